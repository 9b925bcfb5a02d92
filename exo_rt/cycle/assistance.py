"""The assistance level in the cycle: asked for by a request (the wearer's crutch, the
therapist's console, a session script: ``LEVEL``), applied at the next stride boundary of the
wearer's estimated gait and ramped over one stride (docs/assistance.md).

Python writes the level asked for into ``v[V_LEVEL_ASKED]`` (0–1 per joint, each joint the
level of its leg) and sets the scalar ``level_pending``; the cycle starts the ramp when the
estimated phase next passes a stride boundary — at once when the wearer stands still — and
moves ``v[V_LEVEL]`` from where it is then to the level asked (``v[V_LEVEL_TO]`` from then on)
by a smooth step over one stride (at the estimated stride frequency: standing still, the last
one's). A request during a ramp waits for the next boundary too: the running ramp never
changes its end (no step in the level).
"""

from __future__ import annotations

import math

from exo_rt.cycle.layout import V_LEVEL, V_LEVEL_ASKED, V_LEVEL_FROM, V_LEVEL_TO
from exo_rt.jit import njit

WALKING = 0.5  # the estimate's ``walking`` at or above which the wearer walks


@njit(cache=True)
def level_update(s, v, est, dt):
    """One cycle of the level: start a pending change at the stride boundary (``est``: the
    gait-phase estimate's state record), advance a running ramp by the estimated stride
    frequency."""
    if s.level_pending > 0.5 and (est.wrapped > 0.5 or est.walking < WALKING):
        s.level_pending = 0.0
        s.level_ramp = 0.0
        for j in range(v.shape[1]):
            v[V_LEVEL_FROM, j] = v[V_LEVEL, j]
            v[V_LEVEL_TO, j] = v[V_LEVEL_ASKED, j]
    if s.level_ramp >= 1.0:
        return
    s.level_ramp = min(1.0, s.level_ramp + dt * est.omega / (2.0 * math.pi))
    x = s.level_ramp
    w = x * x * (3.0 - 2.0 * x)
    for j in range(v.shape[1]):
        v[V_LEVEL, j] = v[V_LEVEL_FROM, j] + w * (v[V_LEVEL_TO, j] - v[V_LEVEL_FROM, j])
