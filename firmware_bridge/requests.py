"""The vocabulary of a session, shared by every source of requests and every answer: what
can be asked (:data:`KINDS`), the answers (:data:`ANSWERS`), why a request is refused
(:data:`REASONS`), who asked (:data:`SOURCES`) and the crutch buttons (:data:`BUTTONS`).

The codes are the wire values of the board protocol's BUTTONS / ANSWER / MENU frames
(:mod:`firmware_bridge.protocol`, ``firmware_bridge/c/exo_bridge.h``): append, never
renumber. docs/sessions.md lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# --- what can be asked (a request's kind)
START = 1  # start a motion (by name; the board: the selected one, on GO's press)
STOP = 2  # end walking with the closing step / cut a motion that allows it
GO = 3  # GO pressed (progress a motion that needs GO held; the board also starts with it)
GO_RELEASE = 4  # GO released: a motion that needs GO held freezes smoothly
SPEED = 5  # walking speed (m/s), applied at the next stride boundary
STEP_LENGTH = 6  # step length (m) at the current speed (the cadence follows), next stride
LEVEL = 7  # assistance level (0–1 per leg), applied at the next stride boundary
CONFIRM = 8  # the operator confirms HOME (a start in no named posture)
NEXT = 9  # the crutch's selection: next possible motion
PREV = 10  # the crutch's selection: previous possible motion
MODE = 11  # the crutch's MODE button: the next speed of the profile's presets
END = 12  # end the session (from a posture: the run goes STOPPING → SHUTDOWN)
KINDS = {START: "start", STOP: "stop", GO: "go", GO_RELEASE: "go_release", SPEED: "speed",
         STEP_LENGTH: "step_length", LEVEL: "level", CONFIRM: "confirm", NEXT: "next",
         PREV: "prev", MODE: "mode", END: "end"}
BY_NAME = {v: k for k, v in KINDS.items()}

# --- answers
ACCEPTED = 1
REJECTED = 2
FINISHED = 3  # the motion a request started has ended (in its end posture)
ANSWERS = {ACCEPTED: "accepted", REJECTED: "rejected", FINISHED: "finished"}

# --- why a request is refused (REJECTED's reason; 0: none)
R_NONE = 0
R_NOT_FROM_HERE = 1  # the motion does not start at the current posture
R_BUSY = 2  # a motion runs: nothing else starts until it ends
R_GO_HELD = 3  # GO still held since the last posture was reached: release it first
R_UNKNOWN_MOTION = 4  # no motion of that name in the activities file
R_SPEED_RANGE = 5  # outside the wearer profile's speed range
R_STEP_RANGE = 6  # outside the wearer profile's step-length range
R_NOT_WALKING = 7  # a walking parameter or STOP while not walking
R_ONLY_HOME = 8  # the start posture is none of the named ones: only HOME is possible
R_NEEDS_CONFIRM = 9  # HOME needs the operator's confirmation first
R_NOT_ACTIVE = 10  # the controller is not running a session (READY, STOPPING, SAFE, …)
R_NOT_STOPPABLE = 11  # STOP may not cut this motion (it ends where it was going)
R_LEVEL_RANGE = 12  # an assistance level outside 0–1
R_ALREADY = 13  # already asked (a second STOP while the closing step is due)
R_NOT_IN_POSTURE = 14  # END only from a posture, not during a motion
R_NOTHING_TO_CONFIRM = 15  # CONFIRM with no HOME waiting for it
R_NOT_SELECTABLE = 16  # NEXT/PREV/MODE while a motion runs
R_BEYOND_JOINTS = 17  # the motion would ask more of a joint than its bounds (range, speed,
# acceleration: exo_rt.session.envelope) — a slower walk, a longer step, or another motion
R_SESSION_FAULT = 18  # the session's own code failed: it is ending (the guard's STOP)
R_WINDING_HOT = 19  # a motor's winding is past its warning level: no walk until it cools
R_WINDING_WARM = 20  # a motor's winding is past the level a walk slows at: no faster speed
REASONS = {R_NONE: "none", R_NOT_FROM_HERE: "not_from_here", R_BUSY: "busy",
           R_GO_HELD: "go_held", R_UNKNOWN_MOTION: "unknown_motion",
           R_SPEED_RANGE: "speed_range", R_STEP_RANGE: "step_range",
           R_NOT_WALKING: "not_walking", R_ONLY_HOME: "only_home",
           R_NEEDS_CONFIRM: "needs_confirm", R_NOT_ACTIVE: "not_active",
           R_NOT_STOPPABLE: "not_stoppable", R_LEVEL_RANGE: "level_range",
           R_ALREADY: "already", R_NOT_IN_POSTURE: "not_in_posture",
           R_NOTHING_TO_CONFIRM: "nothing_to_confirm", R_NOT_SELECTABLE: "not_selectable",
           R_BEYOND_JOINTS: "beyond_joints", R_SESSION_FAULT: "session_fault",
           R_WINDING_HOT: "winding_hot", R_WINDING_WARM: "winding_warm"}

# --- who asked
BOARD, CONSOLE, SCRIPT, REPLAY, SESSION, WEB = 1, 2, 3, 4, 5, 6
SOURCES = {BOARD: "board", CONSOLE: "console", SCRIPT: "script", REPLAY: "replay",
           SESSION: "session",  # SESSION: the session itself (its guard, a frozen move's end)
           WEB: "web"}  # WEB: the therapist's web page (exo_rt.web), with the page's id

# --- the crutch buttons (bits of the BUTTONS frame's mask)
B_GO, B_STOP, B_NEXT, B_PREV, B_MODE = 1, 2, 4, 8, 16
BUTTONS = {B_GO: "go", B_STOP: "stop", B_NEXT: "next", B_PREV: "prev", B_MODE: "mode"}
BUTTON_PERIOD_S = 0.02  # the board sends its buttons' state this often (and on a change)
BUTTON_SILENCE_S = 1.0  # silent longer while walking: stop at the end of the stride


@dataclass
class Request:
    """One request: its ``kind`` (a code of :data:`KINDS`), who asked (:data:`SOURCES`), the
    control cycle it reached the machine in, and its argument: a motion's name (START), a
    value (SPEED m/s, STEP_LENGTH m, LEVEL 0–1), the legs for LEVEL (None: all)."""

    kind: int
    source: int
    cycle: int = 0
    motion: str | None = None
    value: float | None = None
    legs: tuple[str, ...] | None = None
    note: str | None = None  # why, where the source asked by itself (the buttons' silence)
    client: str | None = None  # which page asked (source WEB: the web console's client id)

    def as_dict(self) -> dict:
        out = {"request": KINDS[self.kind], "source": SOURCES[self.source]}
        if self.note is not None:
            out["note"] = self.note
        if self.client is not None:
            out["client"] = self.client
        if self.motion is not None:
            out["motion"] = self.motion
        if self.value is not None:
            out["value"] = self.value
        if self.legs is not None:
            out["legs"] = list(self.legs)
        return out


@dataclass
class Answer:
    """The machine's answer to a :class:`Request`: :data:`ACCEPTED` / :data:`REJECTED` (with
    its :data:`REASONS` code) / :data:`FINISHED` (a motion ended, ``posture`` reached)."""

    answer: int
    kind: int
    reason: int = R_NONE
    motion: str | None = None
    posture: str | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = {"answer": ANSWERS[self.answer], "request": KINDS[self.kind]}
        if self.answer == REJECTED:
            out["reason"] = REASONS[self.reason]
        if self.motion is not None:
            out["motion"] = self.motion
        if self.posture is not None:
            out["posture"] = self.posture
        out.update(self.extra)
        return out
