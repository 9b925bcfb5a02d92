"""A controller file's gains per joint (``joints:`` in ``configs/controllers/*.yaml``): the
schema of the keys, and the one declaration of the gains record the control laws read by
field name (:data:`exo_rt.control.registry.GAINS` is made from :class:`Gains`' keys). A leaf
of the schema: the control package imports it without importing the controller file's
schema (which names the registered laws)."""

from __future__ import annotations

import math

from exo_rt.schema.core import Num, key, section

MAGNITUDE = Num(ge=0, inf=True)
FIX = "gains and limits are magnitudes"


def gain(default: float = 0.0, unit: str = "", doc: str = "", gt: float | None = None,
         **kw):
    """A gain or limit: a magnitude (≥ 0, or > ``gt``), ``.inf`` allowed."""
    kind = MAGNITUDE if gt is None else Num(gt=gt, inf=True)
    return key(kind, default, unit=unit, doc=doc, fix=FIX, **kw)


def frac(default: float, doc: str):
    """A fraction of the stride, 0–1."""
    return key(Num(ge=0, le=1), default, unit="stride", doc=doc)


@section("the gains")
class Gains:
    """A joint's gains (omitted gains are 0); their units depend on the law (below)."""

    kp: float = gain(unit="N·m/rad or 1/s²", doc="proportional gain (pid, model_pid: N·m/rad; "
                                                 "computed_torque: 1/s²)")
    ki: float = gain(unit="N·m/(rad·s) or 1/s³", doc="integral gain")
    kd: float = gain(unit="N·m·s/rad or 1/s", doc="derivative gain (on the measurement)")
    i_limit: float = gain(math.inf, unit="N·m", doc="bound of the integral term's torque "
                                                    "(anti-windup)")
    torque_limit: float = gain(math.inf, unit="N·m", doc="output torque limit",
                               shown="the joint's effort limit")
    lam: float = gain(unit="1/s", doc="sliding_mode: the sliding surface s = ė + Λe",
                      name="lambda")
    k_switch: float = gain(unit="N·m", doc="sliding_mode: robust gain of the switching term")
    boundary: float = gain(1.0, unit="rad/s", doc="sliding_mode: boundary-layer width Φ",
                           gt=0)
    k_s: float = gain(unit="N·m·s/rad", doc="sliding_mode: linear feedback on s")
    assist: float = gain(doc="transparent: fraction of the wearer's torque along the gait "
                             "given as assistance")
    onset: float = frac(0.0, "phase_profile: where the torque lobe begins")
    peak: float = frac(0.0, "phase_profile: where it peaks")
    end: float = frac(0.0, "phase_profile: where it ends (a lobe may wrap past the stride's "
                           "end)")
    peak_torque: float = key(Num(), 0.0, unit="N·m", doc="phase_profile: the lobe's torque at "
                             "its peak, signed as the joint (0: no lobe)")
    onset_2: float = frac(0.0, "phase_profile: a second lobe's onset")
    peak_2: float = frac(0.0, "phase_profile: its peak")
    end_2: float = frac(0.0, "phase_profile: its end")
    peak_torque_2: float = key(Num(), 0.0, unit="N·m", doc="phase_profile: its torque at the "
                               "peak (0: none)")
    stiffness: float = gain(unit="N·m/rad", doc="impedance: stance (and standing) stiffness; "
                                                "assist_as_needed: the spring outside the "
                                                "tunnel")
    damping: float = gain(unit="N·m·s/rad", doc="impedance: stance (and standing) damping; "
                                                 "assist_as_needed: the damper outside the "
                                                 "tunnel (on the error's rate)")
    equilibrium: float = key(Num(), 0.0, unit="rad", doc="impedance: stance (and standing) "
                                                          "equilibrium angle")
    swing_stiffness: float = gain(unit="N·m/rad", doc="impedance: swing stiffness")
    swing_damping: float = gain(unit="N·m·s/rad", doc="impedance: swing damping")
    swing_equilibrium: float = key(Num(), 0.0, unit="rad", doc="impedance: swing "
                                                                "equilibrium angle")
    stance_end: float = frac(0.6, "impedance: where swing begins (normal gait: toe-off at "
                                  "≈ 60 %)")
    tunnel: float = gain(unit="rad", doc="assist_as_needed: half-width of the free tunnel "
                                         "around the reference")
    assist_limit: float = gain(math.inf, unit="N·m", doc="assist_as_needed: largest restoring "
                                                          "torque")


# each gain key → its field of a gains record (exo_rt.control.registry.GAINS): the
# attribute's name here (`lambda`, a Python keyword, is `lam`)
COLUMNS = {k: f.name for k, f in Gains.KEYS.items()}
