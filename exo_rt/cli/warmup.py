"""``exo-rt warmup``: every numba kernel compiled into the on-disk cache, in parallel."""

from __future__ import annotations

import argparse
import os
import sys

from exo_rt.cli.common import MAX_JOBS, Command, default_config
from exo_rt.resources import run_config


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--group", action="append", default=[], metavar="G",
                   help="controller, io, plant, bench, sim or dynamics (repeatable; default "
                        "all)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="top config whose robot, plant and controller the kernels are "
                        "compiled for (default both exo-rt run's, configs/exo_2leg_world.yaml, "
                        "and the test stand's, configs/exo_leg.yaml)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="compiling processes (default: the CPUs this process may use)")
    p.add_argument("--force", action="store_true",
                   help="run every entry even if the cache is marked warm")
    p.add_argument("--list", action="store_true", help="list the registry's entries and exit")


def handle(args: argparse.Namespace) -> int:
    """Compile every njit kernel the run, the simulator and the bench use into numba's on-disk
    cache, in parallel processes (exo_rt/warmup.py): the next start loads instead of compiling.
    Exit 1 when an entry failed (its kernel's arguments changed: fix its registry line)."""
    from exo_rt import compile_workers

    if not args.list:
        compile_workers.prestart()  # a cold cache: the workers start while this one imports
    from exo_rt import warmup
    from exo_rt.errors import ConfigError

    unknown = sorted(set(args.group) - set(warmup.GROUPS))
    if unknown:
        raise ConfigError(f"unknown warm-up group {', '.join(unknown)}", None,
                          f"use one of {', '.join(warmup.GROUPS)}")
    if args.list:
        for e in warmup.ENTRIES.values():
            print(f"{e.group:<10} {e.name}")
        return 0
    # without --config: what `exo-rt run` needs (the world's plant) and the test stand's
    configs = [args.config] if args.config else [run_config(), default_config()]
    code = max(warmup.main(args.group or warmup.GROUPS, config=config, jobs=args.jobs,
                           force=args.force) for config in configs)
    # Everything is in the on-disk cache now. End without the interpreter's teardown (freeing
    # numba's and LLVM's objects: ~0.3 s). (It was also seen to abort with a corrupted heap;
    # the cause was the `dyn.integrate` entry writing an energy row past its array, now
    # refused by the kernel itself: tests/test_energy.py.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


COMMAND = Command("warmup", "compile the numba kernels into the cache, in parallel", setup,
                  handle, numbers={"jobs": (1, MAX_JOBS, True, "")})
