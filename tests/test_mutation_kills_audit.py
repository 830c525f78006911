"""Tests that kill the mutants of the audit verdict (``auditors/_audit.py``) which survived
``bash mutation/run.sh audit`` with the auditor's own tests (see mutation/SURVIVORS.md): the
certified bound an audit reports must be exactly the Clopper-Pearson bound of its reported counts at
the requested confidence and δ, Bonferroni-corrected over the events it tested."""

from __future__ import annotations

import math

import numpy as np
import pytest

from _audit_settings import audit_settings
from dpharness.auditors import _audit, audit, clopper_pearson_lower, clopper_pearson_upper
from dpharness.auditors.stats import delta_lower_bound, epsilon_lower_bound


def _rr(eps: float):
    keep = math.exp(eps) / (1.0 + math.exp(eps))

    def mech(d, size, rng):
        return np.where(rng.random(size) < keep, d, 1 - d)

    return mech


@pytest.mark.parametrize("confidence, delta", [(0.8, 0.0), (0.99, 0.05)])
def test_the_bound_is_recomputable_from_the_reported_counts(confidence, delta):
    """Deterministic given the seed: whatever the counts, the reported bound is their Clopper-Pearson
    bound at level (1 − confidence) / (2 · events tested), with δ subtracted from the numerator."""
    r = audit(_rr(1.0), 0, 1, epsilon=1.0, delta=delta, samples=20_000, seed=3, confidence=confidence, workers=1)
    assert r.confidence == confidence and r.delta == delta and r.events_tested >= 1
    level = (1 - confidence) / (2 * r.events_tested)
    assert r.extra["per_event_level"] == pytest.approx(level, rel=1e-12)
    forward = r.extra["direction"] == "data over neighbor"
    h1, h0 = (
        (r.counts["hits_data"], r.counts["hits_neighbor"])
        if forward
        else (r.counts["hits_neighbor"], r.counts["hits_data"])
    )
    n = r.counts["n_data"]
    assert n == r.counts["n_neighbor"] == r.extra["certification_samples"]
    p1, p0 = clopper_pearson_lower(h1, n, level), clopper_pearson_upper(h0, n, level)
    assert r.extra["p1_low"] == pytest.approx(p1, rel=1e-12) and r.extra["p0_high"] == pytest.approx(p0, rel=1e-12)
    assert r.epsilon_lower_bound == pytest.approx(math.log((p1 - delta) / p0), rel=1e-12)
    assert r.passed == (not r.epsilon_lower_bound > 1.0)


def test_an_audit_without_candidate_events_says_so():
    r = audit(lambda d, size, rng: np.zeros(size), 0, 1, epsilon=1.0, samples=2_000, seed=0, workers=1)
    assert r.passed and r.epsilon_lower_bound == 0.0 and r.witness is None and r.events_tested == 0
    assert r.method.endswith("no candidate events (the outputs did not vary)")


def _settings(epsilon: float, delta: float = 0.0, sequential: bool = False):
    return audit_settings(_rr(1.0), epsilon=epsilon, delta=delta, sequential=sequential)


@pytest.mark.parametrize("confidence", [0.9, 0.999])
def test_bounds_are_the_bonferroni_bounds_of_every_event_at_the_given_confidence(confidence):
    """Deterministic: ``_bounds`` at a look's confidence is epsilon_lower_bound / delta_lower_bound of all
    m events at that confidence (not the default 0.95), with m = the number of events."""
    h1, h0, n = np.array([900, 400, 90]), np.array([100, 380, 10]), 1_000
    s = _settings(1.0, 0.01)
    eb, db = _audit._bounds(h1, h0, n, confidence, s)
    want_e = epsilon_lower_bound(h1, n, h0, n, confidence=confidence, delta=0.01, candidates=3)
    want_d = delta_lower_bound(h1, n, h0, n, epsilon=1.0, confidence=confidence, candidates=3)
    assert (eb.epsilon, eb.index, eb.level, eb.candidates) == (want_e.epsilon, want_e.index, want_e.level, 3)
    assert (db.delta, db.index, db.level, db.candidates, db.confidence) == (
        want_d.delta,
        want_d.index,
        want_d.level,
        3,
        confidence,
    )
    assert db.delta > 0  # the δ bound depends on the confidence here, so a default confidence would show


def test_an_infinite_claim_has_no_delta_bound():
    """δ at ε = ∞ is meaningless: the audit reports no δ bound (None), whatever the counts."""
    eb, db = _audit._bounds(np.array([700, 5]), np.array([200, 0]), 1_000, 0.95, _settings(math.inf))
    assert db is None and eb.epsilon > 0
    r = audit(_rr(2.0), 0, 1, epsilon=math.inf, samples=5_000, seed=1, workers=1)
    assert r.passed and r.delta_lower_bound is None


def test_a_bound_of_zero_passes_a_claim_of_zero():
    """Deterministic (no candidate events: the bound is exactly 0.0): ε >= 0 is no violation of ε = 0."""
    r = audit(lambda d, size, rng: np.zeros(size), 0, 1, epsilon=0.0, samples=2_000, seed=0, workers=1)
    assert r.epsilon_lower_bound == 0.0 and r.passed


def test_a_full_audit_certifies_on_every_chunk_at_the_full_confidence():
    """A non-sequential audit over several chunks (fn(data) in a loop: 10 000 samples a chunk) counts all
    its certification samples in one look at the full confidence. Deterministic in what is asserted."""
    rng = np.random.default_rng(0)
    r = audit(
        lambda d: int(rng.random() < 0.6) ^ d, 0, 1, epsilon=1.0, samples=25_000, seed=0, workers=1, vectorized=False
    )
    assert r.events_tested >= 1 and "sequential" not in r.extra
    assert r.counts["n_data"] == r.extra["certification_samples"] == 25_000 - r.extra["train_samples"] > 20_000
    assert r.extra["per_event_level"] == pytest.approx((1 - r.confidence) / (2 * r.events_tested), rel=1e-12)
