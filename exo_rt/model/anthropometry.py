"""The wearer's leg segments from mass, height and sex (de Leva 1996; Borisov & Rozenblat 2017).

de Leva, P. (1996), "Adjustments to Zatsiorsky–Seluyanov's segment inertia parameters",
J. Biomech. 29(9):1223–1230, Table 4: mass as a fraction
of body mass, COM as a fraction of the segment length from the proximal end, and radii of
gyration about the COM (sagittal, transverse, longitudinal) as fractions of the length.
Segment lengths scale with stature from de Leva's reference subjects (Table 1 lengths and
mean statures), unless the exoskeleton link fixes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exo_rt.model.topology import LinkSpec

# segment: (mass fraction, COM fraction from proximal, r_sagittal, r_transverse, r_longitudinal)
DE_LEVA = {
    "male": {
        "thigh": (0.1416, 0.4095, 0.329, 0.329, 0.149),
        "shank": (0.0433, 0.4459, 0.255, 0.249, 0.103),
        "foot": (0.0137, 0.4415, 0.257, 0.245, 0.124),
    },
    "female": {
        "thigh": (0.1478, 0.3612, 0.369, 0.364, 0.162),
        "shank": (0.0481, 0.4416, 0.271, 0.267, 0.093),
        "foot": (0.0129, 0.4014, 0.299, 0.279, 0.139),
    },
}
# de Leva's reference segment lengths (m) and mean statures (m), Table 1
REFERENCE_LENGTH = {
    "male": {"thigh": 0.4222, "shank": 0.4340, "foot": 0.2581},
    "female": {"thigh": 0.3685, "shank": 0.4323, "foot": 0.2283},
}
REFERENCE_STATURE = {"male": 1.741, "female": 1.735}
# the rest of the body as mass fractions (de Leva 1996, Table 4, the same table's other rows):
# head (with neck), trunk, and one upper arm, forearm and hand — the simulated world's upper
# body (exo_rt/sim/world/scene.py); the leg's segments above complete each column to 1
UPPER_BODY = {
    "male": {"head": 0.0694, "trunk": 0.4346, "upper_arm": 0.0271, "forearm": 0.0162,
             "hand": 0.0061},
    "female": {"head": 0.0668, "trunk": 0.4257, "upper_arm": 0.0255, "forearm": 0.0138,
               "hand": 0.0056},
}
# the statures and masses these tables hold for (adults): exo_rt.schema.wearer.HEIGHT_RANGE and
# MASS_RANGE, which the wearer's and the robot's schemas check


def upper_body_fraction(sex: str) -> float:
    """Head, trunk and both arms as a fraction of body mass (de Leva 1996, Table 4)."""
    f = UPPER_BODY[sex]
    return f["head"] + f["trunk"] + 2.0 * (f["upper_arm"] + f["forearm"] + f["hand"])


@dataclass(frozen=True)
class Segment:
    """One wearer segment: mass (kg), length (m), COM fraction, radii of gyration (fractions)."""

    name: str
    mass: float
    length: float
    com_fraction: float
    r_sagittal: float
    r_transverse: float
    r_longitudinal: float


def segment(
    name: str, mass: float, height: float, sex: str, length: float | None = None
) -> Segment:
    """de Leva's ``name`` segment ('thigh', 'shank', 'foot') of a wearer.

    ``length`` (m) overrides the stature-scaled reference length (e.g. the exoskeleton link's).
    """
    frac, com, rs, rt, rl = DE_LEVA[sex][name]
    if length is None:
        length = REFERENCE_LENGTH[sex][name] * height / REFERENCE_STATURE[sex]
    return Segment(name, frac * mass, float(length), com, rs, rt, rl)


def segment_link(
    seg: Segment,
    body: str,
    proximal: np.ndarray,
    distal: np.ndarray,
    lateral: np.ndarray,
    where=None,
) -> LinkSpec:
    """The segment as a rigid body in ``body``'s frame, from its proximal → distal axis.

    The COM lies on the axis at ``com_fraction``; principal axes: longitudinal (the segment
    axis), sagittal (``lateral``, about which the leg flexes) and transverse (the third).
    Inertia about the COM: m (r·L)² on each principal axis.
    """
    proximal = np.asarray(proximal, float)
    distal = np.asarray(distal, float)
    axis = distal - proximal
    length = float(np.linalg.norm(axis))
    if length <= 0:
        raise ValueError("segment axis has zero length")
    e_long = axis / length
    lat = np.asarray(lateral, float)
    lat = lat - e_long * float(lat @ e_long)
    e_sag = lat / np.linalg.norm(lat)
    e_tra = np.cross(e_sag, e_long)
    basis = np.column_stack([e_sag, e_tra, e_long])
    m = seg.mass
    moments = m * (np.array([seg.r_sagittal, seg.r_transverse, seg.r_longitudinal]) * length) ** 2
    inertia = basis @ np.diag(moments) @ basis.T
    com = proximal + seg.com_fraction * axis
    return LinkSpec(name=f"wearer_{seg.name}", mass=m, com=com, inertia=inertia, where=where)
