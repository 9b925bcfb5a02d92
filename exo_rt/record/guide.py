"""``README.md`` in every run folder: each file the run leaves, what it holds, how to open it —
for the person who finds the folder (a therapist's colleague, an engineer a year later)."""

from __future__ import annotations

from pathlib import Path

# (file, what it holds, how to open it); in the order a reader needs them
FILES = (
    ("summary.json", "the run's outcome: final state, faults (cause, joint, when, reaction), "
     "tracking per joint, timing, start-up, each phase's duration, what the session did "
     "(strides, requests accepted and refused, the posture it ended in); absent if the run did "
     "not finish", "any text editor; `exo-rt report RUN`"),
    ("events.jsonl", "state changes, faults, operator stops, recording errors, the session's "
     "requests (who asked, the answer), motions finished, postures reached, strides — one "
     "JSON object a line", "any text editor"),
    ("cycles.exolog", "one record per control cycle (1 kHz): time, state, cause, joint "
     "positions, velocities, references, currents, commands, torques, drive flags, timing",
     "`exo-rt report RUN` (plots), `exo-rt export --csv RUN`, or numpy "
     "(`exo_rt.record.recorder.read_cycle_log`)"),
    ("can.blf", "every CAN frame sent and received, on one clock", "python-can's "
     "`can.LogReader`, Vector tools, `exo-rt replay can.blf --config …`"),
    ("run.mcap", "the cycle log, the CAN frames, the events and the session's (`/activity`) "
     "as MCAP (a run longer than 10 minutes goes on in `run-2.mcap`, `run-3.mcap` …, 10 "
     "minutes each)", "Foxglove or "
     "PlotJuggler (with `foxglove-layout.json`); `exo-rt recover RUN` if a crash cut it"),
    ("foxglove-layout.json", "the plots for this robot's joints", "Foxglove: Layout → Import"),
    ("config.yaml", "the top config as run, pointing at the copies under `configs/`",
     "`exo-rt run --config RUN/config.yaml` runs it again"),
    ("configs/", "a copy of every config file the run used (robot, buses, controller, EDS; "
     "the session script, activities file and wearer profile)",
     "replay uses them (`exo-rt replay RUN`)"),
    ("config-snapshot.json", "where each copied file came from, with its SHA-256",
     "any text editor"),
    ("recording.json", "what the recording process wrote, lost, and why it ended",
     "any text editor"),
    ("run.lock", "held while the run runs: a second run into this folder is refused",
     "—"),
    ("report.txt, *.png", "`exo-rt report RUN`'s summary and plots (once made)",
     "any viewer"),
    ("replay-*.json", "`exo-rt replay RUN`'s results (once made)", "any text editor"),
    ("replay-*.mcap", "the replay's records with the run's 3D scene, at the run's times "
     "(once made)", "Foxglove, beside run.mcap"),
)


def text() -> str:
    rows = "\n".join(f"| `{name}` | {what} | {how} |" for name, what, how in FILES)
    return ("# An exo-rt run\n\nWritten by `exo-rt run`; docs/replay.md says what this folder "
            "guarantees after a crash, a full disk or a power loss.\n\n"
            "| file | what it holds | how to open it |\n|---|---|---|\n" + rows + "\n")


def write(out_dir: Path) -> None:
    """The folder's README.md (before the run: a crash leaves it too)."""
    from exo_rt.record.runfolder import write_atomic

    write_atomic(Path(out_dir) / "README.md", text())
