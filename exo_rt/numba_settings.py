"""Every setting exo-rt makes for numba, LLVM and BLAS, and the key of numba's on-disk cache.

Nothing is set when the package is imported: :func:`apply` runs when the first kernel module
is (``exo_rt/jit.py`` calls it on import, before any kernel is decorated, compiled or loaded)
and when the warm-up looks for its marker (``exo_rt/compile_workers.py``), so that the worker
processes it starts inherit the same settings. Until then ``import exo_rt`` reads no source
file, writes no file and leaves the environment as it was. A setting the user made already
(the environment variable set) is kept.

What :func:`apply` sets, in ``os.environ`` (inherited by every helper and worker process) and,
if numba is imported already, in ``numba.core.config``:

- ``NUMBA_CACHE_DIR`` = ``$XDG_CACHE_HOME/exo-rt/numba-<key>`` (default ``~/.cache``), the
  directory created. numba revalidates a cached kernel against its own file only: a kernel
  that inlines a function from another module (the plant's step calls the harmonic-drive and
  motor laws) would keep running the old code after that module changed. The key
  (:func:`code_key`) hashes the contents of :func:`kernel_files` — every kernel module and what
  its compiled code reads: an edit there gives a fresh cache, an edit elsewhere (the
  controller, the CLI, the bus) keeps the compiled kernels. Without a writable cache home,
  numba's default (``__pycache__``) stays. ``exo-rt warmup`` fills a fresh cache.
- ``NUMBA_LOOP_VECTORIZE=0`` and ``NUMBA_OPT=2``: LLVM's loop vectoriser off, optimisation
  level 2. The kernels loop over 2–12 joints, too short for vector loops to pay; both cut a
  cold start's compiling (3–4 % and ~1.5 %) and leave the run time as it was (measured side by
  side: docs/performance.md, "Start-up").

- ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OMP_NUM_THREADS`` = 1, and numpy's BLAS
  already loaded set to one thread (:func:`one_blas_thread` says why).

Set by ``exo_rt/jit.py`` (its docstring says how each is measured):

- LLVM's ``-unroll-runtime=false`` (a process-wide LLVM option, on its import; kept at LLVM's
  default by ``EXO_RT_LLVM_UNROLL_RUNTIME=1``): unrolling loops whose trip count is known only
  at run time grew a kernel's code several times over for no gain at 2–12 joints.
- per kernel, by its ``njit``: ``no_cfunc_wrapper=True`` (no C-callable wrapper unless the
  kernel is passed as a value) and, with ``python=False``, numba's ``no_cpython_wrapper``
  (no Python entry for a kernel only compiled code calls).

The key is memoized per process and on disk under ``$XDG_CACHE_HOME/exo-rt/keys`` by the cheap
:func:`source_key`: every start stats the sources (a few ms); the first after an edit of the
package also parses the files edited since (:func:`kernel_files`' memo, beside it) and hashes
the kernel files' contents — ~10 ms, where parsing every module took ~0.5 s of CPU.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from exo_rt import __version__

PACKAGE = Path(__file__).resolve().parent
CODEGEN = {"NUMBA_LOOP_VECTORIZE": "0", "NUMBA_OPT": "2"}  # unless the user set them
# one BLAS/OpenMP thread a process, unless the user set them
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def source_key(root: Path) -> str:
    """A hash of every ``*.py`` file's path, size and modification time below ``root``."""
    h = hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def kernel_files(root: Path, memo: dict | None = None) -> list[Path]:
    """The modules below package ``root`` whose text a compiled kernel can depend on.

    A kernel module imports numba at module level or names a jit decorator (``njit``, …)
    anywhere. Compiled code freezes more than its own
    function: the njit functions it calls (inlined, from any module) and the module globals it
    reads (constants, often imported: ``T_MOTOR = T_DRIVE + D_WIDTH``). So the set is every
    kernel module plus, transitively, every module that provides a name used by the code that
    runs at compile or import time — njit function bodies (with their decorators and
    defaults) and module-level statements (class bodies included, function bodies not),
    together with the local functions and classes that code uses. A module that merely
    imports a kernel module (the controller, the CLI, the bus) is not in the set: editing it
    cannot change a compiled kernel. The package's ``__init__`` (version, this key) always is.
    Conservative where unsure: function-local imports count as if global, ``from X import *``
    takes all of X, and a file that does not parse widens the set to every file.

    ``memo`` (a dict, updated in place; JSON-able) keeps each module's findings — whether it
    is a kernel module, which package modules its import-time code reads — under its size and
    modification time: with it, a later call parses only the files edited since (parsing every
    module is ~0.5 s of CPU, paid by the first start after any edit of the package). The
    findings hold for one set of module names and one version of this analysis (this file's
    text): with either changed, the memo starts afresh.
    """
    import ast

    pkg = root.name
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((pkg, *parts))] = path
    trees: dict[str, ast.Module] = {}

    def tree(mod: str) -> ast.Module:
        if mod not in trees:
            trees[mod] = ast.parse(modules[mod].read_bytes(), str(modules[mod]))
        return trees[mod]

    def absolute(mod: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = mod.split(".")
        if modules[mod].name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    jit_names = {"njit", "jit", "vectorize", "guvectorize", "cfunc", "stencil", "overload",
                 "overload_method", "register_jitable", "generated_jit"}

    def bindings(mod: str) -> tuple[dict[str, set[str]], set[str], bool]:
        """local name → package modules it may come from; star-imported modules; kernels?
        (a kernel module imports numba at module level or names a jit decorator anywhere)"""
        names: dict[str, set[str]] = {}
        star: set[str] = set()
        top = set(tree(mod).body)
        numba = False
        for node in ast.walk(tree(mod)):  # function-local imports too (conservative)
            if isinstance(node, (ast.Name, ast.Attribute)):
                numba |= (node.id if isinstance(node, ast.Name) else node.attr) in jit_names
            if isinstance(node, ast.Import):
                for a in node.names:
                    numba |= node in top and a.name.split(".")[0] == "numba"
                    if a.name.split(".")[0] == pkg:
                        target = a.name if a.asname else a.name.split(".")[0]
                        names.setdefault(a.asname or target, set()).update(
                            m for m in modules if a.name == m or a.name.startswith(m + "."))
            elif isinstance(node, ast.ImportFrom):
                src = absolute(mod, node)
                numba |= node in top and src.split(".")[0] == "numba"
                if src.split(".")[0] != pkg:
                    continue
                for a in node.names:
                    if a.name == "*":
                        star.add(src)
                        continue
                    sub = f"{src}.{a.name}"
                    names.setdefault(a.asname or a.name, set()).add(
                        sub if sub in modules else src)
        return names, star, numba

    def is_jit(fn, numba_names: set[str]) -> bool:
        return any(isinstance(n, ast.Name) and n.id in numba_names
                   for d in fn.decorator_list for n in ast.walk(d))

    def loads(node) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    def executed(stmts, numba_names: set[str], local: dict) -> set[str]:
        """Names read by statements run at import (and by njit bodies among them)."""
        out: set[str] = set()
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if is_jit(s, numba_names):
                    out |= loads(s)
                else:
                    local[s.name] = s
                    out |= set().union(*(loads(d) for d in s.decorator_list),
                                       *(loads(d) for d in s.args.defaults),
                                       *(loads(d) for d in s.args.kw_defaults if d))
            elif isinstance(s, ast.ClassDef):
                local[s.name] = s
                out |= set().union(*(loads(d) for d in (*s.decorator_list, *s.bases)),
                                   *(loads(k.value) for k in s.keywords))
                out |= executed(s.body, numba_names, local)
            elif isinstance(s, ast.AnnAssign):
                out |= loads(s.value) if s.value else set()
            elif not isinstance(s, (ast.Import, ast.ImportFrom)):
                out |= loads(s)
        return out

    def deps(mod: str) -> set[str]:
        names, star, _ = bindings(mod)
        numba_names = {"numba", *jit_names}
        local: dict = {}
        used = executed(tree(mod).body, numba_names, local)
        seen: set[str] = set()
        while used - seen:  # local functions/classes the import-time code uses, whole
            name = (used - seen).pop()
            seen.add(name)
            if name in local:
                used |= loads(local[name])
        out = set(star)
        for name in used:
            out |= names.get(name, set())
        return {m for m in out if m in modules and m != mod}

    memo = {} if memo is None else memo
    version = hashlib.sha256("\n".join(sorted(modules)).encode()
                             + Path(__file__).read_bytes()).hexdigest()[:16]
    if memo.get("version") != version or not isinstance(memo.get("modules"), dict):
        memo.clear()
        memo["version"] = version
    found: dict = memo.setdefault("modules", {})

    def finding(mod: str) -> dict:
        """This module's memo entry, emptied if the file changed (stat before any read: an
        edit racing this call leaves a stale stamp, so the next call looks again)."""
        st = modules[mod].stat()
        stamp = [st.st_size, st.st_mtime_ns]
        if not isinstance(entry := found.get(mod), dict) or entry.get("stamp") != stamp:
            entry = found[mod] = {"stamp": stamp}
        return entry

    def is_kernel(mod: str) -> bool:
        entry = finding(mod)
        if "kernel" not in entry:  # (a cheap look at the bytes first)
            entry["kernel"] = any(w in modules[mod].read_bytes()
                                  for w in (b"numba", b"jit", b"cfunc", b"overload",
                                            b"vectorize", b"stencil")) and bindings(mod)[2]
        return entry["kernel"]

    def reads(mod: str) -> list[str]:
        entry = finding(mod)
        if "deps" not in entry:
            entry["deps"] = sorted(deps(mod))
        return entry["deps"]

    try:
        kernel = sorted(m for m in modules if is_kernel(m))
        keep = {pkg, *kernel}
        todo = list(kernel)
        while todo:
            for m in reads(todo.pop()):
                if m not in keep:
                    keep.add(m)
                    todo.append(m)
    except (OSError, SyntaxError, ValueError):
        found.clear()  # (nothing of an unsure call is kept)
        return sorted(modules.values())
    for gone in set(found) - set(modules):
        del found[gone]
    return sorted(modules[m] for m in keep)


def kernel_key(root: Path, memo: dict | None = None) -> str:
    """A hash of the contents of :func:`kernel_files` (and the version): what compiled code
    depends on. Edits anywhere else leave it — and numba's cache — as they were. ``memo``:
    :func:`kernel_files`' (the files' contents are hashed anew all the same)."""
    h = hashlib.sha256(__version__.encode())
    for path in kernel_files(root, memo):
        h.update(f"{path.relative_to(root)}:".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def cache_base() -> Path:
    """``$XDG_CACHE_HOME/exo-rt`` (default ``~/.cache/exo-rt``): the numba cache, the key memo."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "exo-rt"


_CODE_KEY: str | None = None
_APPLIED = False


def code_key() -> str:
    """:func:`kernel_key` of this package, memoized (per process, and on disk under
    ``$XDG_CACHE_HOME/exo-rt/keys`` by the cheap :func:`source_key`: the sources are parsed
    once per edit, every other start only stats them — a few ms)."""
    global _CODE_KEY
    if _CODE_KEY is None:
        _CODE_KEY = _cache_key(PACKAGE, cache_base())
    return _CODE_KEY


def _cache_key(root: Path, base: Path) -> str:
    """The key memoized by :func:`source_key` under ``base/keys``; computed on a miss, with
    :func:`kernel_files`' findings kept beside it (``kernel-files-<where>.json``, one per
    installed copy of the package: two copies' files differ in their times)."""
    import json

    memo = base / "keys" / source_key(root)
    try:
        key = memo.read_text().strip()
        if len(key) == 16:
            return key
    except OSError:
        pass
    where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:8]
    found_path = base / "keys" / f"kernel-files-{where}.json"
    try:
        found = json.loads(found_path.read_text())
        found = found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        found = {}
    key = kernel_key(root, found)
    for path, text in ((found_path, json.dumps(found)), (memo, key + "\n")):
        try:  # (atomically: another process may write them too)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}")
            tmp.write_text(text)
            tmp.replace(path)
        except OSError:
            pass
    return key


def numba_cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/exo-rt/numba-<key>``, created; None without a writable cache home."""
    try:
        cache = cache_base() / f"numba-{code_key()}"
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return cache


def apply() -> None:
    """Make the settings the module names (once a process; the user's own variables win)."""
    global _APPLIED
    if _APPLIED:
        return
    _APPLIED = True
    changed = False
    if not os.environ.get("NUMBA_CACHE_DIR") and (cache := numba_cache_dir()) is not None:
        os.environ["NUMBA_CACHE_DIR"] = str(cache)
        changed = True
    for name, value in CODEGEN.items():
        if name not in os.environ:
            os.environ[name] = value
            changed = True
    if changed and "numba" in sys.modules:  # read at numba's import: read again now
        from numba.core import config

        config.reload_config()
    one_blas_thread()


def one_blas_thread() -> None:
    """BLAS (numpy's OpenBLAS) and OpenMP at one thread in this process and the processes it
    starts, unless the user set ``OPENBLAS_NUM_THREADS`` (:data:`BLAS_THREADS`).

    Why: every matrix exo-rt's Python multiplies or solves is small (a gait's Fourier fit, a
    thousand phases by 25 terms), where a second thread gains nothing, and OpenBLAS's threads
    wait for one another spinning: with the other CPUs busy — the control thread's own CPU, the
    simulation's, a loaded machine — a 1000 × 25 least-squares fit took a median 18 ms and up
    to 170 ms on 2 threads, 0.4 ms on one (``tools/bench_blas_threads.py``). The variables reach
    the processes started later; the BLAS numpy has loaded already is set through threadpoolctl
    (they are read only when it loads)."""
    user = "OPENBLAS_NUM_THREADS" in os.environ
    for name, value in BLAS_THREADS.items():
        os.environ.setdefault(name, value)
    if not user and "numpy" in sys.modules:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
