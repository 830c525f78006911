"""The efficiency benchmark's oracle (``benchmarks/bench_efficiency.py``), checked by hand on Laplace.

Laplace(1/ε = 10), pair 1 vs 2: the half-line {y <= 1} has p1 = 1/2 on the data's side and
p0 = e^{-0.1}/2 on the neighbour's, the full ratio e^{0.1}; the oracle certifies one event (m = 1)
at 90% confidence, so each one-sided Clopper-Pearson bound has tail mass 0.05."""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

import numpy as np
import pytest
from scipy import stats

_BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "bench_efficiency.py"
P1, P0 = 0.5, 0.5 * math.exp(-0.1)
TARGET = 0.95 * 0.1


@pytest.fixture(scope="module")
def be():
    spec = importlib.util.spec_from_file_location("bench_efficiency", _BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_efficiency", mod)  # its dataclasses look their module up
    spec.loader.exec_module(mod)  # puts benchmarks/ on sys.path for its bench_dpsniper import
    return mod


@pytest.fixture(scope="module")
def laplace(be):
    # 100 thresholds per decade of tail mass (the benchmark uses 1000): fast, and {y <= 1} is in it (the median)
    return be._laplace_halflines("Laplace", 1.0, 2.0, 10.0, "test", np.geomspace(1e-13, 0.5, 1_201))


def _one_event(be):
    return be.OracleFamily("one", "test", "{y <= 1}", np.array([P1]), np.array([P0]), ("y <= 1",))


def test_bound_is_the_exact_interval_at_the_expected_counts(be):
    """At n = 999,999 the counts are floor(n/2) = 499,999 and ceil(n·e^{-0.1}/2) = ceil(452,418.26) =
    452,419 (rounding to nearest would give 500,000 and 452,418); the bound is ln of the lower end of
    one two-sided 90% exact interval over the upper end of the other."""
    n = 999_999
    r = be.oracle_bound(_one_event(be), n)
    assert (r.hits1, r.hits0) == (499_999, 452_419)
    lo = stats.binomtest(499_999, n).proportion_ci(0.9, method="exact").low
    hi = stats.binomtest(452_419, n).proportion_ci(0.9, method="exact").high
    assert r.epsilon == pytest.approx(math.log(lo / hi), abs=1e-9)


def test_oracle_is_at_least_the_fixed_half_line_and_below_the_truth(be, laplace):
    for n in (100_000, 800_000, 6_400_000):
        fixed = be.oracle_bound(_one_event(be), n).epsilon
        best = be.oracle_bound(laplace, n).epsilon
        assert fixed <= best + 1e-12 < 0.1, (n, fixed, best)
        assert best - fixed < 2e-3, (n, fixed, best)  # a threshold near 1 or 2 gains little


def test_bound_is_monotone_on_the_grid_and_n_is_the_first_grid_point(be, laplace):
    grid = [100_000 * 2**k for k in range(7)]
    fixed = [be.oracle_bound(_one_event(be), n).epsilon for n in grid]
    best = [be.oracle_bound(laplace, n).epsilon for n in grid]
    assert np.all(np.diff(fixed) > 0) and np.all(np.diff(best) > 0)
    n, r, exact = be.oracle_samples(laplace, TARGET, start=100_000, stop=10**8)
    first = next(g for g, b in zip(grid, best) if b >= TARGET)
    assert n == first == 800_000 and r.epsilon >= TARGET > be.oracle_bound(laplace, n // 2).epsilon
    assert be.oracle_bound(laplace, exact).epsilon >= TARGET > be.oracle_bound(laplace, exact - 1).epsilon
    assert n // 2 < exact <= n


def test_exact_n_matches_the_normal_approximation(be):
    """ln(p1_lo / p0_hi) ≈ ln(p1/p0) − z (√((1−p1)/(n p1)) + √((1−p0)/(n p0))), z = Φ^{-1}(0.95): the n
    where this reaches 0.095 is ≈ 477,400; the exact Clopper-Pearson crossing is within 1% of it."""
    z = stats.norm.ppf(0.95)
    approx = (z * (math.sqrt((1 - P1) / P1) + math.sqrt((1 - P0) / P0)) / (0.1 - TARGET)) ** 2
    _, _, exact = be.oracle_samples(_one_event(be), TARGET, start=100_000, stop=10**8)
    assert exact == pytest.approx(approx, rel=0.01)


def test_a_bound_that_does_not_invert_the_tail_is_refused(be):
    n, k1, k0, level = 10**6, np.array([500_000]), np.array([452_419]), 0.05
    lo = be.clopper_pearson_lower(k1, n, level)
    hi = be.clopper_pearson_upper(k0, n, level)
    assert be._inverts(k1, k0, n, lo, hi, level).all()
    assert not be._inverts(k1, k0, n, lo * 1.001, hi, level).any()
    assert not be._inverts(k1, k0, n, lo, hi * 0.999, level).any()
