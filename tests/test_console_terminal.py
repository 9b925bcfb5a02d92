"""The therapist's console driven through a real terminal: ``exo-rt run --console`` in a tmux
pane, keys sent one at a time as a therapist types them, the pane captured after every key.
After each the status block must be readable — the expected posture or motion, what it needs,
what waits for what — and nothing else may write over it (the recorder's progress line is
off: the console's status shows the time). The whole session ends SHUTDOWN, and the run
asked exactly the keys' requests: ``--console`` alone runs no script."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TMUX = shutil.which("tmux")

pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not installed: apt-get install -y tmux (.ci/run does)")


class Pane:
    """A detached tmux session of its own (its own server socket) running ``command`` in a
    ``width`` × ``height`` terminal."""

    def __init__(self, command: str, width: int = 100, height: int = 40) -> None:
        self.socket = f"exo-rt-console-test-{os.getpid()}"
        self._tmux("new-session", "-d", "-s", "console", "-x", str(width), "-y", str(height),
                   "-c", str(ROOT), command)

    def _tmux(self, *args: str) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=10, check=True).stdout

    def text(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "console")

    def key(self, key: str) -> None:
        self._tmux("send-keys", "-t", "console", "-l", key)

    def wait(self, *needles: str, timeout: float = 20.0) -> str:
        """The pane once it shows every one of ``needles`` (the test fails with the pane's
        text if it does not within ``timeout`` s, or the run ended without them)."""
        end = time.monotonic() + timeout
        while True:
            text = self.text()
            if all(n in text for n in needles):
                return text
            if time.monotonic() > end or ("exit=" in text and "exit=" not in needles):
                missing = [n for n in needles if n not in text]
                pytest.fail(f"the pane does not show {missing} after {timeout} s:\n{text}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=10)


def status(text: str) -> str:
    """The status block of a captured pane: from its first line (the session's time) to the
    end of the pane's text, its lines joined as the block was cut."""
    lines = text.rstrip("\n").split("\n")
    first = max(i for i, x in enumerate(lines) if " s of 60 s | " in x)
    return " | ".join(x.strip() for x in lines[first:] if x.strip())


# (key, what the status shows after it, what the pane shows once the key's work is done)
STEPS = [
    ("h", ["no posture"], ["keys: g GO press/release"]),
    ("1", ["home waits for CONFIRM: c", "last: rejected start home: needs_confirm"], []),
    ("c", ["home ", "last: accepted confirm home"],
     ["standing", "possible: 1 walk, 2 sit_down (hold GO: g)", "finished home → standing"]),
    ("1", ["walk", "last: accepted start walk"], ["strides 2"]),
    ("s", ["walk (stopping)", "last: accepted stop walk"],
     ["standing", "finished walk → standing"]),
    ("2", ["sit_down   0% (waits for GO: g)", "last: accepted start sit_down"], []),
    ("g", ["(GO held: g pauses)", "GO held", "last: accepted go sit_down"], []),
    ("g", ["(waits for GO: g)", "GO –", "last: accepted go_release"], []),
    ("g", ["(GO held: g pauses)", "GO held"],
     ["sitting", "release GO (g) before the next motion", "finished sit_down → sitting"]),
    ("g", ["sitting", "possible: 1 stand_up (hold GO: g)", "GO –",
           "last: accepted go_release"], []),
]


@pytest.mark.slow
def test_the_console_in_a_terminal_for_a_whole_session(tmp_path):
    out = tmp_path / "run"
    # the leg starts in no named posture: only HOME is possible, and it waits for CONFIRM
    run = shlex.join([sys.executable, "-m", "exo_rt", "run", "--console", "--start-pose",
                      "0.15", "0.3", "--duration", "60", "--out", str(out),
                      "--config", str(ROOT / "configs" / "exo_leg.yaml")])  # the test stand
    pane = Pane(f"{run}; echo exit=$?; sleep 60")
    try:
        # (120 s: a cold numba cache compiles first; warm, RUN begins within a few s)
        pane.wait(" s of 60 s | RUN | ", "1 home (then CONFIRM: c)", timeout=120.0)
        for key, shown, done in STEPS:
            pane.key(key)
            text = pane.wait(*shown, timeout=5.0)
            block = status(text)
            assert " s of 60 s | RUN | " in block, block
            assert "real time" not in text, text  # the recorder's line never overwrites it
            if done:
                block = status(pane.wait(*done, timeout=15.0))
                assert " s of 60 s | RUN | " in block, block
        pane.key("q")
        text = pane.wait("exit=", timeout=20.0)
    finally:
        pane.close()
    assert "final state SHUTDOWN" in text and "exit=0" in text, text
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    asked = [(e["source"], e["request"], e.get("motion"), e["answer"])
             for e in events if e["event"] == "request"]
    # exactly the keys' requests: --console alone runs no script, and asks nothing itself
    assert asked == [
        ("console", "start", "home", "rejected"), ("console", "confirm", "home", "accepted"),
        ("console", "start", "walk", "accepted"), ("console", "stop", "walk", "accepted"),
        ("console", "start", "sit_down", "accepted"), ("console", "go", "sit_down", "accepted"),
        ("console", "go_release", None, "accepted"), ("console", "go", "sit_down", "accepted"),
        ("console", "go_release", None, "accepted"), ("console", "end", None, "accepted")]
