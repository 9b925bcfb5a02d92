"""The controller's states (docs/safety.md has the diagram).

BOOT → CONFIGURE (NMT, SDO set-up) → READY (drives enabled at zero current) → RUN (the
session: docs/sessions.md) → STOPPING → SHUTDOWN, or SAFE on any fault: the configured
reaction, ramped, then the drives disabled. SAFE latches: nothing re-enables the drives but
an explicit reset. ALIGN (3) is no state a run enters any more — the session's HOME took its
place — but keeps its code: the state column of older runs' records still holds it.
"""

BOOT, CONFIGURE, READY, ALIGN, RUN, STOPPING, SAFE, SHUTDOWN = range(8)
STATES = ("BOOT", "CONFIGURE", "READY", "ALIGN", "RUN", "STOPPING", "SAFE", "SHUTDOWN")
READY_CYCLES = 20  # zero current after enabling, before moving
