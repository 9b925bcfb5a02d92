"""Hypothesis: well-formed random trees always load; malformed files only ever raise ModelError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exo_rt.errors import ExoError
from exo_rt.model import load_mechanism
from tests.treegen import random_tree_specs, specs_urdf, specs_yaml

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _expected(specs):
    movable = [j for j in specs["joints"] if j["type"] != "fixed"]
    return len(movable), len(movable) + 1


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 20))
def test_random_trees_load_from_urdf_and_yaml(tmp_path, seed, n):
    specs = random_tree_specs(np.random.default_rng(seed), n)
    nq, nb = _expected(specs)
    (tmp_path / "t.urdf").write_text(specs_urdf(specs))
    (tmp_path / "t.yaml").write_text(specs_yaml(specs))
    a = load_mechanism(tmp_path / "t.urdf")
    b = load_mechanism(tmp_path / "t.yaml")
    assert (a.nq, a.n_bodies) == (nq, nb)
    np.testing.assert_allclose(a.packed, b.packed, rtol=1e-12, atol=1e-12)


def _mutate(text: str, data) -> str:
    lines = text.splitlines()
    op = data.draw(st.sampled_from(["delete", "swap", "number", "truncate", "insert", "dup"]))
    i = data.draw(st.integers(0, max(0, len(lines) - 1)))
    if op == "delete":
        del lines[i]
    elif op == "swap" and len(lines[i]) > 1:
        k = data.draw(st.integers(0, len(lines[i]) - 2))
        s = lines[i]
        lines[i] = s[:k] + s[k + 1] + s[k] + s[k + 2:]
    elif op == "number":
        lines[i] = lines[i].replace("0.", data.draw(st.sampled_from(["x.", "-", "nan", "1e999"])))
    elif op == "truncate":
        cut = data.draw(st.integers(0, len(text)))
        return text[:cut]
    elif op == "insert":
        lines.insert(i, data.draw(st.text(max_size=30)))
    else:
        lines.insert(i, lines[i])
    return "\n".join(lines)


@pytest.mark.parametrize(("suffix", "writer"), [(".yaml", specs_yaml), (".urdf", specs_urdf)])
@SETTINGS
@given(seed=st.integers(0, 2**16), data=st.data())
def test_mutated_files_raise_only_model_errors(tmp_path, suffix, writer, seed, data):
    specs = random_tree_specs(np.random.default_rng(seed), 4)
    path = tmp_path / f"m{suffix}"
    path.write_text(_mutate(writer(specs), data))
    try:
        load_mechanism(path)
    except ExoError:
        pass


@SETTINGS
@given(raw=st.binary(max_size=300))
def test_random_bytes_raise_only_model_errors(tmp_path, raw):
    for suffix in (".yaml", ".urdf"):
        path = tmp_path / f"r{suffix}"
        path.write_bytes(raw)
        try:
            load_mechanism(path)
        except ExoError:
            pass
