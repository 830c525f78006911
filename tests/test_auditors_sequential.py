"""Sequential audits (``audit(..., sequential=True)``, the gate's mode): looks after 1/8, 1/4, 1/2 and
all of the certification samples, a stop at the first look where the verdict is certain, and a union
bound over every look.

Statistical tests use fixed seeds; each states its false-failure probability in its docstring."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpharness.auditors import _audit, audit
from dpharness.errors import ParameterError


def rr(eps: float):
    """Binary randomized response with true ε = eps."""
    p = math.exp(eps) / (1 + math.exp(eps))

    def mech(d, size, rng):
        return np.where(rng.random(size) < p, d, 1 - d)

    return mech


def _spent(result) -> float:
    """α spent over the looks that were planned (the stop only skips some)."""
    return sum(1 - look["confidence"] for look in result.extra["sequential"]["looks"])


@pytest.mark.parametrize("n_chunks", [1, 2, 3, 7, 8, 9, 64])
@pytest.mark.parametrize("alpha", [0.05, 0.01, 1e-4])
def test_the_looks_spend_exactly_alpha_and_end_on_the_last_chunk(n_chunks, alpha):
    plan = _audit._look_plan(n_chunks, alpha)
    assert math.isclose(sum(a for _, a in plan), alpha, rel_tol=1e-12)
    ends = [e for e, _ in plan]
    assert ends == sorted(set(ends)) and ends[-1] == n_chunks and ends[0] >= 1
    assert plan[-1][1] == pytest.approx(alpha if len(plan) == 1 else alpha / 2)


@pytest.mark.statistical
def test_a_clear_violation_stops_at_the_first_look():
    """Randomized response at true ε = 2 against a claim of 1: certified at the first look (1/8 of the
    samples). False-failure probability: < 1e-9 (the first look alone certifies about 1.9)."""
    r = audit(rr(2.0), 0, 1, epsilon=1.0, samples=400_000, seed=3, workers=1, sequential=True)
    seq = r.extra["sequential"]
    assert not r.passed and r.epsilon_lower_bound > 1.5
    assert seq["stopped"] == "a violation was certified"
    assert len(seq["looks"]) == 1 and r.counts["n_data"] == seq["looks"][0]["samples"]
    assert seq["looks"][0]["samples"] * 8 == pytest.approx(seq["planned_samples"], abs=8)
    assert "sequential: 1 look(s)" in r.method


@pytest.mark.statistical
def test_a_loose_claim_stops_early_with_a_pass():
    """Randomized response at true ε = 0.5 against a claim of 2: every event is certified within the
    claim at an early look. False-failure probability: < 1e-9 (at 45 000 samples a side the upper
    bounds on the loss are below 0.7)."""
    r = audit(rr(0.5), 0, 1, epsilon=2.0, samples=400_000, seed=4, workers=1, sequential=True)
    seq = r.extra["sequential"]
    assert r.passed
    assert seq["stopped"] == "every chosen event was certified within the claim"
    assert len(seq["looks"]) < 4 and r.counts["n_data"] < seq["planned_samples"]


@pytest.mark.statistical
def test_a_tight_claim_uses_every_look_and_stays_valid():
    """At the true ε (claim = 1, true ε = 1) neither stop applies before the last look. The bound is a
    lower bound at confidence 0.95 over all looks. False-failure probability: <= 5% by construction
    (Bonferroni over looks and events), far less in practice."""
    r = audit(rr(1.0), 0, 1, epsilon=1.0, samples=400_000, seed=5, workers=1, sequential=True)
    seq = r.extra["sequential"]
    assert r.passed, f"false alarm at the true ε: {r.epsilon_lower_bound} (false-failure prob <= 0.05)"
    assert seq["stopped"] == "all certification samples were used" and len(seq["looks"]) == 4
    assert _spent(r) == pytest.approx(1 - r.confidence)
    assert 0.9 < r.epsilon_lower_bound <= 1.0


@pytest.mark.statistical
def test_false_alarms_over_seeds_stay_within_the_confidence():
    """30 sequential audits of randomized response at exactly its true ε (claim = truth, the hardest
    case for the union bound over looks): a false alarm has probability <= 5% per audit by
    construction. The test fails at more than 6 of 30, probability <= 0.008 for a correct auditor
    (binomial tail at p = 0.05)."""
    alarms = sum(not audit(rr(1.0), 0, 1, epsilon=1.0, samples=40_000, seed=s, workers=1, sequential=True).passed
                 for s in range(30))
    assert alarms <= 6, f"{alarms} of 30 false alarms (false-failure prob <= 0.008)"


def test_same_seed_same_result():
    a = audit(rr(1.0), 0, 1, epsilon=0.5, samples=100_000, seed=9, workers=1, sequential=True)
    b = audit(rr(1.0), 0, 1, epsilon=0.5, samples=100_000, seed=9, workers=1, sequential=True)
    assert a.epsilon_lower_bound == b.epsilon_lower_bound and a.counts == b.counts
    assert a.extra["sequential"] == b.extra["sequential"]


def test_a_full_audit_reports_no_looks():
    r = audit(rr(1.0), 0, 1, epsilon=1.0, samples=50_000, seed=1, workers=1)
    assert "sequential" not in r.extra and "sequential" not in r.method


def test_sequential_must_be_a_bool():
    with pytest.raises(ParameterError, match="sequential="):
        audit(rr(1.0), 0, 1, epsilon=1.0, samples=1_000, sequential="yes")
