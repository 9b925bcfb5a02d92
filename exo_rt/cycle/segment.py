"""The reference of a session: the segment the activity machine wrote into the cycle data
(``seg``, its one :data:`~exo_rt.cycle.layout.SEGMENT` record), evaluated by the compiled
cycle every cycle of RUN (:func:`reference`).

A segment is one of

- **HOLD** — a posture (``v[V_SEG_TO]``): q̇_r = q̈_r = 0;
- **MOVE** — a minimum-jerk move (Flash & Hogan 1985) from ``v[V_SEG_FROM]`` to
  ``v[V_SEG_TO]`` over ``seg.seg_duration`` s of *progress* ``seg.seg_tau``. Progress advances at
  the rate ``seg.seg_rate`` ∈ [0, 1], which follows ``seg.seg_go`` (1: GO held, 0: released)
  through a critically damped filter (:func:`_slew`): releasing GO freezes the move smoothly
  — the reference keeps its position and its velocity falls to zero in 0.23 s, with no step
  in q_r, q̇_r or q̈_r — and pressing it again resumes it the same way;
- **GAIT** — walking: the gait phase φ (strides) advances at ``rate · ((1 − w)/T_A + w/T_B)``
  and every joint's reference is a blend ``q = (1 − w)·A(φ) + w·B(φ)`` of two sources, each a
  posture or the normal gait (Fourier rows of the cycle data's ``gaits[slot]``, the joint's
  phase offset added). The weight ``w`` runs 0 → 1 as a minimum-jerk shape of
  ``(φ − seg.blend_start)/seg.blend_len`` (zero slope at both ends), so q and q̇ are continuous at
  every boundary: the **opening step** blends the start posture into the gait, a **speed or
  step-length change** blends the old gait into the new one over the strides after the
  boundary it waited for (its weight moving in single support only: :func:`_single_support`),
  the **closing step** blends the gait into the end posture from the first half-stride
  boundary after a STOP, and ends there (HOLD, ``seg.seg_done``). A walk on
  the floor (the flat-foot gait's two legs) makes its opening and closing steps as the strides
  are — one foot planted, the other lifted from foothold to foothold, one pelvis for both
  (:func:`exo_rt.control.flat_foot.walk_steps`) — by a correction added to the blend,
  :func:`_step`, zero with its first two derivatives at both ends of the step: its sides
  are then POSTURE_STEP and GAIT_STEPS, the corrections in ``gaits[SLOT_OPEN …]``.

Python (the activity machine) writes a new segment between two cycles; the cycle applies
what must wait for a stride boundary (``seg.next_pending``: a new gait in ``gaits[NEXT]``;
``seg.stop_req``: the closing step) itself, at the boundary, so a change never depends on when
Python got to it. Every function here runs inside :func:`exo_rt.cycle.step.step`:
allocation-free, on the cycle's arrays.
"""

from __future__ import annotations

import math

from exo_rt.control.flat_foot import STANCE
from exo_rt.cycle.layout import V_QDDR, V_QDR, V_QR, V_SEG_FROM, V_SEG_TO
from exo_rt.jit import njit

HOLD, MOVE, GAIT = 0, 1, 2
POSTURE, GAIT_SOURCE = 0, 1  # what a blend's side A or B is …
# … or, a walk's floor steps made (exo_rt.control.flat_foot.walk_steps): a posture joined to
# the gait by one (the opening's A, the closing's B: the blend corrected by gaits[SLOT_OPEN]
# or SLOT_CLOSE…, :func:`_step`), a gait whose closing step is one (B while walking)
POSTURE_STEP, GAIT_STEPS = 2, 3
SLOT_A, SLOT_B, SLOT_NEXT = 0, 1, 2  # the gait's Fourier rows in the cycle data's ``gaits``
# … and the floor steps' corrections (:func:`_step`): the opening step's, the closing step's
# from a whole or a half stride boundary, and those of the gait in SLOT_NEXT
SLOT_OPEN, SLOT_CLOSE, SLOT_CLOSE_HALF, SLOT_NEXT_CLOSE, SLOT_NEXT_CLOSE_HALF = 3, 4, 5, 6, 7
# the walk's floor steps by the name the gait's construction gives them (exo_rt.control.
# flat_foot.walk_steps) → their slot
STEP_SLOTS = {"open": SLOT_OPEN, "close": SLOT_CLOSE, "close_half": SLOT_CLOSE_HALF}
SLOTS = 8
TWO_PI = 2.0 * math.pi
GO_OMEGA = 40.0  # rad/s: the progress rate's filter — GO released, a move is frozen in 0.23 s
# (r < RATE_SNAP), its q̈_r at most ω/e ≈ 15 /s times its speed at full rate
RATE_SNAP = 1e-3  # the rate this close to its target (and nearly still) is put on it
DOUBLE_SUPPORT = STANCE - 0.5  # strides: after each heel strike both feet are on the floor
# this long (the legs half a stride apart): a gait-to-gait blend holds its weight there


