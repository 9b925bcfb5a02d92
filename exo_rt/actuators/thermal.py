"""Motor winding temperature: a two-node thermal model fed by the measured current, the
derating of the current limit it drives, and the winding limit that makes the cycle SAFE
(docs/assistance.md, "Thermal protection"; maxon catalogue, p. 324, lines 17–22).

The model, per motor (temperatures in °C, SI otherwise)::

    P     = I²·R(T_w),   R(T) = R_25·(1 + α_Cu·(T_w − 25 °C)),   α_Cu = 0.00393 /K
    C_w·dT_w/dt = P − (T_w − T_h)/R_wh
    C_h·dT_h/dt = (T_w − T_h)/R_wh − (T_h − T_a)/R_ha

with I the measured motor current (A; the drive's actual current, phase-to-phase as the
catalogue's terminal resistance R_25), T_w the winding, T_h the housing (stator iron and
housing, one node), T_a the ambient. The catalogue gives the thermal resistances R_wh
(winding–housing) and R_ha (housing–ambient) in K/W and two time constants, τ_w of the winding
and τ_m of the motor; the capacities are taken as

    C_w = τ_w / R_wh,   C_h = τ_m / R_ha

— the approximation of two weakly coupled nodes: each time constant read as one node's
capacity discharging through its own resistance (the catalogue defines τ_w with the housing
held, τ_m as the whole motor's). The model's two eigen-time-constants then differ from τ_w and
τ_m by the coupling (EC 45 flat 70 W: 36 s and 150 s against 43.1 s and 127 s); the steady
state, which fixes when the winding limit is reached under a sustained current, depends on the
resistances only. Only copper losses are counted: iron (eddy, hysteresis) and bearing losses
grow with speed and are left out, one reason the winding limit keeps a margin below the
catalogue's maximum winding temperature (docs/assistance.md).

The resistance's growth makes the losses grow with the temperature: at constant current the
winding settles at

    T_w − T_a = I²·R_25·(1 + α(T_a − 25))·(R_wh + R_ha) / (1 − I²·R_25·α·(R_wh + R_ha))

and above I² = 1/(R_25·α·(R_wh + R_ha)) (6.95 A for the EC 45 flat 70 W) it has no steady
state at all: held long enough, any such current reaches the limit.

A drive that reports a temperature (``reported``, finite; NaN where it does not) gives a floor
for the housing node, T_h ← max(T_h, reported): the drive's sensor sits on the stator or the
housing, never inside the winding, and a hotter reading than the model means heat the model
does not see (sun, a warm enclosure, iron losses). The winding is then floored at the housing
(T_w ← max(T_w, T_h)): its losses only ever flow out, so it is never colder than the housing it
heats.

Integration: forward Euler at the control period (1 ms). The model's fastest rate is
|λ| ≈ 1/36 s at zero current; the temperature-dependent loss makes one mode grow at large
currents (at 20 A on the EC 45 flat, λ ≈ +0.12 /s). Euler's global error grows as
λ·dt/2 ≈ 6·10⁻⁵ of the temperature change, i.e. below 0.01 °C for a 100 K rise, far inside
the 0.5 °C the test allows against an adaptive integrator (measured: 0.0011 °C over
the 10 minutes of tests/test_thermal.py);
the exact exponential of the (for a held current, linear) system would cost a 2×2 matrix
exponential per joint and cycle for nothing measurable. Euler stays stable for dt ≪ 36 s.

The per-cycle kernels (:func:`thermal_step`, :func:`derate`) work in place on preallocated
arrays: they allocate, compile and block nothing (numba, cached).
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.errors import ConfigError, Where
from exo_rt.jit import njit

ALPHA_CU = 0.00393  # 1/K: copper's temperature coefficient of resistance at 20–25 °C
T_REF = 25.0  # °C: the catalogue's terminal resistance is given at 25 °C
WINDING, HOUSING = 0, 1  # rows of the temperature array
SLOW_MARGIN = 15.0  # K: a walk slows this far below the warning unless the config says where

THERMAL = np.dtype([
    ("r_wh", np.float64),  # K/W winding–housing
    ("r_ha", np.float64),  # K/W housing–ambient
    ("c_w", np.float64),  # J/K winding (0: no motor on this joint: skipped)
    ("c_h", np.float64),  # J/K housing
    ("resistance", np.float64),  # Ω terminal resistance at 25 °C
    ("alpha", np.float64),  # 1/K its temperature coefficient
    ("ambient", np.float64),  # °C
    ("slow", np.float64),  # °C winding: a walk slows to its slowest preset (the session)
    ("warning", np.float64),  # °C winding: derating starts
    ("limit", np.float64),  # °C winding: derated to `floor`, and SAFE
    ("floor", np.float64),  # the derating factor at the limit (0–1]
])
"""One joint's thermal parameters (a joint without a motor: all zero, skipped)."""


