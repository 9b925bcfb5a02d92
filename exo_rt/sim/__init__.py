"""Simulation: the plant (exoskeleton, wearer, compliant harmonic drives, motors)."""

from exo_rt.sim.plant import Plant

__all__ = ["Plant"]
