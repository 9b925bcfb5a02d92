"""A run folder belongs to one run: claimed under a lock, its small files written atomically,
its ``run.mcap`` recovered after a crash.

- :func:`claim` takes the folder for a run before anything is brought up: ``run.lock`` in the
  folder, an exclusive ``flock`` held by the run's control process until its files are
  written. A second run into a folder a live run holds is refused (:class:`FolderInUse`, one
  line, exit 2); so is a folder that is not empty and holds none of a run's files
  (:class:`NotARunFolder`: a clone's root, a home folder — nothing there is touched). A run
  that did not finish (killed, a power loss: no ``summary.json``) is kept: its folder is moved
  aside whole to ``DIR.crashed-<its start>`` (one line on stderr), or — where it cannot be
  moved — the new run is refused (:class:`CrashedRun`). In a folder an earlier, finished run
  left, that run's files are removed when the new run's recording starts
  (:meth:`RunFolder.take_over`: the folder then holds the new run whole). A folder that
  cannot be written (full disk, read-only) is no error: the run goes on unrecorded and says
  so.
- :func:`write_atomic` writes a file (summary, events, the recording's report, the layout,
  what ``report``, ``export`` and ``replay`` write into a run folder) so that a reader sees the
  old file or the new one whole, never a part: a temporary file beside it (created new, never
  through a link), fsync, rename, fsync of the folder. A symbolic link planted where the file
  goes is replaced by the file; its target is never written.
- :func:`recover` rewrites a ``run.mcap`` whose end is missing (the recording killed: power
  loss, SIGKILL, a full disk) into a valid file holding every record that reached the disk
  whole; the damaged original is kept as ``run.mcap.damaged``. ``exo-rt recover RUN`` runs it,
  and exo-rt's own readers (report, export, replay of a run.mcap) run it first
  (:func:`recover_on_read`).
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import os
import socket
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from exo_rt.errors import ConfigError, LogError, Where

LOCK = "run.lock"
DAMAGED = ".damaged"
# what a run writes (and so what an earlier run left, removed when a new run takes the folder)
RUN_FILES = ("summary.json", "events.jsonl", "config.yaml", "config-snapshot.json",
             "cycles.exolog", "can.blf", "can.asc", "can.log", "run.mcap", "run.mcap" + DAMAGED,
             "foxglove-layout.json", "recording.json", "replay-plant.json",
             "replay-controller.json", "replay-closed-loop.json", "replay-plant.mcap",
             "replay-controller.mcap", "replay-closed-loop.mcap")
MCAP_MAGIC = b"\x89MCAP0\r\n"
FOOTER_BYTES = 1 + 8 + 8 + 8 + 4  # opcode, length, summary start, summary offset start, crc
METADATA = "exo-rt"  # the name of the MCAP metadata record that holds a run's columns, meta


def segment_path(first: Path, k: int) -> Path:
    """The k-th file of a run's MCAP (1: ``run.mcap`` itself, then ``run-2.mcap`` …)."""
    return first if k == 1 else first.with_name(f"{first.stem}-{k}{first.suffix}")


def segments(run_dir: str | Path) -> list[Path]:
    """A run folder's MCAP files in order: ``run.mcap``, ``run-2.mcap``, … (each 10 minutes of
    run time, :data:`exo_rt.record.mcap_log.SEGMENT_S`), as far as they go on without a
    gap."""
    first = Path(run_dir) / "run.mcap"
    out, k = [], 1
    while segment_path(first, k).exists():
        out.append(segment_path(first, k))
        k += 1
    return out


# a run's own files: a folder holding one of them is a run folder (an earlier run's)
MARKERS = ("run.lock", "summary.json", "cycles.exolog", "run.mcap", "config-snapshot.json",
           "events.jsonl", "recording.json")
# what only a run that got going leaves (a folder holding run.lock alone: a start that failed)
RUN_DATA = ("cycles.exolog", "run.mcap", "events.jsonl", "config-snapshot.json", "can.blf",
            "can.asc", "can.log", "recording.json")
CRASHED = ".crashed-"  # DIR.crashed-<start>: where a run that did not finish is kept


class FolderInUse(ConfigError):
    """A second run into a run folder that a live run holds."""


class NotARunFolder(ConfigError):
    """``--out`` names a folder that is not empty and holds none of a run's files."""


class CrashedRun(ConfigError):
    """``--out`` names the folder of a run that did not finish, which cannot be moved aside."""


