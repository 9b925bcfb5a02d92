"""numba's ``njit`` with this project's defaults: every kernel module imports it from here.

One default differs from numba's: ``no_cfunc_wrapper=True``. numba gives every compiled
function, besides the wrapper that Python calls, a second one with a C calling convention,
used only when the function is passed as a first-class function value (a ``FunctionType``
argument). Few kernels here are (the control laws, the wearer's torque and the plant models
passed as values are ``numba.cfunc``s; the cycle's step says so), so that wrapper would be
lowered, optimised and emitted for nothing: 2–6 % of a cold start's compiling
(docs/performance.md, "Start-up"). A kernel that is to be passed as a value says
``no_cfunc_wrapper=False``.

One option is this project's: ``python=False`` compiles a kernel that only compiled code
calls (a step's parts) without the wrapper through which Python calls it — numba's
``no_cpython_wrapper``: its arguments' unboxing and its result's boxing, lowered, optimised
and emitted for every such kernel, ~5 % of a cold start's compiling. Called from Python, such
a kernel raises a ``TypeError`` saying so (numba itself would crash the interpreter).

Two of numba's code-generation settings are set when the package is imported (before numba
is; see ``exo_rt/__init__.py``): LLVM's loop vectoriser off and optimisation level 2. The
kernels work on 2–12 joints, too short for vector loops to pay; both cut compiling and leave
the run time as it was (measured side by side: the plant step, every law, the real-time
cycle, the dynamics against Pinocchio).
"""

from __future__ import annotations

from numba import config
from numba import njit as _njit
from numba.core.registry import CPUDispatcher


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
        return _njit(*args, **options)
    if args:  # @njit(python=False) takes no positional arguments: a signature would compile now
        raise TypeError("njit(python=False) takes keyword options only")
    cache = options.pop("cache", False)
    options.update(nopython=True, no_cpython_wrapper=True, boundscheck=None)

    def compile_later(fn):
        disp = CompiledCallersOnly(py_func=fn, locals={}, targetoptions=options)
        if cache:
            disp.enable_caching()
        return disp
    return compile_later
