"""Simulation: the plant (exoskeleton, wearer, drives, motors: a registered plant model,
:mod:`exo_rt.sim.plants`), the emulated drives and the simulated bus."""

from exo_rt.sim.plant import HarmonicDrivePlant, Plant
from exo_rt.sim.plants import PlantModel

__all__ = ["HarmonicDrivePlant", "Plant", "PlantModel"]