def describe(exc: OSError, path: Path | str | None = None) -> str:
    """One phrase for a write error: what and where (full disk, file-size limit, read-only,
    permission — alike: the recording stops)."""
    where = path if path is not None else exc.filename
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EFBIG and "limit" not in reason:
        reason += " (the file-size limit, ulimit -f)"
    return f"cannot write {where}: {reason}" if where else f"cannot write: {reason}"


@dataclass
class RunFolder:
    """A claimed run folder. ``error``: why nothing can be written there (the run goes on
    unrecorded); ``fd``: the lock file, held (flock) while the run lives."""

    path: Path
    fd: int | None = None
    error: str | None = None
    removed: list[str] | None = None  # an earlier run's files, once taken over
    fresh: bool = False  # the folder was new (or empty): tidied away if no run starts

    def take_over(self) -> None:
        """The run starts here: an earlier run's files are removed (once), so that the folder
        holds this run whole. Called when the recording starts, not at :func:`claim`: a run
        that fails to start (a bad option, a bus that does not open) leaves them as they were."""
        if self.removed is not None or self.fd is None:
            return
        self.removed = []
        # the run's later MCAP files too (run-2.mcap … 10 minutes each, and their damaged
        # copies): left there, readers would take them for this run's
        later = sorted({p.name for p in self.path.glob("run-*.mcap*")
                        if p.name.split("-", 1)[1].split(".", 1)[0].isdigit()})
        for name in (*RUN_FILES, *later):
            try:
                (self.path / name).unlink()
                self.removed.append(name)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self.error = self.error or describe(exc, self.path / name)

    def release(self) -> None:
        """The run's files are written: let go of the folder (the lock file stays, a marker
        that a run was here)."""
        _HELD.pop(_key(self.path), None)
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None


_HELD: dict[str, RunFolder] = {}  # folders this process holds (exo-rt run claims, then runs)


@atexit.register
def _tidy() -> None:
    """A folder claimed new that no run started in (a failed start) is removed, lock and all."""
    for folder in list(_HELD.values()):
        if folder.fresh and folder.removed is None:
            try:
                if [p.name for p in folder.path.iterdir()] == [LOCK]:
                    (folder.path / LOCK).unlink()
                    folder.path.rmdir()
            except OSError:
                pass


def _key(path: Path) -> str:
    return os.path.realpath(path)


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another run"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.get("started", 0)))
    return f"the run of pid {info['pid']} on {info.get('host', '?')}, started {when}"


def _lock(path: Path, fd: int, what: str) -> None:
    """Take the folder's lock, or FolderInUse naming who holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise FolderInUse(f"the run folder is in use by {holder}", Where(str(path)),
                          what) from None


def finished(path: Path) -> bool:
    """Whether the run folder ``path`` holds a run that finished (its ``summary.json``)."""
    return (path / "summary.json").is_file()


def _entries(path: Path) -> list[str]:
    try:
        return sorted(p.name for p in path.iterdir())
    except OSError:
        return []


def _check_foreign(path: Path, names: list[str]) -> None:
    """NotARunFolder when ``path`` holds files and none of them is a run's."""
    if not names or any(n in MARKERS for n in names):
        return
    shown = ", ".join(names[:3]) + (f" … ({len(names)} entries)" if len(names) > 3 else "")
    raise NotARunFolder(f"not a run folder: it holds {shown} and none of a run's files; "
                        "nothing there was touched", Where(str(path)),
                        "give a new or empty folder as --out (or none: a new folder under "
                        "runs/)")


def _started(path: Path) -> str:
    """When the run of the folder ``path`` started (its lock's record, else its cycle log's
    time), as ``YYYYmmdd-HHMMSS``."""
    try:
        when = float(json.loads((path / LOCK).read_text())["started"])
    except (OSError, ValueError, KeyError, TypeError):
        stamps = [(path / n).stat().st_mtime for n in RUN_DATA if (path / n).exists()]
        when = min(stamps, default=time.time())
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(when))


