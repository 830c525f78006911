"""Tail events for (ε, δ) audits (:mod:`dpharness.auditors.tails`) and their projections
(:func:`~dpharness.auditors.stats.projected_epsilon_expected`, :func:`~dpharness.auditors.stats.projected_delta`).

The Gaussian mechanism here is d + N(0, σ²) on the pair (0, 1), σ calibrated by the analytic
Gaussian mechanism (Balle & Wang 2018, Thm 8) to (ε, δ) = (1, 1e-5), so that the true ε(1e-5) is 1."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import optimize, stats

from dpharness.auditors.stats import (
    bonferroni_level,
    delta_lower_bound,
    epsilon_lower_bound,
    projected_delta,
    projected_epsilon_expected,
)
from dpharness.auditors.tails import TailCandidate, _fit_moments, _fit_tail, propose_tail_events, tail_candidates
from dpharness.core import Event
from dpharness.errors import ParameterError

DELTA = 1e-5


def _profile(eps: float, sigma: float) -> float:
    return float(stats.norm.cdf(0.5 / sigma - eps * sigma) - math.exp(eps) * stats.norm.cdf(-0.5 / sigma - eps * sigma))


SIGMA = optimize.brentq(lambda s: _profile(1.0, s) - DELTA, 0.1, 100.0, xtol=1e-14)


def _train(n: int, sigma: float = SIGMA, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return 0.0 + sigma * rng.standard_normal(n), 1.0 + sigma * rng.standard_normal(n)


def _certify(samples: int, sigma: float, seed: int, *, epsilon: float | None = None) -> tuple[float, float]:
    """Train on 10%, certify on 90% fresh: (certified ε at δ = 1e-5, certified δ at ε = 1)."""
    rng = np.random.default_rng(seed)
    train = samples // 10
    cert = samples - train
    ta, tb = 0.0 + sigma * rng.standard_normal(train), 1.0 + sigma * rng.standard_normal(train)
    cands = tail_candidates(ta, tb, max_events=4, delta=DELTA, cert_n=cert, confidence=0.95, epsilon=epsilon)
    assert cands
    ca, cb = 0.0 + sigma * rng.standard_normal(cert), 1.0 + sigma * rng.standard_normal(cert)
    h1, h0 = [], []
    for c in cands:
        ka, kb = int(np.count_nonzero(c.event.contains(ca))), int(np.count_nonzero(c.event.contains(cb)))
        h1.append(ka if c.forward else kb)
        h0.append(kb if c.forward else ka)
    eb = epsilon_lower_bound(h1, cert, h0, cert, confidence=0.95, delta=DELTA)
    db = delta_lower_bound(h1, cert, h0, cert, epsilon=1.0, confidence=0.95)
    return eb.epsilon, db.delta


# --------------------------------------------------------------------------- the events


def test_events_are_half_lines_with_readable_words():
    ta, tb = _train(20_000)
    cands = tail_candidates(ta, tb, max_events=8, delta=DELTA, cert_n=1_000_000, confidence=0.95)
    assert 1 <= len(cands) <= 8
    x = np.linspace(-60, 60, 100_001)
    for c in cands:
        assert isinstance(c, TailCandidate) and isinstance(c.event, Event)
        expect = x >= c.threshold if c.upper else x <= c.threshold
        np.testing.assert_array_equal(np.asarray(c.event.contains(x), dtype=bool), expect)
        m = re.fullmatch(r"output (>=|<=) (-?\d+(\.\d+)?)", c.event.description)
        assert m, c.event.description
        assert float(m.group(2)) == c.threshold and (m.group(1) == ">=") == c.upper
        assert len(m.group(2).split(".")[-1]) <= 4  # rounded to a readable number


def test_both_tails_and_the_relevant_directions():
    """a = N(0, σ²), b = N(1, σ²): the upper tail favours b, the lower tail favours a; both far out."""
    ta, tb = _train(50_000)
    cands = tail_candidates(ta, tb, max_events=8, delta=DELTA, cert_n=1_000_000, confidence=0.95)
    upper = [c for c in cands if c.upper]
    lower = [c for c in cands if not c.upper]
    assert upper and lower
    assert all(not c.forward for c in upper) and all(c.forward for c in lower)
    assert all(c.threshold > 2 * SIGMA for c in upper) and all(c.threshold < -2 * SIGMA for c in lower)
    assert all(c.p_numerator > c.p_denominator for c in cands)
    assert [c.projected_epsilon for c in cands] == sorted((c.projected_epsilon for c in cands), reverse=True)
    events = propose_tail_events(ta, tb, max_events=8, delta=DELTA, cert_n=1_000_000, confidence=0.95)
    assert [e.description for e in events] == [c.event.description for c in cands]


def test_threshold_moves_out_with_more_certification_samples():
    """The best t at δ lies further in the tail the more certification samples there will be."""
    ta, tb = _train(50_000)

    def best(cert_n):
        c = tail_candidates(ta, tb, max_events=2, delta=DELTA, cert_n=cert_n, confidence=0.95)
        return max(abs(x.threshold) for x in c if x.objective == "epsilon at delta")

    assert best(100_000) < best(1_000_000) < best(10_000_000)


def test_choice_depends_only_on_the_training_outputs():
    ta, tb = _train(20_000, seed=3)
    kw = dict(max_events=6, delta=DELTA, cert_n=900_000, confidence=0.95)
    first = [e.description for e in propose_tail_events(ta, tb, **kw)]
    # same outputs in another order, and a call in between on other data: the same events
    rng = np.random.default_rng(99)
    propose_tail_events(*_train(5_000, seed=4), **kw)
    again = [e.description for e in propose_tail_events(rng.permutation(ta), rng.permutation(tb), **kw)]
    assert first == again
    # inputs are not modified
    ta2, tb2 = _train(20_000, seed=3)
    np.testing.assert_array_equal(ta, ta2)
    np.testing.assert_array_equal(tb, tb2)


def test_integer_outputs_get_integer_thresholds():
    rng = np.random.default_rng(5)
    ta = np.rint(rng.normal(0, 6, 40_000)).astype(np.int64)
    tb = np.rint(rng.normal(2, 6, 40_000)).astype(np.int64)
    cands = tail_candidates(ta, tb, max_events=6, delta=DELTA, cert_n=1_000_000, confidence=0.95)
    assert cands
    for c in cands:
        assert c.threshold == int(c.threshold)
        assert re.fullmatch(r"output (>=|<=) -?\d+", c.event.description), c.event.description
        xs = np.arange(-60, 61)
        np.testing.assert_array_equal(c.event.contains(xs), xs >= c.threshold if c.upper else xs <= c.threshold)


def test_pure_dp_and_heavy_tails_and_small_samples():
    rng = np.random.default_rng(6)
    # δ = 0 (pure DP): Laplace pair, exponential tails
    la, lb = rng.laplace(0, 1, 20_000), rng.laplace(1, 1, 20_000)
    cands = tail_candidates(la, lb, max_events=4, delta=0.0, cert_n=1_000_000, confidence=0.95)
    assert cands and all(c.objective == "epsilon at delta" for c in cands)
    assert max(c.projected_epsilon for c in cands) > 0.8  # Laplace(1): ε = 1; half-lines certify most of it
    # fewer than 100 outputs a side: no extrapolation, empirical thresholds only (still valid events)
    small = tail_candidates(la[:50], lb[:50], max_events=4, delta=DELTA, cert_n=1_000, confidence=0.95)
    assert all(min(la[:50].min(), lb[:50].min()) <= c.threshold <= max(la[:50].max(), lb[:50].max()) for c in small)
    # infinite and NaN outputs do not break the fit
    ia = np.concatenate([la, [np.inf, np.nan]])
    assert tail_candidates(ia, lb, max_events=4, delta=DELTA, cert_n=10_000, confidence=0.95)
    # identical sides: nothing favours either side much, and no event claims a large ε
    same = tail_candidates(la, la.copy(), max_events=4, delta=DELTA, cert_n=10_000, confidence=0.95)
    assert all(c.projected_epsilon <= 0 for c in same)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(max_events=0), "max_events"),
        (dict(delta=1.0), "delta"),
        (dict(delta=-0.1), "delta"),
        (dict(cert_n=0), "cert_n"),
        (dict(confidence=1.0), "confidence"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=math.inf), "epsilon"),
    ],
)
def test_bad_parameters_raise(kwargs, name):
    ta, tb = _train(1_000)
    kw = dict(max_events=4, delta=DELTA, cert_n=10_000, confidence=0.95) | kwargs
    with pytest.raises(ParameterError, match=name):
        tail_candidates(ta, tb, **kw)


def test_bad_outputs_raise():
    kw = dict(max_events=4, delta=DELTA, cert_n=10_000, confidence=0.95)
    with pytest.raises(ParameterError, match="train_a.*shape"):
        propose_tail_events(np.zeros((10, 2)), np.zeros((10, 2)), **kw)
    with pytest.raises(ParameterError, match="train_b.*dtype"):
        propose_tail_events(np.zeros(10), np.array(["x"] * 10, dtype=object), **kw)
    with pytest.raises(ParameterError, match="train_a.*empty"):
        propose_tail_events(np.zeros(0), np.zeros(10), **kw)


# --------------------------------------------------------------------------- the tail model


def test_moment_fit_is_exact_for_truncated_gaussian_and_exponential():
    # exponential exceedances (Laplace tails): E[Y] = 2, E[Y^2] = 8 -> the exponential, mean 2
    gaussian, *_, mean, _ = _fit_moments(2.0, 8.0)
    assert not gaussian and mean == 2.0
    # N(m, s^2) truncated to Y >= 0 with m = -1.5, s = 0.8: exact moments recover m and s
    m, s = -1.5, 0.8
    tn = stats.truncnorm(-m / s, np.inf, loc=m, scale=s)
    gaussian, mf, sf, _, _ = _fit_moments(tn.mean(), tn.moment(2))
    assert gaussian and mf == pytest.approx(m, rel=1e-6) and sf == pytest.approx(s, rel=1e-6)


@pytest.mark.statistical
def test_fitted_gaussian_tail_extrapolates():
    """The fitted tail of 10^5 N(0, 1) outputs predicts P(X >= 4) = 3.2e-5 (about 3 samples expected
    in training) within a factor 1.5. Seed fixed; over 200 seeds the factor stayed below 1.35, so
    the false-failure rate is below 0.5%."""
    x = np.sort(np.random.default_rng(7).standard_normal(100_000))
    tail = _fit_tail(x, len(x), lattice=False)
    got = float(np.exp(tail.log_sf(np.array([4.0]))[0]))
    truth = float(stats.norm.sf(4.0))
    assert tail.gaussian
    assert truth / 1.5 < got < truth * 1.5, (
        f"fitted P(X >= 4) = {got:.3g}, truth {truth:.3g} (false-failure rate < 0.5%)"
    )


# --------------------------------------------------------------------------- projections (stats block)


def test_projections_match_the_exact_bounds_at_integer_counts():
    n, level = 100_000, bonferroni_level(0.95, 4)
    k1, k0 = np.array([40, 300, 7]), np.array([5, 120, 0])
    pe = projected_epsilon_expected(k1 / n, k0 / n, n, level, DELTA)
    eb = epsilon_lower_bound(k1, n, k0, n, delta=DELTA, confidence=0.95, candidates=4)
    np.testing.assert_allclose(pe, eb.per_candidate, rtol=1e-9)
    pd = projected_delta(k1 / n, k0 / n, n, level, 1.0)
    db = delta_lower_bound(k1, n, k0, n, epsilon=1.0, confidence=0.95, candidates=4)
    np.testing.assert_allclose(pd, db.per_candidate, rtol=1e-9)
    # continuous between integer counts (what the threshold scan needs)
    p = np.linspace(39.0, 41.0, 9) / n
    pe2 = projected_epsilon_expected(p, np.full_like(p, 5 / n), n, level, DELTA)
    assert np.all(np.diff(pe2) > 0)
    with pytest.raises(ParameterError, match="level"):
        projected_delta(0.1, 0.01, 100, 0.0, 1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        projected_delta(0.1, 0.01, 100, 0.01, -1.0)
    with pytest.raises(ParameterError, match="n="):
        projected_epsilon_expected(0.1, 0.01, 0, 0.01)


# --------------------------------------------------------------------------- soundness and power


@pytest.mark.statistical
def test_soundness_certified_epsilon_never_above_the_truth():
    """20 seeded audits (10^5 samples a side) of the correct Gaussian: the certified ε at δ = 1e-5
    exceeds the true ε(1e-5) = 1 in at most 3 runs. Each run may exceed it with probability <= 0.05
    (the confidence), so even for bounds that were exactly tight this fails with probability
    P[Bin(20, 0.05) >= 4] = 1.6%; the measured bounds sit near 0.6, far below 1, and none exceeds it."""
    got = [_certify(100_000, SIGMA, 100 + r)[0] for r in range(20)]
    above = sum(e > 1.0 for e in got)
    assert above <= 3, f"{above} of 20 certified ε above the truth 1: {got} (false-failure rate <= 1.6%)"
    assert max(got) < 1.0


@pytest.mark.statistical
def test_power_at_a_million_samples():
    """10^6 samples a side (10% train, 90% certify) of the correct Gaussian at (1, 1e-5): the median
    over 3 seeded runs certifies >= 0.68 of the true ε(1e-5) = 1 (the best half-line's projection is
    0.743 with 2 events; benchmarks/results/approx_dp.md measured a median 0.756 over 30 runs, range
    0.661 to 0.857, so a run falls below 0.68 about 5% of the time). False-failure rate (2 of 3 runs
    below 0.68): about 0.7%."""
    got = [_certify(1_000_000, SIGMA, 200 + r)[0] for r in range(3)]
    assert np.median(got) >= 0.68, f"certified ε {got} (median below 0.68; false-failure rate about 0.7%)"
    assert max(got) <= 1.0


@pytest.mark.statistical
@pytest.mark.slow
def test_a_gaussian_with_sigma_20_percent_too_small_is_caught():
    """σ 20% too small for its claim (1, 1e-5) (true ε(1e-5) = 1.278, δ(1) = 2.2e-4): at 5·10^6
    samples a side the certified ε at δ = 1e-5 exceeds the claimed 1, and so does the certified δ at
    ε = 1 exceed 1e-5. benchmarks/results/approx_dp.md caught it in every run at this size (6 of 6,
    median ε_lb 1.11); false-failure rate below 5%."""
    eps, delta = _certify(5_000_000, 0.8 * SIGMA, 300, epsilon=1.0)
    assert eps > 1.0 and delta > DELTA, (
        f"ε_lb = {eps:.3f}, δ_lb = {delta:.3g}: violation not certified (false-failure rate < 5%)"
    )
