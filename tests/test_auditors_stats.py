"""Unit tests of the auditor's statistics (pure functions of counts)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from dpharness.auditors import (
    bonferroni_level,
    clopper_pearson_interval,
    clopper_pearson_lower,
    clopper_pearson_upper,
    delta_lower_bound,
    epsilon_lower_bound,
)
from dpharness.auditors.stats import projected_epsilon
from dpharness.errors import ParameterError


def test_two_sided_interval_matches_scipy_exact():
    for k, n in [(7, 20), (0, 10), (10, 10), (1, 1000), (500, 1000)]:
        ci = binomtest(k, n).proportion_ci(0.95, method="exact")
        got = clopper_pearson_interval(k, n, 0.95)
        assert got.low == pytest.approx(ci.low, abs=1e-12)
        assert got.high == pytest.approx(ci.high, abs=1e-12)
        assert "Clopper-Pearson" in got.method


def test_known_values():
    # textbook value: 7 of 20 -> [0.1539, 0.5922] (two-sided 95%)
    iv = clopper_pearson_interval(7, 20)
    assert (round(iv.low, 4), round(iv.high, 4)) == (0.1539, 0.5922)
    # closed forms at the ends: U(0 hits) = 1 - a^(1/n), L(n hits) = a^(1/n)
    assert clopper_pearson_upper(0, 100, 0.025) == pytest.approx(1 - 0.025 ** (1 / 100), rel=1e-12)
    assert clopper_pearson_lower(100, 100, 0.025) == pytest.approx(0.025 ** (1 / 100), rel=1e-12)
    assert clopper_pearson_lower(0, 100, 0.025) == 0.0
    assert clopper_pearson_upper(100, 100, 0.025) == 1.0


def test_vectorised_matches_scalar():
    k = np.array([0, 3, 50, 99, 100])
    lo = clopper_pearson_lower(k, 100, 0.01)
    hi = clopper_pearson_upper(k, 100, 0.01)
    for i, ki in enumerate(k):
        assert lo[i] == pytest.approx(clopper_pearson_lower(int(ki), 100, 0.01))
        assert hi[i] == pytest.approx(clopper_pearson_upper(int(ki), 100, 0.01))
    assert np.all(lo <= k / 100) and np.all(hi >= k / 100)


def test_oracle_laplace_bound():
    """The issue's oracle: event {x >= 1} for Laplace(0/1, 1) at 10^6 a side, 95% -> 0.994."""
    n = 1_000_000
    p1, p0 = 0.5, 0.5 * math.exp(-1)
    r = epsilon_lower_bound(round(p1 * n), n, round(p0 * n), n, confidence=0.95)
    assert r.epsilon == pytest.approx(0.99391, abs=1e-4)
    assert r.candidates == 1 and r.level == pytest.approx(0.025)
    assert "Bonferroni over 1" in r.method


def test_bonferroni_makes_the_bound_smaller():
    one = epsilon_lower_bound(600, 1000, 300, 1000, confidence=0.95)
    many = epsilon_lower_bound(600, 1000, 300, 1000, confidence=0.95, candidates=50)
    assert many.epsilon < one.epsilon
    assert bonferroni_level(0.95, 50) == pytest.approx(0.05 / 100)


def test_zero_hits_gives_a_finite_bound():
    r = epsilon_lower_bound(1000, 1000, 0, 1000, confidence=0.95)
    assert math.isfinite(r.epsilon)
    # p1_lo = 0.025^(1/1000), p0_hi = 1 - 0.025^(1/1000)
    a = 0.025 ** (1 / 1000)
    assert r.epsilon == pytest.approx(math.log(a / (1 - a)))


def test_no_signal_gives_zero():
    r = epsilon_lower_bound([10, 0], [1000, 1000], [10, 0], [1000, 1000])
    assert r.epsilon == 0.0 and r.index == -1


def test_best_candidate_is_chosen():
    r = epsilon_lower_bound([100, 900], [1000, 1000], [100, 100], [1000, 1000])
    assert r.index == 1 and r.epsilon > 1.5
    assert r.per_candidate[0] < 0.3


def test_delta_shrinks_the_bound_and_delta_bound_is_consistent():
    pure = epsilon_lower_bound(600, 10_000, 100, 10_000)
    approx = epsilon_lower_bound(600, 10_000, 100, 10_000, delta=0.01)
    assert approx.epsilon < pure.epsilon
    # epsilon_lb(delta) > eps  <=>  delta_lb(eps) > delta
    for eps in (0.5, 1.0, 1.5):
        db = delta_lower_bound(600, 10_000, 100, 10_000, epsilon=eps)
        assert (approx.epsilon > eps) == (db.delta > 0.01)
    # all mass below delta -> no bound
    assert epsilon_lower_bound(5, 10_000, 0, 10_000, delta=0.01).epsilon == 0.0


