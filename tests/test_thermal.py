"""The motor winding thermal model (exo_rt/actuators/thermal.py, docs/assistance.md "Thermal
protection"): the 1 ms kernel against an independent integration of the same equations
(scipy's solve_ivp, and the exact matrix exponential of the linear system a held current
makes), its steady state against the closed form, derating and the limit under a continuous
overload, and the drives' reported temperature as the housing's floor. The parameters are the
shipped leg's (maxon EC 45 flat 70 W, catalogue p. 324) and the top config's levels."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from exo_rt.actuators import thermal as th
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.schema.top import SafetyConfig, ThermalLevels

DT = 1e-3  # s: the control period
RATED = 3.29  # A: the EC 45 flat 70 W's nominal current (robot file)
LIMIT_A = 20.0  # A: the drive's current limit (the leg's peak_current)


@pytest.fixture(scope="module")
def leg():
    return load_mechanism("configs/robots/exo_leg.yaml")


@pytest.fixture(scope="module")
def params(leg):
    return th.thermal_rows(leg, SafetyConfig())


def ode(row, current):
    """dT/dt of the documented model, written out here from the docstring's equations (not
    the kernel's code), for solve_ivp; ``current(t)`` in A."""
    c_w = row["tw"] / row["rwh"]
    c_h = row["tm"] / row["rha"]

    def f(t, y):
        tw, th_ = y
        p = current(t) ** 2 * row["r25"] * (1.0 + 0.00393 * (tw - 25.0))
        return [(p - (tw - th_) / row["rwh"]) / c_w,
                ((tw - th_) / row["rwh"] - (th_ - row["ta"]) / row["rha"]) / c_h]

    return f


# the catalogue values as the test reads them (maxon catalogue p. 324), independent of the
# kernel's record
EC45 = {"rwh": 6.64, "rha": 2.55, "tw": 43.1, "tm": 127.0, "r25": 0.573, "ta": 25.0}


def run(params, currents, reported=None, dt=DT):
    """Temperatures (steps+1, 2, n) of the kernel under ``currents`` (steps, n)."""
    n = len(params)
    temps = th.initial_temperatures(params)
    rep = np.full(n, np.nan)
    out = np.empty((len(currents) + 1, 2, n))
    out[0] = temps
    for k, cur in enumerate(currents):
        if reported is not None:
            rep[:] = reported[k]
        th.thermal_step(params, temps, cur, rep, dt)
        out[k + 1] = temps
    return out


def test_rows_from_the_catalogue_and_the_levels(params, leg):
    assert leg.joint_names == ("hip", "knee")
    for row in params:
        assert row["c_w"] == pytest.approx(43.1 / 6.64, rel=1e-12)  # 6.49 J/K
        assert row["c_h"] == pytest.approx(127.0 / 2.55, rel=1e-12)  # 49.8 J/K
        assert row["resistance"] == 0.573 and row["alpha"] == 0.00393
        assert (row["ambient"], row["warning"], row["limit"]) == (25.0, 90.0, 110.0)
        assert row["floor"] == pytest.approx(RATED / LIMIT_A, rel=1e-12)  # rated / peak


def test_a_joint_without_a_motor_is_skipped(leg):
    """Rows of joints without a transmission are zero and skipped: no heating, factor 1."""
    robot = SimpleNamespace(joint_names=("hip", "knee", "spare"),
                            transmissions=leg.transmissions[:1])  # the hip's motor only
    p = th.thermal_rows(robot, SafetyConfig())
    assert p["c_w"][0] > 0 and np.all(p["c_w"][1:] == 0.0) and np.all(p["limit"][1:] == 0.0)
    temps = th.initial_temperatures(p)
    assert np.all(temps[:, 0] == 25.0) and np.all(temps[:, 1:] == 0.0)
    temps[:, 1:] = 140.0  # hot, but nobody's limit
    th.thermal_step(p, temps, np.full(3, 9.0), np.array([np.nan, 150.0, 150.0]), DT)
    factor = np.zeros(3)
    assert th.derate(p, temps, factor) == -1
    assert np.all(temps[:, 1:] == 140.0) and np.all(factor == 1.0)
    assert 25.0 < temps[0, 0] < 25.1  # the hip heats


def test_levels_that_do_not_fit_are_refused(leg):
    with pytest.raises(ConfigError, match="not below the limit"):
        th.thermal_rows(leg, SafetyConfig(thermal=ThermalLevels(warning=110.0, limit=110.0)))
    with pytest.raises(ConfigError, match="above the maximum winding temperature 125"):
        th.thermal_rows(leg, SafetyConfig(thermal=ThermalLevels(limit=130.0)))


