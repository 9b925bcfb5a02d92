"""Hypothesis: well-formed random trees always load; malformed files only ever raise ExoError.

(a) Random trees of 1–20 bodies (branches out of depth-first order, random axes and joint
rotations, revolute/continuous/prismatic/fixed joints, optionally mimic joints), written as
URDF and as robot YAML, load with the expected coordinates and bodies, and both files give
the same Mechanism arrays. (b) Random text, random bytes, line mutations of valid files and
random values put in place of valid ones never raise anything but
:class:`exo_rt.errors.ExoError`.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exo_rt.errors import ExoError, ModelError
from exo_rt.model import load_mechanism
from tests.treegen import random_tree_specs, specs_urdf, specs_yaml

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 20), mimic=st.booleans())
def test_random_trees_load_from_urdf_and_yaml(tmp_path, seed, n, mimic):
    specs = random_tree_specs(np.random.default_rng(seed), n, mimic=mimic)
    (tmp_path / "t.urdf").write_text(specs_urdf(specs))
    (tmp_path / "t.yaml").write_text(specs_yaml(specs))
    if specs["nq"] == 0:  # the base alone: nothing to control, a clear error
        for suffix in (".urdf", ".yaml"):
            with pytest.raises(ModelError, match="no movable joint"):
                load_mechanism(tmp_path / f"t{suffix}")
        return
    a = load_mechanism(tmp_path / "t.urdf")
    b = load_mechanism(tmp_path / "t.yaml")
    assert (a.nq, a.n_bodies) == (specs["nq"], specs["n_bodies"])
    assert list(a.joint_names) == list(b.joint_names) == specs["joint_names"]
    np.testing.assert_array_equal(a.packed, b.packed)
    for lim in ("lower", "upper", "velocity_limit", "effort_limit"):
        np.testing.assert_array_equal(getattr(a, lim), getattr(b, lim))


def _loads_or_exo_error(path) -> None:
    """Load ``path``; a user error is fine, anything else propagates and fails the test."""
    try:
        load_mechanism(path)
    except ExoError:
        pass


def _mutate_lines(text: str, data) -> str:
    lines = text.splitlines()
    if not lines:
        return text + data.draw(st.text(max_size=30))
    op = data.draw(st.sampled_from(["delete", "swap", "number", "truncate", "insert", "dup"]))
    i = data.draw(st.integers(0, max(0, len(lines) - 1)))
    if op == "delete":
        del lines[i]
    elif op == "swap" and len(lines[i]) > 1:
        k = data.draw(st.integers(0, len(lines[i]) - 2))
        s = lines[i]
        lines[i] = s[:k] + s[k + 1] + s[k] + s[k + 2:]
    elif op == "number":
        lines[i] = lines[i].replace(
            "0.", data.draw(st.sampled_from(["x.", "-", "nan", "1e999", "'0.", "[0.", ""])))
    elif op == "truncate":
        return text[:data.draw(st.integers(0, len(text)))]
    elif op == "insert":
        lines.insert(i, data.draw(st.text(max_size=30)))
    else:
        lines.insert(i, lines[i])
    return "\n".join(lines)


@pytest.mark.parametrize(("suffix", "writer"), [(".yaml", specs_yaml), (".urdf", specs_urdf)])
@SETTINGS
@given(seed=st.integers(0, 2**16), data=st.data())
def test_mutated_files_raise_only_exo_errors(tmp_path, suffix, writer, seed, data):
    specs = random_tree_specs(np.random.default_rng(seed), 4, mimic=True)
    path = tmp_path / f"m{suffix}"
    text = writer(specs)
    for _ in range(data.draw(st.integers(1, 3))):
        text = _mutate_lines(text, data)
    path.write_text(text)
    _loads_or_exo_error(path)


# any value a YAML file can hold, including the awkward ones
SCALARS = (st.none() | st.booleans() | st.integers(-10**20, 10**20)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
           | st.sampled_from(["base", "b1", "j1", "revolute", "fixed", "1e999", "-0.0",
                              math.nan, math.inf, -math.inf]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


def _paths(obj, prefix=()):
    """Every path (tuple of keys/indices) into a nested list/dict, the root excluded."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) \
        else ()
    for k, v in items:
        yield (*prefix, k)
        yield from _paths(v, (*prefix, k))


@pytest.mark.slow
@SETTINGS
@given(seed=st.integers(0, 2**16), data=st.data())
def test_wrong_values_in_yaml_raise_only_exo_errors(tmp_path, seed, data):
    """A random value (any type) in place of a valid one, or a key removed or added."""
    doc = yaml.safe_load(specs_yaml(random_tree_specs(np.random.default_rng(seed), 4)))
    path = data.draw(st.sampled_from(list(_paths(doc))))
    holder = doc
    for k in path[:-1]:
        holder = holder[k]
    op = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if op == "replace":
        holder[path[-1]] = data.draw(VALUES)
    elif op == "delete":
        del holder[path[-1]]
    elif isinstance(holder, dict):
        holder[data.draw(st.text(min_size=1, max_size=8))] = data.draw(VALUES)
    (tmp_path / "v.yaml").write_text(yaml.safe_dump(doc))
    _loads_or_exo_error(tmp_path / "v.yaml")


@SETTINGS
@given(seed=st.integers(0, 2**16), data=st.data())
def test_wrong_values_in_urdf_raise_only_exo_errors(tmp_path, seed, data):
    """A random attribute value, a removed attribute or a removed element."""
    root = ET.fromstring(specs_urdf(random_tree_specs(np.random.default_rng(seed), 4,
                                                      mimic=True)))
    parents = {c: p for p in root.iter() for c in p}
    el = data.draw(st.sampled_from([e for e in root.iter() if e is not root]))
    op = data.draw(st.sampled_from(["replace", "drop_attribute", "drop_element"]))
    if op == "drop_element":
        parents[el].remove(el)
    elif el.attrib:
        name = data.draw(st.sampled_from(sorted(el.attrib)))
        if op == "drop_attribute":
            del el.attrib[name]
        else:
            value = data.draw(st.text(max_size=12) | st.floats().map(repr)
                              | st.lists(st.floats(), max_size=4).map(
                                  lambda v: " ".join(map(repr, v))))
            el.attrib[name] = value
    (tmp_path / "v.urdf").write_bytes(ET.tostring(root))
    _loads_or_exo_error(tmp_path / "v.urdf")


@SETTINGS
@given(raw=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_random_bytes_and_text_raise_only_exo_errors(tmp_path, raw):
    for suffix in (".yaml", ".urdf"):
        path = tmp_path / f"r{suffix}"
        path.write_bytes(raw)
        _loads_or_exo_error(path)

