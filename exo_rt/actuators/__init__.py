"""Actuator models of the plant: compliant harmonic drives and motors with current loops."""