def move_aside(path: Path) -> Path:
    """Keep the unfinished run of ``path``: the folder renamed whole to ``DIR.crashed-<its
    start>`` (``-2``, ``-3`` … if taken), nothing in it changed. CrashedRun when it cannot be
    (the current folder, a mount point, no right to rename)."""
    path = Path(os.path.abspath(path))
    base = path.with_name(f"{path.name}{CRASHED}{_started(path)}")
    aside, k = base, 1
    while os.path.lexists(aside):
        k += 1
        aside = base.with_name(f"{base.name}-{k}")
    why = None
    cwd = os.path.realpath(os.getcwd())
    if cwd == os.path.realpath(path) or cwd.startswith(os.path.realpath(path) + os.sep):
        why = "it is the current folder"
    else:
        try:
            os.rename(path, aside)
            fsync_dir(path.parent)
        except OSError as exc:
            why = exc.strerror or str(exc)
    if why is not None:
        raise CrashedRun(f"the folder holds a run that did not finish (no summary.json: killed "
                         f"or a power loss), kept; it cannot be moved aside ({why})",
                         Where(str(path)), f"move it yourself (mv {path} {aside}), or give "
                         "another --out")
    return aside


def _keep_unfinished(path: Path, names: list[str]) -> None:
    """The folder of a run that did not finish: FolderInUse while it lives (its lock held),
    else moved aside whole (one line on stderr), nothing in it changed."""
    if LOCK in names:
        try:
            fd = os.open(path / LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            fd = None
        if fd is not None:
            _lock(path, fd, "give another --out (or none: a new folder under runs/), or wait "
                            "for it to end")
            try:
                aside = move_aside(path)
            finally:
                os.close(fd)
        else:
            aside = move_aside(path)
    else:
        aside = move_aside(path)
    print(f"exo-rt: {path} held a run that did not finish (no summary.json: killed or a "
          f"power loss): kept whole, moved to {aside} (exo-rt recover, replay or report it "
          f"there); this run goes into {path}", file=sys.stderr, flush=True)


def claim(path: str | Path) -> RunFolder:
    """The folder ``path`` for a run of this process: created if needed, locked, an earlier
    finished run's files removed when the run starts. FolderInUse when a live run holds it;
    NotARunFolder when it holds other files and no run's; a run there that did not finish is
    moved aside (:func:`move_aside`, said in one line on stderr). A folder that cannot be
    written gives a RunFolder whose ``error`` says why (no exception: the run goes on
    unrecorded)."""
    path = Path(path)
    held = _HELD.get(_key(path))
    if held is not None:
        return held
    names = _entries(path) if path.is_dir() else []
    _check_foreign(path, names)
    if not finished(path) and any(n in RUN_DATA for n in names):
        _keep_unfinished(path, names)
        return claim(path)
    fresh = not names
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        return RunFolder(path, error=describe(exc, exc.filename or path))
    _lock(path, fd, "give another --out (or none: a new folder under runs/), or wait for it "
                    "to end")
    folder = RunFolder(path, fd, fresh=fresh)
    info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                       "started": time.time()}).encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, info, 0)
        os.fsync(fd)
    except OSError as exc:
        folder.error = describe(exc, path / LOCK)
    _HELD[_key(path)] = folder
    return folder


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()


@contextmanager
def _replaced(path: Path):
    """(fd, path) of a temporary file beside ``path`` — created new, never through a link
    planted there, with the mode open() would give it — that becomes ``path`` whole when the
    block ends without an error (fsync, rename, fsync of the folder); else it is removed and
    the error goes to the caller."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # as open() would make it (mkstemp's are 0600)
        yield fd, Path(tmp)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


@contextmanager
def replacing(path: Path, mode: str = "w", **kw):
    """A file object that becomes ``path`` whole when the block ends without an error (a
    temporary file beside it, created new — never through a link planted there —, fsync,
    rename, fsync of the folder); a link at ``path`` is replaced, its target never written.
    OSError (a full disk …) goes to the caller; the temporary file is removed."""
    with _replaced(path) as (fd, _), open(os.dup(fd), mode, **kw) as f:
        yield f
        f.flush()


@contextmanager
def replacing_path(path: Path):
    """:func:`replacing` for a writer that opens its file by name (an MCAP writer): the
    temporary file's path, which becomes ``path`` whole when the block ends without an
    error."""
    with _replaced(path) as (_, tmp):
        yield tmp


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``path`` whole or not at all (:func:`replacing`): a link planted there is
    replaced, its target never written."""
    raw = data.encode() if isinstance(data, str) else data
    with replacing(path, "wb") as f:
        f.write(raw)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- recovery
def mcap_complete(path: Path) -> bool:
    """Whether ``path`` is a whole MCAP file: magic at both ends, a footer before the last."""
    try:
        size = path.stat().st_size
        if size < 2 * len(MCAP_MAGIC) + FOOTER_BYTES:
            return False
        with open(path, "rb") as f:
            head = f.read(len(MCAP_MAGIC))
            f.seek(size - len(MCAP_MAGIC) - FOOTER_BYTES)
            tail = f.read()
    except OSError:
        return False
    return head == MCAP_MAGIC and tail[0] == 0x02 and tail[-len(MCAP_MAGIC):] == MCAP_MAGIC


