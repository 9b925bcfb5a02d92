"""numba's ``njit`` with this project's defaults: every kernel module imports it from here.

One default differs from numba's: ``no_cfunc_wrapper=True``. numba gives every compiled
function, besides the wrapper that Python calls, a second one with a C calling convention,
used only when the function is passed as a first-class function value (a ``FunctionType``
argument). Nothing here does that with an ``njit`` function (the control laws and the plant
models that are passed as values are ``numba.cfunc``s), so that wrapper was lowered,
optimised and emitted for nothing: 2–6 % of a cold start's compiling (docs/performance.md,
"Start-up"). A kernel that is to be passed as a value says
``no_cfunc_wrapper=False``.

Two of numba's code-generation settings are set when the package is imported (before numba
is; see ``exo_rt/__init__.py``): LLVM's loop vectoriser off and optimisation level 2. The
kernels work on 2–12 joints, too short for vector loops to pay; both cut compiling and leave
the run time as it was (measured side by side: the plant step, every law, the real-time
cycle, the dynamics against Pinocchio).
"""

from __future__ import annotations

from numba import njit as _njit


def njit(*args, **options):
    """``numba.njit`` with ``no_cfunc_wrapper=True`` unless given: ``@njit``,
    ``@njit(cache=True)``, ``njit(fn, cache=True)`` all work as numba's."""
    options.setdefault("no_cfunc_wrapper", True)
    return _njit(*args, **options)
