"""One task function over many payloads, on local processes or on Ray (docs/scale.md).

Both engines call the same module-level function with the same payload and yield
``(index, result)`` as each task finishes, so what a batch computes never depends on where it
ran. A task function reports its own failures in its result (it never raises for a bad
session); a task that dies with its worker (killed, out of memory) is turned into a result by
``on_crash(payload, cause)``, and the other tasks go on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from exo_rt.errors import ConfigError

ENGINES = ("local", "ray")
INSTALL_RAY = ("install it with: pip install 'exo-rt[cluster]' (or pip install "
               "'ray[client]>=2.9')")


def ray_module():
    """The ``ray`` package, or None where it is not installed."""
    try:
        import ray
    except ImportError:
        return None
    return ray


def require_ray():
    """The ``ray`` package, or a :class:`ConfigError` saying how to install it."""
    ray = ray_module()
    if ray is None:
        raise ConfigError("--engine ray needs the ray package, which is not installed", None,
                          INSTALL_RAY)
    return ray


def no_usage_stats() -> None:
    """A Ray started here sends no usage statistics (Ray's default is to send them; set
    RAY_USAGE_STATS_ENABLED=1 to allow it)."""
    import os

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def check_engine(engine: str, address: str | None) -> None:
    """Refuse an unknown engine, ``--address`` without Ray, and Ray when it is missing —
    before any task starts."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine '{engine}'", None, f"use one of {', '.join(ENGINES)}")
    if address and engine != "ray":
        raise ConfigError("--address names a Ray cluster, but the engine is local", None,
                          "add --engine ray, or leave --address out")
    if engine == "ray":
        require_ray()


def run_tasks(fn: Callable, payloads: Sequence, *, engine: str = "local", jobs: int = 1,
              address: str | None = None,
              on_crash: Callable | None = None) -> Iterator[tuple[int, object]]:
    """Yield ``(index, fn(payloads[index]))`` in the order the tasks finish.

    ``local``: ``jobs`` spawned processes (``jobs`` ≤ 1: in this process, no start-up cost).
    ``ray``: one Ray task per payload (1 CPU each); ``ray.init(address)`` unless Ray is already
    initialised (``address`` None: a local Ray with ``jobs`` CPUs; ``ray://host:10001`` or
    ``auto``: a cluster, all of its CPUs).
    """
    check_engine(engine, address)
    if not payloads:
        return
    if engine == "ray":
        yield from _ray(fn, payloads, jobs, address, on_crash)
    elif jobs <= 1 or len(payloads) == 1:
        for i, p in enumerate(payloads):
            yield i, fn(p)
    else:
        yield from _local(fn, payloads, jobs, on_crash)


def _crashed(on_crash, payload, exc):
    if on_crash is None:
        raise exc
    return on_crash(payload, f"its worker died ({type(exc).__name__}: {exc})")


def _local(fn, payloads, jobs, on_crash):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("spawn")  # numba and threads: never fork
    with ProcessPoolExecutor(min(jobs, len(payloads)), mp_context=ctx) as pool:
        futures = {pool.submit(fn, p): i for i, p in enumerate(payloads)}
        try:
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    result = fut.result()
                except Exception as exc:  # a worker killed or out of memory: this task only
                    result = _crashed(on_crash, payloads[i], exc)
                yield i, result
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


def _ray(fn, payloads, jobs, address, on_crash):
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        no_usage_stats()
        kwargs = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = max(1, jobs)
        try:
            ray.init(**kwargs)
        except Exception as exc:  # no cluster there, a version mismatch, …
            raise ConfigError(f"cannot start or reach Ray ({type(exc).__name__}: {exc})", None,
                              "check --address (ray://HEAD:10001, or auto on a cluster node) "
                              "and that `ray status` answers there") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        refs = {remote.remote(p): i for i, p in enumerate(payloads)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = refs[ref]
                try:
                    result = ray.get(ref)
                except Exception as exc:  # the worker died (RayTaskError is caught in fn)
                    result = _crashed(on_crash, payloads[i], exc)
                yield i, result
    finally:
        if started:
            ray.shutdown()
