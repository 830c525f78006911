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