def trace(t):
    """A varying motor current (A) over 10 minutes: rest, steps both ways, walking-like
    currents (the stride's two bursts at 0.9 Hz; 1.05 Hz after a cadence change), a short
    overload, a near-rest end. It heats the winding to about 100 °C."""
    if t < 30:
        return 0.0
    if t < 60:
        return 5.0
    if t < 70:
        return -6.0
    if t < 300:
        return 3.5 * math.sin(2 * math.pi * 0.9 * t) + 1.5 * math.sin(2 * math.pi * 1.8 * t + 0.7)
    if t < 310:
        return 7.0
    if t < 480:
        return 3.0 * math.sin(2 * math.pi * 1.05 * t) + 1.0
    return 0.5


STEPS_AT = (0.0, 30.0, 60.0, 70.0, 300.0, 310.0, 480.0, 600.0)  # s: the trace's jumps


def test_kernel_against_solve_ivp_over_ten_minutes(params):
    """Within 0.5 °C of an adaptive, tight-tolerance integration of the same equations over
    10 min of steps and walking currents (the issue asks 5 °C). The kernel holds each 1 ms
    sample over its period, the reference sees the continuous current: that shift (½ ms)
    is inside the figure too."""
    from scipy.integrate import solve_ivp  # (a test dependency: pyproject.toml)
    n_steps = round(STEPS_AT[-1] / DT)
    t = np.arange(n_steps) * DT
    cur = np.array([trace(x) for x in t])
    currents = np.zeros((n_steps, 2))
    currents[:, 1] = cur  # the knee carries it, the hip rests
    temps = run(params, currents)
    # independent: piecewise between the jumps, so that solve_ivp never steps over one
    f = ode(EC45, trace)
    y = [25.0, 25.0]
    ref_t, ref_y = [], []
    for a, b in zip(STEPS_AT[:-1], STEPS_AT[1:], strict=True):
        ev = np.arange(round(a / DT), round(b / DT) + 1, 50) * DT
        sol = solve_ivp(f, (a, b), y, method="DOP853", rtol=1e-10, atol=1e-10, t_eval=ev)
        assert sol.success
        ref_t.append(sol.t)
        ref_y.append(sol.y)
        y = sol.y[:, -1]
    ref_t = np.concatenate(ref_t)
    ref_y = np.concatenate(ref_y, axis=1)
    k = np.round(ref_t / DT).astype(int)
    err_w = np.max(np.abs(temps[k, 0, 1] - ref_y[0]))
    err_h = np.max(np.abs(temps[k, 1, 1] - ref_y[1]))
    peak = temps[:, 0, 1].max()
    print(f"kernel vs solve_ivp over 600 s: winding {err_w:.2e} °C, housing {err_h:.2e} °C;"
          f" peak winding {peak:.1f} °C")
    assert 90.0 < peak < 125.0  # the trace heats the winding to the levels that matter
    assert err_w < 0.5 and err_h < 0.5
    assert np.all(temps[:, :, 0] == 25.0)  # the resting hip stays at ambient


def steady_closed_form(current, ta=25.0):
    """T_w = T_a + P·(R_wh + R_ha) with P = I²·R_25·(1 + α(T_w − 25)), solved for T_w."""
    rsum = EC45["rwh"] + EC45["rha"]
    g = current**2 * EC45["r25"] * rsum
    return ta + g * (1 + 0.00393 * (ta - 25.0)) / (1 - g * 0.00393)


@pytest.mark.parametrize("current", [2.0, RATED])
def test_steady_state_equals_the_closed_form(params, current):
    """Within 0.1 °C of the closed form after 50 min at a constant current (the period is
    0.1 s here: Euler's fixed point is the ODE's, whatever the step)."""
    dt = 0.1
    temps = run(params, np.full((30000, 2), current), dt=dt)
    expected = steady_closed_form(current)
    print(f"{current} A: steady winding {temps[-1, 0, 0]:.3f} °C, closed form "
          f"{expected:.3f} °C")
    assert temps[-1, 0, 0] == pytest.approx(expected, abs=0.1)
    assert th.steady_winding(params[0], current) == pytest.approx(expected, abs=1e-9)
    # the housing sits at T_a + P·R_ha, the winding P·R_wh above it
    p = current**2 * EC45["r25"] * (1 + 0.00393 * (expected - 25.0))
    assert temps[-1, 1, 0] == pytest.approx(25.0 + p * EC45["rha"], abs=0.1)


