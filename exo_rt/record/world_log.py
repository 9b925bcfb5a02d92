"""A world run's truth in the recording process: the simulation's rows joined to the cycle's
records, for run.mcap and live telemetry (docs/world.md, "What a world run records").

The simulation (:mod:`exo_rt.sim.world_truth`) puts one row per physics period into a ring of
its own; the cycle log's header says its layout (``meta["world"]``). Each cycle's record gets
the row stamped at or before its ``wall_start + t + lead_s`` (stamps on the CAN log's clock;
``lead_s``: lockstep, the world's state at the SYNC the cycle's feedback answers, exactly;
real time, the latest the simulation had when the cycle began) and so gains the columns the
3D scene reads (:mod:`exo_rt.record.scene`): ``base`` (pelvis x, z, pitch), ``foot_force``
and ``foot_point`` (3 per foot, world), ``seat_x`` (the seat's centre, m: a chair kept behind
the wearer moves, ``seat_follows``), with the metadata ``feet`` (the scene's names of those
feet) and ``seat`` (the box, from the first row). The rows go to their own channel too:

========= ========== ===================================================================
topic     one per    fields
========= ========== ===================================================================
/world    cycle      t, cycle (the record's), sim_t (the row's own time, run time s on the
                     simulation's clock); base {x, z (m), pitch (rad)}; force and point,
                     each {foot: {x, y, z}} (N; m, world); q {joint: the link's true
                     angle, rad}
========= ========== ===================================================================

The cycle log holds none of it: the cycle's records are the controller's, the world's are
not what it measured. A record whose row has not come (the ring behind, the simulation gone)
carries NaN there: the scene leaves its pelvis where it was, /world has no message.
"""

from __future__ import annotations

import json

import numpy as np

from exo_rt.record.recorder import row_width

WORLD = "/world"
KEEP_ROWS = 60_000  # truth rows held before any record joins them (a minute at 1 kHz)


