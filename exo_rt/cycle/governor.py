"""The reference governor: the cycle's last word on every reference it tracks in RUN.

The activity machine checks each motion before it begins (at load and at each request:
:mod:`exo_rt.session.envelope`), so what a session asks is within the joints. The governor
makes sure of it whatever asked, inside the compiled cycle (after Gilbert & Kolmanovsky's
reference governors: the reference the controller tracks is modified, never the safety
check): each joint's q_r stays within ``[V_GOV_LO, V_GOV_HI]`` (the soft limits, or the
wearer's range of motion where it is tighter), |q̇_r| within ``V_GOV_VEL`` and |q̈_r| — and
the change of q̇_r from one cycle to the next over the period — within ``V_GOV_ACC``.

While the segment's reference keeps within them it passes untouched, bit for bit (the
governor costs nothing to a session that keeps to its checks). When it does not — a joint's
reference would leave its range, step its velocity or exceed a bound — the governor takes
over that joint: its reference follows the segment's with a critically damped tracker of
bounded acceleration and speed that also brakes in time for the range's ends
(|q̇| ≤ √(2·a·d) at a distance d from an end), and hands the joint back once it has caught
up. Each cycle it governs counts in ``s.governed``; ``s.governing`` is 1 while it does, which
the controller reports as an event (a governed reference is a defect of a check upstream).
"""

from __future__ import annotations

import math

import numpy as np

from exo_rt.cycle.layout import (
    V_GOV_ACC,
    V_GOV_HI,
    V_GOV_LO,
    V_GOV_ON,
    V_GOV_Q,
    V_GOV_QD,
    V_GOV_VEL,
    V_QDDR,
    V_QDR,
    V_QR,
)
from exo_rt.jit import njit

OMEGA = 20.0  # rad/s: the tracker's natural frequency while it governs (critically damped)
SLACK = 1e-9  # relative slack on the bounds: a reference exactly at one passes
CAUGHT_Q = 1e-6  # rad: the governed reference is back on the segment's within this …
CAUGHT_QD = 1e-4  # rad/s: … and this — the joint is handed back


@njit(cache=True, inline="always")
def _within(v, j, q0, qd0, dt):
    """The segment's reference of joint ``j`` keeps within its bounds this cycle, and follows
    on from what was let through last cycle (q0, qd0) without a step."""
    q, qd, qdd = v[V_QR, j], v[V_QDR, j], v[V_QDDR, j]
    acc, vel = v[V_GOV_ACC, j] * (1.0 + SLACK), v[V_GOV_VEL, j] * (1.0 + SLACK)
    if not (v[V_GOV_LO, j] <= q <= v[V_GOV_HI, j]):  # (False for NaN too)
        return False
    if not (abs(qd) <= vel and abs(qdd) <= acc):
        return False
    if not abs(qd - qd0) <= acc * dt + 1e-12:
        return False
    return abs(q - q0) <= (abs(qd0) + abs(qd)) * dt + 0.5 * acc * dt * dt + 1e-12


@njit(cache=True, inline="always")
def _track(v, j, q0, qd0, dt):
    """One cycle of the governed reference of joint ``j`` from (q0, qd0) towards the
    segment's: acceleration and speed bounded, braking for the range's ends."""
    lo, hi, vel, acc = v[V_GOV_LO, j], v[V_GOV_HI, j], v[V_GOV_VEL, j], v[V_GOV_ACC, j]
    q_s, qd_s, qdd_s = v[V_QR, j], v[V_QDR, j], v[V_QDDR, j]
    if not (math.isfinite(q_s) and math.isfinite(qd_s) and math.isfinite(qdd_s)):
        q_s, qd_s, qdd_s = q0, 0.0, 0.0  # (no target: stop where it is)
    q_s = min(max(q_s, lo), hi)
    a = qdd_s + OMEGA * OMEGA * (q_s - q0) + 2.0 * OMEGA * (qd_s - qd0)
    a = min(max(a, -acc), acc)
    qd = qd0 + a * dt
    up = math.sqrt(2.0 * acc * max(hi - q0, 0.0))  # the fastest it may go and still stop
    down = math.sqrt(2.0 * acc * max(q0 - lo, 0.0))
    qd = min(max(qd, -vel, -down), vel, up)
    qd = min(max(qd, qd0 - acc * dt), qd0 + acc * dt)  # (the acceleration bound: last)
    q = min(max(q0 + qd * dt, lo), hi)
    v[V_QR, j] = q
    v[V_QDR, j] = qd
    v[V_QDDR, j] = (qd - qd0) / dt
    return abs(q - q_s) <= CAUGHT_Q and abs(qd - qd_s) <= CAUGHT_QD


