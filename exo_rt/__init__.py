"""exo-rt: real-time controller of a powered lower-limb exoskeleton (DESIGN.md)."""

__version__ = "0.1.0"
