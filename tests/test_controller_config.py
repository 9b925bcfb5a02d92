"""Controller files: every shipped one loads; mistakes give one clear error with file:line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from exo_rt.control.config import load_controller
from exo_rt.errors import ConfigError
from exo_rt.model import load_mechanism

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def robot():
    return load_mechanism(ROOT / "configs" / "robots" / "exo_leg.yaml")


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "controllers").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_shipped_controllers_load(robot, path):
    if "12dof" in path.stem:  # a controller for the 12-joint robot names its joints
        robot = load_mechanism(ROOT / "configs" / "robots" / "exo_12dof.yaml")
    cfg = load_controller(path, robot)
    assert cfg.gains.shape[0] == robot.nq
    assert (cfg.current_limit <= 20.0).all()  # the drives' peak current


CASES = [
    ("unknown_law", "law: computed_torq  #<\n", "law", ["unknown law", "computed_torque"]),
    ("negative_gain", "law: pid\njoints:\n  hip: {kp: -5}  #<\n", "joints.hip.kp",
     ["≥ 0"]),
    ("missing_joint", "law: pid\njoints:\n  ankle: {kp: 5}  #<\n", "joints.ankle",
     ["unknown joint 'ankle'"]),
    ("unknown_key", "law: pid\njoints:\n  hip: {kpp: 5}  #<\n", "joints.hip.kpp",
     ["unknown key", "did you mean 'kp'"]),
    ("too_much_current", "law: pid\ncurrent_limit: 40  #<\n", "current_limit",
     ["exceeds", "peak"]),
    ("bad_reference", "law: pid\nreference: {type: walk}  #<\n", "reference.type",
     ["unknown reference type"]),
]


@pytest.mark.parametrize(("case", "text", "key", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_controller_files(tmp_path, robot, case, text, key, words):
    path = tmp_path / f"{case}.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as info:
        load_controller(path, robot)
    msg = str(info.value)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "#<" in s)
    assert f"{path}:{line}" in msg and key in msg, msg
    for w in words:
        assert w in msg, msg
