"""The run's own copy of every config file it used (docs/replay.md, "What a run keeps").

At the start of a run (before the drives are configured, so that it survives a crash), the run
folder receives:

- ``configs/…``: a byte-for-byte copy of each file the run loaded — the robot file and the
  modules it includes (or its URDF), the bus file and each drive's EDS/DCF, the controller
  file — laid out as the originals are relative to each other, so that the relative paths
  inside them (``include``, ``eds``) still point at the copies;
- ``configs/sessions/…``, ``configs/activities/…``, ``configs/wearers/…``: the session's own
  files (:func:`session_files`) — the session script, the activities file and the wearer
  profile (a profile built from the robot file's wearer: the YAML that reproduces it) — which
  replay reads back (:func:`recorded_session`);
- ``config.yaml``: the top config with its ``robot``, ``buses`` and ``controller`` rewritten to
  those copies (the controller the run used: ``--controller`` included), every other key as
  written — ``exo-rt run --config RUN/config.yaml`` runs the same robot, buses and controller;
- ``config-snapshot.json``: the manifest (each copy's kind, original path, SHA-256), written
  last: a folder without it has no complete snapshot.

Replay reads the snapshot instead of the config files as they are now, and
:func:`differences` says what a config given to replay changes (file by file, key by key).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from exo_rt.errors import ConfigError, Where

if TYPE_CHECKING:
    from exo_rt.session.session import SessionFiles

MANIFEST = "config-snapshot.json"
TOP = "config.yaml"
FOLDER = "configs"
VERSION = 1
REFS = ("robot", "buses", "controller")  # the top config's keys that name other files
# the session's files: kind → the folder under configs/ its copy goes to
SESSION_KINDS = {"session": "sessions", "activities": "activities", "wearer": "wearers"}


# ----------------------------------------------------------------------------- which files
def _robot_files(path: Path, seen: set[Path]) -> list[tuple[str, Path]]:
    """A robot file and what it names (modules it includes, its URDF), recursively."""
    path = Path(os.path.abspath(path))
    if path in seen:
        return []
    seen.add(path)
    out: list[tuple[str, Path]] = []
    if path.suffix.lower() not in (".yaml", ".yml"):
        return out
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except (OSError, ValueError, yaml.YAMLError):
        return out  # the run loaded it: unreachable unless it changed since
    if not isinstance(doc, dict):
        return out
    if isinstance(doc.get("urdf"), str):
        out.append(("urdf", Path(os.path.abspath(path.parent / doc["urdf"]))))
    for inc in doc.get("include") or ():
        if isinstance(inc, dict) and isinstance(inc.get("file"), str):
            sub = Path(os.path.abspath(path.parent / inc["file"]))
            if sub not in seen:
                out.append(("module", sub))
                out += _robot_files(sub, seen)
    return out


_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader  # (libyaml's: faster)


def used_files(top_path: Path, robot_path: Path, buses_path: Path, controller_path: Path,
               eds_paths=()) -> list[tuple[str, Path]]:
    """(kind, absolute path) of every file a run with this top config reads, once each:
    ``top``, ``robot``, ``module``/``urdf``, ``buses``, ``eds``, ``controller``."""
    files: list[tuple[str, Path]] = [("top", Path(os.path.abspath(top_path))),
                                     ("robot", Path(os.path.abspath(robot_path)))]
    files += _robot_files(robot_path, set())
    files.append(("buses", Path(os.path.abspath(buses_path))))
    files += [("eds", Path(os.path.abspath(p))) for p in eds_paths]
    files.append(("controller", Path(os.path.abspath(controller_path))))
    out, seen = [], set()
    for kind, p in files:
        if p not in seen:
            seen.add(p)
            out.append((kind, p))
    return out


def files_of(top) -> list[tuple[str, Path]]:
    """The files a loaded :class:`~exo_rt.runtime.config.TopConfig` was read from (the
    package's default EDS, for drives whose bus file names none, as kind ``eds-default``)."""
    from exo_rt.bus.eds import DEFAULT_EDS

    eds = []
    for b in top.buses:
        for d in b.drives:
            e = d.profile.eds if d.profile is not None else None  # (None: no EDS, e.g. MIT)
            if e:
                eds.append(Path(e))
    files = used_files(top.path, top.robot_path, top.buses_path, Path(top.controller.source),
                       eds)
    default = Path(os.path.abspath(DEFAULT_EDS))
    return [("eds-default" if p == default else k, p) for k, p in files]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- writing
def _rewrite_top(text: str, values: dict[str, str], where: str) -> str:
    """The top config's text with ``robot``/``buses``/``controller`` (and ``session``) set to
    ``values``: each value replaced where it is written (comments and layout kept); the result
    is read back and must equal the original with only those values changed, else the file
    is written out plainly."""
    original = yaml.load(text, Loader=_LOADER)
    want = dict(original)
    want.update(values)
    lines = text.splitlines(keepends=True)
    try:
        root = yaml.compose(text, Loader=_LOADER)
        marks = {k.value: (k.start_mark.line, v) for k, v in root.value}  # key: (line, node)
    except (yaml.YAMLError, AttributeError, TypeError):
        marks = {}
    new = list(lines)
    missing, spans = [], []
    for key, value in values.items():
        node = marks.get(key, (0, None))[1]
        if not isinstance(node, yaml.ScalarNode) or node.end_mark.line != node.start_mark.line:
            missing.append(key)
            continue
        spans.append((node.start_mark.line, node.start_mark.column, node.end_mark.column,
                      value))
    for row, a, b, value in sorted(spans, reverse=True):  # right to left: columns hold
        new[row] = new[row][:a] + json.dumps(value) + new[row][b:]
    out = "".join(new)
    if missing:
        out = out.rstrip("\n") + "\n" + "".join(f"{k}: {json.dumps(values[k])}\n"
                                                 for k in missing)
    try:
        ok = yaml.load(out, Loader=_LOADER) == want
    except yaml.YAMLError:
        ok = False
    if not ok:
        out = (f"# the top config {where} as run, its file references rewritten to this "
               "run's copies\n" + yaml.safe_dump(want, sort_keys=False))
    return out


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def session_files(top, files: SessionFiles) -> list[tuple[str, str, str, bytes]]:
    """The session's ``files`` of a run of ``top`` (:meth:`exo_rt.session.session.Session.
    files`): (kind, original, name of the copy,
    contents) of the session script (``--session``, else the shipped default), the
    activities file and the wearer profile — the profile as loaded (its ``text``; built from
    the robot file's wearer when the run named no ``--wearer``)."""
    from exo_rt.session import script

    out = []
    path = Path(os.path.abspath(files.script or top.session_path or script.default_path()))
    out.append(("session", str(path), path.name, path.read_bytes()))
    path = Path(os.path.abspath(files.activities.source))
    out.append(("activities", str(path), path.name, path.read_bytes()))
    wearer = files.wearer
    if wearer.source:
        path = Path(os.path.abspath(wearer.source))
        original, name = str(path), path.name
    else:
        robot = Path(os.path.abspath(str(top.robot.source)))
        original, name = f"{robot} (its wearer, default profile)", f"{robot.stem}-wearer.yaml"
    out.append(("wearer", original, name, wearer.text.encode("utf-8")))
    return out


def write(top, run_dir: Path, session=()) -> Path:
    """Copy every config file of ``top`` into ``run_dir`` (``configs/…``, ``config.yaml``,
    the manifest last), and the session's files (:func:`session_files`) into
    ``configs/sessions``, ``configs/activities`` and ``configs/wearers``; returns the
    manifest's path. OSError goes to the caller."""
    run_dir = Path(run_dir)
    files = files_of(top)
    data = {p: p.read_bytes() for _, p in files}
    others = [p for k, p in files if k not in ("top", "eds-default")]
    root = Path(os.path.commonpath([str(p.parent) for p in others]))
    (run_dir / MANIFEST).unlink(missing_ok=True)
    if (run_dir / FOLDER).is_dir():
        shutil.rmtree(run_dir / FOLDER)
    entries = []
    copy_of: dict[Path, str] = {}
    for kind, p in files:
        if kind == "top":
            continue
        # named by no file (a drive without `eds`): kept for the record, beside the others
        rel = Path(FOLDER) / ("default-eds" if kind == "eds-default" else "") / (
            p.name if kind == "eds-default" else p.relative_to(root))
        _write(run_dir / rel, data[p])
        copy_of[p] = rel.as_posix()
        entries.append({"kind": kind, "copy": rel.as_posix(), "original": str(p),
                        "sha256": _sha(data[p]), "bytes": len(data[p])})
    taken = set(copy_of.values())
    script_copy = None
    for kind, original, name, raw in session:
        rel = Path(FOLDER) / SESSION_KINDS[kind] / name
        while rel.as_posix() in taken:  # a config file of the same name there already
            rel = rel.with_name(f"{rel.stem}-{kind}{rel.suffix}")
        taken.add(rel.as_posix())
        if kind == "session":
            script_copy = rel.as_posix()
        _write(run_dir / rel, raw)
        entries.append({"kind": kind, "copy": rel.as_posix(), "original": original,
                        "sha256": _sha(raw), "bytes": len(raw)})
    top_path = files[0][1]
    refs = {"robot": copy_of[Path(os.path.abspath(top.robot_path))],
            "buses": copy_of[Path(os.path.abspath(top.buses_path))],
            "controller": copy_of[Path(os.path.abspath(top.controller.source))]}
    if top.session_path is not None and script_copy is not None:  # the session that ran
        refs["session"] = script_copy
    text = _rewrite_top(data[top_path].decode("utf-8"), refs, str(top_path))
    _write(run_dir / TOP, text.encode("utf-8"))
    raw = text.encode("utf-8")
    manifest = {"version": VERSION, "top": TOP, "original_top": str(top_path),
                "original_top_sha256": _sha(data[top_path]), "root": str(root),
                "files": [{"kind": "top", "copy": TOP, "original": str(top_path),
                           "sha256": _sha(raw), "bytes": len(raw)},
                          *entries]}
    _write(run_dir / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())
    return run_dir / MANIFEST


def write_at_start(top, run_dir: Path | None, events: list,
                   session: SessionFiles | None = None) -> None:
    """:func:`write` at the start of a run (``run_dir`` None: no run folder, nothing to do),
    with the run's ``session`` files (:func:`session_files`) when given; a file that cannot be
    copied (a full disk, a file removed since it was loaded) becomes a ``snapshot_error``
    event and the run goes on."""
    if run_dir is None:
        return
    try:
        write(top, run_dir, session_files(top, session) if session is not None else ())
    except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
        events.append({"cycle": 0, "event": "snapshot_error", "error": str(exc)})


# ----------------------------------------------------------------------------- reading
def manifest(run_dir: Path) -> dict | None:
    """The run folder's snapshot manifest, or None for a run recorded without one."""
    try:
        doc = json.loads((Path(run_dir) / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the config snapshot's manifest cannot be read ({exc})",
                          Where(str(Path(run_dir) / MANIFEST)),
                          "restore it from a copy of the run folder") from None
    return doc if isinstance(doc, dict) else None


def verify(run_dir: Path, doc: dict) -> None:
    """ConfigError when a copy in the snapshot is missing or differs from its recorded SHA-256
    (the snapshot itself was edited or damaged)."""
    for f in doc.get("files", ()):
        p = Path(run_dir) / f["copy"]
        try:
            sha = _sha(p.read_bytes())
        except OSError:
            raise ConfigError(f"the config snapshot lacks {f['copy']}", Where(str(p)),
                              "restore the run folder from a copy") from None
        if sha != f["sha256"]:
            raise ConfigError(f"the config snapshot's {f['kind']} file was changed after the "
                              "run (its SHA-256 is not the recorded one)", Where(str(p)),
                              "restore the run folder, or replay with --config FILE "
                              "--allow-config-change")


def _labelled(files: list[tuple[str, Path]]) -> dict[str, tuple[str, Path]]:
    """Each file by its role: ``top config``, ``robot file``, ``module M`` (relative to the
    robot file's folder), ``bus file``, ``EDS E`` (relative to the bus file's folder),
    ``controller file``."""
    robot = next(p for k, p in files if k == "robot")
    buses = next(p for k, p in files if k == "buses")
    names = {"top": "top config", "robot": "robot file", "buses": "bus file",
             "controller": "controller file"}
    out = {}
    for kind, p in files:
        if kind in ("module", "urdf"):
            label = f"{kind} {os.path.relpath(p, robot.parent)}"
        elif kind == "eds-default":
            label = f"default EDS {p.name}"
        elif kind == "eds":
            label = f"EDS {os.path.relpath(p, buses.parent)}"
        else:
            label = names[kind]
        out[label] = (kind, p)
    return out


def _flat(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_flat(v, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: value}


def _short(x) -> str:
    s = "—" if x is _ABSENT else json.dumps(x) if isinstance(x, str) else str(x)
    return s if len(s) <= 40 else s[:37] + "…"


_ABSENT = object()


def _file_diff(kind: str, a: bytes, b: bytes, limit: int = 4) -> list[str]:
    """What changed from ``a`` (recorded) to ``b`` (given): YAML keys and values, else text
    lines; at most ``limit`` items and a count of the rest."""
    items: list[str] = []
    if kind not in ("eds", "eds-default", "urdf"):
        try:
            fa = _flat(yaml.load(a.decode("utf-8"), Loader=_LOADER))
            fb = _flat(yaml.load(b.decode("utf-8"), Loader=_LOADER))
            if kind == "top":
                for k in REFS:
                    fa.pop(k, None)
                    fb.pop(k, None)
            for k in list(fa) + [k for k in fb if k not in fa]:
                va, vb = fa.get(k, _ABSENT), fb.get(k, _ABSENT)
                if va != vb:
                    items.append(f"{k} {_short(va)} → {_short(vb)}")
        except (UnicodeDecodeError, yaml.YAMLError, AttributeError, TypeError):
            items = ["(not readable as YAML)"] if a != b else []
    else:
        la = a.decode("utf-8", "replace").splitlines()
        lb = b.decode("utf-8", "replace").splitlines()
        sm = difflib.SequenceMatcher(None, la, lb, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag != "equal":
                old = la[i1].strip() if i1 < i2 else "—"
                new = lb[j1].strip() if j1 < j2 else "—"
                items.append(f"line {i1 + 1}: {_short(old)} → {_short(new)}")
    if len(items) > limit:
        items = items[:limit] + [f"… {len(items) - limit} more"]
    return items


def differences(recorded: list[tuple[str, Path]], given: list[tuple[str, Path]]) -> list[str]:
    """One line per file that differs between the recorded config's files and a given
    config's (matched by role): ``robot module modules/x.yaml (PATH): key old → new; …``.
    Comments and layout are no difference; file paths themselves are not compared."""
    rec = _labelled(recorded)
    giv = _labelled(given)
    lines = []
    for label in list(rec) + [x for x in giv if x not in rec]:
        if label not in giv:
            lines.append(f"{label}: only in the recorded run")
            continue
        if label not in rec:
            lines.append(f"{label} ({giv[label][1]}): not in the recorded run")
            continue
        kind = rec[label][0]
        try:
            a, b = rec[label][1].read_bytes(), giv[label][1].read_bytes()
        except OSError as exc:
            lines.append(f"{label}: cannot be read ({exc.strerror})")
            continue
        if a == b:
            continue
        items = _file_diff(kind, a, b)
        if items:
            lines.append(f"{label} ({giv[label][1]}): " + "; ".join(items))
    return lines


def given_files(config: Path, controller: str | Path | None = None) -> list[tuple[str, Path]]:
    """The files a top config (and ``--controller``) would load, after loading it (its errors
    are the loader's)."""
    from exo_rt.runtime.config import load_top

    return files_of(load_top(config, controller=controller))


def recorded_files(run_dir: Path, doc: dict) -> list[tuple[str, Path]]:
    """(kind, path of the copy) of a snapshot's config files, top config first (what a top
    config names: the session's files are :func:`recorded_session`'s)."""
    return [(f["kind"], Path(run_dir) / f["copy"]) for f in doc["files"]
            if f["kind"] not in SESSION_KINDS]


def recorded_session(run_dir: Path) -> tuple[Path | None, Path | None, Path | None]:
    """(session script, activities file, wearer profile): the copies a run folder keeps of
    its session's files, as ``exo-rt run --session/--activities/--wearer`` take them — None
    for each the run kept none of (a run recorded before sessions, or with no snapshot).
    ConfigError when the manifest cannot be read; :func:`verify` checks the copies."""
    doc = manifest(run_dir) or {}
    found = {f.get("kind"): Path(run_dir) / f["copy"] for f in doc.get("files", ())
             if f.get("kind") in SESSION_KINDS and "copy" in f}
    return found.get("session"), found.get("activities"), found.get("wearer")


def sha_of(path: Path) -> str | None:
    """SHA-256 (hex) of a file's bytes, None if it cannot be read."""
    try:
        return _sha(Path(path).read_bytes())
    except OSError:
        return None
