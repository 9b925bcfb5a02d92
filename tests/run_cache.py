"""``exo-rt run`` command lines that tests of several modules make alike, made once a test
session: the world's sessions of docs/sizing.md's tables that tests/test_world_session.py and
tests/test_world_peaks.py read too (each 20–50 s of a worker's CPU).

The runs live in the session's shared temporary directory (the parent of each pytest-xdist
worker's, pruned by pytest as its own): the first worker to ask for a command line makes the
run under a file lock, and a worker asking for it meanwhile waits for that run rather than
making it again. A test gets the run folder itself, to read: one that writes into it works on
a copy.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class RunCache:
    """Runs made once, in ``base`` (shared by the session's workers)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        base.mkdir(parents=True, exist_ok=True)

    def run(self, *args: str, timeout: float = 600.0
            ) -> tuple[Path, subprocess.CompletedProcess]:
        """``python -m exo_rt run ARGS --out FOLDER`` in the repository (paths in ARGS relative
        to it, as the docs write them: the same words, the same run), made once a session:
        (its run folder, the process's result)."""
        key = hashlib.sha256("\0".join(args).encode()).hexdigest()[:16]
        folder = self.base / key
        done = folder / "result.json"
        with open(self.base / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # (released when the file closes)
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                argv = [sys.executable, "-m", "exo_rt", "run", *args,
                        "--out", str(folder / "run")]
                res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                                     timeout=timeout, env=dict(os.environ, EXO_RT_WARMUP="0"))
                done.write_text(json.dumps({"argv": argv, "returncode": res.returncode,
                                            "stdout": res.stdout, "stderr": res.stderr}))
            r = json.loads(done.read_text())
        return folder / "run", subprocess.CompletedProcess(r["argv"], r["returncode"],
                                                           r["stdout"], r["stderr"])
