"""The privacy profile ε(δ) a proof accounts (dpharness.proofs._profile): upper bounds consistent with
the verdicts, non-increasing in δ, bracketed where the PLD's lower end is certified."""

from __future__ import annotations

import math

from dpharness import parts as dp
from dpharness import prove
from dpharness.core import AddRemove, ApproxDP, IntegerRange, PureDP, RealBox, Substitute
from dpharness.proofs import Verdict
from dpharness.proofs._profile import privacy_profile


def _ten(claim):
    return dp.mechanism(
        name="ten",
        records=IntegerRange(0, 100),
        relation=AddRemove(),
        steps=dp.compose(*[dp.count() >> dp.discrete_gaussian(sigma=1) for _ in range(10)]),
        claim=claim,
    )


def test_the_profile_is_non_increasing_bracketed_and_agrees_with_the_verdicts():
    profile = privacy_profile(_ten(ApproxDP(20, 1e-5)))
    eps = [e for _, e, _ in profile.points]
    assert all(a >= b for a, b in zip(eps, eps[1:]))
    for _, e, lo in profile.points:
        assert lo is None or lo <= e
    assert 1e-5 in [d for d, _, _ in profile.points]  # the decades are profiled exactly
    at = profile.epsilon(1e-5)
    assert profile.methods[[d for d, _, _ in profile.points].index(1e-5)] == "PLD (certified upper)"
    assert profile.epsilon(2e-5) == at and math.isinf(profile.epsilon(1e-13))
    assert prove(_ten(ApproxDP(at * 1.0001, 1e-5))).verdict is Verdict.PROVED
    assert prove(_ten(ApproxDP(at * 0.99, 1e-5))).verdict is not Verdict.PROVED


def test_a_pure_mechanism_has_a_flat_profile_at_its_epsilon():
    m = dp.mechanism(
        name="lap",
        records=IntegerRange(0, 9),
        relation=AddRemove(),
        steps=dp.count() >> dp.discrete_laplace(scale=2),
        claim=PureDP(0.5),
    )
    profile = privacy_profile(m)
    assert profile.pure == 0.5
    assert all(e <= 0.5 for _, e, _ in profile.points)


def test_partition_selection_has_no_epsilon_below_its_exact_delta():
    m = dp.mechanism(
        name="users",
        records=RealBox(0, 100, 2),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=2, max_per_partition=1)
        >> dp.group_by(by=1, keys=range(5), select=dp.partition_select(threshold=5, scale=1)),
        claim=ApproxDP(2, 0.02660033),
    )
    profile = privacy_profile(m)
    for d, e, _ in profile.points:
        assert (e == 2.0) if d >= 0.0266003 else math.isinf(e)


def test_local_randomizers_have_no_profile():
    from dpharness.core import Finite

    m = dp.mechanism(
        name="rr",
        records=Finite((1, 2, 3)),
        relation=Substitute(),
        input="record",
        steps=dp.randomized_response(log_odds=1),
        claim=PureDP(1),
    )
    assert privacy_profile(m) is None
