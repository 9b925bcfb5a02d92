"""The world: the exoskeleton and its wearer as a MuJoCo model (Todorov, Erez & Tassa 2012),
built in code from the same Mechanism the controller uses (docs/world.md).

:func:`build_world` makes the model, fixed to a test stand or on a sagittal floating base; the
registered plant model ``world`` (:mod:`exo_rt.sim.world_plant`) steps the test stand's with
exo-rt's drives. The controller never sees it.
"""

from exo_rt.sim.world.build import World, build_world, mass_matrix
from exo_rt.sim.world.rotors import RigidBodies, Rotor, fold_rotors

__all__ = ["RigidBodies", "Rotor", "World", "build_world", "fold_rotors", "mass_matrix"]
