"""The control cycle itself, apart from the run around it (:mod:`exo_rt.runtime`): its model,
data and step (:mod:`~exo_rt.cycle.step`), the record layout, the reference segments, the
safety check, the governor, the states, the assistance, and the cycle in one compiled call
(:mod:`~exo_rt.cycle.cycle_call`). The session and the simulation build on it; the run's shell
(controller, rig, buses, lifecycle, recording, replay) sits above both."""
