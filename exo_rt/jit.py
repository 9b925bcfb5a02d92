"""numba's ``njit`` with this project's defaults: every kernel module imports it from here.

One default differs from numba's: ``no_cfunc_wrapper=True``. numba gives every compiled
function, besides the wrapper that Python calls, a second one with a C calling convention,
used only when the function is passed as a first-class function value (a ``FunctionType``
argument). Few kernels here are (the control laws, the wearer's torque and the plant models
passed as values are ``numba.cfunc``s; the cycle's step says so), so that wrapper would be
lowered, optimised and emitted for nothing: 2–6 % of a cold start's compiling
(docs/performance.md, "Start-up"). A kernel that is to be passed as a value says
``no_cfunc_wrapper=False``.

A kernel can also be compiled apart and called through its address (:func:`address`,
:func:`call_at`): its callers then compile without it — numba would optimise and emit the
callee's machine code again inside every caller's, level by level — and another process may
compile it meanwhile. The address is this process's; the caller reads it from an array the
object that owns the kernel fills when it is made (the plant's accelerations: its step,
RK4 stages and stick–slip decision compile ~0.7 s faster).

One option is this project's: ``python=False`` compiles a kernel that only compiled code
calls (a step's parts) without the wrapper through which Python calls it — numba's
``no_cpython_wrapper``: its arguments' unboxing and its result's boxing, lowered, optimised
and emitted for every such kernel, 3–5 % of a cold start's compiling. Called from Python, such
a kernel raises a ``TypeError`` saying so (numba itself would crash the interpreter).

The settings exo-rt makes for numba (the cache's directory, the optimisation level, the loop
vectoriser) are all named in :mod:`exo_rt.numba_settings`, and made when this module is
imported — before any kernel module decorates, compiles or loads a kernel. Here, on import,
LLVM does not unroll loops whose trip count is known only at run time (``-unroll-runtime=
false``; ``EXO_RT_LLVM_UNROLL_RUNTIME=1`` keeps LLVM's default): unrolled by 8 with a
remainder loop, a loop over the joints grew a kernel's code several times over (the record
row's 4 500 lines of IR) — 3–9 % of a cold start's compiling, for no gain at n = 2–12.

A kernel made here (``njit``, and :func:`cfunc` for a C callback) loads from numba's cache
without first importing numba's compiling registries (:class:`_LoadCache`, ~0.2 s of a warm
start); the first compile in the process imports them, as numba always does.
``EXO_RT_NUMBA_OWN_LOAD=1`` loads as numba does; so does a numba release not in
:data:`LOAD_CHECKED`.

Also on import, numba's BLAS check is made without importing SciPy (:class:`_DeferBLASCheck`:
``scipy.linalg`` was 0.13–0.25 s of a warm start, for kernels of which none calls BLAS or
LAPACK); ``EXO_RT_SCIPY_AT_START=1`` keeps numba's own check.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

import llvmlite.binding as llvm
from llvmlite import ir
from numba import config, types
from numba import njit as _njit
from numba.core import cgutils
from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher
from numba.extending import intrinsic

from exo_rt import numba_settings

numba_settings.apply()  # before any kernel is decorated (its cache's directory is fixed then)


# numba's releases that :class:`_LoadCache` (it calls numba's private ``_load_overload`` and
# makes what numba's target refresh makes for a load) and :class:`_DeferBLASCheck` (it runs
# ``numba.np.arraymath`` with one import refused) were checked against: on any other release
# numba loads and checks as itself — a release that changed what a load needs then costs a
# few tenths of a second of the warm start, never a crash. Add a release here after running
# tests/test_jit_load.py on it.
LOAD_CHECKED = ((0, 68),)


def _numba_release() -> tuple[int, int]:
    """numba's (major, minor) release."""
    import numba

    major, minor = numba.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


CHECKED_RELEASE = _numba_release() in LOAD_CHECKED
LOAD_LAZILY = CHECKED_RELEASE and os.environ.get("EXO_RT_NUMBA_OWN_LOAD") != "1"


def _blas_found() -> bool:
    """Whether SciPy's BLAS wrappers (``scipy.linalg.cython_blas``) are installed — found on
    the path, not imported (``scipy`` itself is imported already: numba checks its version
    on import)."""
    try:
        spec = importlib.util.find_spec("scipy.linalg")
    except (ImportError, ValueError):
        return False
    return spec is not None and any(next(Path(d).glob("cython_blas.*"), None) is not None
                                    for d in spec.submodule_search_locations or ())


class _RefuseSciPyLinalg(importlib.abc.MetaPathFinder):
    """Refuses ``import scipy.linalg`` when numba's ``ensure_blas`` asks for it (only then:
    the frames above say who imports), while :class:`_DeferBLASCheck` runs
    ``numba.np.arraymath``."""

    def find_spec(self, name, path=None, target=None):
        if name == "scipy.linalg":
            frame = sys._getframe(1)
            while frame is not None:
                if (frame.f_code.co_name == "ensure_blas"
                        and frame.f_globals.get("__name__") == "numba.np.linalg"):
                    raise ModuleNotFoundError("scipy.linalg: deferred by exo_rt.jit",
                                              name=name)
                frame = frame.f_back
        return None