@dataclass
class Recovered:
    """What :func:`recover` kept: messages per topic, their log-time span (ns since the epoch,
    and seconds of the run from the metadata's origin), and where the file was cut."""

    path: Path
    damaged: Path
    messages: dict[str, int]
    first_ns: int
    last_ns: int
    cut_at: int
    size: int
    reason: str
    t_span: tuple[float, float] | None

    def line(self) -> str:
        n = sum(self.messages.values())
        span = (f"t = {self.t_span[0]:.3f} … {self.t_span[1]:.3f} s of the run"
                if self.t_span is not None else
                f"{(self.last_ns - self.first_ns) / 1e9:.3f} s" if n else "no time")
        return (f"recovered {self.path}: {n} messages ({span}; "
                + ", ".join(f"{k} {v}" for k, v in self.messages.items())
                + f"), the first {self.cut_at} of {self.size} bytes ({self.reason}); "
                f"the damaged original kept as {self.damaged.name}")


class _Copy:
    """One pass over a damaged MCAP file, each record read written to a new one at once (a
    long run's messages are never all in memory)."""

    def __init__(self, out) -> None:
        from mcap.writer import CompressionType, Writer

        self.w = Writer(out, compression=CompressionType.ZSTD)
        self.w.start(profile="", library="exo-rt recover")
        self.schemas: dict[int, int] = {}
        self.channels: dict[int, tuple[int, str]] = {}
        self.counts: dict[str, int] = {}
        self.first_ns: int | None = None
        self.last_ns = 0
        self.joints: list[bytes] = []  # the first and the last /joints message
        self.metadata_names: list[str] = []

    def add(self, rec) -> None:
        from mcap.records import Attachment, Channel, Message, Metadata, Schema

        w = self.w
        if isinstance(rec, Message):
            ch = self.channels.get(rec.channel_id)
            if ch is None:
                return
            w.add_message(ch[0], rec.log_time, rec.data, rec.publish_time, rec.sequence)
            self.counts[ch[1]] = self.counts.get(ch[1], 0) + 1
            self.first_ns = rec.log_time if self.first_ns is None else min(self.first_ns,
                                                                           rec.log_time)
            self.last_ns = max(self.last_ns, rec.log_time)
            if ch[1] == "/joints":
                self.joints[1 if self.joints else 0:] = [rec.data]
        elif isinstance(rec, Schema) and rec.id not in self.schemas:
            self.schemas[rec.id] = w.register_schema(rec.name, rec.encoding, rec.data)
        elif isinstance(rec, Channel) and rec.id not in self.channels:
            self.channels[rec.id] = (w.register_channel(rec.topic, rec.message_encoding,
                                                        self.schemas.get(rec.schema_id, 0),
                                                        dict(rec.metadata)), rec.topic)
        elif isinstance(rec, Metadata):
            w.add_metadata(rec.name, dict(rec.metadata))
            self.metadata_names.append(rec.name)
        elif isinstance(rec, Attachment):
            w.add_attachment(rec.create_time, rec.log_time, rec.name, rec.media_type, rec.data)

    def t_span(self) -> tuple[float, float] | None:
        """First and last cycle time t (s) of the /joints messages kept."""
        if not self.joints:
            return None
        try:
            return (float(json.loads(self.joints[0])["t"]), float(json.loads(self.joints[-1])["t"]))
        except (ValueError, KeyError, TypeError):
            return None


def _copy_until_damaged(path: Path, copy: _Copy) -> tuple[int, str]:
    """Every record of ``path`` up to its first damaged one into ``copy``: (bytes read whole,
    why it stopped)."""
    from mcap.stream_reader import StreamReader

    size = path.stat().st_size
    good = 0
    with open(path, "rb") as f:
        reader = StreamReader(f, validate_crcs=True, record_size_limit=max(size, 1 << 20))
        it = reader.records
        while True:
            try:
                rec = next(it)
            except StopIteration:
                return good, "whole"
            except Exception as exc:  # a record cut short or damaged: what came before stays
                if good == 0 and not copy.channels:
                    raise
                return good, f"{type(exc).__name__} after the last whole record"
            copy.add(rec)
            good = reader._stream.count  # bytes read up to the end of this whole record


