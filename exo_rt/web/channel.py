"""What the run's control process and the web console's process agree on over their channel
(:class:`exo_rt.session.web.WebLink` on the run's side, :class:`exo_rt.web.hub.Hub` on the
console's): how long a controlling page may stay silent, the largest message, and the request
kinds a page may ask. Both sides import it from here, so the console's process imports nothing
of the session."""

from __future__ import annotations

from firmware_bridge import requests as rq

SILENCE_S = rq.BUTTON_SILENCE_S  # s: a controlling page silent this long stops the walk
MESSAGE_BYTES = 65536  # the largest message read
ASKABLE = ("start", "stop", "speed", "step_length", "level", "confirm", "next", "prev",
           "mode", "end")  # the kinds a page may ask: every one but GO and its release
