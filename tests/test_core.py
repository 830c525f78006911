"""Fast deterministic unit tests of the core model."""

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from dpharness import (
    AddRemove,
    ApproxDP,
    BoundedChange,
    DiscreteLaw,
    Event,
    Finite,
    InputSpec,
    IntegerRange,
    ParameterError,
    PureDP,
    RealBox,
    RealInterval,
    RenyiDP,
    Substitute,
    exact,
)


def test_exact_reads_floats_as_their_binary_value():
    assert exact(0.1) == sp.Rational(*Fraction(0.1).as_integer_ratio())  # the double the code computes with
    assert exact(0.1) != sp.Rational(1, 10)
    assert exact(0.25) == sp.Rational(1, 4)
    assert exact(Fraction(1, 3)) == sp.Rational(1, 3)
    assert exact(2) == 2
    with pytest.raises(ParameterError, match="Float"):
        exact(sp.Float(0.5))


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "1", True])
def test_pure_dp_rejects_bad_epsilon(bad):
    with pytest.raises(ParameterError, match="epsilon="):
        PureDP(bad)


@pytest.mark.parametrize("bad", [-0.1, 1, 1.5, math.nan])
def test_approx_dp_rejects_bad_delta(bad):
    with pytest.raises(ParameterError, match="delta="):
        ApproxDP(1, bad)


def test_renyi_conversion():
    c = RenyiDP(2, 0.5).to_approx(1e-5)
    assert c.epsilon == pytest.approx(0.5 + math.log(1e5))
    with pytest.raises(ParameterError, match="alpha="):
        RenyiDP(1, 0.5)


def test_relations():
    assert AddRemove().is_neighbour(np.array([1, 2, 3]), np.array([1, 3]))
    assert not AddRemove().is_neighbour(np.array([1, 2, 3]), np.array([1, 4]))
    assert Substitute().is_neighbour(np.array([1, 2, 3]), np.array([1, 5, 3]))
    assert not Substitute().is_neighbour(np.array([1, 2, 3]), np.array([0, 5, 3]))
    assert BoundedChange(1, "l1").is_neighbour(np.array([0.0, 0.0]), np.array([0.5, 0.5]))
    assert not BoundedChange(1, "l1").is_neighbour(np.array([0.0, 0.0]), np.array([0.6, 0.5]))
    assert BoundedChange(1, "linf").is_neighbour(np.array([0.0, 0.0]), np.array([1.0, 1.0]))


def test_input_spec_validation_names_the_argument():
    spec = InputSpec(IntegerRange(0, 10), AddRemove(), "dataset")
    spec.validate_pair(np.array([1, 2]), np.array([1]))
    with pytest.raises(ParameterError, match="neighbor"):
        spec.validate("neighbor", np.array([[1, 2]]))
    with pytest.raises(ParameterError, match="outside the domain"):
        spec.validate("data", np.array([11]))
    with pytest.raises(ParameterError, match="identical"):
        spec.validate_pair(np.array([1, 2]), np.array([1, 2]))
    with pytest.raises(ParameterError, match="not neighbours"):
        spec.validate_pair(np.array([1, 2]), np.array([3]))
    rec = InputSpec(Finite((0, 1, 2)), Substitute(), "record")
    with pytest.raises(ParameterError, match="single record"):
        rec.validate("data", [0, 1])
    with pytest.raises(ParameterError, match="BoundedChange"):
        InputSpec(RealInterval(), AddRemove(), "vector")
    box = InputSpec(RealBox(0, 1, 2), Substitute(), "dataset")
    box.validate_pair(np.array([[0, 0.5], [1, 1]]), np.array([[0, 0.5], [0, 0]]))


def test_discrete_law_and_events():
    law = DiscreteLaw(outcomes=(0, 1), probs=(sp.Rational(1, 4), sp.Rational(3, 4)))
    assert np.allclose(law.prob(np.array([0, 1, 2])), [0.25, 0.75, 0.0])
    assert Event.interval(0, 1).contains(np.array([-1.0, 0.5, 2.0])).tolist() == [False, True, False]
    assert Event.point((1, 0)).contains(np.array([[1, 0], [0, 1]])).tolist() == [True, False]


def test_import_and_plugin_load_no_heavy_libraries():
    """`import dpharness`, the CLI module and the pytest plugin import no sympy, z3 or matplotlib."""
    import subprocess
    import sys

    code = (
        "import sys, dpharness, dpharness.cli, dpharness.pytest_plugin, dpharness.testing; "
        "print(sorted(m for m in ('sympy', 'z3', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out
