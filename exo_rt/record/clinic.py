"""A session's figures for the clinic, from a run's records and events (docs/report.md).

What a therapist's session report holds (Ekso's and Indego's usage data, a gait lab's curves):
steps, walking time, up time and distance; cadence and stride length per walking bout; the
symmetry index between the legs; the assistance level per leg over time; the joint angles over
the stride, mean ± SD per leg, against a normative band; joint torque and motor current over
the stride; winding temperatures and derating; faults with their cause; the session's
timeline of postures, motions and requests (accepted and refused, with who asked).

Definitions (each from the records and ``events.jsonl``, nothing estimated):

- a **walking bout** runs from a walk's accepted ``start`` to its ``finished`` (or to the end
  of RUN: a fault, the session's end); its **strides** are the record's ``stride`` column's
  steps up within it — the opening and the closing step count as one stride each, as the
  session counts them — and **steps** are two a stride (one per leg: the project's cadence,
  :meth:`exo_rt.control.gait_speed.Gait.cadence`);
- a stride's **duration** is the time between two stride boundaries (the first from the
  bout's start); **cadence** is 120 / the bout's mean stride duration (steps/min);
- a stride's **length** is the walking speed asked for the gait it ends in (the last
  accepted ``start`` walk or ``speed``/``step_length`` before its end) × its duration: on the
  test stand that is the distance the gait walks; with a ``base`` column (a world run: the
  pelvis's x, z, pitch) the stride's length is the pelvis's forward travel;
- **walking time** is the bouts' summed duration; **up time** the time in a posture other
  than ``sitting`` plus the walks (a stand-up or sit-down move is neither);
- the **symmetry index** of a quantity is (R − L) / (½ (R + L)) · 100 %; here of each joint's
  range of motion (max − min flexion within a stride, mean over the strides walked);
- the **stride-normalised curves** resample each whole stride (stride boundary to stride
  boundary, the opening and closing steps left out) at 0, 1 … 100 % by the gait's own phase
  (the record's ``phase``: its fractional part is the fraction of the stride), then mean and
  SD over the strides, per joint.
"""

from __future__ import annotations

import math

import numpy as np

SITTING = "sitting"
LEG_NAMES = ("left", "right")
NORMAL_POINTS = 101  # 0, 1, … 100 % of the stride

# normative band: mean (exo_rt.control.trajectory.GAIT_FOURIER_DEG, a fit to gaitutils 0.13.9
# data/normal.gcd's means) ± SD — the same file's SD columns, fitted the same way
# (θ = a0 + Σ a_n cos 2πnφ + b_n sin 2πnφ, degrees; RMS residual 0.14° hip, 0.28° knee)
NORMAL_SD_FOURIER_DEG = {
    "hip": (1.23, [(-0.23, -0.42), (-0.40, 0.02), (0.01, 0.01), (-0.10, -0.07)]),
    "knee": (2.40, [(0.42, -0.50), (-0.31, -0.11), (-0.02, -0.49), (-0.78, 0.04),
                    (-0.39, 0.09)]),
}


def fourier(coeffs, phase: np.ndarray) -> np.ndarray:
    a0, harmonics = coeffs
    out = np.full(len(phase), float(a0))
    for n, (a, b) in enumerate(harmonics, start=1):
        out += a * np.cos(2 * np.pi * n * phase) + b * np.sin(2 * np.pi * n * phase)
    return out


