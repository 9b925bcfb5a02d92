"""What a run's session did, in its summary (``summary.json``'s ``session``; docs/replay.md
names the keys): strides walked, the requests made, accepted and refused (by reason and by
who asked), the motions finished, the posture it ended in — from the session's log of every
request and answer (:class:`exo_rt.session.session.Session`)."""

from __future__ import annotations

from collections import Counter

from firmware_bridge import requests as rq


def summary(session) -> dict:
    """The ``session`` part of a run's summary, from ``session.log`` ([(cycle, request or
    None, answer)]: None for a motion's FINISHED) and its machine's state at the end."""
    made = [(req, ans) for _, req, ans in session.log if req is not None]
    refused = Counter(rq.REASONS[ans.reason] for _, ans in made if ans.answer == rq.REJECTED)
    finished = Counter(ans.motion or "?" for _, req, ans in session.log
                       if req is None and ans.answer == rq.FINISHED)
    m = session.machine
    return {
        "steps": int(m.steps),
        "requests": {"made": len(made),
                     "accepted": sum(ans.answer == rq.ACCEPTED for _, ans in made),
                     "rejected": sum(refused.values()),
                     "by_source": dict(Counter(rq.SOURCES[req.source] for req, _ in made)),
                     "by_kind": dict(Counter(rq.KINDS[req.kind] for req, _ in made))},
        "rejected_by_reason": dict(refused),
        "motions_finished": dict(finished),
        "final_posture": m.posture,
        "motion_at_end": m.motion.name if m.motion is not None else None,
        "ended": bool(m.ended),
    }
