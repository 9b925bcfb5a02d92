"""The top configuration (``configs/exo_leg.yaml``): robot, buses, controller, rate, the
alignment and stop phases, safety and logging — one file a run starts from (docs/config.md)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from exo_rt.bus.config import BusConfig, load_buses
from exo_rt.config import ControllerConfig, load_controller
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.parsing import did_you_mean
from exo_rt.runtime import safety
from exo_rt.yamlio import Node, choice, mapping, number, read_yaml, text

TOP_KEYS = {"robot": True, "buses": True, "controller": True, "rate_hz": False, "align": False,
            "stop": False, "safety": False, "logging": False, "description": False,
            "realtime": False}
SAFETY_KEYS = {"joint_margin": False, "stop_time": False, "tracking_error": False,
               "stale_cycles": False, "overrun_streak": False, "action": False,
               "ramp_cycles": False, "damping": False, "stiffness": False,
               "board_timeout": False}


@dataclass(frozen=True)
class SafetyConfig:
    joint_margin: float = 0.02  # rad inside the robot's limits
    stop_time: float = 0.05  # s: velocity-dependent margin |v|·t before a soft limit
    tracking_error: float = 0.15  # rad, while tracking
    stale_cycles: int = 2
    overrun_streak: int = 2
    action: str = "zero_current"
    ramp_cycles: int = 20
    damping: float = 20.0  # N·m·s/rad
    stiffness: float = 200.0  # N·m/rad
    board_timeout: float = 0.02  # s without a status from the embedded board → link lost


@dataclass(frozen=True)
class RealtimeConfig:
    """Where the control thread runs with ``--realtime`` (docs/config.md)."""

    cpu: int | None = None  # None: the last CPU this process may use
    priority: int = 80  # SCHED_FIFO priority, 1 … 99


@dataclass(frozen=True)
class TopConfig:
    path: Path
    sha256: str
    robot_path: Path
    buses_path: Path
    robot: Mechanism
    exo: Mechanism  # the exoskeleton without its wearer (transparent law)
    buses: tuple[BusConfig, ...]
    controller: ControllerConfig
    rate_hz: float
    align_s: float
    stop_s: float
    safety: SafetyConfig
    runs_dir: Path
    realtime: RealtimeConfig = RealtimeConfig()


def _file(node: Node, base: Path, kind: str) -> Path:
    path = base / text(node)
    if not path.exists():
        raise ConfigError(f"{kind} file '{node.value}' not found", node.where(),
                          "give a path relative to this file")
    return path


def _positive(node: Node, what: str) -> float:
    x = number(node)
    if x <= 0:
        raise ConfigError(f"{what} must be > 0, got {x}", node.where(), "give a positive value")
    return x


def load_top(path: str | Path, controller: str | Path | None = None) -> TopConfig:
    """Read the top config and everything it names (robot, buses, controller) with checks.

    ``controller`` (a file, or a name in the controllers folder) overrides the one named.
    """
    path = Path(path)
    root = read_yaml(path, ConfigError)
    top = mapping(root, TOP_KEYS, "the top config")
    base = path.parent
    robot_path = _file(top["robot"], base, "robot")
    robot = load_mechanism(robot_path)
    exo = load_mechanism(robot_path, wearer=False) if robot_path.suffix != ".urdf" else robot
    rate = _positive(top["rate_hz"], "rate_hz") if "rate_hz" in top else 1000.0
    buses_path = _file(top["buses"], base, "bus")
    buses = load_buses(buses_path, robot, rate)
    if controller is not None:
        cpath = Path(controller)
        if not cpath.suffix:
            cpath = base / "controllers" / f"{controller}.yaml"
        if not cpath.exists():
            names = sorted(p.stem for p in (base / "controllers").glob("*.yaml"))
            raise ConfigError(f"controller '{controller}' not found", None,
                              did_you_mean(str(controller), names) or
                              f"give a file or one of {', '.join(names)}")
    else:
        cpath = _file(top["controller"], base, "controller")
    ctrl = load_controller(cpath, robot)
    sc = SafetyConfig()
    if "safety" in top:
        m = mapping(top["safety"], SAFETY_KEYS, "safety")
        vals = {}
        for k, v in m.items():
            if k == "action":
                vals[k] = choice(v, tuple(safety.ACTIONS), "safe action")
            elif k in ("stale_cycles", "overrun_streak", "ramp_cycles"):
                vals[k] = int(_positive(v, k))
            else:
                vals[k] = _positive(v, k)
        sc = SafetyConfig(**vals)
    driven = {d.joint for b in buses for d in b.drives}
    missing = [j for j in robot.joint_names if j not in driven]
    if missing:
        raise ConfigError(f"no drive on any bus for joint(s) {', '.join(missing)}",
                          top["buses"].where(), "add them to the bus file")
    align = mapping(top["align"], {"duration": False}, "align") if "align" in top else {}
    stop = mapping(top["stop"], {"duration": False}, "stop") if "stop" in top else {}
    logging = mapping(top["logging"], {"runs": False}, "logging") if "logging" in top else {}
    rt = RealtimeConfig()
    if "realtime" in top:
        m = mapping(top["realtime"], {"cpu": False, "priority": False}, "realtime")
        cpu = int(number(m["cpu"])) if "cpu" in m else None
        if cpu is not None and cpu < 0:
            raise ConfigError(f"realtime.cpu must be ≥ 0, got {cpu}", m["cpu"].where(),
                              "give a CPU number (0 is the first; see nproc)")
        priority = int(number(m["priority"])) if "priority" in m else 80
        if not 1 <= priority <= 99:
            raise ConfigError(f"realtime.priority must be 1 … 99, got {priority}",
                              m["priority"].where(), "SCHED_FIFO priorities are 1 … 99")
        rt = RealtimeConfig(cpu, priority)
    return TopConfig(
        path=path, sha256=hashlib.sha256(path.read_bytes()).hexdigest(), robot_path=robot_path,
        buses_path=buses_path,
        robot=robot, exo=exo, buses=buses, controller=ctrl, rate_hz=rate,
        align_s=_positive(align["duration"], "align.duration") if "duration" in align else 2.0,
        stop_s=_positive(stop["duration"], "stop.duration") if "duration" in stop else 0.5,
        safety=sc,
        runs_dir=Path(text(logging["runs"])) if "runs" in logging else Path("runs"),
        realtime=rt,
    )
