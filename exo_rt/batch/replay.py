"""Replay a lab's archive of sessions as one batch (``exo-rt replay ARCHIVE…``, docs/scale.md).

An ARCHIVE is a run folder, a bare CAN log, or a folder holding run folders at any depth
(wearer/day/run…). Each session is one task, :func:`replay_session`, on the local or the Ray
engine (:mod:`exo_rt.batch.engine`); a broken session (a truncated or damaged cycle log, a
missing file) becomes a failed row with its cause and never stops the others.

Each finished session's result is kept in ``OUT/.replay-cache/<key>.json``, the key being the
SHA-256 of what the replay reads (the cycle log or run.mcap, summary.json, the top config and
the controller file it will use, the mode, the exo-rt version): re-running skips those sessions,
so an interrupted batch resumes where it stopped, and a changed controller or log is replayed
again. The batch's table is ``OUT/replay-summary.csv`` and ``.json``, its overview plot
``OUT/replay-summary.png``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import struct
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from exo_rt import __version__
from exo_rt.errors import ExoError, LogError, Where

RUN_FILES = ("cycles.exolog", "run.mcap", "summary.json", "config.yaml", "events.jsonl")
CAN_LOGS = (".blf", ".asc", ".log")
CACHE = ".replay-cache"
COLUMNS = ("session", "status", "joint", "rms_error_deg", "max_error_deg",
           "max_abs_command_diff_A", "divergence_cycle", "cycles", "recorded_faults",
           "final_state", "error")


@dataclass(frozen=True)
class Session:
    """One session of an archive: its name in the table (relative to the archives' common
    folder) and its path (a run folder or a bare CAN log)."""

    name: str
    path: str


@dataclass
class Batch:
    """What a batch did: every session's result (sorted by name), which were replayed now and
    which came from the cache, where the table went, and the wall time (s)."""

    mode: str
    results: list[dict]
    computed: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    out: Path | None = None
    files: list[Path] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.results if r["status"] != "ok"]


# ----------------------------------------------------------------------------- sessions
def _is_run(folder: Path) -> bool:
    return any((folder / f).exists() for f in RUN_FILES)


def _sessions_below(folder: Path, can_logs: bool) -> list[Path]:
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        found += [sub] if _is_run(sub) else _sessions_below(sub, can_logs)
    if can_logs:
        found += sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in CAN_LOGS)
    return found


def find_sessions(archives: list[str | Path], *,
                  can_logs: bool = False) -> tuple[list[Session], list[Path]]:
    """The sessions of ``archives`` and the archives that are folders of sessions (not runs).

    A path that is a run folder or a file is one session; a folder of runs gives each run
    below it (and, with ``can_logs`` — a replay given ``--config`` — each bare CAN log); a
    folder with neither is one session (its replay says what is missing), and so is a path
    that does not exist."""
    paths: list[Path] = []
    folders: list[Path] = []
    for a in archives:
        p = Path(a)
        below = _sessions_below(p, can_logs) if p.is_dir() and not _is_run(p) else []
        if below:
            paths += below
            folders.append(p)
        else:
            paths.append(p)
    absolute = [os.path.abspath(p) for p in paths]
    if len(absolute) == 1:
        root = os.path.dirname(absolute[0])
    else:
        root = os.path.commonpath(absolute)
        if root in absolute:
            root = os.path.dirname(root)
    seen: set[str] = set()
    sessions = []
    for a in absolute:
        if a in seen:
            continue
        seen.add(a)
        sessions.append(Session(os.path.relpath(a, root), a))
    return sessions, folders


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b"<missing " + str(path.name).encode() + b">"


def _logged_config(run: Path) -> Path | None:
    """The top config a run's replay reads: its snapshot's, else (a run recorded before
    exo-rt kept one) the one its cycle log's header names, else summary.json's."""
    from exo_rt.runtime import snapshot

    if (run / snapshot.MANIFEST).exists():
        return run / snapshot.TOP
    try:
        with open(run / "cycles.exolog", "rb") as f:
            head = f.read(16)
            (n,) = struct.unpack("<Q", head[8:16])
            return Path(json.loads(f.read(min(n, 1 << 20)))["meta"]["config"])
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        pass
    try:
        return Path(json.loads((run / "summary.json").read_text())["config"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _controller_file(config: Path, controller: str | None) -> Path | None:
    """The controller file a replay with this top config (and ``--controller``) loads — as
    :func:`exo_rt.runtime.config.load_top` resolves it."""
    if controller:
        p = Path(controller)
        return p if p.suffix else config.parent / "controllers" / f"{controller}.yaml"
    try:
        import yaml

        return config.parent / yaml.safe_load(config.read_text())["controller"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError):
        return None
    except Exception:  # yaml's own errors: the replay itself will say what is wrong
        return None


def session_key(session: Session, mode: str, controller: str | None = None,
                config: str | None = None, allow_config_change: bool = False) -> str:
    """SHA-256 (hex) of everything the session's replay reads (the snapshot's manifest holds
    each copied config file's SHA-256), with the mode, the version and, for a run folder,
    the ``--config`` given and whether a change is allowed."""
    h = hashlib.sha256()

    def part(label: str, data: bytes) -> None:
        h.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)

    part("exo-rt", __version__.encode())
    part("mode", mode.encode())
    path = Path(session.path)
    if path.is_file():
        part("can-log", _read(path))
        top = Path(config) if config else None
    else:
        log = path / "cycles.exolog"
        part("run", _read(log if log.exists() else path / "run.mcap"))
        part("summary", _read(path / "summary.json"))
        part("snapshot", _read(path / "config-snapshot.json"))
        if config:
            part("given-config", _read(Path(config)) + bytes([allow_config_change]))
        top = _logged_config(path)
    if top is not None:
        part("config", _read(top))
        ctl = _controller_file(top, controller)
        part("controller", _read(ctl) if ctl is not None else b"")
    return h.hexdigest()


# ----------------------------------------------------------------------------- the task
def _recorded_faults(path: Path) -> str:
    try:
        faults = json.loads((path / "summary.json").read_text()).get("faults", [])
        return ";".join(f"{f.get('cause')}@{f.get('joint')}" for f in faults)
    except (OSError, ValueError, AttributeError, TypeError):
        return ""


def replay_session(task: dict) -> dict:
    """Replay one session (the task function of both engines): ``task`` holds its name, path,
    key, mode, controller and config. Returns its row: status ``ok`` with the replay's figures,
    or ``failed`` with the cause (``cacheable`` when the data itself is at fault, so that a
    re-run does not try it again until it changes)."""
    from exo_rt.runtime.replay import replay, replay_can_log

    t0 = time.perf_counter()
    path = Path(task["path"])
    out = {"session": task["name"], "path": task["path"], "key": task["key"], "status": "ok",
           "error": None, "result": None, "recorded_faults": "", "cacheable": True}
    try:
        if not path.exists():
            raise LogError("no such run folder or file", Where(str(path)),
                           "check the archive's path (a run folder, a folder of runs or a "
                           "bare CAN log)")
        if path.is_file():
            if path.suffix not in CAN_LOGS:
                raise LogError("not a run folder nor a bare CAN log", Where(str(path)),
                               "give a run folder, or a .blf/.asc/.log file with --config")
            if task["mode"] != "plant" or not task.get("config"):
                raise LogError(f"a bare CAN log replays in plant mode with --config "
                               f"(mode {task['mode']})", Where(str(path)),
                               "add --mode plant --config configs/exo_leg.yaml")
            out["result"] = replay_can_log(path, task["config"])
        else:
            out["recorded_faults"] = _recorded_faults(path)
            out["result"] = replay(path, task["mode"], task.get("controller"),
                                   config=task.get("config"),
                                   allow_config_change=bool(task.get("allow_config_change")),
                                   mcap=task.get("mcap", True))
    except ExoError as err:  # the session's own data or files: reported, deterministic
        out.update(status="failed", error=str(err))
    except Exception as exc:  # anything else: reported with its type, tried again next time
        out.update(status="failed", error=f"{type(exc).__name__}: {exc}", cacheable=False,
                   traceback=traceback.format_exc())
    out["wall_s"] = time.perf_counter() - t0
    return out


def _crash(task: dict, cause: str) -> dict:
    return {"session": task["name"], "path": task["path"], "key": task["key"],
            "status": "failed", "error": cause, "result": None, "recorded_faults": "",
            "cacheable": False, "wall_s": 0.0}


# ----------------------------------------------------------------------------- the batch
def default_out(folders: list[Path]) -> Path | None:
    """Where the table goes without ``--out``: the first archive that is a folder of runs
    (none for run folders given one by one: the replay-<mode>.json in each, as always)."""
    return folders[0] if folders else None


def _write_atomic(path: Path, text: str) -> None:
    """``path`` written whole (:func:`exo_rt.record.runfolder.write_atomic`): a link planted
    there is replaced, its target never written."""
    from exo_rt.record.runfolder import write_atomic

    write_atomic(path, text)


def _real_folder(path: Path) -> Path:
    """``path`` made (if needed) as a folder; LogError when it is a symbolic link (the cache
    or the table would be written wherever it points)."""
    if path.is_symlink():
        raise LogError("is a symbolic link: nothing is written through it", Where(str(path)),
                       "remove the link (or give --out another folder)")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _mcap_missing(path: str, mode: str) -> bool:
    """A run folder without its ``replay-<mode>.mcap`` (a bare CAN log has none to write)."""
    folder = Path(path)
    return folder.is_dir() and not (folder / f"replay-{mode}.mcap").exists()


def run_batch(archives: list[str | Path], mode: str, *, controller: str | None = None,
              config: str | None = None, engine: str = "local", jobs: int = 1,
              address: str | None = None, out: str | Path | None = None, force: bool = False,
              status: bool = True, on_result=None, allow_config_change: bool = False,
              mcap: bool = True) -> Batch:
    """Replay every session of ``archives``; with ``out`` (or a folder of runs among the
    archives), cache each result there and write the table and plot. ``force`` replays the
    cached sessions again; ``mcap`` writes each run folder's ``replay-<mode>.mcap`` (a cached
    session whose run folder lacks it is replayed again). ``on_result(row)`` is called as
    each session finishes. ``config`` is the bare CAN logs' bus mapping and, for run
    folders, replaces their recorded config only with ``allow_config_change`` (it is refused
    where it differs)."""
    from exo_rt.batch.engine import check_engine, run_tasks
    from exo_rt.progress import progress

    check_engine(engine, address)
    t0 = time.perf_counter()
    sessions, folders = find_sessions(archives, can_logs=bool(config))
    out = Path(out) if out is not None else default_out(folders)
    cache = None
    if out is not None:
        cache = _real_folder(out / CACHE)
    tasks = [{"name": s.name, "path": s.path, "mode": mode, "controller": controller,
              "config": config, "allow_config_change": allow_config_change, "mcap": mcap,
              "key": session_key(s, mode, controller, config, allow_config_change)}
             for s in sessions]
    batch = Batch(mode, [], out=out)
    rows: dict[str, dict] = {}
    todo = []
    for t in tasks:
        hit = cache / f"{t['key']}.json" if cache is not None else None
        if hit is not None and not force and hit.exists():
            try:
                row = json.loads(hit.read_text())
                if mcap and row.get("status") == "ok" and _mcap_missing(t["path"], mode):
                    raise ValueError  # replayed with --no-mcap: replay again, writing it
                row.update(session=t["name"], path=t["path"])
                rows[t["name"]] = row
                batch.cached.append(t["name"])
                continue
            except (OSError, ValueError):
                pass  # a damaged cache entry (or no replay MCAP): replay again
        todo.append(t)
    results = run_tasks(replay_session, todo, engine=engine, jobs=jobs, address=address,
                        on_crash=_crash)
    bar = progress(results, f"{mode} replay", total=len(todo), unit="session") if status \
        else results
    for i, row in bar:
        rows[todo[i]["name"]] = row
        batch.computed.append(todo[i]["name"])
        if cache is not None and row.get("cacheable"):
            _write_atomic(cache / f"{row['key']}.json", json.dumps(row, indent=1) + "\n")
        if on_result is not None:
            on_result(row)
    batch.results = [rows[s.name] for s in sorted(sessions, key=lambda s: s.name)]
    batch.wall_s = time.perf_counter() - t0
    if out is not None:
        batch.files = write_summary(batch, out, engine=engine, jobs=jobs)
    return batch


# ----------------------------------------------------------------------------- table, plot
def _fmt(x) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def table_rows(results: list[dict]) -> list[dict]:
    """One row per session and joint (one per session for controller mode and failures)."""
    rows = []
    for r in results:
        base = {"session": r["session"], "status": r["status"],
                "recorded_faults": r.get("recorded_faults", ""), "error": r.get("error") or ""}
        res = r.get("result") or {}
        common = {"max_abs_command_diff_A": res.get("max_abs_command_diff_A"),
                  "divergence_cycle": res.get("first_diff_cycle"), "cycles": res.get("cycles"),
                  "final_state": res.get("final_state")}
        joints = res.get("joints") or {}
        if joints:
            for name, j in joints.items():
                rows.append({**base, **common, "joint": name,
                             "rms_error_deg": j.get("rms_error_deg"),
                             "max_error_deg": j.get("max_error_deg")})
        else:
            rows.append({**base, **common, "joint": ""})
    return rows


def table_csv(results: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in table_rows(results):
        w.writerow({k: _fmt(row.get(k)) for k in COLUMNS})
    return buf.getvalue()


def write_summary(batch: Batch, out: Path, *, engine: str, jobs: int) -> list[Path]:
    """``replay-summary.csv``, ``.json`` and (with matplotlib) ``.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out / "replay-summary.csv", out / "replay-summary.json"
    _write_atomic(csv_path, table_csv(batch.results))
    keep = ("session", "status", "error", "recorded_faults", "result", "key")
    doc = {"mode": batch.mode,
           "sessions": [{k: r.get(k) for k in keep} for r in batch.results],
           "counts": {"sessions": len(batch.results), "ok": len(batch.results)
                      - len(batch.failed), "failed": len(batch.failed)},
           "batch": {"engine": engine, "jobs": jobs, "replayed": sorted(batch.computed),
                     "from_cache": sorted(batch.cached), "wall_s": round(batch.wall_s, 3)}}
    _write_atomic(json_path, json.dumps(doc, indent=1) + "\n")
    files = [csv_path, json_path]
    png = plot_summary(batch, out / "replay-summary.png")
    if png is not None:
        files.append(png)
    return files