@njit(cache=True, inline="always")
def govern(s, v, dt):
    """The segment's reference in ``v`` (q_r, q̇_r, q̈_r) let through or governed, joint by
    joint (RUN, after :func:`exo_rt.cycle.segment.reference`)."""
    on = 0.0
    for j in range(v.shape[1]):
        q0, qd0 = v[V_GOV_Q, j], v[V_GOV_QD, j]
        if q0 != q0:  # (none yet — a cycle that begins in RUN, model-in-the-loop's: the
            q0, qd0 = v[V_QR, j], v[V_QDR, j]  # segment's first reference is the start)
        if v[V_GOV_ON, j] == 0.0 and _within(v, j, q0, qd0, dt):
            pass
        else:
            caught = _track(v, j, q0, qd0, dt)
            v[V_GOV_ON, j] = 0.0 if caught else 1.0
            on = 1.0
        v[V_GOV_Q, j] = v[V_QR, j]
        v[V_GOV_QD, j] = v[V_QDR, j]
    if on:
        s.governed += 1.0
    s.governing = on


@njit(cache=True, inline="always")
def follow(v):
    """Outside RUN: the governor's last reference is the cycle's (READY's measured posture,
    STOPPING's hold), so RUN's first reference follows on from it."""
    for j in range(v.shape[1]):
        v[V_GOV_Q, j] = v[V_QR, j]
        v[V_GOV_QD, j] = v[V_QDR, j]
        v[V_GOV_ON, j] = 0.0


DEFAULT_ACCELERATION = 50.0  # rad/s²: a joint the safety section does not name — the
# session's budget for the change of q̇_r, 0.05 rad/s per cycle at 1 kHz


def accelerations(joint_names, given: dict) -> np.ndarray:
    """Each joint's largest reference acceleration (rad/s²) from the safety section's
    ``reference_acceleration`` ({joint or kind: rad/s²}; a full name over a kind; unnamed:
    :data:`DEFAULT_ACCELERATION`). ValueError naming an unknown joint."""
    names = list(joint_names)
    out = np.full(len(names), DEFAULT_ACCELERATION)
    exact = {}
    for key, value in given.items():
        idx = [i for i, nm in enumerate(names) if nm == key or nm.endswith("_" + key)]
        if not idx:
            raise ValueError(f"safety.reference_acceleration names '{key}', which is no joint "
                             f"(the robot's joints: {', '.join(names)})")
        for i in idx:
            if names[i] == key:
                exact[i] = value
            else:
                out[i] = value
    for i, value in exact.items():
        out[i] = value
    return out


def unset(v) -> None:
    """No reference let through yet (NaN): the first RUN cycle's reference is the start,
    checked against the bounds alone — for a cycle that begins in RUN, as model-in-the-loop's
    does; a controller's READY sets it (:func:`follow`)."""
    v[V_GOV_Q] = np.nan
    v[V_GOV_QD] = np.nan


def set_bounds(v, limits, speed_fraction: float, acceleration) -> None:
    """The governor's bounds into the cycle's joint vectors ``v``: the soft limits and the
    velocity limits (``limits``: the safety's per-joint records) times ``speed_fraction``,
    each joint's ``acceleration`` (rad/s²; a scalar or (n,))."""
    v[V_GOV_LO] = limits["lower"]
    v[V_GOV_HI] = limits["upper"]
    v[V_GOV_VEL] = limits["velocity"] * speed_fraction
    v[V_GOV_ACC] = acceleration


def narrow(v, lower, upper) -> None:
    """The position bounds narrowed to a range (rad, (n,)): the wearer's range of motion."""
    np.maximum(v[V_GOV_LO], lower, out=v[V_GOV_LO])
    np.minimum(v[V_GOV_HI], upper, out=v[V_GOV_HI])