@njit(cache=True, inline="always")
def _shape(x):
    """The minimum-jerk shape on x ∈ [0, 1] and its first two derivatives (per unit x)."""
    x = min(max(x, 0.0), 1.0)
    return (x**3 * (10.0 - 15.0 * x + 6.0 * x * x), 30.0 * x * x * (1.0 - x) ** 2,
            60.0 * x * (1.0 - x) * (1.0 - 2.0 * x))


@njit(cache=True, python=False)
def fourier(rows, j, phase):
    """The gait's Fourier series of joint ``j`` at phase φ (strides): the angle (rad) and its
    first two derivatives per stride (rad/stride, rad/stride²)."""
    p = rows[j, 0]
    d1 = 0.0
    d2 = 0.0
    for n in range(1, (rows.shape[1] - 1) // 2 + 1):
        a, b = rows[j, 2 * n - 1], rows[j, 2 * n]
        if a == 0.0 and b == 0.0:
            continue
        w = TWO_PI * n
        c, s = math.cos(w * phase), math.sin(w * phase)
        p += a * c + b * s
        d1 += w * (b * c - a * s)
        d2 -= w * w * (a * c + b * s)
    return p, d1, d2


@njit(cache=True, inline="always")
def _step(gaits, slot, j, x):
    """Joint ``j``'s correction of a floor step at its fraction x ∈ [0, 1] and its first two
    derivatives (per unit x): D(x) = x³(1 − x)³ Σ c_k T_k(2x − 1), the Chebyshev
    coefficients c_k the row ``gaits[slot, j]`` — zero with its first two derivatives at
    both ends, so the blend's joins stay as they are (its Python twin:
    :func:`exo_rt.control.flat_foot.step_basis`)."""
    y = 2.0 * x - 1.0
    row = gaits[slot, j]
    t0, t1, d0, d1, e0, e1 = 1.0, y, 0.0, 1.0, 0.0, 0.0  # T_k, T_k′, T_k″ (per unit y)
    p = row[0] + row[1] * y
    p1 = row[1]
    p2 = 0.0
    for k in range(2, row.shape[0]):
        t2 = 2.0 * y * t1 - t0
        d2 = 2.0 * t1 + 2.0 * y * d1 - d0
        e2 = 4.0 * d1 + 2.0 * y * e1 - e0
        p += row[k] * t2
        p1 += row[k] * d2
        p2 += row[k] * e2
        t0, t1, d0, d1, e0, e1 = t1, t2, d1, d2, e1, e2
    p1 *= 2.0  # (per unit x)
    p2 *= 4.0
    u = 1.0 - x
    b = x * x * x * u * u * u
    b1 = 3.0 * x * x * u * u * (u - x)
    b2 = 6.0 * x * u * (u * u - 3.0 * x * u + x * x)
    return b * p, b1 * p + b * p1, b2 * p + 2.0 * b1 * p1 + b * p2


@njit(cache=True, inline="always")
def _source(kind, slot, posture, gaits, j, phase):
    if kind == POSTURE or kind == POSTURE_STEP:
        return posture[j], 0.0, 0.0
    return fourier(gaits[slot], j, phase)


@njit(cache=True, inline="always")
def _slew(seg, dt):
    """The progress rate one cycle nearer GO's target ``seg.seg_go``, by a critically damped
    second-order filter of natural frequency ω = ``seg.seg_slew`` (rad/s): r̈ = ω²(g − r) − 2ωṙ.
    The rate's change ṙ is continuous, so q̈_r — which holds ṙ·dq/dτ — never steps, however
    GO chatters; a reversal half-way turns round smoothly. Within ``RATE_SNAP`` of its target
    and nearly still it is put on it (a step of q̇_r of at most RATE_SNAP of the move's speed:
    a frozen move is frozen exactly, a resumed one runs at full rate). Returns ṙ (1/s)."""
    r, rd, g, w = seg.seg_rate, seg.seg_rate_dot, seg.seg_go, seg.seg_slew
    if r == g and rd == 0.0:
        return 0.0
    rd += (w * w * (g - r) - 2.0 * w * rd) * dt  # (semi-implicit Euler: stable at ω·dt ≪ 1)
    r += rd * dt
    if abs(r - g) < RATE_SNAP and abs(rd) < 2.0 * w * RATE_SNAP:
        r, rd = g, 0.0
    elif r < 0.0 or r > 1.0:  # (a reversal that would overshoot: held at the end)
        r, rd = min(max(r, 0.0), 1.0), 0.0
    seg.seg_rate = r
    seg.seg_rate_dot = rd
    return rd


@njit(cache=True, inline="always")
def _hold(v, n):
    for j in range(n):
        v[V_QR, j] = v[V_SEG_TO, j]
        v[V_QDR, j] = 0.0
        v[V_QDDR, j] = 0.0


@njit(cache=True, inline="always")
def _move(seg, v, n, dt):
    """Progress first, then the reference at it: an accepted move moves in its first cycle."""
    rd = _slew(seg, dt)
    r, big_t = seg.seg_rate, seg.seg_duration
    seg.seg_tau += r * dt
    # a move of no length (a frozen move ended back where it stood still: duration 0) is
    # done at once — x = τ/T would divide by zero, and in the compiled step that raises
    x = seg.seg_tau / big_t if big_t > 0.0 else 1.0
    if x >= 1.0:
        _hold(v, n)
        seg.seg_kind = HOLD
        seg.seg_done = 1.0
        return
    sh, d1, d2 = _shape(x)
    for j in range(n):
        delta = v[V_SEG_TO, j] - v[V_SEG_FROM, j]
        v[V_QR, j] = v[V_SEG_FROM, j] + delta * sh
        v[V_QDR, j] = delta * d1 / big_t * r
        v[V_QDDR, j] = delta * (d2 / (big_t * big_t) * r * r + d1 / big_t * rd)


@njit(cache=True, inline="always")
def _copy(gaits, src, dst):
    """One slot's Fourier rows into another (an element loop: no shape-check code)."""
    for j in range(gaits.shape[1]):
        for i in range(gaits.shape[2]):
            gaits[dst, j, i] = gaits[src, j, i]


@njit(cache=True, inline="always")
def _boundary(seg, gaits, phase):
    """At a stride boundary the cycle crossed: the stride counted, a pending gait change
    begun (when no blend runs)."""
    seg.stride += 1.0
    if seg.next_pending and phase >= seg.blend_start + seg.blend_len:
        _copy(gaits, SLOT_B, SLOT_A)
        _copy(gaits, SLOT_NEXT, SLOT_B)
        seg.a_kind = GAIT_SOURCE
        seg.a_period = seg.b_period
        seg.b_period = seg.next_period
        seg.blend_start = math.floor(phase)
        seg.blend_len = seg.next_blend
        seg.next_pending = 0.0
        if seg.b_kind == GAIT_STEPS:  # (the closing steps of the gait walked from now)
            _copy(gaits, SLOT_NEXT_CLOSE, SLOT_CLOSE)
            _copy(gaits, SLOT_NEXT_CLOSE_HALF, SLOT_CLOSE_HALF)


@njit(cache=True, inline="always")
def _mix(seg, gaits, phase):
    """A plain gait-to-gait blend (a speed change's, sides GAIT_SOURCE) stopped at the
    half-stride boundary just crossed: its mix there, ``(1 − w)·A + w·B`` — the Fourier rows
    are linear in it — into ``gaits[SLOT_B]`` and the blend's phase rate into ``b_period``,
    the blend ended. At a half-stride boundary w is held (a double support:
    :func:`_single_support`), so q, q̇ and the phase rate go on unchanged: a STOP need not
    wait out a long blend (a one-leg walk's, ``stride_change``)."""
    w = _single_support(phase - seg.blend_start, seg.blend_len)[0]
    for j in range(gaits.shape[1]):
        for i in range(gaits.shape[2]):
            gaits[SLOT_B, j, i] = (1.0 - w) * gaits[SLOT_A, j, i] + w * gaits[SLOT_B, j, i]
    seg.b_period = 1.0 / ((1.0 - w) / seg.a_period + w / seg.b_period)
    seg.blend_len = phase - seg.blend_start


@njit(cache=True, inline="always")
def _close(seg, gaits, phase):
    """The closing step from the half-stride boundary just crossed, once no blend runs — or
    from a plain speed change's mix there (:func:`_mix`)."""
    half = math.floor(2.0 * phase) / 2.0
    if seg.closing:
        return
    if phase < seg.blend_start + seg.blend_len:
        if seg.a_kind != GAIT_SOURCE or seg.b_kind != GAIT_SOURCE:
            return  # (an opening, or a walk whose floor steps are made for its gait B)
        _mix(seg, gaits, phase)
    _copy(gaits, SLOT_B, SLOT_A)
    seg.a_kind = seg.b_kind
    seg.a_period = seg.b_period
    seg.b_kind = POSTURE_STEP if seg.a_kind == GAIT_STEPS else POSTURE
    seg.blend_start = half
    seg.blend_len = seg.closing_len
    seg.closing = 1.0
    seg.stop_req = 0.0


@njit(cache=True, inline="always")
def _blend(seg, phase):
    """The blend at ``phase``: its fraction x, its weight w and dw/dφ, d²w/dφ² (per stride),
    and the phase rate at full progress f (strides/s). A blend from one gait into another (a
    speed or step-length change) moves only in single support (:func:`_single_support`); the
    opening and closing steps, whose floor steps are made for it, by the minimum-jerk shape
    of x."""
    if seg.blend_len <= 0.0:
        return 1.0, 1.0, 0.0, 0.0, 1.0 / seg.b_period
    x = (phase - seg.blend_start) / seg.blend_len
    if seg.a_kind == GAIT_SOURCE and seg.b_kind != POSTURE and seg.b_kind != POSTURE_STEP:
        w, w1, w2 = _single_support(phase - seg.blend_start, seg.blend_len)
    else:
        w, w1, w2 = _shape(x)
        w1 /= seg.blend_len
        w2 /= seg.blend_len * seg.blend_len
    return x, w, w1, w2, (1.0 - w) / seg.a_period + w / seg.b_period


@njit(cache=True, inline="always")
def _single_support(y, length):
    """A gait-to-gait blend's weight ``y`` strides into it (``length`` whole strides, from a
    stride boundary) and its first two derivatives per stride: held in each double support
    (:data:`DOUBLE_SUPPORT` after each of the two heel strikes of a stride), rising by a
    minimum-jerk step of 1/(2·length) in each single support. Two gaits of different strides
    put a planted foot at different places under the hip, and a weight that moved while both
    feet were planted would move them apart: the joints would fight each other through the
    pelvis (on the floor, 30 A at a speed change's heel strike). With one foot planted, a
    moving weight only changes how fast the pelvis passes over it."""
    if y >= length:
        return 1.0, 0.0, 0.0
    if y <= 0.0:
        return 0.0, 0.0, 0.0
    half = math.floor(2.0 * y)  # the half strides behind
    span = 1.0 - 2.0 * DOUBLE_SUPPORT  # a half stride's single support, per half stride
    u = (2.0 * y - half - 2.0 * DOUBLE_SUPPORT) / span  # (< 0: double support)
    s, s1, s2 = _shape(u)
    du = 2.0 / span  # du/dy
    parts = 2.0 * length
    return (half + s) / parts, s1 * du / parts, s2 * du * du / parts


@njit(cache=True, inline="always")
def _gait(s, seg, v, n, dt, gaits, offsets):
    """The phase advanced first (at the rate of the blend where it was), the boundaries it
    crossed applied, then the reference at it: an accepted walk moves in its first cycle."""
    rd = _slew(seg, dt)
    r = seg.seg_rate
    last = s.phase
    phase = last + r * _blend(seg, last)[4] * dt
    s.phase = phase
    if math.floor(phase) > math.floor(last):
        _boundary(seg, gaits, phase)
    if seg.stop_req and math.floor(2.0 * phase) > math.floor(2.0 * last):
        _close(seg, gaits, phase)
    x, w, w1, w2, f = _blend(seg, phase)
    if seg.closing and x >= 1.0:  # the closing step is over: the end posture, held
        _hold(v, n)
        seg.seg_kind = HOLD
        seg.seg_done = 1.0
        seg.closing = 0.0
        return
    rate = r * f  # φ̇
    rate_dot = rd * f + r * w1 * (1.0 / seg.b_period - 1.0 / seg.a_period) * rate  # φ̈
    step = 0  # the gaits slot of a floor step's correction, while one runs
    if x < 1.0:
        if seg.a_kind == POSTURE_STEP:
            step = SLOT_OPEN
        elif seg.b_kind == POSTURE_STEP:
            half = seg.blend_start != math.floor(seg.blend_start)
            step = SLOT_CLOSE_HALF if half else SLOT_CLOSE
    for j in range(n):
        pj = phase + offsets[j]
        a, a1, a2 = _source(seg.a_kind, SLOT_A, v[V_SEG_FROM], gaits, j, pj)
        b, b1, b2 = _source(seg.b_kind, SLOT_B, v[V_SEG_TO], gaits, j, pj)
        q = (1.0 - w) * a + w * b
        q1 = (1.0 - w) * a1 + w * b1 + w1 * (b - a)
        q2 = (1.0 - w) * a2 + w * b2 + 2.0 * w1 * (b1 - a1) + w2 * (b - a)
        if step > 0:
            d, d1, d2 = _step(gaits, step, j, x)
            q += d
            q1 += d1 / seg.blend_len
            q2 += d2 / (seg.blend_len * seg.blend_len)
        v[V_QR, j] = q
        v[V_QDR, j] = q1 * rate
        v[V_QDDR, j] = q2 * rate * rate + q1 * rate_dot


@njit(cache=True)  # (its own kernel: inlined, the step's compile copied its IR level by level)
def reference(s, seg, v, gaits, offsets, dt):
    """The reference of the segment ``seg`` (RUN): q_r, q̇_r, q̈_r into ``v``, the gait phase
    advanced in the scalars ``s``."""
    n = v.shape[1]
    kind = int(seg.seg_kind)
    if kind == MOVE:
        _move(seg, v, n, dt)
    elif kind == GAIT:
        _gait(s, seg, v, n, dt, gaits, offsets)
    else:
        _hold(v, n)


def walk_from_start(s, seg, period: float) -> None:
    """The default segment of a new cycle: the gait from phase 0 at full rate, at ``period``
    s a stride, no blend (what RUN tracks when no activity machine writes a segment: the
    bench, model-in-the-loop). ``s``: the cycle's scalars record (its gait phase); ``seg``:
    its segment record."""
    seg["seg_kind"] = GAIT
    seg["a_kind"] = seg["b_kind"] = GAIT_SOURCE
    seg["a_period"] = seg["b_period"] = seg["next_period"] = period
    seg["seg_rate"] = seg["seg_go"] = 1.0
    seg["seg_rate_dot"] = 0.0
    seg["seg_slew"] = GO_OMEGA
    s["phase"] = seg["stride"] = 0.0
    seg["blend_start"] = seg["blend_len"] = 0.0
    seg["next_pending"] = seg["stop_req"] = seg["closing"] = seg["seg_done"] = 0.0