def plot_summary(batch: Batch, path: Path) -> Path | None:
    """One bar per session (per joint): RMS error (plant, closed-loop) or the largest command
    difference (controller); failed sessions in red with their cause. None without
    matplotlib (the plot extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    res = batch.results
    names = [r["session"] for r in res]
    height = max(3.0, 0.28 * len(res) + 1.5)
    fig, ax = plt.subplots(figsize=(9, height))
    y = list(range(len(res)))
    joints = sorted({j for r in res for j in ((r.get("result") or {}).get("joints") or {})})
    top = 0.0
    if joints:
        w = 0.8 / len(joints)
        for k, jn in enumerate(joints):
            vals = [((r.get("result") or {}).get("joints") or {}).get(jn, {})
                    .get("rms_error_deg", 0.0) for r in res]
            top = max(top, *vals)
            ax.barh([v + (k - (len(joints) - 1) / 2) * w for v in y], vals, height=w, label=jn)
        ax.set_xlabel("RMS error (deg)")
        ax.legend(loc="lower right")
    else:
        vals = [(r.get("result") or {}).get("max_abs_command_diff_A", 0.0) or 0.0 for r in res]
        top = max(vals, default=0.0)
        ax.barh(y, vals, color="tab:blue")
        ax.set_xlabel("largest command difference (A)")
    ax.set_xlim(0.0, 1.15 * top if top > 0 else 1e-3)  # all zero: the replay reproduces
    for i, r in enumerate(res):
        if r["status"] != "ok":
            cause = (r.get("error") or "").replace(r["path"] + os.sep, "").replace(r["path"], "")
            ax.axhspan(i - 0.4, i + 0.4, color="tab:red", alpha=0.25)
            ax.text(0.0, i, "  FAILED: " + cause.lstrip(": ")[:90], va="center",
                    fontsize=7, color="darkred", transform=ax.get_yaxis_transform())
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ok = len(res) - len(batch.failed)
    ax.set_title(f"{batch.mode} replay of {len(res)} sessions: {ok} ok, "
                 f"{len(batch.failed)} failed")
    fig.tight_layout()
    from exo_rt.record.runfolder import replacing

    with replacing(path, "wb") as f:  # a link planted there: replaced, not followed
        from exo_rt.plotting import save_png

        save_png(fig, f, dpi=90)
    plt.close(fig)
    return path
