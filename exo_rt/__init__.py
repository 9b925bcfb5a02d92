"""exo-rt: real-time controller of a powered lower-limb exoskeleton (DESIGN.md)."""

import time as _time

__version__ = "0.1.0"
STARTED = _time.monotonic()  # process start (close enough): start-up time to READY and RUN