def time_to(level, current, t_max=600.0):
    """When the winding reaches ``level`` °C from ambient under a constant current (s): the
    exact solution T(t) = T* + V·e^{Λt}·V⁻¹·(T₀ − T*) of the linear system a held current
    makes (A = VΛV⁻¹, two real eigenvalues), and bisection (it rises monotonically)."""
    e = EC45
    c_w, c_h = e["tw"] / e["rwh"], e["tm"] / e["rha"]
    g = current**2 * e["r25"]
    a = np.array([[(-1 / e["rwh"] + g * 0.00393) / c_w, 1 / (e["rwh"] * c_w)],
                  [1 / (e["rwh"] * c_h), -(1 / e["rwh"] + 1 / e["rha"]) / c_h]])
    b = np.array([g * (1 - 0.00393 * 25.0) / c_w, e["ta"] / (e["rha"] * c_h)])
    fixed = -np.linalg.solve(a, b)
    lam, v = np.linalg.eig(a)
    w = np.linalg.solve(v, np.array([e["ta"], e["ta"]]) - fixed)

    def winding(t):
        return (fixed + v @ (np.exp(lam * t) * w))[0]

    lo, hi = 0.0, t_max
    assert winding(hi) > level
    while hi - lo > 1e-9:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if winding(mid) < level else (lo, mid)
    return hi


def test_continuous_overload_derates_then_reaches_the_limit(params):
    """3× the rated current all the time on the knee: the warning is passed and the limit
    derates (factor < 1) well before the winding limit; the limit is reached (derate returns
    the joint) within 10 ms of the exact solution's time."""
    overload = 3 * RATED
    t_warn, t_limit = time_to(90.0, overload), time_to(110.0, overload)
    temps = th.initial_temperatures(params)
    factor = np.ones(2)
    cur = np.array([0.0, overload])
    rep = np.full(2, np.nan)
    first_derate = hit = None
    for k in range(1, 60000):
        th.thermal_step(params, temps, cur, rep, DT)
        j = th.derate(params, temps, factor)
        if first_derate is None and factor[1] < 1.0:
            first_derate = k * DT
            assert j == -1 and factor[0] == 1.0
        if j >= 0:
            hit = (k * DT, j, factor.copy(), temps[0, 1])
            break
    print(f"3× rated: derating from {first_derate:.3f} s (exact {t_warn:.3f} s), limit at "
          f"{hit[0]:.3f} s (exact {t_limit:.3f} s)")
    assert hit is not None and hit[1] == 1
    assert first_derate == pytest.approx(t_warn, abs=0.01)
    assert hit[0] == pytest.approx(t_limit, abs=0.01)
    assert t_limit - first_derate > 1.0  # a warning that comes well before the limit
    assert hit[2][1] == pytest.approx(RATED / LIMIT_A) and hit[2][0] == 1.0
    assert 110.0 <= hit[3] < 110.05


def test_derating_holds_the_winding_below_the_limit(params):
    """The same overload asked for, but the current capped at factor × the 20 A limit (as the
    cycle applies it): the winding settles between the warning and the limit over 30 min and
    the cap never falls below the rated current (the floor is rated / peak)."""
    dt = 0.01
    temps = th.initial_temperatures(params)
    factor = np.ones(2)
    rep = np.full(2, np.nan)
    cur = np.zeros(2)
    peak = 0.0
    for _ in range(180000):
        cur[1] = min(3 * RATED, factor[1] * LIMIT_A)
        th.thermal_step(params, temps, cur, rep, dt)
        assert th.derate(params, temps, factor) == -1
        peak = max(peak, temps[0, 1])
    print(f"derated overload: winding {temps[0, 1]:.2f} °C (peak {peak:.2f}), current "
          f"{cur[1]:.2f} A after 30 min")
    assert 90.0 < temps[0, 1] <= peak < 110.0
    assert factor[1] * LIMIT_A >= RATED


def test_a_hotter_report_raises_the_housing(params):
    """A drive's reading above the model floors the housing (and the winding at it); NaN (no
    report) and a colder reading leave the model as it is."""
    temps = th.initial_temperatures(params)
    cur = np.zeros(2)
    th.thermal_step(params, temps, cur, np.array([60.0, np.nan]), DT)
    assert temps[1, 0] == 60.0 and temps[0, 0] == 60.0
    assert temps[0, 1] == 25.0 and temps[1, 1] == 25.0
    # no report: the housing cools by the model from there
    th.thermal_step(params, temps, cur, np.array([np.nan, 10.0]), DT)
    c_h = EC45["tm"] / EC45["rha"]
    assert temps[1, 0] == pytest.approx(60.0 - DT * 35.0 / EC45["rha"] / c_h, abs=1e-12)
    assert temps[1, 1] == 25.0  # a colder reading lowers nothing
    # the raised floor counts toward the limit
    factor = np.ones(2)
    temps[:, 0] = 40.0
    th.thermal_step(params, temps, cur, np.array([112.0, np.nan]), DT)
    assert th.derate(params, temps, factor) == 0


def test_levels_in_the_top_config():
    """The schema's defaults and a few checked values."""
    assert dataclasses.asdict(ThermalLevels()) == {"ambient": 25.0, "warning": 90.0,
                                                   "limit": 110.0, "slow_walk": None,
                                                   "floor": None}
