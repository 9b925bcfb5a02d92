"""Controller files: YAML → :class:`ControllerConfig` (per-joint gains and limits as arrays).

A controller file (``configs/controllers/*.yaml``, schema :mod:`exo_rt.schema.controller`,
reference ``docs/config-controller.md``) chooses the law, its gains per joint, limits, the
velocity estimate and the reference. What the schema cannot know is checked here: the law's
name against the law registry, and, against the robot the controller will drive, joint names
and current limits at most the drives' peak.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from exo_rt.control import laws, registry
from exo_rt.errors import ConfigError, Where
from exo_rt.model.mechanism import Mechanism
from exo_rt.model.parsing import did_you_mean
from exo_rt.schema import core
from exo_rt.schema.controller import (
    COLUMNS,
    REFERENCE_TYPES,
    ControllerFile,
    Gains,
    PhaseEstimate,
    Reference,
    StanceLoad,
)
from exo_rt.yamlio import Node, read_yaml

GAIN_KEYS = COLUMNS  # gain key → its field of a gains record (exo_rt.control.laws.GAINS)
GAIN_DEFAULTS = core.defaults(Gains)
__all__ = ["GAIN_KEYS", "GAIN_DEFAULTS", "REFERENCE_TYPES", "ControllerConfig", "Reference",
           "load_controller", "rotor_inertias", "stance_rows", "transmission_rows"]


@dataclass(frozen=True)
class ControllerConfig:
    """A validated controller: law, gains per joint (rows as ``mech.joint_names``), limits."""

    source: str
    law: str
    gains: np.ndarray  # one laws.GAINS record per joint
    current_limit: np.ndarray  # A per joint
    inertia_feedforward: bool
    friction_compensation: bool
    velocity_cutoff_hz: float
    encoder: str  # 'output' | 'motor'
    counts_per_rev: float
    reference: Reference
    phase_estimate: PhaseEstimate = PhaseEstimate()
    stance_load: StanceLoad | None = None  # off where the file has no ``stance_load``

    def options(self) -> np.ndarray:
        """The options the laws read: one :data:`exo_rt.control.laws.OPTIONS` record (an
        array of one, as compiled code takes it)."""
        o = np.zeros(1, laws.OPTIONS)
        o[0]["law"] = registry.code(self.law)
        o[0]["inertia_feedforward"] = self.inertia_feedforward
        o[0]["friction_compensation"] = self.friction_compensation
        o[0]["follows_wearer"] = registry.get(self.law).follows_wearer
        o[0]["feeds_acceleration"] = registry.get(self.law).feeds_acceleration
        return o

    @property
    def assists(self) -> bool:
        """A joint's gain ``assist`` is set: the cycle computes the wearer's own torque."""
        return bool(np.any(self.gains["assist"] != 0.0))

    def estimate_joint(self, mech: Mechanism) -> int:
        """The index of the hip joint the gait-phase estimate follows (−1: the robot has
        none): the file's ``phase_estimate.joint``, else the first hip flexion joint."""
        name = self.phase_estimate.joint
        if name:
            return mech.joint_names.index(name)
        hips = [j for j, nm in enumerate(mech.joint_names) if nm == "hip" or nm.endswith("_hip")]
        return hips[0] if hips else -1


def _joint_map(node: Node, mech: Mechanism) -> dict[str, Node]:
    """{joint: node}: a key names a joint, or every joint ending in '_<key>' (``hip`` gives
    ``left_hip`` and ``right_hip``), so one controller file serves one leg or two."""
    out: dict[str, Node] = {}
    for name, sub in node.value.items():
        joints = [name] if name in mech.joint_names else [
            j for j in mech.joint_names if j.endswith("_" + name)]
        if not joints:
            raise ConfigError(f"unknown joint '{name}'", sub.where(),
                              did_you_mean(name, mech.joint_names)
                              or f"the robot's joints are {', '.join(mech.joint_names)}")
        for j in joints:
            out[j] = sub
    return out


def _per_joint(values: dict, node: Node, mech: Mechanism) -> dict:
    """A {name: value} map of the file keyed by the robot's joints (see :func:`_joint_map`)."""
    keys = {id(sub): name for name, sub in node.value.items()}
    return {j: values[keys[id(sub)]] for j, sub in _joint_map(node, mech).items()}


