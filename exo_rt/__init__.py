"""exo-rt: real-time controller of a powered lower-limb exoskeleton (DESIGN.md)."""

import hashlib as _hashlib
import os as _os
import sys as _sys
import time as _time
from pathlib import Path as _Path

__version__ = "0.1.0"
STARTED = _time.monotonic()  # process start (close enough): start-up time to READY and RUN


def source_key(root: _Path) -> str:
    """A hash of every ``*.py`` file's path, size and modification time below ``root``."""
    h = _hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def _numba_cache_dir() -> None:
    """Key numba's on-disk cache to this package's sources.

    numba revalidates a cached kernel against its own file only: a kernel that inlines a
    function from another module (the plant step calls the harmonic-drive and motor laws)
    would keep running the old code after that module changed. Unless the user chose
    ``NUMBA_CACHE_DIR``, the cache goes to ``$XDG_CACHE_HOME/exo-rt/numba-<h>`` (default
    ``~/.cache``), h hashing every source file's path, size and modification time: any edit
    gives a fresh cache. Set before numba is imported (or on its config if it already is).
    """
    if _os.environ.get("NUMBA_CACHE_DIR"):
        return
    try:
        key = source_key(_Path(__file__).resolve().parent)
        base = _Path(_os.environ.get("XDG_CACHE_HOME") or _Path.home() / ".cache")
        cache = base / "exo-rt" / f"numba-{key}"
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # no writable cache home: numba's default (__pycache__) stays
    _os.environ["NUMBA_CACHE_DIR"] = str(cache)
    if "numba" in _sys.modules:
        from numba.core import config as _config

        _config.CACHE_DIR = str(cache)


_numba_cache_dir()
