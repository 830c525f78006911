"""Unit and property tests of the auditor's event machinery: keys, key sets, proposers, float structure."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpharness.auditors import clopper_pearson_lower, clopper_pearson_upper, epsilon_lower_bound
from dpharness.auditors import events as ev
from dpharness.auditors import floats as fl


# --------------------------------------------------------------------------- keys and membership


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-(2**62), 2**62), max_size=300),
    st.lists(st.integers(-(2**62), 2**62), max_size=300),
    st.integers(0, 2**40),
)
def test_keyset_matches_isin(members, others, offset):
    s = np.array(members, dtype=np.int64)
    q = np.array(others + members[:50] + [m + 1 for m in members[:20]], dtype=np.int64)
    assert np.array_equal(ev.KeySet(s)(q), np.isin(q, s))
    small = (np.abs(s) % 5000).astype(np.int64) + offset  # small span: lookup table
    q2 = (np.abs(q) % 6000).astype(np.int64) + offset
    assert np.array_equal(ev.KeySet(small)(q2), np.isin(q2, small))


def test_row_keys_distinguish_rows_and_ignore_negative_zero():
    a = np.array([[0, 1], [1, 0], [0, 1], [1, 1]], dtype=np.int8)
    k = ev.row_keys(a)
    assert k[0] == k[2] and len(set(k.tolist())) == 3
    assert ev.row_keys(np.array([0.0]))[0] == ev.row_keys(np.array([-0.0]))[0]
    assert ev.output_kind(a) == "discrete-vector"
    assert ev.output_kind(np.zeros(3)) == "float"
    assert ev.output_kind(np.array(["a", "b"], dtype=object)) == "object"


# --------------------------------------------------------------------------- proposers


def test_discrete_proposer_finds_the_likelihood_ratio_set():
    rng = np.random.default_rng(0)
    a = rng.choice(4, 20_000, p=[0.4, 0.3, 0.2, 0.1])
    b = rng.choice(4, 20_000, p=[0.1, 0.2, 0.3, 0.4])
    events = ev.propose_discrete(a, b, max_events=10)
    sets = []
    probe = np.arange(4)
    for e in events:
        sets.append(frozenset(probe[e.contains(probe)].tolist()))
    assert frozenset({0}) in sets and frozenset({0, 1}) in sets and frozenset({3}) in sets


def test_threshold_and_interval_proposers_cover_the_optimum():
    rng = np.random.default_rng(1)
    a = rng.laplace(0, 1, 50_000)
    b = rng.laplace(1, 1, 50_000)
    th = ev.propose_thresholds(a, b, max_events=10)
    assert any("<=" in e.description for e in th)
    best = max(
        epsilon_lower_bound(int(e.contains(a).sum()), len(a), int(e.contains(b).sum()), len(b)).epsilon for e in th
    )
    assert best > 0.9
    iv = ev.propose_intervals(a, b, max_events=5)
    assert iv and all("output in [" in e.description for e in iv)


def test_atoms_proposer_finds_repeated_values():
    rng = np.random.default_rng(2)
    a = np.where(rng.random(10_000) < 0.3, 5.0, rng.normal(size=10_000))
    b = np.where(rng.random(10_000) < 0.05, 5.0, rng.normal(size=10_000))
    events = ev.propose_atoms(a, b, max_events=5)
    assert any(e.description == "output = 5.0" for e in events)


def test_pattern_and_projection_proposers():
    rng = np.random.default_rng(3)
    a = (rng.random((5_000, 3)) < 0.7).astype(np.int8)
    b = (rng.random((5_000, 3)) < 0.3).astype(np.int8)
    pats = ev.propose_discrete(a, b, max_events=8)
    assert any("pattern" in e.description for e in pats)
    feats = ev.propose_pattern_features(a, b, max_events=8)
    assert any("number of nonzero coordinates" in e.description for e in feats)
    proj = ev.propose_projections(a.astype(float), b.astype(float), max_events=8)
    assert any("projection" in e.description for e in proj)
    for e in pats + feats + proj:
        assert e.contains(a).shape == (len(a),)


# --------------------------------------------------------------------------- float structure


def test_float_cells_and_round_trips():
    x = np.array([1.0, 0.75, 0.25 + 2**-54, -3.0])
    cells = fl.float_cells(x)
    tz = cells & 0xFF
    assert tz.tolist() == [52, 51, 0, 51]
    assert (cells >> 20).tolist() == [0, 0, 0, 1]
    rt = fl.round_trip_cells(x, (1.0,)) & 1
    assert rt.tolist() == [1, 1, 0, 1]  # 0.25 + 2^-54 is not 1 + (a double)
    assert "trailing zero" in fl.describe_cell(int(cells[0]))


def test_float_structure_separates_textbook_laplace_not_grid_laplace():
    rng = np.random.default_rng(4)
    n = 50_000
    for grid, should_separate in ((False, True), (True, False)):

        def m(d):
            x = d + rng.laplace(0, 1, n)
            return np.round(x * 2**20) / 2**20 if grid else x

        a, b = m(0.0), m(1.0)
        events = fl.propose_float_structure(a, b, max_events=8, shifts=fl.shifts_from_pair(0.0, 1.0))
        a2, b2 = m(0.0), m(1.0)  # fresh samples
        best = max(
            max(
                epsilon_lower_bound(int(e.contains(a2).sum()), n, int(e.contains(b2).sum()), n).epsilon,
                epsilon_lower_bound(int(e.contains(b2).sum()), n, int(e.contains(a2).sum()), n).epsilon,
            )
            for e in events
        )
        assert (best > 3) == should_separate, (grid, best)


def test_shifts_from_pair():
    assert fl.shifts_from_pair(0.0, 1.0)[:2] == (1.0, -1.0)
    assert 3.0 in fl.shifts_from_pair(np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    assert fl.shifts_from_pair("x", "y") == (1.0, -1.0)


# --------------------------------------------------------------------------- statistics properties


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 10_000), st.data(), st.floats(1e-6, 0.4))
def test_clopper_pearson_brackets_the_estimate(n, data, level):
    k = data.draw(st.integers(0, n))
    lo, hi = clopper_pearson_lower(k, n, level), clopper_pearson_upper(k, n, level)
    assert 0 <= lo <= k / n <= hi <= 1
    assert hi > 0  # never zero: zero hits alone never give an infinite bound
    if k < n:
        assert clopper_pearson_lower(k + 1, n, level) >= lo


@settings(max_examples=80, deadline=None)
@given(st.integers(10, 10_000), st.data())
def test_epsilon_bound_below_plugin_estimate(n, data):
    k1 = data.draw(st.integers(1, n))
    k0 = data.draw(st.integers(0, n))
    r = epsilon_lower_bound(k1, n, k0, n)
    assert math.isfinite(r.epsilon) and r.epsilon >= 0
    if k0 > 0:
        assert r.epsilon <= max(0.0, math.log(k1 / k0)) + 1e-12


def test_distinct_sorted_is_np_unique():
    """``distinct_sorted`` (one sort, for the proposers' key sets) gives ``np.unique``'s array, dtype included."""
    from dpharness.auditors.events import distinct_sorted

    rng = np.random.default_rng(3)
    cases = [
        rng.integers(-(2**40), 2**40, 5_000),
        rng.integers(0, 7, 1_000),
        rng.integers(0, 2**63, 3_000, dtype=np.uint64),
        np.array([True, False, True]),
        np.zeros(0, dtype=np.int64),
        np.array([5]),
        np.array([[3, 1], [1, 2]]),
        np.array([1.5, np.nan, 1.5, np.nan, -0.0, 0.0]),
    ]
    for x in cases:
        got, want = distinct_sorted(x), np.unique(x)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), x


def test_nested_list_outputs_are_keys_and_a_dict_is_refused():
    """A callable returning nested (even ragged) lists is audited on them as keys (a raw TypeError,
    unhashable list, before); an output that is no key at all is a MechanismError naming it."""
    import dpharness
    from dpharness.errors import MechanismError

    def nested(d):
        return [[1, 2], [3 + int(d[0])]]

    r = dpharness.audit(
        nested, data=np.array([0.0]), neighbor=np.array([1.0]), epsilon=1.0, samples=2000, seed=0, vectorized=False
    )
    assert not r.passed and r.epsilon_lower_bound > 1  # deterministic and different: no ε holds
    with pytest.raises(MechanismError, match="not hashable"):
        dpharness.audit(
            lambda d: {"a": 1},
            data=np.array([0.0]),
            neighbor=np.array([1.0]),
            epsilon=1.0,
            samples=2000,
            seed=0,
            vectorized=False,
        )