def load_controller(path: str | Path, mech: Mechanism) -> ControllerConfig:
    """Read and validate a controller file for the robot ``mech``."""
    root = read_yaml(Path(path), ConfigError)
    f = core.read(ControllerFile, root)
    nodes = root.value
    # the schema keeps the law a plain name (it sits below the laws); the registry's names,
    # third parties' included, are checked here, with the schema's own message for a choice
    core.Choice(laws.LAWS, "law").read(nodes["law"], "law", None)
    n = mech.nq
    gains = np.zeros(n, laws.GAINS)
    for k, default in GAIN_DEFAULTS.items():
        gains[COLUMNS[k]] = default
    gains["torque_limit"] = np.minimum(gains["torque_limit"], mech.effort_limit[: n])
    if "joints" in nodes:
        subs = _joint_map(nodes["joints"], mech)
        for name, given in _per_joint(f.joints, nodes["joints"], mech).items():
            j = mech.joint_names.index(name)
            for k in subs[name].value:  # only the gains written: the others keep defaults
                gains[j][COLUMNS[k]] = getattr(given, Gains.KEYS[k].name)
    peaks = {tr.joint: tr.motor.peak_current for tr in mech.transmissions}
    limit = np.array([peaks.get(nm, 0.0) for nm in mech.joint_names])
    if f.current_limit is not None:
        node = nodes["current_limit"]
        if isinstance(f.current_limit, dict):
            values = _per_joint(f.current_limit, node, mech)
            subs = _joint_map(node, mech)
        else:
            values = dict.fromkeys(mech.joint_names, f.current_limit)
            subs = dict.fromkeys(mech.joint_names, node)
        for name, a in values.items():
            if name in peaks and a > peaks[name]:
                raise ConfigError(f"current limit {a} A of '{name}' exceeds its drive's peak "
                                  f"current {peaks[name]} A", subs[name].where(),
                                  f"give at most {peaks[name]} A")
            limit[mech.joint_names.index(name)] = a
    ref = f.reference
    if "reference" in nodes:
        rnodes = nodes["reference"].value
        gait = (_per_joint(ref.gait_joints, rnodes["joints"], mech) if "joints" in rnodes
                else {})
        posture = (_per_joint(ref.posture, rnodes["posture"], mech) if "posture" in rnodes
                   else {})
        ref = dataclasses.replace(ref, gait_joints=gait, posture=posture)
    friction = f.friction_compensation
    return ControllerConfig(
        source=str(path), law=f.law, gains=gains, current_limit=limit,
        inertia_feedforward=f.inertia_feedforward,
        friction_compensation=f.law != "passive" and (
            friction if friction is not None else f.law != "pid"),
        velocity_cutoff_hz=f.velocity_filter_hz,
        encoder=f.encoder.source, counts_per_rev=f.encoder.counts_per_rev,
        reference=ref, phase_estimate=_estimate(f.phase_estimate, nodes, mech),
        stance_load=_stance(f, nodes, mech),
    )


def _stance(f: ControllerFile, nodes: dict, mech: Mechanism) -> StanceLoad | None:
    """The file's ``stance_load``, checked: a law that adds it, each of the robot's legs
    named with its ankle found (:func:`stance_rows`; the names of legs it lacks are skipped)."""
    if f.stance_load is None:
        return None
    node = nodes["stance_load"]
    if not registry.get(f.law).carries_stance:
        carriers = [n for n in laws.LAWS.entries() if registry.get(n).carries_stance]
        raise ConfigError(f"the law '{f.law}' does not feed the stance load forward",
                          node.where(), f"remove stance_load, or use {', '.join(carriers)}")
    for leg, sub in node.value["sensors"].value.items():
        prefix = _prefix(leg)
        if prefix in _legs(mech):
            _ankle(mech, prefix, sub.where())
    return f.stance_load


def _prefix(leg: str) -> str:
    """A leg's joints' prefix: ``left`` → 'left_', ``leg`` → '' (a one-leg robot)."""
    return "" if leg == "leg" else leg.rstrip("_") + "_"


def _legs(mech: Mechanism) -> list[str]:
    from exo_rt.control.gait_speed import leg_prefixes

    return leg_prefixes(mech)


def _ankle(mech: Mechanism, prefix: str, where) -> tuple[int, np.ndarray]:
    """(the shank's body, the ankle joint's centre in its frame, m) of the leg ``prefix``:
    a revolute ankle's origin, or a fixed one's from the robot file (lumped by the loader)."""
    from exo_rt.control.gait_speed import _fixed_origin

    names = list(mech.tree_joint_names)
    shank = names.index(prefix + "knee")
    ankle = prefix + "ankle"
    if ankle in names and int(mech.parent[names.index(ankle)]) == shank:
        return shank, np.array(mech.origin_xyz[names.index(ankle)], float)
    return shank, np.asarray(_fixed_origin(mech, ankle, mech.body_names[shank], where, ""),
                             float)


