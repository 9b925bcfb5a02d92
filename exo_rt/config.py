"""Controller configuration: YAML → frozen dataclasses, validated with file:line errors.

A controller file (``configs/controllers/*.yaml``, reference in ``docs/config-controller.md``)
chooses the law, its gains per joint, limits, the velocity estimate and the reference. It is
checked against the robot it will drive (joint names, current limits ≤ the drives' peak).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exo_rt.control import laws
from exo_rt.errors import ConfigError
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.parsing import did_you_mean
from exo_rt.yamlio import Node, choice, mapping, number, read_yaml, text

GAIN_KEYS = {"kp": laws.G_KP, "ki": laws.G_KI, "kd": laws.G_KD, "i_limit": laws.G_I_LIMIT,
             "torque_limit": laws.G_TORQUE_LIMIT, "lambda": laws.G_LAMBDA,
             "k_switch": laws.G_K_SWITCH, "boundary": laws.G_BOUNDARY, "k_s": laws.G_K_S,
             "assist": laws.G_ASSIST}
GAIN_DEFAULTS = {"i_limit": math.inf, "torque_limit": math.inf, "boundary": 1.0}
REFERENCE_TYPES = ("gait", "hold", "min_jerk")


@dataclass(frozen=True)
class Reference:
    """What the joints track: the normal gait, a held posture or a minimum-jerk move."""

    type: str = "gait"
    period: float = 2.0  # s per stride (gait)
    amplitude: float = 1.0  # excursion scale (gait)
    gait_joints: dict = field(default_factory=dict)  # joint → 'hip' | 'knee' (gait data)
    posture: dict = field(default_factory=dict)  # joint → rad (hold, min_jerk target)
    duration: float = 2.0  # s (min_jerk)
    phase: str = "time"  # gait phase from 'time' or from heel strikes ('events', the board)


@dataclass(frozen=True)
class ControllerConfig:
    """A validated controller: law, gains per joint (rows as ``mech.joint_names``), limits."""

    source: str
    law: str
    gains: np.ndarray  # (n_joints, laws.G_WIDTH)
    current_limit: np.ndarray  # A per joint
    inertia_feedforward: bool
    friction_compensation: bool
    velocity_cutoff_hz: float
    encoder: str  # 'output' | 'motor'
    counts_per_rev: float
    reference: Reference

    def options(self) -> np.ndarray:
        o = np.zeros(laws.O_WIDTH)
        o[laws.O_LAW] = laws.LAWS[self.law]
        o[laws.O_INERTIA_FF] = 1.0 if self.inertia_feedforward else 0.0
        o[laws.O_FRICTION_COMP] = 1.0 if self.friction_compensation else 0.0
        return o


TOP_KEYS = {"law": True, "joints": False, "current_limit": False, "inertia_feedforward": False,
            "friction_compensation": False, "velocity_filter_hz": False, "encoder": False,
            "reference": False, "description": False}
REF_KEYS = {"type": True, "period": False, "amplitude": False, "joints": False,
            "posture": False, "duration": False, "phase": False}


def _positive(node: Node, what: str, allow_zero: bool = True) -> float:
    x = number(node, allow_inf=True)
    if x < 0 or (x == 0 and not allow_zero):
        raise ConfigError(f"{what} must be {'≥' if allow_zero else '>'} 0, got {x}",
                          node.where(), "gains and limits are magnitudes")
    return x


def _joint_map(node: Node, mech: Mechanism, what: str) -> dict[str, Node]:
    """{joint: node}: a key names a joint, or every joint ending in '_<key>' (``hip`` gives
    ``left_hip`` and ``right_hip``), so one controller file serves one leg or two."""
    m = node.value
    if not isinstance(m, dict):
        raise ConfigError(f"{what} must map joint names to values", node.where(),
                          f"e.g. {mech.joint_names[0]}: …")
    out: dict[str, Node] = {}
    for name, sub in m.items():
        joints = [name] if name in mech.joint_names else [
            j for j in mech.joint_names if j.endswith("_" + name)]
        if not joints:
            raise ConfigError(f"unknown joint '{name}'", sub.where(),
                              did_you_mean(name, mech.joint_names)
                              or f"the robot's joints are {', '.join(mech.joint_names)}")
        for j in joints:
            out[j] = sub
    return out


def _reference(node: Node | None, mech: Mechanism) -> Reference:
    if node is None:
        return Reference()
    m = mapping(node, REF_KEYS, "reference")
    kind = choice(m["type"], REFERENCE_TYPES, "reference type")
    gait_joints = {}
    if "joints" in m:
        for name, sub in _joint_map(m["joints"], mech, "reference.joints").items():
            pattern = text(sub)
            if pattern not in ("hip", "knee", "hold"):
                raise ConfigError(f"unknown gait pattern '{pattern}'", sub.where(),
                                  "use hip, knee (normal-gait data) or hold")
            gait_joints[name] = pattern
    posture = {}
    if "posture" in m:
        posture = {k: number(v) for k, v in _joint_map(m["posture"], mech, "posture").items()}
    return Reference(
        type=kind,
        period=_positive(m["period"], "period", False) if "period" in m else 2.0,
        amplitude=_positive(m["amplitude"], "amplitude") if "amplitude" in m else 1.0,
        gait_joints=gait_joints, posture=posture,
        duration=_positive(m["duration"], "duration", False) if "duration" in m else 2.0,
        phase=_phase(m["phase"]) if "phase" in m else "time",
    )


def _phase(node: Node) -> str:
    return choice(node, ("time", "events"), "phase source")


def load_controller(path: str | Path, mech: Mechanism) -> ControllerConfig:
    """Read and validate a controller file for the robot ``mech``."""
    root = read_yaml(Path(path), ConfigError)
    top = mapping(root, TOP_KEYS, "the controller file")
    law = choice(top["law"], tuple(laws.LAWS), "law")
    n = mech.nq
    gains = np.zeros((n, laws.G_WIDTH))
    for key, default in GAIN_DEFAULTS.items():
        gains[:, GAIN_KEYS[key]] = default
    gains[:, laws.G_TORQUE_LIMIT] = np.minimum(gains[:, laws.G_TORQUE_LIMIT],
                                               mech.effort_limit[: n])
    if "joints" in top:
        for name, sub in _joint_map(top["joints"], mech, "joints").items():
            j = mech.joint_names.index(name)
            g = mapping(sub, {k: False for k in GAIN_KEYS}, f"the gains of '{name}'")
            for key, val in g.items():
                gains[j, GAIN_KEYS[key]] = _positive(val, key, key != "boundary")
    peaks = {tr.joint: tr.motor.peak_current for tr in mech.transmissions}
    limit = np.array([peaks.get(nm, 0.0) for nm in mech.joint_names])
    if "current_limit" in top:
        node = top["current_limit"]
        values = (_joint_map(node, mech, "current_limit") if isinstance(node.value, dict)
                  else dict.fromkeys(mech.joint_names, node))
        for name, sub in values.items():
            j = mech.joint_names.index(name)
            a = _positive(sub, "current_limit")
            if name in peaks and a > peaks[name]:
                raise ConfigError(f"current limit {a} A of '{name}' exceeds its drive's peak "
                                  f"current {peaks[name]} A", sub.where(),
                                  f"give at most {peaks[name]} A")
            limit[j] = a
    encoder, cpr = "motor", 65536.0
    if "encoder" in top:
        e = mapping(top["encoder"], {"source": False, "counts_per_rev": False}, "encoder")
        if "source" in e:
            encoder = choice(e["source"], ("motor", "output"), "encoder source")
        if "counts_per_rev" in e:
            cpr = _positive(e["counts_per_rev"], "counts_per_rev", False)
    return ControllerConfig(
        source=str(path), law=law, gains=gains, current_limit=limit,
        inertia_feedforward=bool(top["inertia_feedforward"].value)
        if "inertia_feedforward" in top else False,
        friction_compensation=law != "passive" and (
            bool(top["friction_compensation"].value) if "friction_compensation" in top
            else law != "pid"),
        velocity_cutoff_hz=_positive(top["velocity_filter_hz"], "velocity_filter_hz", False)
        if "velocity_filter_hz" in top else 80.0,
        encoder=encoder, counts_per_rev=cpr,
        reference=_reference(top.get("reference"), mech),
    )


def rotor_inertias(mech: Mechanism) -> np.ndarray:
    """k²·I_rotor (kg·m²) per joint: each rotor's own inertia about its axis, at the joint."""
    from exo_rt.dynamics import Dynamics
    from exo_rt.dynamics.couplings import released

    out = np.zeros(mech.nq)
    if not mech.transmissions or mech.closure is not None:
        return out
    plant = released(mech)
    m = Dynamics(plant).mass_matrix(np.zeros(plant.nq))
    for tr in mech.transmissions:
        r = plant.joint_names.index(tr.rotor_joint)
        out[mech.joint_names.index(tr.joint)] = tr.multiplier**2 * m[r, r]
    return out


def transmission_rows(mech: Mechanism, cfg: ControllerConfig) -> np.ndarray:
    """Per-joint transmission data for :func:`exo_rt.control.laws.torque_to_current`."""
    tc = np.zeros((mech.nq, laws.C_WIDTH))
    rotor = rotor_inertias(mech)
    for tr in mech.transmissions:
        j = mech.joint_names.index(tr.joint)
        d = tr.drive
        tc[j] = [tr.multiplier, tr.motor.torque_constant, tr.motor_sign, d.coulomb, d.viscous,
                 d.load_friction, d.ratio, cfg.current_limit[j], max(d.stribeck_velocity, 1e-3),
                 rotor[j]]
    return tc

