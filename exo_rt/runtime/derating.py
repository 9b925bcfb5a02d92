"""Derating announced: when a motor's winding passes ``safety.thermal.warning`` the run says so
— an event, a line on standard error, and an entry in the summary per joint (when, and how
far: the highest winding temperature and the lowest current-limit factor it reached) — before
anything else does (the first SAFE ``winding_temperature`` was, before, the first sign).

The compiled cycle computes each joint's winding temperature and derating factor
(:mod:`exo_rt.actuators.thermal`, rows ``V_T_WINDING`` and ``V_DERATE`` of the cycle's joint
vectors); this watch reads them from Python between cycles, one joint a cycle in turn, with one
comparison: the joint's winding against its mark — its warning level until it passes it, then
the highest temperature seen so far plus :data:`RESOLUTION`. Derating is therefore seen at most
n − 1 periods after it begins (n joints: 1 ms on a two-joint leg at 1 kHz), and the highest
temperature within :data:`RESOLUTION` plus the rise over n periods. The factor is the kernel's
own (:func:`~exo_rt.actuators.thermal.derate`), a falling function of the winding's
temperature: the lowest factor is the one at the highest temperature. The line is written by a
short-lived thread, never by the control thread (a terminal or pipe that blocks cannot hold up
the loop).
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from exo_rt.actuators import thermal
from exo_rt.cycle.states import RUN, STATES

RESOLUTION = 0.01  # °C: the highest winding temperature is tracked to this


class Watch:
    """The derating watch of one run: its ``cycle`` (:class:`exo_rt.cycle.step.Cycle`: the
    joints' thermal parameters, windings and current limits, ``s["state"]`` the run's
    state), its ``joint_names``, its period ``dt`` (s), its ``events`` (a derating is
    appended) and ``k0``, the cycle each state began (RUN's: the summary's ``t_run``) — the
    run's own list and dict, which it fills as it goes."""

    def __init__(self, cycle, joint_names, dt: float, events: list, k0: dict,
                 stream=None) -> None:
        self.cycle, self.joint_names, self.dt = cycle, list(joint_names), dt
        self.events, self.k0 = events, k0
        self.stream = stream  # None: sys.stderr when a line is due
        c = cycle
        self.params = c.thermal
        self.winding = c.winding  # a view of the cycle's row: the compiled cycle writes it
        self.limit_A = np.array([float(t["current_limit"]) for t in c.transmissions])
        self.n = len(self.params)
        motor = self.params["c_w"] > 0.0
        self.mark = np.where(motor, self.params["warning"], np.inf).tolist()  # °C
        self.started: dict[int, dict] = {}  # joint → its entry
        self.peak = [-np.inf] * self.n  # °C: the highest winding temperature since the start

    def poll(self, k: int) -> None:
        """Between cycles: cycle ``k``'s joint k mod n against its mark (one comparison; the
        rest only when the winding passed it)."""
        j = k % self.n
        if self.winding[j] > self.mark[j]:
            self._passed(k, j)

    def _passed(self, k: int, j: int) -> None:
        tw = float(self.winding[j])
        self.peak[j] = tw
        self.mark[j] = tw + RESOLUTION
        if j not in self.started:
            self._start(k, j, tw)

    def _start(self, k: int, j: int, tw: float) -> None:
        """Derating begins on joint ``j`` in cycle ``k``: its event, its line."""
        p = self.params[j]
        name = self.joint_names[j]
        t = round(k * self.dt, 6)
        state = STATES[int(self.cycle.s["state"])]
        floor = float(p["floor"])
        event = {"cycle": k, "t": t, "event": "derating", "joint": name, "state": state,
                 "winding_C": round(tw, 3), "warning_C": float(p["warning"]),
                 "limit_C": float(p["limit"]), "floor": round(floor, 4),
                 "current_limit_A": float(self.limit_A[j])}
        self.started[j] = event
        self.events.append(event)
        line = (f"exo-rt: warning: t = {t:.3f} s ({state}): the {name} motor's winding is at "
                f"{tw:.1f} °C, past its warning level {p['warning']:g} °C — its current limit "
                f"derates from {self.limit_A[j]:g} A down to {floor * self.limit_A[j]:.1f} A "
                f"at {p['limit']:g} °C, where the run stops SAFE (winding_temperature); let "
                "the motor cool before going on (docs/assistance.md, 'Thermal protection')")
        threading.Thread(target=self._say, args=(line,), name="exo-rt derating line",
                         daemon=True).start()

    def _say(self, line: str) -> None:
        stream = self.stream or sys.stderr
        try:
            tty = stream.isatty()
        except (AttributeError, OSError, ValueError):
            tty = False
        try:  # on a terminal the recording's status line is rewritten in place: a line below
            stream.write(("\n" if tty else "") + line + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass  # (stderr closed: the event and the summary still say it)

    def summary(self) -> dict:
        """Per joint that derated: when it began (``t``, ``cycle``, ``t_run`` from the start of
        RUN, the state), its winding then, the highest winding temperature (°C) and the lowest
        factor of its current limit (0–1) and the limit it gave (A) over the run."""
        if not self.started:
            return {}
        peaks = np.array([max(self.peak[j], float(self.winding[j])) if j in self.started
                          else -np.inf for j in range(self.n)])
        factor = np.ones(self.n)
        thermal.derate(self.params, np.vstack([peaks, peaks]), factor)
        k_run = self.k0.get(RUN)
        out = {}
        for j in sorted(self.started):
            e = self.started[j]
            out[e["joint"]] = {
                "t": e["t"], "cycle": e["cycle"],
                "t_run": round(e["t"] - k_run * self.dt, 6) if k_run is not None else None,
                "state": e["state"], "winding_C": e["winding_C"],
                "highest_winding_C": round(float(peaks[j]), 2),
                "lowest_factor": round(float(factor[j]), 4),
                "lowest_current_limit_A": round(float(factor[j] * self.limit_A[j]), 3),
                "warning_C": e["warning_C"], "limit_C": e["limit_C"]}
        return out