def stance_rows(mech: Mechanism, cfg: ControllerConfig, dt: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """The stance-load feedforward of ``cfg`` for the controller's model ``mech`` and the
    period ``dt`` (s): its legs (:data:`exo_rt.control.registry.STANCE` records — none where
    the file has no ``stance_load``) and their ankle points (legs × 3, m, each in its shank's
    frame). The legs named that ``mech`` lacks are skipped: one controller file serves the
    one-leg and the two-leg robot (none of its legs named: none, no feedforward)."""
    sl = cfg.stance_load
    if sl is None:
        return np.zeros(0, registry.STANCE), np.zeros((0, 3))
    have = _legs(mech)
    legs = [(_prefix(leg), sensor) for leg, sensor in sl.sensors.items()
            if _prefix(leg) in have]
    rows, points = np.zeros(len(legs), registry.STANCE), np.zeros((len(legs), 3))
    g = np.asarray(mech.gravity, float)
    up = -g / np.linalg.norm(g)
    for r, (prefix, sensor) in enumerate(legs):
        body, points[r] = _ankle(mech, prefix, Where(cfg.source))
        rec = rows[r]
        rec["sensor"], rec["body"] = int(sensor), body
        rec["up_x"], rec["up_y"], rec["up_z"] = up
        rec["alpha"] = 1.0 - np.exp(-dt / sl.tau_s)
        rec["max_n"] = sl.max_N
    return rows, points


def _estimate(est: PhaseEstimate, nodes: dict, mech: Mechanism) -> PhaseEstimate:
    """The phase estimate's section, its joint checked against the robot."""
    if est.joint and est.joint not in mech.joint_names:
        node = nodes["phase_estimate"].value["joint"]
        raise ConfigError(f"unknown joint '{est.joint}'", node.where(),
                          did_you_mean(est.joint, mech.joint_names)
                          or f"the robot's joints are {', '.join(mech.joint_names)}")
    return est


def rotor_inertias(mech: Mechanism) -> np.ndarray:
    """k²·I_rotor (kg·m²) per joint: each rotor's own inertia about its axis, at the joint —
    the released tree's mass-matrix diagonal at the rotor's coordinate. A rotor without
    bodies below it (every shipped one) in closed form: aᵀ(I_G + m(|c|²E − c cᵀ))a of its
    body (inertia I_G about its centre of mass c, axis a, all in its frame; the parallel-axis
    theorem), so that a cycle's set-up compiles no dynamics; otherwise the mass-matrix
    kernel's."""
    from exo_rt.dynamics import kernels
    from exo_rt.dynamics.couplings import released

    out = np.zeros(mech.nq)
    if not mech.transmissions or mech.closure is not None:
        return out
    bodies = [mech.tree_joint_names.index(tr.rotor_joint) for tr in mech.transmissions]
    if any(np.any(mech.parent == b) for b in bodies):  # a body below a rotor
        plant = released(mech)
        m = np.zeros((plant.nq, plant.nq))  # the cycle's own mass-matrix kernel
        kernels.mass_matrix(*kernels.model_and_data(plant), np.zeros(plant.nq), m)
        diag = [m[r, r] for r in (plant.joint_names.index(tr.rotor_joint)
                                  for tr in mech.transmissions)]
    else:
        diag = []
        for b in bodies:
            a, c = mech.axis[b], mech.com[b]
            about = mech.inertia[b] + mech.mass[b] * (c @ c * np.eye(3) - np.outer(c, c))
            diag.append(float(a @ about @ a))
    for tr, d in zip(mech.transmissions, diag, strict=True):
        out[mech.joint_names.index(tr.joint)] = tr.multiplier**2 * d
    return out


def transmission_rows(mech: Mechanism, cfg: ControllerConfig) -> np.ndarray:
    """Per-joint transmission data (:data:`exo_rt.control.laws.TRANSMISSION` records, zero for
    a joint without a motor) for :func:`exo_rt.control.laws.torque_to_current`."""
    transmissions = np.zeros(mech.nq, laws.TRANSMISSION)
    rotor = rotor_inertias(mech)
    for tr in mech.transmissions:
        j = mech.joint_names.index(tr.joint)
        d = tr.drive
        row = transmissions[j]  # a view: writing its fields fills the array
        row["multiplier"] = tr.multiplier
        row["kt"] = tr.motor.torque_constant
        row["motor_sign"] = tr.motor_sign
        row["coulomb"] = d.coulomb
        row["viscous"] = d.viscous
        row["load_friction"] = d.load_friction
        row["ratio"] = d.ratio
        row["current_limit"] = cfg.current_limit[j]
        row["sign_width"] = max(d.stribeck_velocity, 1e-3)
        row["rotor_inertia"] = rotor[j]
    return transmissions
