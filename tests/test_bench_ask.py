"""``exo-rt bench-test`` on a real (non-simulated) bus asks ``Proceed? [y/N]`` whenever
``--yes`` is absent, whether standard input is a terminal or not (docs/bench.md, "Running a
procedure"); from a pipe that gives no ``y`` nothing moves: not one frame on the bus, exit 1,
one line saying so. The bus is python-can's ``virtual`` interface: a real bus to exo-rt (no
simulated drives behind it), watched here by a second node on the same channel."""

from __future__ import annotations

import io
import os

import can
import pytest

from exo_rt import cli
from exo_rt.hil.procedures import proceed


def _pipe(data: bytes):
    """Standard input as a script gives it: the read end of a pipe, ``data`` then EOF."""
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    return os.fdopen(r, "r", encoding="utf-8", errors="strict")


@pytest.mark.hazard("H-BENCH-NO-ASK")
@pytest.mark.parametrize("answer", [b"", b"\n", b"n\n", b"\xff\n"],
                         ids=["eof", "empty", "no", "not-utf8"])
def test_a_pipe_without_y_moves_nothing(answer, tmp_path, monkeypatch, capsys):
    """No ``--yes``, standard input a pipe giving end of input, an empty line, ``n`` or a byte
    that is not UTF-8: the question is asked, exit 1, one line on stderr, and the bus sees no
    frame at all — no NMT, no SDO, no current command: the drives are never enabled."""
    channel = f"bench-ask-{os.getpid()}-{answer.hex()}"
    monkeypatch.setattr("sys.stdin", _pipe(answer))
    with can.Bus(interface="virtual", channel=channel) as watch:
        code = cli.main(["bench-test", "step", "--joint", "knee", "--bus", f"virtual:{channel}",
                         "--out", str(tmp_path / "b")])
        frames = []
        while (msg := watch.recv(0.2)) is not None:
            frames.append(msg)
    out, err = capsys.readouterr()
    assert code == 1
    assert "Proceed? [y/N]" in out
    assert "bench-test not started" in err and "nothing moved" in err and "--yes" in err
    assert "Traceback" not in err
    assert frames == []
    assert not (tmp_path / "b").exists()


@pytest.mark.hazard("H-BENCH-NO-ASK")
@pytest.mark.parametrize(("text", "go"), [("y\n", True), ("YES\n", True), ("n\n", False),
                                          ("", False), ("yy\n", False), ("\n", False)])
def test_only_y_proceeds(text, go):
    """The answer read from a stream that is not a terminal: ``y``/``yes`` (any case) go, all
    else is no; the answer read is echoed, since a pipe does not echo it."""
    out, err = io.StringIO(), io.StringIO()
    assert proceed(io.StringIO(text), out, err) is go
    assert out.getvalue().startswith("Proceed? [y/N] ")
    assert (err.getvalue() == "") is go
    if text.strip():
        assert repr(text.strip()) in out.getvalue()
