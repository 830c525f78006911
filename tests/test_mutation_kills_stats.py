"""Tests that kill the mutants of :mod:`dpharness.auditors.stats` which survived
``bash mutation/run.sh stats`` with the unit tests alone (see mutation/SURVIVORS.md).

Each test pins one behaviour the statistics promise: exact values against scipy's own Beta
quantiles, the scalar/array shape of results, exact integer counts (also above 2^53), argument
names in error messages, the boundary of every accepted range, and the fields of the frozen results.
All deterministic (no sampling)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, binomtest

from dpharness.auditors import stats as S
from dpharness.errors import ParameterError


def _ref_lower(k: int, n: int, level: float) -> float:
    return 0.0 if k == 0 else float(beta.ppf(level, k, n - k + 1))


def _ref_upper(k: int, n: int, level: float) -> float:
    return 1.0 if k == n else float(beta.isf(level, k + 1, n - k))


# --------------------------------------------------------------------------- Clopper-Pearson values and shapes


@pytest.mark.parametrize("k, n", [(0, 1), (1, 1), (0, 7), (1, 7), (6, 7), (7, 7), (3, 20), (19, 20), (499, 1000)])
@pytest.mark.parametrize("level", [0.001, 0.025, 0.3])
def test_one_sided_bounds_equal_beta_quantiles(k, n, level):
    lo, hi = S.clopper_pearson_lower(k, n, level), S.clopper_pearson_upper(k, n, level)
    assert lo == pytest.approx(_ref_lower(k, n, level), rel=1e-10, abs=1e-300)
    assert hi == pytest.approx(_ref_upper(k, n, level), rel=1e-10, abs=1e-300)
    assert type(lo) is float and type(hi) is float


def test_scalar_hits_with_array_sizes_give_arrays():
    lo = S.clopper_pearson_lower(3, [10, 20], 0.05)
    hi = S.clopper_pearson_upper(3, np.array([10, 20]), 0.05)
    for got, ref in (
        (lo, [_ref_lower(3, 10, 0.05), _ref_lower(3, 20, 0.05)]),
        (hi, [_ref_upper(3, 10, 0.05), _ref_upper(3, 20, 0.05)]),
    ):
        assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.shape == (2,)
        np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_array_results_are_float64():
    lo = S.clopper_pearson_lower(np.array([0, 2, 5]), 5, 0.05)
    hi = S.clopper_pearson_upper(np.array([0, 2, 5]), 5, 0.05)
    assert lo.dtype == np.float64 and hi.dtype == np.float64
    assert lo[0] == 0.0 and hi[2] == 1.0


def test_counts_beyond_float_precision_stay_exact():
    """2^53 + 1 hits among 2^53 samples is refused: as floats both would be 2^53 and pass the range
    check, so integer counts must never be routed through floats."""
    for fn in (S.clopper_pearson_lower, S.clopper_pearson_upper):
        with pytest.raises(ParameterError, match=r"must lie in 0\.\.n"):
            fn(2**53 + 1, 2**53, 0.05)
        with pytest.raises(ParameterError, match=r"must lie in 0\.\.n"):
            fn(np.array([2**53 + 1], dtype=np.int64), np.array([2**53], dtype=np.int64), 0.05)


def test_two_sided_interval_fields_and_values():
    iv = S.clopper_pearson_interval(7, 20, 0.9)
    ci = binomtest(7, 20).proportion_ci(0.9, method="exact")
    assert iv.low == pytest.approx(ci.low, rel=1e-10) and iv.high == pytest.approx(ci.high, rel=1e-10)
    assert iv.hits == 7 and iv.n == 20 and iv.level == pytest.approx(0.05)
    assert iv.method == "Clopper-Pearson exact (two-sided)"


# --------------------------------------------------------------------------- counts: what is accepted, what is refused


def test_integral_floats_and_object_arrays_are_counts():
    ref = S.clopper_pearson_lower(3, 10, 0.05)
    assert S.clopper_pearson_lower(3.0, 10, 0.05) == ref
    assert S.clopper_pearson_lower(3, 10.0, 0.05) == ref
    assert S.clopper_pearson_lower(np.array([3.0]), np.array([10.0]), 0.05)[0] == ref
    assert S.clopper_pearson_lower(np.array([3], dtype=object), 10, 0.05)[0] == ref
    assert S.clopper_pearson_upper(3, np.array([10], dtype=object), 0.05)[0] == S.clopper_pearson_upper(3, 10, 0.05)


def test_one_sample_is_a_sample_size():
    assert S.clopper_pearson_lower(1, 1, 0.05) == pytest.approx(0.05)
    assert S.clopper_pearson_upper(0, 1, 0.05) == pytest.approx(0.95)


@pytest.mark.parametrize(
    "hits, n, match",
    [
        (["a"], 10, r"hits=\['a'\] is not a count"),
        (2.5, 10, r"hits=2\.5 \(n=10\) are not whole numbers"),
        (np.inf, 10, r"hits=inf \(n=10\) are not whole numbers"),
        (3, 10.5, r"hits=3 \(n=10\.5\) are not whole numbers"),
        (3, np.inf, r"hits=3 \(n=inf\) are not whole numbers"),
        (3, np.nan, r"not whole numbers"),
        (0, 0, r"n=0 must be >= 1"),
        (-1, 10, r"hits=-1 must lie in 0\.\.n \(n=10\)"),
        (11, 10, r"hits=11 must lie in 0\.\.n \(n=10\)"),
    ],
)
def test_bad_counts_are_refused_with_their_name(hits, n, match):
    for fn in (S.clopper_pearson_lower, S.clopper_pearson_upper):
        with pytest.raises(ParameterError, match=match):
            fn(hits, n, 0.05)


def test_interval_names_hits():
    with pytest.raises(ParameterError, match=r"^hits=2\.5"):
        S.clopper_pearson_interval(2.5, 10)


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1])
def test_level_must_lie_strictly_between_0_and_1(level):
    for fn in (S.clopper_pearson_lower, S.clopper_pearson_upper):
        with pytest.raises(ParameterError, match=r"^level=.* must lie in \(0, 1\)"):
            fn(3, 10, level)


@pytest.mark.parametrize("confidence", [0, 1, 1.2])
def test_confidence_must_lie_strictly_between_0_and_1(confidence):
    calls = [
        lambda: S.clopper_pearson_interval(3, 10, confidence),
        lambda: S.bonferroni_level(confidence, 2),
        lambda: S.epsilon_lower_bound(3, 10, 1, 10, confidence=confidence),
        lambda: S.delta_lower_bound(3, 10, 1, 10, epsilon=0.5, confidence=confidence),
    ]
    for call in calls:
        with pytest.raises(ParameterError, match=r"^confidence=.* must lie in \(0, 1\)"):
            call()


# --------------------------------------------------------------------------- Bonferroni and the paired bounds


def test_bonferroni_level_and_its_candidates():
    assert S.bonferroni_level(0.9, 1) == pytest.approx(0.05)
    assert S.bonferroni_level(0.9, 5) == pytest.approx(0.01)
    for bad in (0, -3):
        with pytest.raises(ParameterError, match=r"^candidates=.* must be >= 1"):
            S.bonferroni_level(0.9, bad)
    with pytest.raises(ParameterError, match=r"^candidates=2\.0 is not an integer"):
        S.bonferroni_level(0.9, 2.0)


def test_paired_bounds_name_each_side():
    with pytest.raises(ParameterError, match=r"^hits1="):
        S.epsilon_lower_bound([2.5], [10], [1], [10])
    with pytest.raises(ParameterError, match=r"^hits0="):
        S.epsilon_lower_bound([2], [10], [1.5], [10])
    with pytest.raises(ParameterError, match=r"^hits1="):
        S.delta_lower_bound([2.5], [10], [1], [10], epsilon=0.1)
    with pytest.raises(ParameterError, match=r"^hits0="):
        S.delta_lower_bound([2], [10], [11], [10], epsilon=0.1)


def test_candidates_at_least_the_entries():
    one = S.epsilon_lower_bound([90], [100], [10], [100], confidence=0.9, candidates=1)
    assert one.candidates == 1 and one.level == pytest.approx(0.05)
    with pytest.raises(ParameterError, match=r"^candidates=1 must be >= 2"):
        S.epsilon_lower_bound([90, 80], [100, 100], [10, 20], [100, 100], candidates=1)
    with pytest.raises(ParameterError, match=r"^candidates=.* not an integer"):
        S.epsilon_lower_bound([90], [100], [10], [100], candidates=1.0)


# --------------------------------------------------------------------------- ε lower bound


def test_epsilon_bound_values_and_fields():
    r = S.epsilon_lower_bound([90, 60], [100, 100], [10, 40], [100, 100], confidence=0.9, candidates=3)
    level = 0.1 / 6
    p1 = np.array([_ref_lower(90, 100, level), _ref_lower(60, 100, level)])
    p0 = np.array([_ref_upper(10, 100, level), _ref_upper(40, 100, level)])
    np.testing.assert_allclose(r.p1_low, p1, rtol=1e-10)
    np.testing.assert_allclose(r.p0_high, p0, rtol=1e-10)
    np.testing.assert_allclose(r.per_candidate, np.log(p1) - np.log(p0), rtol=1e-10)
    assert r.per_candidate.dtype == np.float64
    assert r.epsilon == pytest.approx(math.log(p1[0] / p0[0]), rel=1e-10) and r.index == 0
    assert (r.delta, r.confidence, r.candidates) == (0.0, 0.9, 3) and r.level == pytest.approx(level)
    assert r.method.endswith("; ln(p1_lo / p0_hi)") and "Bonferroni over 3 candidate(s)" in r.method


def test_epsilon_bound_with_delta():
    r = S.epsilon_lower_bound([90], [100], [10], [100], confidence=0.9, delta=0.01)
    level = 0.05
    p1, p0 = _ref_lower(90, 100, level), _ref_upper(10, 100, level)
    assert r.epsilon == pytest.approx(math.log((p1 - 0.01) / p0), rel=1e-10)
    assert r.delta == 0.01 and r.method.endswith("; ln((p1_lo - 0.01) / p0_hi)")
    with pytest.raises(ParameterError, match=r"^delta=1 must lie in \[0, 1\)"):
        S.epsilon_lower_bound([90], [100], [10], [100], delta=1)


def test_epsilon_bound_without_positive_candidate():
    r = S.epsilon_lower_bound([10, 0], [100, 100], [90, 0], [100, 100], delta=0.0)
    assert r.epsilon == 0.0 and r.index == -1
    assert r.per_candidate[1] == -math.inf  # zero hits on the numerator side: no information
    assert r.per_candidate.dtype == np.float64


# --------------------------------------------------------------------------- δ lower bound


def test_delta_bound_values_fields_and_no_positive():
    r = S.delta_lower_bound([60, 90], [100, 100], [40, 10], [100, 100], epsilon=0.5, confidence=0.9, candidates=2)
    level = 0.1 / 4
    per = np.array(
        [
            _ref_lower(60, 100, level) - math.exp(0.5) * _ref_upper(40, 100, level),
            _ref_lower(90, 100, level) - math.exp(0.5) * _ref_upper(10, 100, level),
        ]
    )
    assert r.index == 1
    np.testing.assert_allclose(r.per_candidate, per, rtol=1e-10)
    assert r.delta == pytest.approx(per.max(), rel=1e-10) and r.index == int(np.argmax(per))
    assert (r.epsilon, r.confidence, r.candidates) == (0.5, 0.9, 2) and r.level == pytest.approx(level)
    assert "Bonferroni over 2 candidate(s)" in r.method and "e^0.5" in r.method
    none = S.delta_lower_bound([10], [100], [90], [100], epsilon=0.5)
    assert none.delta == 0.0 and none.index == -1 and none.per_candidate[0] < 0
    more = S.delta_lower_bound([90], [100], [10], [100], epsilon=0.5, candidates=7)
    assert more.candidates == 7 and more.level == pytest.approx(0.05 / 14)
    with pytest.raises(ParameterError, match=r"^epsilon=-1 must be >= 0"):
        S.delta_lower_bound([90], [100], [10], [100], epsilon=-1)


@pytest.mark.parametrize("eps", [700.0, 800.0, 1e6])
def test_delta_bound_at_huge_epsilon_is_zero(eps):
    """e^ε · p0_hi overflows past ε ≈ 709; from ε = 700 on, p1_lo − e^ε p0_hi is −inf since p0_hi > 0."""
    r = S.delta_lower_bound([100, 5], [100, 100], [0, 0], [100, 100], epsilon=eps)
    assert r.delta == 0.0 and r.index == -1
    assert r.per_candidate.dtype == np.float64 and np.all(r.per_candidate == -np.inf)


# --------------------------------------------------------------------------- projected ε (ranking heuristic)


def _projected_ref(p1, p0, n, level, delta):
    k1 = math.floor(min(max(p1, 0.0), 1.0) * n)
    k0 = math.ceil(min(max(p0, 0.0), 1.0) * n)
    lo = S.clopper_pearson_lower(k1, n, level)
    hi = S.clopper_pearson_upper(k0, n, level)
    return math.log(lo - delta) - math.log(hi) if lo - delta > 0 else -math.inf


@pytest.mark.parametrize("delta", [0.0, 0.05])
def test_projected_epsilon_is_the_bound_those_counts_would_give(delta):
    n, level = 50, 0.01
    p1s = [-0.2, 0.0, 1 / n, 0.3, 0.98, 1.0, 1.3]
    p0s = [-0.2, 0.0, 1 / n, 0.3, 0.98, 1.0, 1.3]
    P1, P0 = np.meshgrid(p1s, p0s)
    got = S.projected_epsilon(P1.ravel(), P0.ravel(), n, level, delta)
    ref = [_projected_ref(a, b, n, level, delta) for a, b in zip(P1.ravel(), P0.ravel())]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-10)


# --------------------------------------------------------------------------- "positive" means > 0, not >= 0


def test_a_bound_of_exactly_zero_is_not_a_witness():
    """index is −1 unless some candidate is strictly positive (the docstrings' "0 when no candidate is
    positive"). Exact zeros are built in floating point: by Sterbenz's lemma p1_lo − (p1_lo − p0_hi)
    is exactly p0_hi when p0_hi <= p1_lo <= 2 p0_hi, so ln((p1_lo − δ) / p0_hi) is exactly 0."""
    level = S.bonferroni_level(0.95, 1)
    p1, p0 = S.clopper_pearson_lower(80, 100, level), S.clopper_pearson_upper(40, 100, level)
    assert p0 <= p1 <= 2 * p0
    r = S.epsilon_lower_bound(80, 100, 40, 100, delta=p1 - p0)
    assert r.per_candidate[0] == 0.0 and r.epsilon == 0.0 and r.index == -1
    # δ: the first (k1, k0) whose p1_lo − e^ε p0_hi is exactly 0 at ε = ln(p1_lo / p0_hi)
    for k1 in range(1, 100):
        q1, q0 = S.clopper_pearson_lower(k1, 100, level), S.clopper_pearson_upper(0, 100, level)
        eps = math.log(q1 / q0) if q1 > q0 else None
        if eps is not None and q1 - math.exp(eps) * q0 == 0.0:
            break
    else:
        pytest.fail("no exact zero found among k1 = 1..99")
    d = S.delta_lower_bound(k1, 100, 0, 100, epsilon=eps)
    assert d.per_candidate[0] == 0.0 and d.delta == 0.0 and d.index == -1


def test_no_floating_point_warnings():
    """The bounds handle their edge cases (zero hits, all hits, non-positive numerators, huge ε)
    without numpy floating-point errors, even when the caller has made them fatal."""
    with np.errstate(all="raise"):
        S.clopper_pearson_lower(np.array([0, 1, 10]), 10, 0.05)
        S.clopper_pearson_upper(np.array([0, 9, 10]), 10, 0.05)
        S.epsilon_lower_bound([0, 10, 3], [10, 10, 10], [10, 0, 3], [10, 10, 10], delta=0.5)
        S.delta_lower_bound([0, 10], [10, 10], [10, 0], [10, 10], epsilon=800.0)
        S.projected_epsilon([0.0, 1.0, 0.5, -1.0], [1.0, 0.0, 0.5, 2.0], 10, 0.05, 0.2)