def recover(run_dir: str | Path, *, force: bool = False) -> Recovered | None:
    """Rewrite the folder's ``run.mcap`` if its end is missing (None when it is whole, or
    absent): every schema, channel, message, metadata record and attachment read before the
    first damaged record, into a new file; the original kept as ``run.mcap.damaged``. The
    metadata record ``exo-rt`` (written when the loop starts, and again at the end) comes
    from the cycle log's header if the damaged file lost it. LogError when it cannot."""
    run_dir = Path(run_dir)
    path = run_dir / "run.mcap" if run_dir.is_dir() else run_dir
    if not path.exists() or (not force and mcap_complete(path)):
        return None
    tmp = path.with_name(f".{path.name}.recovering")  # (named once mkstemp made it)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".recovering",
                                    dir=path.parent)  # new: never a link planted there
        tmp = Path(name)
        with open(fd, "wb") as f:
            copy = _Copy(f)
            try:
                cut, reason = _copy_until_damaged(path, copy)
            except (OSError, LogError):
                raise
            except Exception as exc:  # not an MCAP file at all (bad magic …)
                raise LogError(f"cannot recover the MCAP file ({type(exc).__name__}: {exc})",
                               Where(str(path)), "the file is not an MCAP file; the cycle "
                               "log and the CAN log hold the run") from None
            if METADATA not in copy.metadata_names:
                header = _cycle_log_metadata(path.parent / "cycles.exolog")
                if header is not None:
                    copy.add(header)
            copy.w.finish()
            f.flush()
            os.fsync(f.fileno())
        damaged = path.with_name(path.name + DAMAGED)
        os.replace(path, damaged)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise LogError(describe(exc) + " while recovering", Where(str(path)),
                       "free disk space and run `exo-rt recover` again") from None
    except LogError:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    return Recovered(path, damaged, copy.counts, copy.first_ns or 0, copy.last_ns, cut,
                     damaged.stat().st_size, reason if cut else "nothing whole",
                     copy.t_span())


def _cycle_log_metadata(log: Path):
    from mcap.records import Metadata

    from exo_rt.record.recorder import read_header

    try:
        columns, meta = read_header(log)
    except (OSError, ValueError, KeyError):
        return None
    return Metadata(name=METADATA, metadata={"columns": json.dumps(columns),
                                             "meta": json.dumps(meta)})


def recover_on_read(run_dir: str | Path) -> list[Recovered]:
    """A reader's first step (report, export, replay of run.mcap): recover each of the
    folder's MCAP files (``run.mcap``, ``run-2.mcap`` …) whose end is missing, unless a live
    run holds the folder, saying so in one line each on stderr. A recovery that fails is
    said in one line too; the reader goes on with the files it reads."""
    path = Path(run_dir)
    if not path.is_dir():
        if path.name != "run.mcap":  # only a run's own files are rewritten
            return []
        path = path.parent
    done = []
    for file in segments(path):
        if mcap_complete(file) or in_use(path):
            continue
        try:
            rec = recover(file)
        except LogError as err:
            print(f"exo-rt: {err}", file=sys.stderr)
            continue
        if rec is not None:
            print(f"exo-rt: {rec.line()}", file=sys.stderr)
            done.append(rec)
    return done


def in_use(run_dir: Path) -> bool:
    """Whether a live run holds the folder (its lock taken by another process)."""
    if _key(run_dir) in _HELD:
        return True
    try:
        fd = os.open(run_dir / LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def recover_folder(run_dir: str | Path) -> list[Recovered]:
    """``exo-rt recover RUN``: the folder locked while its MCAP files whose end is missing
    are rewritten (a folder a live run holds is refused); what was recovered, file by file."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise LogError("no such run folder", Where(str(run_dir)),
                       "give a run folder written by `exo-rt run`")
    if not (run_dir / "run.mcap").exists():
        raise LogError("no run.mcap in this folder", Where(str(run_dir)),
                       "give a run folder written by `exo-rt run` (the cycle log, if any, "
                       "needs no recovery: a cut last record is dropped when read)")
    fd = None
    if (run_dir / LOCK).exists():
        try:
            fd = os.open(run_dir / LOCK, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            fd = None
        if fd is not None:
            _lock(run_dir, fd, "recover it once that run has ended")
    try:
        return [r for r in (recover(f) for f in segments(run_dir)) if r is not None]
    finally:
        if fd is not None:
            os.close(fd)
