"""A joint's torque at a motor current: one computation for every figure that states it
(``exo-rt check``, the bench's pre-flight checklist), so that no two of them disagree."""

from __future__ import annotations


def joint_torque(tr, current: float) -> float:
    """The torque (N·m) joint ``tr.joint`` gets from a motor current (A) when the motor
    drives the load through its harmonic drive: N·k_M·|i|·η, with N the reduction, k_M the
    motor's torque constant and η the drive's forward efficiency (robot file:
    ``transmissions[].drive.efficiency``; the wave generator's friction takes the rest).
    Without η it would be the motor's torque referred to the joint, which the joint never
    sees while the drive carries a load."""
    return tr.ratio * tr.motor.torque_constant * abs(current) * tr.drive.efficiency


def limit_text(tr, current: float) -> str:
    """``'20 A → 56.6 N·m at the joint'``: a current limit and the joint torque it gives."""
    return f"{current:g} A → {joint_torque(tr, current):.1f} N·m at the joint"