def normative_band(kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(percent of the stride, mean, SD) in degrees of flexion for 'hip' or 'knee'; None for
    a joint without normative data."""
    from exo_rt.control.trajectory import GAIT_FOURIER_DEG

    if kind not in GAIT_FOURIER_DEG:
        return None
    pct = np.linspace(0.0, 100.0, NORMAL_POINTS)
    phase = pct / 100.0
    return pct, fourier(GAIT_FOURIER_DEG[kind], phase), fourier(NORMAL_SD_FOURIER_DEG[kind],
                                                                 phase)


def leg_of(joint: str) -> str:
    """'left'/'right' for a prefixed joint, '' for a one-leg robot's."""
    head = joint.split("_", 1)[0]
    return head if head in LEG_NAMES and "_" in joint else ""


def kind_of(joint: str) -> str:
    leg = leg_of(joint)
    return joint[len(leg) + 1:] if leg else joint


def legs(names) -> dict[str, list[int]]:
    """Leg → the indices of its joints (one leg '' for a robot with unprefixed joints)."""
    out: dict[str, list[int]] = {}
    for j, n in enumerate(names):
        out.setdefault(leg_of(n), []).append(j)
    return out


def _field(records, name):
    return records[name] if name in (records.dtype.names or ()) else None


def _ok(x) -> bool:
    return x is not None and bool(np.all(np.isfinite(x)))


# ----------------------------------------------------------------------------- timeline
def timeline(events: list[dict], t_end: float) -> list[dict]:
    """The session's timeline: each posture held (from its reaching to the next accepted
    start), each motion (accepted start to finished), each request with its answer, source and
    reason — in time order, times in s."""
    items: list[dict] = []
    posture, since = None, None
    motion, m_start, m_from = None, None, None
    for e in events:
        kind, t = e.get("event"), float(e.get("t", 0.0) or 0.0)
        if kind == "request":
            items.append({"t": t, "kind": "request", "request": e.get("request"),
                          "source": e.get("source", ""), "answer": e.get("answer"),
                          "reason": e.get("reason"), "what": _what(e)})
            if _starts(e) and motion is None:
                if posture is not None:
                    items.append({"t": since, "end": t, "kind": "posture", "what": posture})
                    posture = None
                motion, m_start, m_from = e["motion"], t, posture
        elif kind == "finished":
            if motion is not None:
                items.append({"t": m_start, "end": t, "kind": "motion", "what": motion,
                              "to": e.get("posture")})
                motion = None
        elif kind == "activity":
            if posture is None and e.get("posture"):
                posture, since = e["posture"], t
            elif e.get("posture") and e["posture"] != posture:
                items.append({"t": since, "end": t, "kind": "posture", "what": posture})
                posture, since = e["posture"], t
    if motion is not None:
        items.append({"t": m_start, "end": t_end, "kind": "motion", "what": motion, "to": None,
                      "cut": True})
    if posture is not None:
        items.append({"t": since, "end": t_end, "kind": "posture", "what": posture})
    del m_from
    return sorted(items, key=lambda i: (i["t"], i["kind"] != "posture"))


def _starts(e: dict) -> bool:
    """A request that starts a motion: an accepted ``start``, or ``go`` (the crutch's way,
    with none running) — both name the motion."""
    return e.get("event") == "request" and e.get("request") in ("start", "go") and \
        e.get("answer") == "accepted" and bool(e.get("motion"))


def _what(e: dict) -> str:
    parts = [str(e.get("request", ""))]
    for k in ("motion", "value"):
        if e.get(k) is not None:
            parts.append(f"{e[k]:g}" if isinstance(e[k], float) else str(e[k]))
    if e.get("legs"):
        parts.append("(" + ", ".join(e["legs"]) + ")")
    return " ".join(parts)


# ----------------------------------------------------------------------------- bouts
def _walks(events: list[dict], rate: float, n: int, run_end: int) -> list[tuple[int, int]]:
    """(first cycle, end cycle) of each walk: accepted start walk → finished walk (or the end
    of RUN)."""
    out, start, running = [], None, None
    for e in events:
        if _starts(e) and running is None:
            running = e["motion"]
            if running == "walk":
                start = int(e["cycle"])
        elif e.get("event") == "finished":
            running = None
            if start is not None and e.get("motion") == "walk":
                out.append((start, min(int(e["cycle"]), n - 1)))
                start = None
    if start is not None:
        out.append((start, min(run_end, n - 1)))
    return out


def _speeds(events: list[dict]) -> list[tuple[int, float]]:
    """(cycle, m/s) of each accepted walking speed (a walk's start, speed, step_length, mode)."""
    out = []
    for e in events:
        if e.get("event") == "request" and e.get("answer") == "accepted" and \
                e.get("speed") is not None:
            out.append((int(e["cycle"]), float(e["speed"])))
    return out


def bouts(records, meta: dict, events: list[dict]) -> list[dict]:
    """Each walking bout's figures (module docstring): start and end (s), duration (s),
    strides, steps, cadence (steps/min), stride length (m), speed (m/s), distance (m), and its
    strides' boundaries (cycles) and durations (s)."""
    rate = float(meta.get("rate_hz", 1000.0))
    stride = _field(records, "stride")
    n = len(records)
    if stride is None or not n:
        return []
    state = records["state"].astype(int)
    states = list(meta.get("states") or [])
    run = np.flatnonzero(state == states.index("RUN")) if "RUN" in states else np.arange(n)
    run_end = int(run[-1]) if len(run) else n - 1
    cyc0 = int(records["cycle"][0])
    speeds = _speeds(events)
    base = _field(records, "base")
    out = []
    for a, b in _walks(events, rate, n + cyc0, run_end + cyc0):
        a, b = a - cyc0, b - cyc0
        s = np.nan_to_num(stride[a:b + 1])
        up = np.flatnonzero(np.diff(s) > 0) + a + 1  # the cycles a stride ends at
        bounds = [a] + up.tolist()
        durations = np.diff(bounds) / rate
        lengths = []
        for k, end in enumerate(up.tolist()):
            if base is not None and _ok(base[bounds[k]]) and _ok(base[end]):
                lengths.append(float(base[end, 0] - base[bounds[k], 0]))
                continue
            v = [sp for c, sp in speeds if c - cyc0 <= end]
            lengths.append((v[-1] if v else 0.0) * float(durations[k]))
        strides = int(len(up))
        mean_t = float(np.mean(durations)) if strides else math.nan
        distance = float(np.sum(lengths))
        dur = (b - a) / rate
        out.append({"start_s": float(records["t"][a]), "end_s": float(records["t"][b]),
                    "duration_s": dur, "strides": strides, "steps": 2 * strides,
                    "cadence_steps_min": 120.0 / mean_t if strides else 0.0,
                    "stride_length_m": distance / strides if strides else 0.0,
                    "speed_m_s": distance / float(np.sum(durations)) if strides else 0.0,
                    "distance_m": distance,
                    "stride_ends": up.tolist(), "stride_s": durations.tolist()})
    return out


# ----------------------------------------------------------------------------- strides
def normalised(records, meta: dict, walk_bouts: list[dict], field: str = "q",
               scale: float = 1.0) -> dict[str, np.ndarray]:
    """Joint → (strides, 101) of ``field`` (× ``scale``) over each whole stride (its start a
    stride boundary, its end the next; the opening and closing steps left out), resampled at
    0 … 100 % by the gait's phase (the record's ``phase``)."""
    names = list(meta["joint_names"])
    values = _field(records, field)
    phase = _field(records, "phase")
    out = {n: [] for n in names}
    if values is None or phase is None:
        return {n: np.zeros((0, NORMAL_POINTS)) for n in names}
    grid = np.linspace(0.0, 1.0, NORMAL_POINTS)
    for bout in walk_bouts:
        ends = bout["stride_ends"]
        for a, b in zip(ends[:-2], ends[1:-1], strict=True):  # not the closing step
            ph = phase[a:b + 1] - math.floor(phase[a] + 1e-9)
            ph[-1] = max(ph[-1], 1.0)
            if not (np.all(np.isfinite(ph)) and np.all(np.diff(ph) >= 0)):
                continue
            for j, n in enumerate(names):
                v = values[a:b + 1, j] * scale
                out[n].append(np.interp(grid, ph, v))
    return {n: np.array(v) if v else np.zeros((0, NORMAL_POINTS)) for n, v in out.items()}


def symmetry_index(right: float, left: float) -> float:
    """(R − L) / (½ (R + L)) · 100 (%): 0 for equal legs; NaN when both are 0."""
    mean = 0.5 * (right + left)
    return 100.0 * (right - left) / mean if mean != 0 else math.nan


def symmetry(curves: dict[str, np.ndarray], names) -> dict[str, float]:
    """Per joint kind (hip, knee …) present on both legs: the symmetry index of its range of
    motion per stride (max − min, mean over the strides), right against left (%)."""
    out = {}
    by = legs(names)
    if not ("left" in by and "right" in by):
        return out
    for jl in by["left"]:
        kind = kind_of(names[jl])
        jr = next((j for j in by["right"] if kind_of(names[j]) == kind), None)
        if jr is None:
            continue
        cl, cr = curves[names[jl]], curves[names[jr]]
        if not len(cl) or not len(cr):
            continue
        rom_l = float(np.mean(cl.max(axis=1) - cl.min(axis=1)))
        rom_r = float(np.mean(cr.max(axis=1) - cr.min(axis=1)))
        out[kind] = symmetry_index(rom_r, rom_l)
    return out


# ----------------------------------------------------------------------------- levels, heat
def level_changes(records, meta: dict) -> list[dict]:
    """Each leg's assistance level in the records: its first value, then each change — the
    level ramps over a stride, so a change is a run of cycles where it moves: t (s) where it
    starts to move, ``t_end`` where it settles, leg, level (0–1) it settles at."""
    level = _field(records, "level")
    if level is None or not len(records):
        return []
    names = list(meta["joint_names"])
    t = records["t"]
    out = []
    for leg, idx in legs(names).items():
        lv = np.nanmean(level[:, idx], axis=1) if len(idx) > 1 else level[:, idx[0]]
        if not np.isfinite(lv[0]):
            continue
        out.append({"t": float(t[0]), "t_end": float(t[0]), "leg": leg or "leg",
                    "level": float(lv[0])})
        moving = np.flatnonzero(np.diff(lv) != 0) + 1  # cycles whose level is new
        if not len(moving):
            continue
        cuts = np.flatnonzero(np.diff(moving) > 1) + 1
        for run in np.split(moving, cuts):
            a, b = int(run[0]), int(run[-1])
            if np.isfinite(lv[b]):
                out.append({"t": float(t[a - 1]), "t_end": float(t[b]), "leg": leg or "leg",
                            "level": float(lv[b])})
    return sorted(out, key=lambda r: (r["t"], r["leg"]))


def thermal(records, meta: dict) -> dict[str, dict]:
    """Per joint: the hottest winding (°C), the lowest derating factor and how long the
    current limit was derated (factor < 1, s)."""
    w, d = _field(records, "winding"), _field(records, "derate")
    rate = float(meta.get("rate_hz", 1000.0))
    out = {}
    for j, n in enumerate(meta["joint_names"]):
        row = {}
        if w is not None and np.isfinite(w[:, j]).any():
            row["max_winding_C"] = float(np.nanmax(w[:, j]))
        if d is not None and np.isfinite(d[:, j]).any():
            row["min_derate"] = float(np.nanmin(d[:, j]))
            row["derated_s"] = float(np.sum(d[:, j] < 1.0) / rate)
        out[n] = row
    return out


# ----------------------------------------------------------------------------- all
def figures(records, meta: dict, events: list[dict], summary: dict) -> dict:
    """The numbers of report.html (and of summary.json's ``clinic``)."""
    rate = float(meta.get("rate_hz", 1000.0))
    names = list(meta["joint_names"])
    states = list(meta.get("states") or [])
    state = records["state"].astype(int)
    in_run = state == states.index("RUN") if "RUN" in states else np.ones(len(records), bool)
    # the session's end: the end of RUN (STOPPING's hold and SHUTDOWN are not the session)
    t_run = records["t"][in_run]
    t_end = (float(t_run[-1]) + 1.0 / rate if len(t_run) else
             float(records["t"][-1]) if len(records) else 0.0)
    walk_bouts = bouts(records, meta, events)
    curves = normalised(records, meta, walk_bouts, "q", 180.0 / math.pi)
    items = timeline(events, t_end)
    walking = sum(b["duration_s"] for b in walk_bouts)
    upright = sum(i["end"] - i["t"] for i in items
                  if i["kind"] == "posture" and i["what"] != SITTING)
    strides = sum(b["strides"] for b in walk_bouts)
    distance = sum(b["distance_m"] for b in walk_bouts)
    requests = [i for i in items if i["kind"] == "request"]
    level = _field(records, "level")
    assist = {}
    if level is not None:
        for leg, idx in legs(names).items():
            lv = level[in_run][:, idx]
            if lv.size and np.isfinite(lv).any():
                assist[leg or "leg"] = {"mean": float(np.nanmean(lv)),
                                        "min": float(np.nanmin(lv)),
                                        "max": float(np.nanmax(lv))}
    faults = []
    for f in summary.get("faults", []):
        faults.append({k: f.get(k) for k in ("t", "cause", "joint", "action", "detail")
                       if f.get(k) is not None})
    out = {
        "session_s": float(np.sum(in_run) / rate),
        "session_end_s": t_end,
        "strides": int(strides),
        "steps": int(2 * strides),
        "walking_s": float(walking),
        "up_s": float(upright + walking),
        "distance_m": float(distance),
        "distance_from": "world" if _field(records, "base") is not None else "gait",
        "speed_m_s": float(distance / walking) if walking else 0.0,
        "bouts": [{k: v for k, v in b.items() if k not in ("stride_ends", "stride_s")}
                  for b in walk_bouts],
        "symmetry_index_pct": symmetry(curves, names),
        "assistance": assist,
        "level_changes": level_changes(records, meta),
        "requests": {"made": len(requests),
                     "accepted": sum(r["answer"] == "accepted" for r in requests),
                     "refused": sum(r["answer"] == "rejected" for r in requests)},
        "thermal": thermal(records, meta),
        "derated": any(v.get("min_derate", 1.0) < 1.0 for v in thermal(records, meta).values()),
        "faults": faults,
        "strides_normalised": {n: int(len(c)) for n, c in curves.items()},
    }
    return out
