"""The top configuration (``configs/exo_leg.yaml``): robot, buses, controller, rate, the
alignment and stop phases, safety, logging and the simulation's plant model — one file a run
starts from (docs/config.md)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from exo_rt.bus.config import BusConfig, load_buses
from exo_rt.control.config import ControllerConfig, load_controller
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.parsing import did_you_mean
from exo_rt.schema import core
from exo_rt.schema.top import RealtimeConfig, SafetyConfig, SimulationConfig, TopFile
from exo_rt.yamlio import Node, read_yaml

__all__ = ["RealtimeConfig", "SafetyConfig", "SimulationConfig", "TopConfig", "load_top"]


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
    stop_s: float
    safety: SafetyConfig
    runs_dir: Path
    realtime: RealtimeConfig = RealtimeConfig()
    simulation: SimulationConfig = SimulationConfig()  # only the simulated exoskeleton reads it
    session_path: Path | None = None  # the config's own default session script (None: shipped)


def _file(node: Node, base: Path, kind: str) -> Path:
    path = base / node.value
    if not path.exists():
        raise ConfigError(f"{kind} file '{node.value}' not found", node.where(),
                          "give a path relative to this file")
    return path


def _check_plant(nodes: dict) -> None:
    """The plant model's name, against the plant registry (third parties' included): the
    schema keeps a plain name, being below the simulation, and the check says it as a choice
    of the schema would (file:line, the key, a near name)."""
    section = nodes.get("simulation")
    plant = section.value.get("plant") if section is not None else None
    if plant is not None:
        from exo_rt.sim import plants

        core.Choice(plants.NAMES, "plant model").read(plant, "plant", None)


def _check_room(simulation, nodes) -> None:
    """The ``simulation:`` section's room keys (the floor, the chair, the support …) are for a
    plant model that has a room (``world``): with another one, one ConfigError naming them —
    the run never starts on a test stand the config did not ask for."""
    room = simulation.plant_options()
    if not room:
        return
    from exo_rt.sim import plants

    if not plants.get(simulation.plant).has_room:
        node = nodes["simulation"]
        raise ConfigError(f"simulation keys {', '.join(sorted(room))} place a plant in a "
                          f"room, and plant '{simulation.plant}' has none", node.where(),
                          "add 'plant: world' to the simulation section, or remove them")


def load_top(path: str | Path, controller: str | Path | None = None) -> TopConfig:
    """Read the top config (schema :class:`exo_rt.schema.top.TopFile`) and everything it names
    (robot, buses, controller) with checks.

    ``controller`` (a file, or a name in the controllers folder) overrides the one named.
    """
    path = Path(path)
    root = read_yaml(path, ConfigError)
    top = core.read(TopFile, root)
    nodes = root.value
    _check_plant(nodes)
    base = path.parent
    robot_path = _file(nodes["robot"], base, "robot")
    robot = load_mechanism(robot_path)
    exo = load_mechanism(robot_path, wearer=False) if robot_path.suffix != ".urdf" else robot
    buses_path = _file(nodes["buses"], base, "bus")
    buses = load_buses(buses_path, robot, top.rate_hz)
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
        cpath = _file(nodes["controller"], base, "controller")
    ctrl = load_controller(cpath, robot)
    _check_room(top.simulation, nodes)
    driven = {d.joint for b in buses for d in b.drives}
    missing = [j for j in robot.joint_names if j not in driven]
    if missing:
        raise ConfigError(f"no drive on any bus for joint(s) {', '.join(missing)}",
                          nodes["buses"].where(), "add them to the bus file")
    return TopConfig(
        path=path, sha256=hashlib.sha256(path.read_bytes()).hexdigest(), robot_path=robot_path,
        buses_path=buses_path, robot=robot, exo=exo, buses=buses, controller=ctrl,
        rate_hz=top.rate_hz, stop_s=top.stop.duration,
        safety=top.safety, runs_dir=Path(top.logging.runs), realtime=top.realtime,
        simulation=top.simulation,
        session_path=_file(nodes["session"], base, "session") if top.session else None,
    )