class WorldLog:
    """The truth ring ``ring`` (:class:`exo_rt.record.rings.RecordRing`) of a run whose header
    says ``meta["world"]``; ``scene``: the run's :class:`~exo_rt.record.scene.RobotScene`
    (its feet's names, its seat), or None."""

    TOPICS = (WORLD,)

    def __init__(self, ring, meta: dict, scene=None) -> None:
        spec = meta["world"]
        self.ring = ring
        self.cols = {k: (int(a), int(b)) for k, (a, b) in spec["columns"].items()}
        self.width = row_width(self.cols)
        self.lead = float(spec.get("lead_s", 0.0))
        self.joints = list(spec.get("joints", meta.get("joint_names", [])))
        shanks = list(spec["feet"])
        names = shanks
        if scene is not None:  # the scene's foot carried by each shank
            by_body = {scene.mech.body_names[f.body]: f.name for f in scene.feet}
            names = [by_body.get(s, s) for s in shanks]
        self.feet = names
        self.scene = scene
        self.wall_start: float | None = meta.get("wall_start")
        self.held = np.zeros((0, self.width))  # rows not yet past every record's key
        self.seat: dict | None = None
        self._fmt = self._format()
        self.extra = sum(width for _, width in self.gained())  # the columns a record gains

    def set_origin(self, meta: dict) -> None:
        """The header's final metadata (the loop's ``wall_start``)."""
        self.wall_start = meta.get("wall_start")

    def gained(self) -> tuple[tuple[str, int], ...]:
        """The columns a record gains, (name, width) in their order (:meth:`join` fills
        them)."""
        return (("base", 3), ("foot_force", 3 * len(self.feet)),
                ("foot_point", 3 * len(self.feet)), ("q_world", len(self.joints)),
                ("seat_x", 1), ("sim_t", 1))

    def extend(self, columns: dict, meta: dict) -> tuple[dict, dict]:
        """The records' columns with the truth's after them (``base``, ``foot_force``,
        ``foot_point``, ``q_world``, ``seat_x``, ``sim_t``), and the metadata with ``feet``."""
        w = row_width(columns)
        wide = dict(columns)
        for name, width in self.gained():
            wide[name] = (w, w + width)
            w += width
        meta = dict(meta, feet=list(self.feet))
        if self.seat is not None:
            meta["seat"] = self.seat
        return wide, meta

    def join(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` (records) with the truth's columns after them (:meth:`extend`): the row
        stamped at or before each record's key; NaN where none has come."""
        took = self.ring.take()
        if len(took):
            self.held = np.concatenate([self.held, took])[-KEEP_ROWS:]
            if self.seat is None:
                self._seat(took[0])
        c, w = self.cols, rows.shape[1]
        out = np.full((len(rows), w + self.extra), np.nan)
        out[:, :w] = rows
        if not len(rows) or not len(self.held) or self.wall_start is None:
            return out
        keys = self.wall_start + rows[:, 0] + self.lead
        idx = np.searchsorted(self.held[:, 0], keys, side="right") - 1
        ok = idx >= 0
        src = self.held[idx[ok]]
        o = w
        for name in ("base", "foot_force", "foot_point", "q_world"):
            a, b = c[name]
            out[ok, o:o + b - a] = src[:, a:b]
            o += b - a
        out[ok, o] = src[:, c["seat"][0]]  # the seat's centre x (NaN: no chair)
        out[ok, o + 1] = src[:, 0] - self.wall_start
        if ok.any():  # what no later record needs: gone (the last one a record took stays)
            self.held = self.held[int(idx[ok].max()):]
        return out

    def _seat(self, row: np.ndarray) -> None:
        a, b = self.cols["seat"]
        box = row[a:b]
        if np.all(np.isfinite(box)):
            self.seat = {"center": box[:3].tolist(), "size": box[3:].tolist()}
            if self.scene is not None and not self.scene.seat:
                self.scene.seat = self.seat  # drawn from the scene's next static entities

    # ------------------------------------------------------------------ /world
    def channels(self, context) -> dict:
        import foxglove

        num = {"type": ["number", "null"]}
        vec = {"type": "object", "properties": dict.fromkeys("xyz", num)}
        per_foot = {"type": "object", "properties": dict.fromkeys(self.feet, vec)}
        schema = {"type": "object", "title": "exo_rt.world", "properties": {
            "t": num, "cycle": num, "sim_t": num,
            "base": {"type": "object", "properties": dict.fromkeys(("x", "z", "pitch"), num)},
            "force": per_foot, "point": per_foot,
            "q": {"type": "object", "properties": dict.fromkeys(self.joints, num)}}}
        return {WORLD: foxglove.Channel(WORLD, schema=schema, message_encoding="json",
                                        context=context)}

    def _format(self) -> str:
        def group(keys):
            return "{" + ",".join(f"{json.dumps(k)}:%r" for k in keys) + "}"

        xyz = group("xyz")
        feet = "{" + ",".join(f"{json.dumps(f)}:{xyz}" for f in self.feet) + "}"
        return ('{"t":%r,"cycle":%r,"sim_t":%r,"base":' + group(("x", "z", "pitch"))
                + ',"force":' + feet + ',"point":' + feet + ',"q":' + group(self.joints)
                + "}")

    def rows(self, wide: np.ndarray, times_ns, log) -> int:
        """/world for each record of ``wide`` (:meth:`join`'s) that took a truth row; the
        messages logged."""
        w = wide.shape[1] - self.extra
        ok = np.flatnonzero(np.isfinite(wide[:, -1]))
        if not len(ok):
            return 0
        # t, cycle, sim_t, then base … q_world (the seat's x, before sim_t, is the scene's)
        body = np.concatenate([wide[ok][:, [0, 1, -1]], wide[ok][:, w:-2]], axis=1)
        fmt = self._fmt
        for k, r in zip(ok.tolist(), body.tolist(), strict=True):
            text = fmt % tuple(r)
            if not np.isfinite(r).all():  # (NaN and ±inf are not JSON)
                text = _null(text)
            log(WORLD, text.encode(), int(times_ns[k]))
        return len(ok)


def _null(text: str) -> str:
    for bad in ("-inf", "inf", "nan"):
        for lead in (":", ",", "["):
            text = text.replace(lead + bad, lead + "null")
    return text
