"""Errors a user can cause (configs, model files, logs, buses).

Every such error is one clear sentence: what is wrong, where (``file:line`` and the key),
and how to fix it. The CLI prints ``str(err)`` and exits non-zero with no traceback.
Programming errors stay ordinary Python exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Where:
    """A place in a user's file: path, 1-based line (0 if unknown) and the key path."""

    file: str
    line: int = 0
    key: str = ""

    def __str__(self) -> str:
        loc = self.file if self.line <= 0 else f"{self.file}:{self.line}"
        return f"{loc}: {self.key}" if self.key else loc


class ExoError(Exception):
    """Base of all user-facing errors: ``what`` at ``where``, and ``fix`` says how to mend it."""

    def __init__(self, what: str, where: Where | None = None, fix: str = "") -> None:
        self.what = what
        self.where = where
        self.fix = fix
        msg = f"{where}: {what}" if where is not None else what
        if fix:
            msg = f"{msg} — {fix}"
        super().__init__(msg)


class ConfigError(ExoError):
    """A YAML configuration (controller, bus, top config) is malformed or inconsistent."""


class ModelError(ExoError):
    """A mechanism description (URDF or robot YAML) is malformed or physically impossible."""


class BusError(ExoError):
    """A CAN bus cannot be opened or configured, or a drive does not answer at start-up."""


class LogError(ExoError):
    """A log file or run folder cannot be read."""


class ComputeError(ExoError):
    """Compiled code raised where numba could only report it (a law or a plant called
    through its C wrapper, :mod:`exo_rt.unraisable`): what it computed is not trusted."""


@dataclass(frozen=True)
class ModelWarning:
    """A model that loads but is physically implausible (e.g. a CAD-exported inertia outside
    the triangle inequality): what, where (``file:line``) and the fix, as an error would say
    it. ``exo-rt check`` lists them; strict loading (``--strict``) refuses them."""

    what: str
    where: Where | None = None
    fix: str = ""

    def __str__(self) -> str:
        msg = f"{self.where}: {self.what}" if self.where is not None else self.what
        return f"{msg} — {self.fix}" if self.fix else msg

    def error(self, note: str = "") -> ModelError:
        """The same finding as a :class:`ModelError` (strict loading)."""
        return ModelError(self.what + note, self.where, self.fix)
