"""Progress bars of long commands: on a terminal only, the items unchanged."""

from __future__ import annotations

import io
import sys

from exo_rt.progress import progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_quiet_when_not_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    items = [1, 2, 3]
    assert progress(items, "replay") is items
    assert sys.stderr.getvalue() == ""


def test_a_bar_on_a_terminal(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert list(progress(iter(range(5)), "replay", total=5, unit="run")) == list(range(5))
    assert "replay" in tty.getvalue() and "/5 " in tty.getvalue()  # (redrawn at most 10×/s)
