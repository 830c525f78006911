"""Property tests of ``dpharness.strategies``: every generated pair is a pair of neighbours under
the declared relation, stays in the record domain, and the strategies reach the cases that matter
(both directions of add/remove, empty data sets, changes that use the whole sensitivity)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpharness import (
    AddRemove,
    BoundedChange,
    Finite,
    IntegerRange,
    ParameterError,
    RealBox,
    RealInterval,
    Substitute,
)
from dpharness.strategies import (
    mechanism_inputs,
    neighboring_datasets,
    neighboring_records,
    records_from_domain,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DOMAINS = [Finite((0, 1, 2)), IntegerRange(-3, 3), RealInterval(0, 1), RealInterval(), RealBox(-1, 1, 2)]


@pytest.mark.parametrize("domain", DOMAINS, ids=lambda d: type(d).__name__)
@pytest.mark.parametrize("relation", [AddRemove(), Substitute()], ids=["add_remove", "substitute"])
def test_dataset_pairs_are_neighbours(domain, relation):
    @FAST
    @given(neighboring_datasets(records=domain, relation=relation, max_size=6))
    def check(pair):
        data, neighbor = pair
        assert relation.is_neighbour(data, neighbor)
        for side in (data, neighbor):
            if len(side):
                assert np.all(domain.contains(side))

    check()


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
@pytest.mark.parametrize(
    "domain, sensitivity",
    [
        (RealInterval(), 1),
        (RealInterval(), 0.5),
        (RealInterval(-2, 2), 3),
        (IntegerRange(-10, 10), 1),
        (IntegerRange(-10, 10), 3),
    ],
    ids=["reals-1", "reals-0.5", "bounded-3", "integers-1", "integers-3"],
)
def test_vector_pairs_respect_the_bound(norm, sensitivity, domain):
    relation = BoundedChange(sensitivity, norm)

    @FAST
    @given(neighboring_datasets(records=domain, relation=relation, dim=3))
    def check(pair):
        a, b = pair
        assert a.shape == b.shape == (3,)
        assert not np.array_equal(a, b)
        assert relation.distance(a, b) <= sensitivity
        assert relation.is_neighbour(a, b)
        assert np.all(domain.contains(a)) and np.all(domain.contains(b))

    check()


def test_record_pairs_differ():
    @FAST
    @given(neighboring_datasets(records=Finite((0, 1)), relation=Substitute(), shape="record"))
    def check(pair):
        assert pair[0] != pair[1] and {pair[0], pair[1]} <= {0, 1}

    check()


def test_user_strategies_as_records():
    @FAST
    @given(neighboring_datasets(records=st.integers(0, 4), relation=AddRemove(), min_size=2, max_size=4))
    def check(pair):
        a, b = pair
        assert AddRemove().is_neighbour(a, b)
        assert 2 <= min(len(a), len(b)) <= 4

    check()


def test_strategies_reach_the_edge_cases():
    seen = {"bigger_first": False, "smaller_first": False, "empty": False}
    full = []

    @settings(max_examples=200, deadline=None)
    @given(neighboring_datasets(records=IntegerRange(0, 3), relation=AddRemove(), max_size=3))
    def add_remove(pair):
        a, b = pair
        seen["bigger_first" if len(a) > len(b) else "smaller_first"] = True
        seen["empty"] |= min(len(a), len(b)) == 0

    @settings(max_examples=200, deadline=None)
    @given(neighboring_datasets(records=IntegerRange(-5, 5), relation=BoundedChange(2, "l1"), dim=2))
    def bounded(pair):
        full.append(BoundedChange(2, "l1").distance(*pair))

    add_remove()
    bounded()
    assert all(seen.values()), seen
    assert max(full) == 2  # integer changes use the whole sensitivity


class _Spec:
    def __init__(self, spec):
        self.input_spec = spec


def test_mechanism_inputs_reads_the_input_spec():
    from dpharness import InputSpec

    spec = InputSpec(RealInterval(0, 1), Substitute(), "dataset", size=4)

    @FAST
    @given(mechanism_inputs(_Spec(spec)))
    def check(pair):
        spec.validate_pair(*pair)
        assert len(pair[0]) == len(pair[1]) == 4

    check()
    vec = InputSpec(RealInterval(), BoundedChange(1, "l2"), "vector", dim=5)

    @FAST
    @given(mechanism_inputs(_Spec(vec)))
    def check_vec(pair):
        vec.validate_pair(*pair)

    check_vec()


def test_catalog_mechanisms_accept_generated_pairs():
    """Every registered mechanism's input spec validates the pairs drawn for it."""
    from dpharness import catalog

    mechanisms = [cls() for cls in catalog(gallery=None).values()]
    assert mechanisms
    for m in mechanisms:
        spec = m.input_spec

        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
        @given(
            mechanism_inputs(m, max_size=5) if spec.shape == "dataset" and spec.size is None else mechanism_inputs(m)
        )
        def check(pair):
            spec.validate_pair(*pair)

        check()


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"records": IntegerRange(0, 3)}, "relation=None"),
        ({"relation": AddRemove()}, "records=None"),
        ({"records": 5, "relation": AddRemove()}, "records=5"),
        ({"records": IntegerRange(0, 3), "relation": AddRemove(), "shape": "vector"}, "shape='vector'"),
        ({"records": IntegerRange(0, 3), "relation": AddRemove(), "shape": "record"}, "shape='record'"),
        ({"records": IntegerRange(0, 3), "relation": Substitute(), "max_size": 0}, "max_size=0"),
        ({"records": IntegerRange(0, 3), "relation": AddRemove(), "min_size": 3, "max_size": 2}, "max_size=2"),
    ],
)
def test_bad_arguments(kwargs, needle):
    with pytest.raises(ParameterError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        neighboring_datasets(**kwargs)


def test_records_from_domain_bounds_infinite_intervals():
    @FAST
    @given(records_from_domain(RealInterval(), bound=10.0))
    def check(x):
        assert -10 <= x <= 10

    check()
    with pytest.raises(ParameterError, match="bound="):
        records_from_domain(RealInterval(100, 200), bound=10.0)


def test_neighboring_records_from_a_strategy():
    @FAST
    @given(neighboring_records(st.sampled_from("abc")))
    def check(pair):
        assert pair[0] != pair[1]

    check()