def thermal_rows(robot, safety) -> np.ndarray:
    """The :data:`THERMAL` record of every joint of ``robot`` (a
    :class:`~exo_rt.model.mechanism.Mechanism`; rows as ``robot.joint_names``) from its
    motors' catalogue values (the robot file's ``motor.thermal``, or the schema's defaults —
    the EC 45 flat 70 W — where the motor does not carry them) and the top config's
    ``safety.thermal`` levels (``safety``: its :class:`~exo_rt.schema.top.SafetyConfig`).

    Raises :class:`~exo_rt.errors.ConfigError` when the levels do not fit the motor: warning
    not below the limit, or the limit above the catalogue's maximum winding temperature."""
    levels = safety.thermal
    where = Where("the top config", 0, "safety.thermal")
    rows = np.zeros(len(robot.joint_names), THERMAL)
    if not levels.warning < levels.limit:
        raise ConfigError(f"warning {levels.warning:g} °C is not below the limit "
                          f"{levels.limit:g} °C", where,
                          "derating runs from the warning up to the limit: give warning < "
                          "limit")
    slow = levels.slow_walk if levels.slow_walk is not None else levels.warning - SLOW_MARGIN
    if not slow < levels.warning:
        raise ConfigError(f"slow_walk {slow:g} °C is not below the warning "
                          f"{levels.warning:g} °C", where,
                          "a walk slows before its warning stops it: give slow_walk < warning")
    for tr in robot.transmissions:
        j = robot.joint_names.index(tr.joint)
        m = tr.motor
        cat = catalogue(m)
        if levels.limit > cat.max_winding_temperature:
            raise ConfigError(
                f"limit {levels.limit:g} °C is above the maximum winding temperature "
                f"{cat.max_winding_temperature:g} °C of the motor of '{tr.joint}' "
                f"({m.name or 'unnamed'})", where,
                "keep the limit below the catalogue's maximum, with a margin "
                "(docs/assistance.md, 'Thermal protection')")
        row = rows[j]  # a view: writing its fields fills the array
        row["r_wh"] = cat.resistance_winding_housing
        row["r_ha"] = cat.resistance_housing_ambient
        row["c_w"] = cat.time_constant_winding / cat.resistance_winding_housing
        row["c_h"] = cat.time_constant_motor / cat.resistance_housing_ambient
        row["resistance"] = m.resistance
        row["alpha"] = ALPHA_CU
        row["ambient"] = levels.ambient
        row["slow"] = slow
        row["warning"] = levels.warning
        row["limit"] = levels.limit
        row["floor"] = (levels.floor if levels.floor is not None
                        else min(1.0, m.rated_current / m.peak_current))
    return rows


def catalogue(motor):
    """The motor's thermal catalogue values (:class:`exo_rt.schema.robot.MotorThermal`): its
    own, or the schema's defaults (the EC 45 flat 70 W) where the motor carries none."""
    from exo_rt.schema.robot import MotorThermal  # the schema module imports the model's

    cat = getattr(motor, "thermal", None)
    return cat if cat is not None else MotorThermal()


def initial_temperatures(params: np.ndarray) -> np.ndarray:
    """A (2, n) temperature array (row 0 winding, row 1 housing, °C), every node at its
    joint's ambient: the state :func:`thermal_step` advances (allocate it once, before the
    loop; :func:`reset` sets it back in place)."""
    temps = np.empty((2, len(params)))
    reset(params, temps)
    return temps


def reset(params, temps) -> None:
    """Every node of ``temps`` (2, n) back to its joint's ambient (in place; set-up, from
    Python: nothing to compile)."""
    temps[WINDING] = params["ambient"]
    temps[HOUSING] = params["ambient"]


@njit(cache=True)
def thermal_step(params, temps, current, reported, dt):
    """Advance ``temps`` (2, n; °C, in place) by one period ``dt`` (s) under the measured
    motor currents ``current`` (n, A; held over the period), then floor the housing at the
    drives' ``reported`` temperatures (n, °C; NaN where a drive reports none) and the winding
    at the housing. Forward Euler (see the module's docstring for its error). Joints whose
    ``c_w`` is 0 (no motor) are skipped."""
    for j in range(params.shape[0]):
        p = params[j]
        if p["c_w"] <= 0.0:
            continue
        tw = temps[WINDING, j]
        th = temps[HOUSING, j]
        i = current[j] if math.isfinite(current[j]) else 0.0  # (a missing sample: the
        # safety check stops the run; the model must not turn NaN)
        loss = i * i * p["resistance"] * (1.0 + p["alpha"] * (tw - T_REF))
        q_wh = (tw - th) / p["r_wh"]
        q_ha = (th - p["ambient"]) / p["r_ha"]
        tw += dt * (loss - q_wh) / p["c_w"]
        th += dt * (q_wh - q_ha) / p["c_h"]
        r = reported[j]
        if r > th:  # False for NaN: no report, no floor
            th = r
        if th > tw:
            tw = th
        temps[WINDING, j] = tw
        temps[HOUSING, j] = th


@njit(cache=True)
def derate(params, temps, factor):
    """Fill ``factor`` (n) with the fraction of each joint's configured current limit it may
    use: 1 up to the warning temperature of the winding, falling linearly to ``floor`` at the
    limit (and ``floor`` above it); 1 for a joint without a motor. Returns the first joint
    whose winding is at or above its limit (the cycle goes SAFE), or −1."""
    first = -1
    for j in range(params.shape[0]):
        p = params[j]
        if p["c_w"] <= 0.0:
            factor[j] = 1.0
            continue
        tw = temps[WINDING, j]
        if tw <= p["warning"]:
            factor[j] = 1.0
        elif tw >= p["limit"]:
            factor[j] = p["floor"]
        else:
            x = (tw - p["warning"]) / (p["limit"] - p["warning"])
            factor[j] = 1.0 - (1.0 - p["floor"]) * x
        if tw >= p["limit"] and first < 0:
            first = j
    return first


def steady_winding(row, current: float) -> float:
    """The winding temperature (°C) a joint settles at under a constant ``current`` (A), or
    ``inf`` where the losses outgrow the cooling (no steady state): the closed form of the
    module's docstring, for people and docs (the tests derive it on their own)."""
    rsum = row["r_wh"] + row["r_ha"]
    gain = current * current * row["resistance"] * rsum
    denominator = 1.0 - gain * row["alpha"]
    if denominator <= 0.0:
        return math.inf
    return float(row["ambient"] + gain * (1.0 + row["alpha"] * (row["ambient"] - T_REF))
                 / denominator)
