"""False-alarm rate of the auditor on correct mechanisms audited exactly at their true ε (the hardest
case: the certified bound can only exceed the claim by a statistical accident).

Soundness promises Pr[ε_lb > true ε] <= 1 − confidence for every audit. Over N independent audits
(different seeds) the number of false alarms F is then stochastically at most Binomial(N, α).
Each test fails only if F exceeds the (1 − 1e-3) quantile of Binomial(N, α), so a sound auditor
fails it with probability < 1e-3 (the false-failure rate stated in each message)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from dpharness.auditors import audit

FALSE_FAILURE = 1e-3


def _rr2(d, size, rng):
    p = math.e / (1 + math.e)
    return np.where(rng.random(size) < p, d, 1 - d)


def _rr4(d, size, rng):  # k-ary RR, truth w.p. e/(e+3), true ε = 1
    p = math.e / (math.e + 3)
    other = (d + rng.integers(1, 4, size)) % 4
    return np.where(rng.random(size) < p, d, other)


def _geometric(d, size, rng):  # two-sided geometric (discrete Laplace) with true ε = 1
    p = 1 - math.exp(-1)
    return d + rng.geometric(p, size) - rng.geometric(p, size)


def _grid_laplace(d, size, rng):  # float Laplace rounded to 2^-20: true ε = 1 (float error negligible)
    return np.round((d + rng.laplace(0, 1, size)) * 2**20) / 2**20


def _even_geometric(d, size, rng):  # geometric on the even integers (ε = 1): the rounding family's residues
    p = 1 - math.exp(-1)
    return 2 * (d + rng.geometric(p, size) - rng.geometric(p, size))


def _bits(d, size, rng):  # RAPPOR-like one-hot with f = 2/(1+e^0.5): true ε = 1
    f = 2 / (1 + math.exp(0.5))
    x = np.zeros((size, 4), np.int8)
    x[:, d] = 1
    u = rng.random((size, 4))
    return np.where(u < f / 2, 1, np.where(u < f, 0, x)).astype(np.int8)


CASES = [  # (mechanism, data, neighbor, samples)
    (_rr2, 0, 1, 2_000),
    (_rr4, 0, 1, 3_000),
    (_geometric, 0, 1, 3_000),
    (_grid_laplace, 0.0, 1.0, 3_000),
    (_bits, 0, 1, 3_000),
    (_even_geometric, 0, 1, 3_000),
]


def _run(n_audits: int, confidence: float, scale: int) -> tuple[int, int, list]:
    alarms, bounds = 0, []
    for i in range(n_audits):
        mech, a, b, n = CASES[i % len(CASES)]
        r = audit(mech, a, b, epsilon=1.0, samples=n * scale, seed=10_000 + i, confidence=confidence, workers=1)
        bounds.append(r.epsilon_lower_bound)
        alarms += not r.passed
    limit = int(binom.isf(FALSE_FAILURE, n_audits, 1 - confidence))
    return alarms, limit, bounds


@pytest.mark.statistical
def test_false_alarm_rate_small():
    """250 audits at confidence 0.9 (α = 0.1) of six correct mechanisms at their true ε = 1.
    False-failure probability < 1e-3 (binomial tail, see module docstring)."""
    alarms, limit, bounds = _run(250, 0.9, 1)
    assert alarms <= limit, (
        f"{alarms} false alarms in 250 audits at α = 0.1 (limit {limit}; false-failure probability < 1e-3)"
    )
    # the audits are not vacuous: most find a clearly positive bound
    assert np.median(bounds) > 0.3, f"median bound {np.median(bounds)}"


@pytest.mark.statistical
@pytest.mark.slow
def test_false_alarm_rate_large():
    """1000 audits at confidence 0.95 with 10x the samples. False-failure probability < 1e-3."""
    alarms, limit, bounds = _run(1000, 0.95, 10)
    assert alarms <= limit, (
        f"{alarms} false alarms in 1000 audits at α = 0.05 (limit {limit}; false-failure probability < 1e-3)"
    )


def _box_counts(data, size, rng):
    """A parameter vector from a data set of (x, y) records in [0, 1]²: the record count and the number of
    records with x >= 1/2, each with discrete Laplace noise of scale 2 (exact integers): a record moves the
    vector by at most 2 in L1, so the release is exactly 1-DP under add/remove, tight on a pair whose
    extra record has x >= 1/2."""
    arr = np.asarray(data, dtype=float).reshape(-1, 2)
    stats = np.array([len(arr), int(np.count_nonzero(arr[:, 0] >= 0.5))], dtype=np.int64)
    p = 1.0 - math.exp(-0.5)
    return stats[None, :] + rng.geometric(p, (size, 2)) - rng.geometric(p, (size, 2))


def _constant_time(d):  # uniform on {0..7}, one draw per call whatever d is: its outputs and time carry nothing
    return int(np.random.default_rng().integers(0, 8))


@pytest.mark.statistical
@pytest.mark.slow
def test_false_alarm_rate_of_the_new_families():
    """Issue 16: 240 audits of correct mechanisms at confidence 0.9 (α = 0.1), counted together:
    120 audits of a parameter vector over pairs searched in Datasets(RealBox(0, 1, 2)) (the model
    targets' pair search and vector events; true ε = 1 = claim), and 120 timing audits of a sampler
    whose outputs and running time do not depend on the input (claim ε = 0: any positive bound is an
    alarm). Every audit's certified trade-off points are also checked against the claim's curve (none
    may fall below f_{1,0} for the vector mechanism). False-failure probability < 1e-3 (binomial tail)."""
    from dpharness import timing_audit
    from dpharness.auditors.pairsearch import Datasets
    from dpharness.auditors.tradeoff import epsilon_delta_curve
    from dpharness.core import AddRemove, RealBox

    space = Datasets(RealBox(0, 1, 2), AddRemove(), (0, 6))
    alarms, below_curve = 0, 0
    for i in range(120):
        r = audit(
            _box_counts,
            inputs=space,
            epsilon=1.0,
            samples=4_000,
            seed=20_000 + i,
            confidence=0.9,
            workers=1,
            progress=False,
        )
        alarms += not r.passed
        curve = r.tradeoff()
        if curve is not None:  # any certified point below the true curve's claim f_{1,0} is a false alarm too
            below_curve += int(np.any(curve.below(lambda a: epsilon_delta_curve(a, 1.0))))
    for i in range(120):
        t = timing_audit(_constant_time, 0, 1, epsilon=0.0, samples=1_000, seed=30_000 + i, confidence=0.9)
        alarms += not t.passed
    limit = int(binom.isf(FALSE_FAILURE, 240, 0.1))
    assert alarms <= limit, (
        f"{alarms} false alarms in 240 audits at α = 0.1 (limit {limit}; false-failure probability < 1e-3)"
    )
    assert below_curve <= limit, f"{below_curve} audits certified trade-off points below the true curve"
