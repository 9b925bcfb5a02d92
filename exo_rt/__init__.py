"""exo-rt: real-time controller of a powered lower-limb exoskeleton (docs/architecture.md).

Importing the package reads no file, writes none and sets nothing for the process: numba's
settings and its cache's key are made where the kernels are (:mod:`exo_rt.numba_settings`).
"""

import time as _time

__version__ = "0.1.0"
STARTED = _time.monotonic()  # process start (close enough): start-up time to READY and RUN
