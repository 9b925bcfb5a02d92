"""What every shipped config loads to, as plain data: the reference the schema-driven loaders
are checked against (``tests/test_config_schemas.py``).

``snapshot(obj)`` turns a loaded result (a ``Mechanism``, a ``ControllerConfig``, a
``TopConfig``, bus configs …) into JSON-able values: dataclasses by field, arrays with dtype
and shape, floats exact (JSON keeps ``repr``). ``capture()`` loads every shipped file of each
kind. ``tests/data/config_before.json.gz`` was written by ``python -m tests.config_snapshot``
with the hand-written loaders, before the configuration became declared schemas (the bus
files and top configs re-taken after the drive-protocol registry's last bus-file change,
before the bus kind moved to its schema); it is not to be regenerated (it is the "before").
Paths inside the checkout are written ``<root>/…``: the same wherever the repository is.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
from numpy.lib.recfunctions import structured_to_unstructured

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "config_before.json.gz"
# a top config's sha256 hashes its text, which the editor-schema line changed; a harmonic
# drive's catalogue name (free text, for people) came into the model with its ratings
SKIP_FIELDS = {"sha256", "catalogue"}
# keys added since the snapshot (issue 44) at the defaults every robot the snapshot holds has:
# the catalogue ratings (not given) and the SAFE reaction (none declared)
DRIVE_ADDED = {"rated_torque": None, "peak_torque": None, "momentary_torque": None,
               "max_input_speed": None}
MOTOR_ADDED = {"rated_speed": None, "max_speed": None}
TRANSMISSION_ADDED = {"safe_reaction": "none"}


def snapshot(obj):
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {"__class__": type(obj).__name__}
        for f in dataclasses.fields(obj):
            if f.name not in SKIP_FIELDS:
                out[f.name] = snapshot(getattr(obj, f.name))
        return out
    if isinstance(obj, np.ndarray) and obj.dtype.names:  # records: their fields as columns
        obj = structured_to_unstructured(obj)
    if isinstance(obj, np.ndarray):
        return {"__array__": str(obj.dtype), "shape": list(obj.shape),
                "data": obj.ravel().tolist()}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {"__dict__": [[snapshot(k), snapshot(v)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return [snapshot(v) for v in obj]
    if isinstance(obj, (Path, str)):  # a file of the checkout: where it is cloned is no part
        text = str(obj)  # of what it loads to
        return "<root>/" + text[len(str(ROOT)) + 1:] if text.startswith(f"{ROOT}/") else text
    if isinstance(obj, (int, float, bool)) or obj is None:
        return obj
    if hasattr(obj, "__dict__"):
        return {"__class__": type(obj).__name__,
                **{k: snapshot(v) for k, v in sorted(vars(obj).items())}}
    return repr(obj)


# Values changed in the shipped files since the snapshot, on purpose: the gains retuned for the
# loop's one period of transport delay (docs/config-controller.md, "Choosing gains"). Per
# controller file: gain column → (old, new), and the velocity filter's cut-off (Hz).
RETUNED = {
    "computed_torque": ({0: (1600.0, 400.0), 1: (4000.0, 2500.0), 2: (80.0, 36.0)}, (80.0, 300.0)),
    "computed_torque_events": ({0: (1600.0, 400.0), 1: (4000.0, 2500.0), 2: (80.0, 36.0)},
                               (80.0, 300.0)),
    "sliding_mode": ({5: (40.0, 20.0), 7: (0.05, 1.0)}, (80.0, 300.0)),
}
TOP_CONTROLLER = "computed_torque"  # the controller every shipped top config names
# keys added to a controller file since the snapshot, as every controller the snapshot holds
# loads them (none sets it): the stance-load feedforward, off (issue 44)
CONTROLLER_ADDED = {"stance_load": None}
# Keys added to the top config since the snapshot, as every shipped top config loads them (it
# sets none of them: their defaults).
TOP_ADDED = {"simulation": {"__class__": "SimulationConfig", "plant": "harmonic_drive",
                            # the world plant's room (issue 44), at its defaults
                            "scene": "test_stand", "seat_height": 0.45,
                            "stabiliser_stiffness": 3000.0, "stabiliser_damping": 300.0,
                            "support": 0.0, "wearer_damping": 0.0,
                            "ankle_stiffness": 0.0, "ankle_damping": 0.0, "ankle_rest": 0.0,
                            "seat_follows": False},
             "session_path": None}  # a top config's own default session (issue 44)
REALTIME_ADDED = {"cpu_latency_us": 0}  # keys added to the top config's `realtime` since
# keys added to the top config's `safety` since
SAFETY_ADDED = {"saturation_cycles": 20, "duplicate_cycles": 3}
# the reference governor's bounds (issue 43): the shipped tops that name their joints' own
REFERENCE_ACCELERATION = {"exo_leg": {"hip": 12.0, "knee": 50.0},
                          "exo_2leg": {"hip": 12.0, "knee": 50.0}}


def _retune(snap: dict, name: str) -> None:
    columns, (old_hz, new_hz) = RETUNED[name]
    gains = snap["gains"]
    width = gains["shape"][1]
    for i, value in enumerate(gains["data"]):
        old, new = columns.get(i % width, (None, None))
        if old is not None:
            assert value == old, (name, i, value)
            gains["data"][i] = new
    assert snap["velocity_cutoff_hz"] == old_hz
    snap["velocity_cutoff_hz"] = new_hz


def _widen_packed(node) -> None:
    """The packed model's columns added since the snapshot, each mechanism's (``Mechanism.
    packed``'s last two: its joints' origin rotation exactly the identity, 1.0; its axis
    exactly ±x, ±y, ±z: 0, 1, 2, else −1), derived here from the snapshot's own
    ``origin_rot`` and ``axis``, everywhere a mechanism appears."""
    if isinstance(node, list):
        for v in node:
            _widen_packed(v)
    if not isinstance(node, dict):
        return
    for v in node.values():
        _widen_packed(v)
    if node.get("__class__") != "Mechanism":
        return
    packed = node["packed"]
    rows, width = packed["shape"]
    rot = np.reshape(node["origin_rot"]["data"], (-1, 9))
    axis = np.reshape(node["axis"]["data"], (-1, 3))
    table = np.reshape(packed["data"], (rows, width))
    extra = np.zeros((rows, 2))
    for i in range(rows - 1):  # the last row is the header
        extra[i, 0] = float(list(rot[i]) == [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0])
        nonzero = [k for k in range(3) if axis[i, k] != 0.0]
        extra[i, 1] = nonzero[0] if len(nonzero) == 1 and abs(axis[i, nonzero[0]]) == 1.0 \
            else -1.0
    packed["shape"] = [rows, width + 2]
    packed["data"] = np.hstack([table, extra]).ravel().tolist()


def _add_motor_keys(node) -> None:
    """The motor keys added since the snapshot, everywhere a motor appears: its thermal
    catalogue data (``motor.thermal``), which every shipped motor (all EC 45 flat 70 W) gives
    at the schema's defaults; and the ratings and SAFE reaction of issue 44 (:data:`MOTOR_ADDED`,
    :data:`DRIVE_ADDED`, :data:`TRANSMISSION_ADDED`) on motors, drives and transmissions."""
    from exo_rt.schema.robot import MotorThermal

    if isinstance(node, list):
        for v in node:
            _add_motor_keys(v)
    if not isinstance(node, dict):
        return
    for v in node.values():
        _add_motor_keys(v)
    if node.get("__class__") == "Motor":
        node["thermal"] = snapshot(MotorThermal())
        node.update(MOTOR_ADDED)
    elif node.get("__class__") == "HarmonicDrive":
        node.update(DRIVE_ADDED)
    elif node.get("__class__") == "Transmission":
        node.update(TRANSMISSION_ADDED)


def before() -> dict:
    """The snapshot taken with the hand-written loaders, with the retuned values (RETUNED),
    the top config's added keys (TOP_ADDED, REALTIME_ADDED, SAFETY_ADDED), the packed
    models' added columns (:func:`_widen_packed`), the motors' added keys
    (:func:`_add_motor_keys`) and the controllers' (:func:`_add_controller_keys`)."""
    import gzip

    from exo_rt.schema.top import ThermalLevels

    snap = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    for key, value in snap["controller"].items():
        name = Path(key.split("@")[0]).stem
        if name in RETUNED:
            _retune(value, name)
    for key, value in snap["top"].items():
        _retune(value["controller"], TOP_CONTROLLER)
        value.update(TOP_ADDED)
        value["realtime"].update(REALTIME_ADDED)
        value["safety"].update(SAFETY_ADDED, thermal=snapshot(ThermalLevels()),
                               reference_speed=0.8,
                               reference_acceleration={"__dict__": [
                                   list(kv) for kv in REFERENCE_ACCELERATION.get(
                                       Path(key).stem, {}).items()]})
    _widen_packed(snap)
    _add_motor_keys(snap)
    _add_controller_keys(snap)
    return snap


