"""Sequential audits (``audit(..., sequential=True)``, the gate's mode): looks after 1/8, 1/4, 1/2 and
all of the certification samples, a stop at the first look where the verdict is certain, and a union
bound over every look.

Statistical tests use fixed seeds; each states its false-failure probability in its docstring."""

from __future__ import annotations

import math

import numpy as np
import pytest

from _audit_settings import audit_settings
from dpharness.auditors import _audit, audit, clopper_pearson_lower, clopper_pearson_upper
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
    alarms = sum(
        not audit(rr(1.0), 0, 1, epsilon=1.0, samples=40_000, seed=s, workers=1, sequential=True).passed
        for s in range(30)
    )
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


# ----------------------------------------------------------------- the stop rules, exactly
# (these kill the mutants of the stop rules that survived `bash mutation/run.sh audit`)


def _settings(epsilon: float, delta: float = 0.0) -> "_audit._Settings":
    return audit_settings(rr(1.0), epsilon=epsilon, delta=delta, sequential=True)


def _accepted_h1(n: int, h0: int, m: int, alpha: float, epsilon: float, delta: float) -> np.ndarray:
    """The documented rule, for every h1 in 0..n against h0 (m events with these counts): CP_upper(h1)
    − δ <= e^ε CP_lower(h0), each bound at α/(2m)."""
    level = alpha / (2 * m)
    p1_high = clopper_pearson_upper(np.arange(n + 1), n, level)
    return np.flatnonzero(p1_high - delta <= math.exp(epsilon) * float(clopper_pearson_lower(h0, n, level)))


@pytest.mark.parametrize("epsilon, delta", [(1.0, 0.0), (0.5, 0.01)])
def test_all_within_claim_switches_exactly_at_the_documented_threshold(epsilon, delta):
    """Deterministic: for three events with these denominator counts, the largest h1 the rule accepts is
    the one the documented rule (Clopper-Pearson at α/(2m), δ subtracted from the numerator side) accepts."""
    n, alpha, h0 = 2_000, 0.05, 500
    ok = _accepted_h1(n, h0, 3, alpha, epsilon, delta)
    top = int(ok.max())
    assert 0 < top < n and list(ok) == list(range(top + 1))
    s = _settings(epsilon, delta)
    within = lambda h: _audit._all_within_claim(np.array([h, 0, h]), np.array([h0, h0, h0]), n, alpha, s)  # noqa: E731
    assert within(top) and not within(top + 1)


def test_all_within_claim_accepts_equality():
    """The rule is ``<=``: with no denominator hits (lower bound exactly 0) and δ equal to the numerator's
    upper bound, the two sides are both exactly 0 and the event is within the claim."""
    n, alpha, h1 = 1_000, 0.05, np.array([3])
    delta = float(clopper_pearson_upper(h1, n, alpha / 2)[0])
    assert float(clopper_pearson_lower(np.array([0]), n, alpha / 2)[0]) == 0.0
    assert _audit._all_within_claim(h1, np.array([0]), n, alpha, _settings(1.0, delta))
    assert not _audit._all_within_claim(h1 + 1, np.array([0]), n, alpha, _settings(1.0, delta))


def test_an_infinite_claim_is_always_within():
    assert _audit._all_within_claim(np.array([5]), np.array([0]), 10, 0.05, _settings(math.inf))


@pytest.mark.statistical
def test_a_bound_of_zero_does_not_stop_a_claim_of_zero():
    """A coin that ignores its input, against a claim of ε = 0: nothing is certified (bound exactly 0.0),
    which is no violation, and no event can be certified within an ε = 0 claim, so every look is taken.
    False-failure probability: <= 1 - confidence = 0.01 (a bound > 0 certified at some look)."""
    coin = lambda d, size, rng: rng.random(size) < 0.5  # noqa: E731
    r = audit(coin, 0, 1, epsilon=0.0, samples=40_000, seed=2, confidence=0.99, workers=1, sequential=True)
    seq = r.extra["sequential"]
    assert r.events_tested >= 1
    assert r.epsilon_lower_bound == 0.0 and r.passed, f"bound {r.epsilon_lower_bound} (false-failure prob <= 0.01)"
    assert seq["stopped"] == "all certification samples were used" and len(seq["looks"]) == 4


def test_a_single_look_ends_because_the_samples_ran_out():
    """One certification sample: the plan has one chunk and one look. An infinite claim is within at every
    look, yet the only look is the last, so the audit stops because every sample was used."""
    r = audit(rr(1.0), 0, 1, epsilon=math.inf, samples=20, train_fraction=0.95, seed=0, workers=1, sequential=True)
    seq = r.extra["sequential"]
    assert r.events_tested >= 1 and r.passed and seq["planned_samples"] == 1
    assert len(seq["looks"]) == 1 and seq["stopped"] == "all certification samples were used"