class _DeferBLASCheck(importlib.abc.MetaPathFinder):
    """numba's BLAS check without SciPy's import: 0.13–0.25 s of a warm start.

    When numba makes its CPU target (the first kernel compiled or loaded from the cache) it
    imports ``numba.np.arraymath``, whose module-level ``_HAVE_BLAS = _check_blas()`` imports
    ``scipy.linalg`` — all of it (SciPy 1.17's array-API layer imports ``numpy.f2py`` and
    ``numpy.testing`` as well) — to learn whether ``np.dot`` and ``np.linalg`` can compile.
    No kernel here calls BLAS or LAPACK (tests/test_jit_blas.py: no jitted function names
    them; a default run never imports ``scipy.linalg``), so the import bought nothing. This
    finder runs that one module with the import refused (:class:`_RefuseSciPyLinalg`) and
    then sets ``_HAVE_BLAS`` to what numba's check finds (:func:`_blas_found`: the module
    on the path), so that compiling is as before: a kernel that calls BLAS or LAPACK still
    imports ``scipy.linalg`` when it compiles (numba's ``ensure_blas``/``ensure_lapack``) and
    its wrappers bind SciPy's functions at their first call, as they always did. Only the
    check of SciPy's integer width (numba's ``_check_lapack_int_width``) comes later: at the
    first such kernel's compile instead of numba's target. One shot: removed from
    ``sys.meta_path`` at that import; not installed if either module is imported already.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "numba.np.arraymath":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader:
            return None  # (not a plain source file: numba's own import, unchanged)
        return importlib.util.spec_from_file_location(
            name, spec.origin, loader=_ArraymathLoader(name, spec.origin),
            submodule_search_locations=spec.submodule_search_locations)


class _ArraymathLoader(importlib.machinery.SourceFileLoader):
    """``numba.np.arraymath`` run with ``scipy.linalg`` refused to numba's BLAS check, its
    ``_HAVE_BLAS`` then set to what the check would have found (:class:`_DeferBLASCheck`)."""

    def exec_module(self, module) -> None:
        refuse = _RefuseSciPyLinalg()
        sys.meta_path.insert(0, refuse)
        try:
            super().exec_module(module)
        finally:
            sys.meta_path.remove(refuse)
        if hasattr(module, "_HAVE_BLAS"):
            module._HAVE_BLAS = _blas_found()


if CHECKED_RELEASE and os.environ.get("EXO_RT_SCIPY_AT_START") != "1" and not {
        "numba.np.arraymath", "scipy.linalg"} & set(sys.modules):
    sys.meta_path.insert(0, _DeferBLASCheck())


def _llvm_options() -> None:
    """LLVM's runtime loop unrolling off (a process-wide LLVM option, set on import)."""
    if os.environ.get("EXO_RT_LLVM_UNROLL_RUNTIME") != "1":
        llvm.set_option("exo-rt", "-unroll-runtime=false")


_llvm_options()


class _LoadCache(FunctionCache):
    """numba's on-disk cache of one kernel, loading it without numba's compiling registries:
    ~0.2 s of a warm start's CPU, for a process that compiles nothing.

    numba's ``FunctionCache.load_overload`` calls ``target_context.refresh()`` before it reads
    the file. The first refresh imports and installs every lowering and typing registry numba
    has (``numba.np.arraymath``, ``linalg``, ``random``, ``polynomial``, the unicode, list
    and dict implementations, cffi's parser …): what compiling needs. Of what it does, a
    load needs what compiled code links against and what ``typeof`` reads when the kernel is
    called, made here as that refresh makes them: the runtime's functions
    (``rtsys.initialize``: ``NRT_*``), the hash secret's symbols (``numba.cpython.hashing``,
    on its import), the ``typeof`` of a C callback and of a jitclass instance (registered on
    the import of ``numba.experimental.function_type`` and ``…jitclass.boxing``) and the
    extensions' ``init`` (``entrypoints.init_all``); the C helpers, ``PyExc_*`` and the
    math functions are the target's own, made with it. What is read — machine code, function
    descriptor, environment — is rebuilt by numba's own ``_load_overload`` into the same
    ``CompileResult``: the same machine code runs. A compile still refreshes first (numba's
    compiler does, every compile), so the registries are installed — in their order of
    registration, as before — when a kernel first compiles in the process.
    tests/test_jit_load.py: a warm process's results to the bit, the registries not
    imported; the default run, exo_2leg, exo_leg_world and exo_leg_mit record the same
    cycles to the bit (docs/notes/2026-11-performance-start-up.md)."""

    def load_overload(self, sig, target_context):
        from numba.core import entrypoints
        from numba.core.runtime import rtsys
        from numba.cpython import hashing  # noqa: F401  (its symbols, on import)
        from numba.experimental import function_type  # noqa: F401  (typeof of a cfunc)
        from numba.experimental.jitclass import boxing  # noqa: F401  (typeof of a jitclass)

        rtsys.initialize(target_context)
        entrypoints.init_all()
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


