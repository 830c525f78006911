"""Sampling without replacement of a fixed size (issue 15 §3): dp.sample(m) under substitution on data
sets of a declared size n, amplified at q = m/n (Balle, Barthe & Gaboardi 2018, Thm 9)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpharness import audit, prove
from dpharness import parts as dp
from dpharness.core import AddRemove, IntegerRange, PureDP, RenyiDP, Substitute
from dpharness.errors import ParameterError
from dpharness.proofs import Verdict

AMPLIFIED = math.log(1 + 0.25 * (math.e - 1))  # ε = 1 inside, q = 5/20


def _wor(eps, relation=Substitute(), size=20, claim=None):
    return dp.mechanism(
        name="wor",
        records=IntegerRange(0, 1),
        relation=relation,
        size=size,
        steps=dp.sample(5) >> dp.sum() >> dp.discrete_laplace(scale=1),
        claim=claim or PureDP(eps),
    )


def test_the_amplified_epsilon_is_proved_and_the_unamplified_claim_is_not_needed():
    p = prove(_wor(AMPLIFIED * 1.0001))
    assert p.verdict is Verdict.PROVED and abs(float(p.bound) - AMPLIFIED) < 1e-12
    assert any("Thm 9" in o.justification for o in p.steps)
    assert prove(_wor(AMPLIFIED * 0.9)).verdict is not Verdict.PROVED


def test_rho_is_unchanged_by_the_sampling():
    m = dp.mechanism(
        name="wor_rho",
        records=IntegerRange(0, 1),
        relation=Substitute(),
        size=10,
        steps=dp.sample(2) >> dp.sum() >> dp.discrete_gaussian(sigma=2),
        claim=RenyiDP(2, 0.25),
    )
    assert prove(m).verdict is Verdict.PROVED  # α·ρ = 2 · 1/8


@pytest.mark.parametrize("relation, size", [(AddRemove(), None), (Substitute(), None)])
def test_without_substitution_and_a_declared_size_it_is_unproven(relation, size):
    m = dp.mechanism(
        name="wor_bad",
        records=IntegerRange(0, 1),
        relation=relation,
        size=size,
        steps=dp.sample(5) >> dp.count() >> dp.discrete_laplace(scale=1),
        claim=PureDP(1),
    )
    p = prove(m)
    assert p.verdict is Verdict.UNPROVEN
    assert any("sampling without replacement is proved here" in o.justification for o in p.steps if not o.discharged)


def test_the_sampler_draws_exactly_m_records_and_refuses_fewer():
    m = _wor(1)
    rng = np.random.default_rng(0)
    out = m.sample(np.ones(20), 2000, rng)  # every 5-subset of twenty ones sums to exactly 5
    assert np.median(out) == 5  # the noise is symmetric with P(0) ≈ 0.46: the median is 5 but with tiny odds
    half = m.sample(np.array([1.0] * 10 + [0.0] * 10), 4000, rng)
    assert abs(half.mean() - 2.5) < 0.15  # hypergeometric mean 5·10/20; sd of the mean ≈ 0.027
    with pytest.raises(ParameterError, match="draws 5 records but the data set has 3"):
        dp.mechanism(
            name="wor_small",
            records=IntegerRange(0, 1),
            relation=Substitute(),
            steps=dp.sample(5) >> dp.sum() >> dp.discrete_laplace(scale=1),
            claim=PureDP(1),
        ).sample(np.ones(3), 10, rng)
    with pytest.raises(ParameterError, match="size="):
        dp.sample(0)


@pytest.mark.statistical
def test_the_audit_stays_below_the_amplified_bound():
    """2·10^5 samples a side, seed 0, 95%: the certified lower bound is at most the proven ε
    (false-failure rate <= 5%)."""
    r = audit(_wor(AMPLIFIED * 1.0001), samples=200_000, seed=0)
    assert r.passed and r.epsilon_lower_bound <= AMPLIFIED


@pytest.mark.parametrize(
    "steps",
    [
        # a partition sees fewer than n records: q = m/n would understate its rate
        dp.parallel(dp.sample(2) >> dp.count() >> dp.discrete_laplace(scale=1), by=0, keys=[0, 1]),
        # the second sample draws from the first's 5 records, not from n
        dp.sample(5) >> dp.sample(2) >> dp.sum() >> dp.discrete_laplace(scale=1),
    ],
)
def test_a_sample_that_does_not_see_the_whole_data_set_is_not_amplified_by_m_over_n(steps):
    m = dp.mechanism(
        name="wor_part", records=IntegerRange(0, 1), relation=Substitute(), size=20, steps=steps, claim=PureDP(5)
    )
    p = prove(m)
    assert p.verdict is Verdict.UNPROVEN
    assert any("must see the whole data set" in o.justification for o in p.steps if not o.discharged)
    assert not any("q = m/n" in o.statement for o in p.steps)


def test_a_sample_inside_a_composition_sees_the_whole_data_set():
    part = dp.sample(5) >> dp.sum() >> dp.discrete_laplace(scale=1)
    m = dp.mechanism(
        name="wor_twice",
        records=IntegerRange(0, 1),
        relation=Substitute(),
        size=20,
        steps=dp.compose(part, part),
        claim=PureDP(2 * AMPLIFIED * 1.0001),
    )
    assert prove(m).verdict is Verdict.PROVED
