"""Progress of long commands (replay over many runs, bench procedures and their sweeps): a
tqdm bar on stderr when it is a terminal, nothing at all otherwise (CI, pipes, logs)."""

from __future__ import annotations

import sys
from collections.abc import Iterable


def progress(iterable: Iterable, desc: str, *, total: int | None = None,
             unit: str = "it") -> Iterable:
    """``iterable``, with a progress bar while stderr is a terminal."""
    if not sys.stderr.isatty():
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:  # the bar is a convenience
        return iterable
    return tqdm(iterable, desc=desc, total=total, unit=unit, leave=False, file=sys.stderr,
                dynamic_ncols=True)
