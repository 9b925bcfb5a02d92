"""Hardware-in-the-loop bench procedures (DESIGN §4.2, §7): ``exo-rt bench-test NAME``.

Each procedure runs on any python-can bus — real drives on a rig, the emulated drives over
SLCAN (``exo-rt drives``), or the in-process simulated bus — prints its pre-flight checklist
(which joints move, how far, at what current), keeps the safety limits on (current clamped,
joint range watched), disables the drives whatever happens (also on ctrl-C), and writes a run
folder with ``bench-<name>.json``.

Procedures so far: ``bringup`` (nodes, mapping, state machine, heartbeat periods, bus load),
``latency`` (command → measurement delay per joint). The identifications (friction, stiffness,
inertia) and step/chirp responses are still to come (issue 9).
"""
