"""The page's alarms, in the manner of IEC 60601-1-8 (alarm systems of medical electrical
equipment): each condition has a priority — **high** (immediate response: SAFE and its
cause, a fault, the E-stop pressed, the board or the run not heard), **medium** (prompt
response: a winding derating, an input lost — the crutch's buttons silent, the console's keys
lost, the controlling page silent), **low** (awareness: information such as a HOME waiting
for CONFIRM, GO to release, the session over) — and is shown in its priority's colour and
rhythm (high: red, flashing ≈ 2 Hz; medium: yellow, flashing ≈ 0.6 Hz; low: cyan, steady),
highest first. The page adds its own medium alarm when it does not hear the PC.
"""

from __future__ import annotations

HIGH, MEDIUM, LOW = "high", "medium", "low"
ORDER = {HIGH: 0, MEDIUM: 1, LOW: 2}


def alarms(config: dict | None, status: dict | None, tick: dict | None,
           channel_lost: str | None = None) -> list[dict]:
    """The alarms now, highest priority first: dicts ``{"priority", "text"}``. ``config``:
    the run's hello (joints, thermal levels), ``status`` / ``tick``: the last of each from the
    control process, ``channel_lost``: why the run is not heard (None while it is)."""
    out: list[tuple[str, str]] = []
    config, status, tick = config or {}, status or {}, tick or {}
    if channel_lost:
        out.append((HIGH, f"the run is not heard: {channel_lost}"))
    state = tick.get("state")
    if state == "SAFE":
        cause = tick.get("cause") or "a fault"
        out.append((HIGH, f"SAFE: {cause} — the drives are stopped; only the operator's reset "
                          "on the PC leaves SAFE"))
    if tick.get("estop"):
        out.append((HIGH, "E-stop pressed: motor power is cut"))
    if tick.get("board_lost"):
        out.append((HIGH, "the embedded board is not heard (its link): SAFE"))
    joints = config.get("joints") or []
    for j, (t, f) in enumerate(zip(tick.get("winding_C") or (), tick.get("derate") or (),
                                   strict=False)):
        name = joints[j] if j < len(joints) else f"joint {j}"
        if f < 1.0:
            out.append((MEDIUM, f"{name} derated: winding {t:.1f} °C, current limit at "
                                f"{100 * f:.0f} % — let the motor cool"))
    for why in tick.get("lost") or ():
        out.append((MEDIUM, f"input lost: {why}"))
    if status.get("pending"):
        out.append((LOW, f"{status['pending']} waits for CONFIRM"))
    if status.get("go_block"):
        out.append((LOW, "release GO on the crutch before the next motion"))
    if status.get("stopping"):
        out.append((LOW, f"{status.get('motion')} stopping: it ends at the end of the stride"))
    if status.get("ended") or state in ("STOPPING", "SHUTDOWN"):
        out.append((LOW, f"the session is over ({state or 'ended'})"))
    duration, t = status.get("duration"), tick.get("time")
    if duration is not None and t is not None and t > duration and state == "RUN":
        out.append((LOW, f"past the session's {duration:g} s: it is ended 30 s after it"))
    out.sort(key=lambda x: ORDER[x[0]])
    return [{"priority": p, "text": text} for p, text in out]