def test_projected_epsilon_is_close_to_the_certified_value():
    n = 100_000
    proj = projected_epsilon(0.5, 0.2, n, 0.025)
    cert = epsilon_lower_bound(50_000, n, 20_000, n).epsilon
    assert proj == pytest.approx(cert, abs=1e-3)


@pytest.mark.parametrize(
    "call",
    [
        lambda: clopper_pearson_lower(-1, 10, 0.05),
        lambda: clopper_pearson_lower(11, 10, 0.05),
        lambda: clopper_pearson_upper(1, 0, 0.05),
        lambda: clopper_pearson_upper(1.5, 10, 0.05),
        lambda: clopper_pearson_upper(1, 10, 0.0),
        lambda: clopper_pearson_interval(1, 10, 1.0),
        lambda: epsilon_lower_bound(1, 10, 1, 10, confidence=0),
        lambda: epsilon_lower_bound(1, 10, 1, 10, delta=1.0),
        lambda: epsilon_lower_bound([1, 2], 10, [1, 2], 10, candidates=1),
        lambda: delta_lower_bound(1, 10, 1, 10, epsilon=-1),
    ],
)
def test_invalid_inputs_raise_parameter_error(call):
    with pytest.raises(ParameterError):
        call()


def test_results_are_frozen():
    r = epsilon_lower_bound(600, 1000, 300, 1000)
    with pytest.raises(AttributeError):
        r.epsilon = 5.0  # type: ignore[misc]


def test_projected_epsilon_counts_whole_hits_despite_float_error():
    """7 hits in 10^5 projected at n = 10^5: p·n is 6.99… in doubles; the projection uses 7 hits (and 3,
    not 4, on the other side), exactly as epsilon_lower_bound does on those counts."""
    from dpharness.auditors.stats import projected_epsilon

    n, level = 100_000, 0.025
    got = float(projected_epsilon(7 / n, 3 / n, n, level))
    want = float(np.log(clopper_pearson_lower(7, n, level) / clopper_pearson_upper(3, n, level)))
    assert got == pytest.approx(want, rel=1e-12)


def test_clopper_pearson_bounds_are_checked_forward_where_scipy_inverts_wrongly():
    """scipy 1.17.1's betaincinv(1000, ~10^9, 0.025) returns 1.9e-6, whose lower tail is 1.0: equal counts
    of 1000 in 10^9 a side certified ε = 0.58. The bounds are re-solved where the forward tail is wrong."""
    from scipy import special

    from dpharness.auditors.stats import clopper_pearson_lower, clopper_pearson_upper, epsilon_lower_bound

    assert epsilon_lower_bound(1000, 10**9, 1000, 10**9, confidence=0.95).epsilon == 0.0
    for k, n in ((1000, 10**9), (1000, 6 * 10**7), (999, 8 * 10**8), (3, 10), (500_000, 10**6)):
        lo = clopper_pearson_lower(k, n, 0.025)
        hi = clopper_pearson_upper(k, n, 0.025)
        assert special.betainc(k, n - k + 1, lo) <= 0.025 * (1 + 1e-9)  # Pr[p < lo] <= level
        assert special.betaincc(k + 1, n - k, hi) <= 0.025 * (1 + 1e-9)  # Pr[p > hi] <= level
        assert abs(special.betainc(k, n - k + 1, lo) - 0.025) < 1e-6  # and tight, not merely safe


# --------------------------------------------------------------------------- certifiable range (issue 36)


@pytest.mark.parametrize("n", [100, 1_800, 18_000, 900_000])
@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_certifiable_range_ceiling_is_the_bound_of_maximally_separated_counts(n, delta):
    from dpharness.auditors import stats

    level = stats.bonferroni_level(0.95, 20)
    r = stats.certifiable_range(n, level, delta)
    exact = stats.epsilon_lower_bound(n, n, 0, n, confidence=1 - 2 * level, delta=delta, candidates=1)
    assert r.ceiling == pytest.approx(exact.epsilon, rel=1e-12)
    # the floor: the expected counts of an event of probability 1/2 vs e^-ε/2 certify > 0 just above it
    above = stats.projected_epsilon_expected(0.5, 0.5 * np.exp(-r.floor * 1.001), n, level, delta)
    below = stats.projected_epsilon_expected(0.5, 0.5 * np.exp(-r.floor * 0.999), n, level, delta)
    assert above > 0 >= below
    assert 0 < r.floor < r.ceiling


def test_certifiable_range_narrows_with_more_samples():
    from dpharness.auditors import stats

    level = stats.bonferroni_level(0.95, 20)
    rs = [stats.certifiable_range(n, level) for n in (1_000, 10_000, 100_000)]
    assert rs[0].floor > rs[1].floor > rs[2].floor and rs[0].ceiling < rs[1].ceiling < rs[2].ceiling


def test_certifiable_range_refuses_a_bad_size_naming_it():
    from dpharness.auditors import stats

    with pytest.raises(ParameterError, match="n="):
        stats.certifiable_range(0, 0.001)
