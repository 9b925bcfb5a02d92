"""Step and chirp responses of a joint's position loop → step metrics, a Bode plot and the
closed-loop bandwidth (docs/bench.md; issue 9).

The bench closes a PD loop on the joint, k_p = J ω_n², k_d = 2ζ J ω_n with J the model's
inertia at the pose (rotors included), model gravity and the configured friction compensated,
the derivative on the measurement only. On a rigid, well-modelled joint the loop is then the
second-order system ω_n²/(s² + 2ζω_n s + ω_n²): its −3 dB bandwidth
ω_b = ω_n·√(1 − 2ζ² + √(4ζ⁴ − 4ζ² + 2)) is what the joint *should* show; the measured one
differs by what the model misses (inertia, friction, compliance, the bus's one-cycle delay).

- step: a reference step of ``amplitude`` rad → rise time (10–90 %), overshoot, 2 % settling
  time, steady-state error (measured from where the joint was before the step), and the
  second-order fit ζ = −ln(OS)/√(π² + ln²OS), ω_n = π/(t_peak·√(1 − ζ²)) → its bandwidth;
- chirp: a logarithmic sine sweep f0 → f1 → the frequency response H(f) = Σ Y X* / Σ |X|²
  (X, Y the DFTs of reference and response, summed over log-spaced frequency bands), its −3 dB
  frequency, and a Bode plot (PNG) against the second-order model.
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.hil import registry
from exo_rt.hil.bench import Bench, Gains, move_to, second_order_bandwidth, track


def _setup(bench: Bench, joint: str, pose, hz: float, zeta: float, swing: float):
    j = bench.robot.joint_names.index(joint)
    bench.start()
    q0 = bench.centred(bench.home() if pose is None else pose, swing)
    gains = Gains.for_bandwidth(bench.n, hz, zeta)
    move_to(bench, q0)
    return j, q0, gains


def _expected(bench: Bench, j: int, q0, hz: float, zeta: float) -> dict:
    return {"natural_hz": hz, "damping": zeta, "inertia_kgm2": float(bench.inertia(q0)[j]),
            "bandwidth_hz": second_order_bandwidth(2 * math.pi * hz, zeta) / (2 * math.pi)}


def step_metrics(t: np.ndarray, y: np.ndarray, amplitude: float) -> dict:
    """Metrics of a step response: ``t`` (s) from the step (t ≤ 0 before it), ``y`` (rad) the
    joint angle less the reference before the step, ``amplitude`` (rad) the reference's step.

    The joint need not start on the reference (the wave generator's friction holds it a few
    mrad off where the loop has no integral), so the response is measured from where it was,
    y₀ (mean over the 50 ms before the step), to where it settled, y_f (mean of the last
    10 %): rise time 10–90 % of y_f − y₀, overshoot (peak − y_f)/(y_f − y₀), 2 % settling time
    (into y_f ± 2 % of y_f − y₀, from the step), and the steady-state error amplitude − y_f
    (rad, and as a fraction of the amplitude). Samples before the step only give y₀."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    before = (t <= 0.0) & (t > -0.05 - 1e-9)
    y0 = float(np.mean(y[before])) if before.any() else 0.0
    t, y = t[t > 0.0], y[t > 0.0]
    final = float(np.mean(y[-max(1, len(y) // 10):]))
    change = final - y0
    s = (y - y0) / change if change != 0.0 else np.zeros_like(y)
    rise = t[np.argmax(s >= 0.9)] - t[np.argmax(s >= 0.1)]
    k_peak = int(np.argmax(s))
    overshoot = max(float(s[k_peak]) - 1.0, 0.0)
    outside = np.nonzero(np.abs(s - 1.0) > 0.02)[0]
    settling = float(t[outside[-1] + 1] if len(outside) and outside[-1] + 1 < len(t) else t[-1])
    out = {"rise_time_s": float(rise), "overshoot": overshoot, "peak_time_s": float(t[k_peak]),
           "settling_time_s": settling, "start_rad": y0, "final_rad": final,
           "steady_state_error_rad": amplitude - final,
           "steady_state_error": (amplitude - final) / amplitude}
    if overshoot > 1e-3:
        ln = math.log(overshoot)
        zeta = -ln / math.sqrt(math.pi**2 + ln * ln)
        wn = math.pi / (t[k_peak] * math.sqrt(1 - zeta * zeta))
        out.update(fit_damping=zeta, fit_natural_hz=wn / (2 * math.pi),
                   bandwidth_hz=second_order_bandwidth(wn, zeta) / (2 * math.pi))
    return out


@registry.procedure("step", per_joint=True,
                    moves="a 0.05 rad position step from where the joint is, 1.5 s")
def step(bench: Bench, joint: str, *, amplitude: float = 0.05, pose=None, hz: float = 3.0,
         zeta: float = 0.7, seconds: float = 1.5) -> dict:
    """A position step on ``joint`` (the others held): step metrics and fitted bandwidth.

    The report's ``trace`` is the data the metrics come from and the plot shows: t (s, from
    the step; the 0.2 s before it negative), the joint angle and its reference, both less the
    reference before the step (rad)."""
    j, q0, gains = _setup(bench, joint, pose, hz, zeta, 2 * abs(amplitude))
    pre = int(0.2 / bench.dt)
    k = pre + int(seconds / bench.dt)
    ref = np.repeat(q0[None, :], k, axis=0)
    ref[pre:, j] += amplitude
    log = track(bench, ref, gains, qd_ref=np.zeros_like(ref)).trimmed()
    bench.disable_all()
    t = log.t - log.t[pre - 1]
    y = log.q[:, j] - q0[j]
    return {"joint": joint, "amplitude_rad": amplitude, "pose_rad": q0.tolist(),
            "gains_per_s2_per_s": [float(gains.kp[j]), float(gains.kd[j])],
            "expected": _expected(bench, j, q0, hz, zeta), "step": step_metrics(t, y, amplitude),
            "trace": {"t_s": t.tolist(), "q_rad": y.tolist(),
                      "q_ref_rad": (log.q_ref[:, j] - q0[j]).tolist()}}


def chirp_reference(dt: float, seconds: float, f0: float, f1: float) -> np.ndarray:
    """A logarithmic sine sweep f0 → f1 (Hz) over ``seconds``, unit amplitude, faded in and
    out over 0.2 s (its phase φ(t) = 2π f0 T (r^(t/T) − 1)/ln r, r = f1/f0)."""
    t = np.arange(int(seconds / dt)) * dt
    r = f1 / f0
    x = np.sin(2 * math.pi * f0 * seconds * (r ** (t / seconds) - 1) / math.log(r))
    fade = np.clip(np.minimum(t, seconds - t) / 0.2, 0.0, 1.0)
    return x * fade


def frequency_response(x: np.ndarray, y: np.ndarray, dt: float, f0: float, f1: float,
                       bands: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """(f, H): H = Σ Y X* / Σ |X|² over ``bands`` log-spaced bands between f0 and f1 (Hz)."""
    freqs = np.fft.rfftfreq(len(x), dt)
    xf, yf = np.fft.rfft(x), np.fft.rfft(y)
    edges = np.geomspace(f0, f1, bands + 1)
    f, h = [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        sel = (freqs >= lo) & (freqs < hi)
        if sel.sum() == 0:
            continue
        f.append(math.sqrt(lo * hi))
        h.append(np.sum(yf[sel] * np.conj(xf[sel])) / np.sum(np.abs(xf[sel]) ** 2))
    return np.array(f), np.array(h)


def bandwidth_3db(f: np.ndarray, h: np.ndarray) -> float | None:
    """The frequency (Hz) where |H| last falls through 1/√2 (log-interpolated), None if it
    never does: the last crossing, so a dip at low frequency — where a slow sweep of a
    joint with stiction is noisy — is not taken for the bandwidth."""
    mag = np.abs(h)
    level = 1 / math.sqrt(2)
    down = np.nonzero((mag[:-1] >= level) & (mag[1:] < level))[0]
    if not len(down):
        return None
    k = down[-1] + 1
    a, b = math.log(mag[k - 1]), math.log(mag[k])
    s = (math.log(1 / math.sqrt(2)) - a) / (b - a)
    return float(math.exp(math.log(f[k - 1]) + s * (math.log(f[k]) - math.log(f[k - 1]))))


@registry.procedure("chirp", per_joint=True, moves="a ±0.03 rad sine sweep 0.3 → 15 Hz about "
                    "where the joint is, 20 s")
def chirp(bench: Bench, joint: str, *, amplitude: float = 0.03, pose=None, hz: float = 3.0,
          zeta: float = 0.7, f0: float = 0.3, f1: float = 15.0, seconds: float = 20.0) -> dict:
    """A chirp on ``joint``'s position reference: frequency response and −3 dB bandwidth."""
    j, q0, gains = _setup(bench, joint, pose, hz, zeta, 2 * abs(amplitude))
    x = amplitude * chirp_reference(bench.dt, seconds, f0, f1)
    ref = np.repeat(q0[None, :], len(x), axis=0)
    ref[:, j] += x
    log = track(bench, ref, gains, qd_ref=np.zeros_like(ref)).trimmed()
    bench.disable_all()
    y = log.q[:, j] - q0[j]
    f, h = frequency_response(x, y - y.mean(), bench.dt, f0, f1)
    return {"joint": joint, "amplitude_rad": amplitude, "pose_rad": q0.tolist(),
            "gains_per_s2_per_s": [float(gains.kp[j]), float(gains.kd[j])],
            "expected": _expected(bench, j, q0, hz, zeta),
            "chirp": {"f0_hz": f0, "f1_hz": f1, "seconds": seconds,
                      "bandwidth_hz": bandwidth_3db(f, h)},
            "bode": {"f_hz": f.tolist(), "magnitude_db": (20 * np.log10(np.abs(h))).tolist(),
                     "phase_deg": np.degrees(np.unwrap(np.angle(h))).tolist()}}
