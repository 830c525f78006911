"""Tests that kill the mutants of the audit verdict (``auditors/_audit.py``) which survived
``bash mutation/run.sh audit`` with the auditor's own tests (see mutation/SURVIVORS.md): the
certified bound an audit reports must be exactly the Clopper-Pearson bound of its reported counts at
the requested confidence and δ, Bonferroni-corrected over the events it tested."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpharness.auditors import audit, clopper_pearson_lower, clopper_pearson_upper


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
    h1, h0 = (r.counts["hits_data"], r.counts["hits_neighbor"]) if forward else (r.counts["hits_neighbor"], r.counts["hits_data"])
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
