"""Where the shipped files are: the configs (top configs, robots, buses with their EDS/DCF
files, controllers) and the Foxglove layouts.

In a wheel they are package data (``exo_rt/configs/``, copied from the repository's
``configs/`` when the wheel is built: see setup.py); in a source checkout they are the
repository's own ``configs/``. A file of the same name in the working directory's ``configs/``
comes first, as the README uses it.

Two tops are defaults: ``exo-rt run``'s, the default wearer in the two-leg exoskeleton on the
world's floor (``exo_2leg_world.yaml``), and the test stand's, the one-leg exoskeleton hanging
from a fixed pelvis as on the HIL bench (``exo_leg.yaml``): what ``exo-rt bench-test``,
``check``, ``sweep`` and a lab's archive take without ``--config``.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def config_dir() -> Path:
    """The shipped configs: the package's own (a wheel), else the source tree's."""
    packaged = PACKAGE / "configs"
    return packaged if packaged.is_dir() else PACKAGE.parent / "configs"


def config(*parts: str) -> Path:
    """A shipped config file, e.g. ``config("robots", "exo_leg.yaml")``."""
    return config_dir().joinpath(*parts)


RUN_CONFIG = "exo_2leg_world.yaml"  # exo-rt run: a person on the floor (README)
STAND_CONFIG = "exo_leg.yaml"  # the test stand: the leg hanging from a fixed pelvis


def _here_or_shipped(name: str) -> Path:
    here = Path.cwd() / "configs" / name
    return here if here.exists() else config(name)


def run_config() -> Path:
    """``exo-rt run``'s top without ``--config``: configs/exo_2leg_world.yaml of the working
    directory, else the shipped one — the default wearer seated in the two-leg exoskeleton on
    the world's floor, whose own session stands up, walks, stops and sits down."""
    return _here_or_shipped(RUN_CONFIG)


def default_config() -> Path:
    """The test stand's top (the bench's, ``check``'s, ``sweep``'s default):
    configs/exo_leg.yaml of the working directory, else the shipped one."""
    return _here_or_shipped(STAND_CONFIG)


def runs_root(config_path: Path) -> Path:
    """Where a run's folders go (the config's ``logging.runs`` is relative to it): the working
    directory for a shipped config — a wheel's package data and a source checkout's
    ``configs/`` alike, so that an editable install run from another directory writes its
    ``./runs/`` there, not into the checkout — else beside the config's folder
    (``lab/configs/exo_leg.yaml`` → ``lab/runs/``)."""
    config_path = Path(config_path).resolve()
    if PACKAGE in config_path.parents or config_dir().resolve() in config_path.parents:
        return Path.cwd()
    return config_path.parent.parent


def layout(name: str = "exo_leg") -> Path:
    """A shipped Foxglove layout (``exo_rt/layouts/NAME.json``)."""
    return PACKAGE / "layouts" / f"{name}.json"
