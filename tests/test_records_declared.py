"""Every record the one compiled call takes is declared by name: the call's argument, walked
field by field down to its arrays, holds only records declared with ``exo_rt.structs.declare``
(their fields as declared), arrays of numbers or of named numpy records, numbers, functions and
homogeneous tuples of declared records (the buses) — never a positional tuple. The cycle log's
row is written by its declared column names, the gains record is the schema's, and a law's
feed-forward is its registry entry's flag, not its code."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from numba import types
from numba.experimental import structref

from exo_rt import structs
from exo_rt.control import laws, registry
from exo_rt.control.config import load_controller
from exo_rt.cycle import cycle_call as cc
from exo_rt.cycle import layout
from exo_rt.cycle import step as cy
from exo_rt.cycle.states import SAFE
from exo_rt.record import recorder
from exo_rt.schema.gains import Gains
from exo_rt.sim.mil import MIL_SAFETY
from firmware_bridge import fastdecode as fd

CONTROLLERS = Path(__file__).resolve().parents[1] / "configs" / "controllers"


def undeclared(t: types.Type, where: str, seen: set | None = None) -> list[str]:
    """What in the numba type ``t`` (a record's field ``where``) is not declared by name."""
    seen = set() if seen is None else seen
    if isinstance(t, types.StructRef):
        if t in seen:
            return []
        seen.add(t)
        proxy = structs.DECLARED.get(type(t))
        if proxy is None:
            return [f"{where}: {type(t).__name__} is not declared with structs.declare"]
        names = tuple(name for name, _ in t.field_dict.items())
        if names != proxy.FIELDS:
            return [f"{where}: fields {names} are not {proxy.__name__}'s {proxy.FIELDS}"]
        return [bad for name, ft in t.field_dict.items()
                for bad in undeclared(ft, f"{where}.{name}", seen)]
    if isinstance(t, types.Array):  # a preallocated array: of numbers, or of named records
        ok = isinstance(t.dtype, (types.Number, types.Boolean, types.Record))
        return [] if ok else [f"{where}: an array of {t.dtype}"]
    if isinstance(t, types.UniTuple) and isinstance(t.dtype, types.StructRef):
        return undeclared(t.dtype, f"{where}[b]", seen)  # the same record, one per bus
    if isinstance(t, types.BaseTuple):
        return [f"{where}: a positional tuple {t}"]
    if isinstance(t, (types.Number, types.Boolean, types.NoneType, types.FunctionType)):
        return []
    return [f"{where}: {t} is neither a declared record nor an array"]


@pytest.mark.parametrize("drives", [[], [2], [2, 3]], ids=["python-buses", "one-bus",
                                                          "two-buses"])
def test_every_record_of_the_one_call_is_declared(drives):
    fields = cc.argument_types(drives)
    assert [name for name, _ in fields] == list(cc.FIELDS)
    assert undeclared(cc.CycleArgsType(fields), "a") == []
    kinds = {type(ft).__name__ for _, ft in fields}
    assert ("NoneType" in kinds) == (not drives)  # (the buses and the board Python's)
    if drives:  # the bus and board records are there, each by name
        by_name = dict(fields)
        assert structs.DECLARED[type(by_name["board"])] is cc.BoardPoll
        assert len(by_name["buses"]) == len(drives)


def test_a_positional_tuple_or_an_undeclared_record_is_found():
    class LooseType(types.StructRef):
        pass

    structref.register(LooseType)
    args = dict(cc.argument_types([]))
    args["board"] = types.Tuple((types.int64, types.Array(types.uint8, 1, "C")))
    found = undeclared(cc.CycleArgsType(list(args.items())), "a")
    assert found == ["a.board: a positional tuple Tuple(int64, array(uint8, 1d, C))"]
    loose = LooseType([("x", types.float64)])
    assert undeclared(loose, "a.x") == ["a.x: LooseType is not declared with structs.declare"]


def test_io_is_one_record_and_pythons_float_view_of_it():
    values = np.arange(cc.IO_WIDTH, dtype=np.float64)
    rec = cc.io_record(values)
    assert rec.dtype == cc.IO and np.shares_memory(rec, values)
    for name in cc.IO.names:  # each Python index is its field's place in the record
        assert rec[0][name] == values[cc.io_slot(name)]
    assert (cc.IO_K, cc.IO_STAGE, cc.IO_PY_BUSES) == (0, 1, cc.IO_WIDTH - 1)
    with pytest.raises(TypeError):
        cc.io_record(np.zeros(cc.IO_WIDTH - 1))


def test_rows_of_v_are_declared_once():
    assert layout.V_WIDTH == len(layout.ROWS) == len(set(layout.ROWS))
    named = {k: v for k, v in vars(layout).items() if k.startswith("V_") and k != "V_WIDTH"}
    assert sorted(named.values()) == list(range(layout.V_WIDTH))  # every row, each once


@pytest.fixture(scope="module")
def cycle(exo_leg, exo_leg_alone):
    cfg = load_controller(CONTROLLERS / "pid.yaml", exo_leg)
    return cy.build(exo_leg, exo_leg_alone, cfg, MIL_SAFETY, dt=1e-3, history=1)


def test_a_cycle_holds_only_its_declared_attributes(cycle):
    assert not hasattr(cycle, "__dict__")
    for name in cy.Cycle.__slots__:  # every one set by build
        getattr(cycle, name)
    for i, name in enumerate(layout.ROWS):  # the joint vectors: views of v's rows by name
        assert np.shares_memory(getattr(cycle, name), cycle.v[i])
    with pytest.raises(AttributeError):
        cycle.undeclared = 1.0


def test_the_record_is_written_by_its_columns_names(cycle):
    """Each column of the cycle log's row holds its own source: distinct values put in every
    source, the row read back by the declared column names."""
    c = cycle.fresh(1)
    n = c.n
    c.v[:] = np.arange(layout.V_WIDTH * n, dtype=float).reshape(layout.V_WIDTH, n) + 0.25
    for i, name in enumerate(layout.SCALARS.names):
        c.s[name] = 1000.0 + i
    for i, name in enumerate(layout.SEGMENT.names):
        c.seg[name] = 2000.0 + i
    c.s["state"] = SAFE
    c.flags[:] = np.arange(n) + 7
    c.gait[0]["phase"], c.gait[0]["omega"] = 0.125, 3.0
    c.gait[0]["walking"], c.gait[0]["heels"] = 1.0, 9.0
    c.s["slot"], c.s["hist"] = -1.0, 0.0  # (not recording: the record into the history's row)
    board = np.zeros(fd.D_WIDTH, np.int64)  # the board's decoder: 3 sensors of the 4 recorded
    board[fd.D_PRESSURE_N], board[fd.D_N_SENSORS] = 5, 3
    board[fd.D_SENSORS:fd.D_SENSORS + 5] = [11, 12, 13, 14, 15]
    c.bind_board(board)
    c.set_hist(np.full((1, recorder.row_width(recorder.row_columns(n))), np.nan))
    cy._keep(c.data)
    row = c.hist[0]
    cols = recorder.row_columns(n)
    vectors = {"q": "q", "qd": "qd", "q_ref": "qr", "current": "i_meas", "command": "cur",
               "torque": "tau", "qd_ref": "qdr", "level": "level", "winding": "winding",
               "derate": "derate", "drive_temp": "reported_temp"}
    scalars = {"t": "t", "cycle": "k", "state": "state", "cause": "cause",
               "overrun_streak": "overrun_streak", "board": "board", "wake_us": "wake_us",
               "compute_us": "compute_us", "overruns": "overruns", "sample_t": "sample_t",
               "phase": "phase"}
    gait = {"gait_phase": 0.125, "stride_hz": 3.0 / (2.0 * math.pi), "walking": 1.0,
            "heels": 9.0}
    soles = {"sole_frames": [5.0], "sole_sensors": [3.0], "soles": [11.0, 12.0, 13.0, 0.0]}
    assert set(vectors) | set(scalars) | set(gait) | set(soles) | {"flags", "stride"} == set(cols)
    for col, (a, b) in cols.items():
        got = row[a:b]
        if col in vectors:
            assert list(got) == list(getattr(c, vectors[col])), col
        elif col in scalars:
            assert got[0] == c.s[scalars[col]], col
        elif col == "stride":  # (the segment's)
            assert got[0] == c.seg["stride"], col
        elif col in gait:
            assert got[0] == gait[col], col
        elif col in soles:
            assert list(got) == soles[col], col
        else:
            assert list(got) == list(c.flags.astype(float)), col
    assert not np.isnan(row).any()  # every column written


def test_the_gains_record_is_the_schemas():
    assert registry.GAINS.names == tuple(f.name for f in Gains.KEYS.values())
    assert all(registry.GAINS[name] == np.float64 for name in registry.GAINS.names)


def _opts(name: str) -> np.ndarray:
    law = registry.get(name)
    o = np.zeros(1, registry.OPTIONS)
    o[0]["law"], o[0]["follows_wearer"] = law.code, law.follows_wearer
    o[0]["feeds_acceleration"] = law.feeds_acceleration
    return o


def test_what_a_law_feeds_forward_is_its_registry_entrys_flag():
    qddr, scratch = np.array([1.5, -2.0]), np.ones((6, 2))
    fed = {name: np.shares_memory(laws.friction_acceleration(_opts(name), qddr, scratch), qddr)
           for name in registry.NAMES.entries()}
    assert fed == {name: registry.get(name).feeds_acceleration for name in fed}
    # the tracking laws and transparent (which the wearer leads, yet feeds q̈_r forward) feed
    # it; the assistance laws do not — by the flag each registered, not by a code
    assert fed["pid"] and fed["transparent"] and not fed["impedance"]
    assert registry.get("transparent").follows_wearer
    o = _opts("impedance")
    o[0]["feeds_acceleration"] = True  # the flag alone decides, whatever the law's code
    assert np.shares_memory(laws.friction_acceleration(o, qddr, scratch), qddr)
    zero = laws.friction_acceleration(_opts("impedance"), qddr, scratch)
    assert list(zero) == [0.0, 0.0]