def _load_lazily(disp):
    """``disp`` (a dispatcher or a ``CFunc``) with its on-disk cache loading as
    :class:`_LoadCache` does (numba's ``FunctionCache`` only: the class swapped, no state
    added; only on a numba release of :data:`LOAD_CHECKED`, and not with
    ``EXO_RT_NUMBA_OWN_LOAD=1``); anything else as it is."""
    if LOAD_LAZILY and type(getattr(disp, "_cache", None)) is FunctionCache:
        disp._cache.__class__ = _LoadCache
    return disp


def cfunc(sig, cache: bool = False, **options):
    """``numba.cfunc(sig, cache=…, **options)`` (a C callback: a law, a plant's step passed
    as a value) whose on-disk cache loads as :class:`_LoadCache` does: numba's decorator, its
    ``compile`` (a load from the cache, when warm) run as it returns."""
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    sig = sigutils.normalize_signature(sig)
    locals_ = dict(options.pop("locals", {}))

    def wrapper(func):
        res = CFunc(func, sig, locals=locals_, options=options)
        if cache:
            res.enable_caching()
            _load_lazily(res)
        res.compile()
        return res
    return wrapper


class CompiledCallersOnly(CPUDispatcher):
    """A kernel compiled without its Python entry (``njit(python=False)``)."""

    def __call__(self, *args, **kwargs):
        f = self.py_func
        raise TypeError(f"{f.__module__}.{f.__qualname__} is compiled for compiled callers only "
                        "(njit(python=False): no Python entry); call it from a jitted function, "
                        "or drop python=False where it is defined")


def njit(*args, python: bool = True, **options):
    """``numba.njit`` with ``no_cfunc_wrapper=True`` unless given: ``@njit``,
    ``@njit(cache=True)``, ``njit(fn, cache=True)`` all work as numba's; ``python=False``:
    compiled callers only (the module's docstring)."""
    options.setdefault("no_cfunc_wrapper", True)
    if python or config.DISABLE_JIT:
        out = _njit(*args, **options)
        if args and callable(args[0]):  # njit(fn): the dispatcher
            return _load_lazily(out)
        return lambda fn: _load_lazily(out(fn))  # @njit(...): numba's decorator
    if args:  # @njit(python=False) takes no positional arguments: a signature would compile now
        raise TypeError("njit(python=False) takes keyword options only")
    cache = options.pop("cache", False)
    options.update(nopython=True, no_cpython_wrapper=True, boundscheck=None)

    def compile_later(fn):
        disp = CompiledCallersOnly(py_func=fn, locals={}, targetoptions=options)
        if cache:
            disp.enable_caching()
        return _load_lazily(disp)
    return compile_later


def address(kernel, argtypes: tuple) -> int:
    """Where ``kernel`` (an ``njit`` function returning nothing), compiled — or loaded from the
    cache — for the numba types ``argtypes``, starts in this process: what :func:`call_at`
    calls. A float64 holds it exactly (user-space addresses are below 2⁵³)."""
    kernel.compile(tuple(argtypes))
    cres = kernel.overloads[tuple(argtypes)]
    if cres.signature.return_type != types.none:
        raise TypeError(f"{kernel.py_func.__qualname__} returns a value: call_at calls "
                        "kernels that return nothing")
    addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    if not 0 < addr < 2**53:
        raise RuntimeError(f"{kernel.py_func.__qualname__}: no address ({addr})")
    return addr


@intrinsic
def call_at(typingctx, addr, *args):
    """``call_at(addr, *args)`` in compiled code: the kernel at ``addr`` (:func:`address`, for
    exactly these argument types) called with ``args`` — numba's own calling convention, its
    exceptions propagated; the caller's code holds none of the callee's."""
    argtypes = tuple(args)
    sig = types.void(addr, types.StarArgTuple.from_types(argtypes))

    def codegen(context, builder, signature, llargs):
        fnty = context.call_conv.get_function_type(types.none, argtypes)
        fn = builder.inttoptr(llargs[0], fnty.as_pointer())
        values = cgutils.unpack_tuple(builder, llargs[1], len(argtypes))
        status, _ = context.call_conv.call_function(builder, fn, types.none, argtypes, values)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def c_call_at(typingctx, addr, *args):
    """``c_call_at(addr, *args)`` in compiled code: the C function ``void f(args…)`` at
    ``addr`` (an int64) with the C calling convention — a C library's API (MuJoCo's) from a
    kernel, as :func:`call_at` calls a kernel; pointers are passed as int64."""
    argtypes = tuple(args)
    sig = types.void(addr, types.StarArgTuple.from_types(argtypes))

    def codegen(context, builder, signature, llargs):
        fnty = ir.FunctionType(ir.VoidType(), [context.get_value_type(t) for t in argtypes])
        fn = builder.inttoptr(llargs[0], fnty.as_pointer())
        builder.call(fn, cgutils.unpack_tuple(builder, llargs[1], len(argtypes)))
        return context.get_dummy_value()
    return sig, codegen
