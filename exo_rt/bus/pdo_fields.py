"""A PDO's quantities as a field table, and the one decoder of it.

A drive's mapping (:class:`exo_rt.bus.pdo.Layout`, from the bus file or the drive's own
0x1600/0x1A00) becomes one :data:`FIELD` row per quantity the controller reads or writes:
its byte offset in the PDO (−1: not mapped), its size in bytes, its signedness and its
integer range. Every reader of a CiA 402 PDO goes through :func:`read` on such a table,
whatever the mapping: the cycle's compiled decoder (:func:`exo_rt.bus.pdo_cycle.take_tpdos`,
for every port, python-can's included), the CAN-log decoder (replay of a bare log) and
:func:`exo_rt.bus.cia402.decode_tpdo1`; :func:`write` is the cycle's one RPDO encoder.
"""

from __future__ import annotations

import numpy as np

from exo_rt.bus import pdo
from exo_rt.jit import njit

FIELD = np.dtype([("offset", np.int64), ("size", np.int64), ("signed", np.bool_),
                  ("low", np.int64), ("high", np.int64)])  # offset and size in bytes

# quantities of a TPDO and of an RPDO: the columns of a drive's fields row
(TPDO_STATUSWORD, TPDO_POSITION, TPDO_CURRENT, TPDO_VELOCITY, TPDO_DIGITAL_INPUTS,
 TPDO_ERROR_CODE) = range(6)
TPDO_QUANTITIES = 6
RPDO_CONTROLWORD, RPDO_TARGET = range(2)  # quantities of an RPDO
RPDO_QUANTITIES = 2
TPDO_NAMES = ((pdo.STATUSWORD,), (pdo.POSITION,), pdo.CURRENT_KINDS, (pdo.VELOCITY,),
              (pdo.DIGITAL_INPUTS,), (pdo.ERROR_CODE,))
RPDO_NAMES = ((pdo.CONTROLWORD,), (pdo.TARGET_TORQUE,))


def fields(layout: pdo.Layout, quantities: tuple[tuple[str, ...], ...]) -> np.ndarray:
    """One drive's row: where each quantity (any of the names in its tuple) sits in the PDO."""
    row = np.zeros(len(quantities), FIELD)
    row["offset"] = -1
    at = 0
    for e in layout.entries:
        for q, names in enumerate(quantities):
            if e.kind in names:
                row[q] = (at, e.bits // 8, e.signed, e.low, e.high)
        at += e.bits // 8
    return row


def tpdo_fields(layout: pdo.Layout) -> np.ndarray:
    """A TPDO's row (:data:`TPDO_NAMES`' columns)."""
    return fields(layout, TPDO_NAMES)


def rpdo_fields(layout: pdo.Layout) -> np.ndarray:
    """An RPDO's row (:data:`RPDO_NAMES`' columns)."""
    return fields(layout, RPDO_NAMES)


@njit(cache=True)
def read(data, r, f):
    """The little-endian integer field ``f`` holds in row r of ``data`` (0 where it is not
    mapped)."""
    if f.offset < 0:
        return 0
    x = 0
    for b in range(f.size - 1, -1, -1):
        x = (x << 8) | data[r, f.offset + b]
    if f.signed and x >= 1 << (8 * f.size - 1):
        x -= 1 << (8 * f.size)
    return x


@njit(cache=True)
def write(out, r, f, x):
    """``x`` into field ``f`` of row r of ``out``, little-endian (nothing where it is not
    mapped)."""
    if f.offset < 0:
        return
    for b in range(f.size):
        out[r, f.offset + b] = (x >> (8 * b)) & 0xFF


@njit(cache=True)
def _read_row(data, row, out):
    for q in range(row.shape[0]):
        out[q] = read(data, 0, row[q])


def decode(data: bytes, row: np.ndarray, size: int) -> np.ndarray | None:
    """One PDO's quantities (int64, in ``row``'s columns; 0 where not mapped) by the cycle's
    decoder, for code that reads frames one at a time (a CAN log); None for a frame of
    another length than ``size`` (the cycle flags it malformed)."""
    if len(data) != size:
        return None
    out = np.zeros(row.shape[0], np.int64)
    _read_row(np.frombuffer(bytes(data), np.uint8)[None, :], row, out)
    return out


_DEFAULT: dict[str, np.ndarray] = {}


def default_tpdo() -> np.ndarray:
    """The default mapping's TPDO row (:data:`exo_rt.bus.pdo.DEFAULT_PROFILE`; made once)."""
    if "tpdo" not in _DEFAULT:
        _DEFAULT["tpdo"] = tpdo_fields(pdo.Layout(pdo.DEFAULT_PROFILE.tpdo))
    return _DEFAULT["tpdo"]


def default_rpdo() -> np.ndarray:
    """The default mapping's RPDO row (made once)."""
    if "rpdo" not in _DEFAULT:
        _DEFAULT["rpdo"] = rpdo_fields(pdo.Layout(pdo.DEFAULT_PROFILE.rpdo))
    return _DEFAULT["rpdo"]