def _add_controller_keys(node) -> None:
    """:data:`CONTROLLER_ADDED` into every controller the snapshot holds (a controller file's
    load, a top config's)."""
    if isinstance(node, list):
        for v in node:
            _add_controller_keys(v)
    if not isinstance(node, dict):
        return
    for v in node.values():
        _add_controller_keys(v)
    if node.get("__class__") == "ControllerConfig":
        for k, v in CONTROLLER_ADDED.items():
            node.setdefault(k, v)


def capture() -> dict:
    """Every shipped robot (with and without its wearer), controller (on the one- and the
    two-leg robot), bus file and top config, loaded; keys are paths relative to the
    repository."""
    import os

    from exo_rt.bus.config import load_buses
    from exo_rt.control.config import load_controller
    from exo_rt.model import load_mechanism
    from exo_rt.runtime.config import load_top

    here = Path.cwd()
    os.chdir(ROOT)
    try:
        out: dict = {"robot": {}, "controller": {}, "buses": {}, "top": {}}
        robots = {}
        for p in sorted(Path("configs/robots").rglob("*.yaml")):
            mech = load_mechanism(p)
            robots[p.stem] = mech
            out["robot"][str(p)] = snapshot(mech)
            out["robot"][f"{p}?wearer=false"] = snapshot(load_mechanism(p, wearer=False))
        for p in sorted(Path("configs/controllers").glob("*.yaml")):
            for robot in ("exo_12dof",) if "12dof" in p.stem else ("exo_leg", "exo_2leg"):
                out["controller"][f"{p}@{robot}"] = snapshot(load_controller(p, robots[robot]))
        for p in sorted(Path("configs/buses").glob("*.yaml")):
            robot = robots["exo_12dof" if "12dof" in p.stem else
                           "exo_2leg" if "2leg" in p.stem else "exo_leg"]
            out["buses"][str(p)] = snapshot(load_buses(p, robot))
        for p in sorted(Path("configs").glob("*.yaml")):
            out["top"][str(p)] = snapshot(load_top(p))
        return out
    finally:
        os.chdir(here)


if __name__ == "__main__":
    import gzip

    FIXTURE.write_bytes(gzip.compress(json.dumps(capture(), separators=(",", ":")).encode(),
                                      mtime=0))
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes)")
