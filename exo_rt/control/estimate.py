"""Joint state from encoders at 1 kHz (docs/config-controller.md).

- Joint angle from the motor encoder through the (rigid) transmission, q = θ_motor / k, or
  from an output encoder directly; the flexspline's twist makes the two differ under load by
  T/K (≈ 0.06° at 16 N·m for the default knee).
- Velocity from encoder differences through a first-order low-pass at f_c (a "dirty
  derivative"): v ← v + α((q − q_prev)/Δt − v), α = 1 − e^(−2π f_c dt) (:func:`filter_gain`),
  Δt the real gap between the SYNCs the samples answer — the cycle's one estimate,
  :func:`exo_rt.cycle.step.estimate`, which every user of the cycle runs. At 1 kHz with a
  16-bit motor encoder behind a 100:1 drive the quantum is ≈ 1e-6 rad at the joint, so a
  cut-off of 50–100 Hz gives mrad/s noise with ~2–3 ms of lag.
"""

from __future__ import annotations

import math

from exo_rt.jit import njit


@njit(cache=True)
def quantize(angle, counts_per_rev):
    """An encoder's reading of ``angle`` (rad) with ``counts_per_rev`` counts per turn."""
    step = 2.0 * math.pi / counts_per_rev
    return math.floor(angle / step + 0.5) * step


def filter_gain(cutoff_hz: float, dt: float) -> float:
    """α of the first-order velocity filter for a cut-off (Hz) at period dt (s)."""
    return 1.0 - math.exp(-2.0 * math.pi * cutoff_hz * dt)


@njit(cache=True)
def joint_from_motor(q_motor, multiplier):
    """Joint angle (rad) from the rotor angle through a rigid transmission z_rotor = k·q."""
    return q_motor / multiplier
