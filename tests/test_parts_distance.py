"""Privacy maps as functions of the distance (issue 15 §5): ``prove(m, distance=k)`` judges the claim
for data sets that differ by k records."""

from __future__ import annotations

import math

import pytest

from dpharness import AddRemove, ApproxDP, Finite, PureDP, RealInterval, Substitute, parts as dp, prove
from dpharness.errors import ParameterError
from dpharness.proofs import Verdict
from dpharness.registry import get


def _count(noise, claim, relation=AddRemove()):
    return dp.mechanism(
        name="count_k", records=RealInterval(0, 1), relation=relation, steps=dp.count() >> noise, claim=claim
    )


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_a_laplace_count_at_distance_k_is_k_epsilon(k):
    assert prove(_count(dp.laplace(scale=1), PureDP(k)), distance=k).verdict is Verdict.PROVED
    assert prove(_count(dp.laplace(scale=1), PureDP(k - 0.01)), distance=k).verdict is not Verdict.PROVED


def test_a_sum_under_substitution_scales_with_k():
    m = dp.mechanism(
        name="sum_k",
        records=RealInterval(0, 1),
        relation=Substitute(),
        size=10,
        steps=dp.clamp(0, 1) >> dp.sum() >> dp.laplace(scale=1),
        claim=PureDP(3),
    )
    assert prove(m, distance=3).verdict is Verdict.PROVED
    assert prove(m, distance=4).verdict is not Verdict.PROVED


def test_a_gaussian_at_distance_two_is_the_gaussian_with_half_the_sigma():
    """σ = 2 at distance 2 has the loss law of σ = 1 at distance 1: ε(1e-5) = 4.3772 (exact)."""
    at_two = prove(_count(dp.gaussian(sigma=2), ApproxDP(4.38, 1e-5)), distance=2)
    assert at_two.verdict is Verdict.PROVED
    assert any("shift 2097152" in s.statement for s in at_two.steps)
    assert prove(_count(dp.gaussian(sigma=2), ApproxDP(4.37, 1e-5)), distance=2).verdict is not Verdict.PROVED


def test_subsampled_mechanisms_use_group_privacy_only():
    eps1 = math.log(1 + 0.25 * (math.e - 1))
    m = dp.mechanism(
        name="sub_k",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.poisson_sample(0.25) >> dp.count() >> dp.laplace(scale=1),
        claim=PureDP(2 * eps1 * (1 + 1e-9)),
    )
    assert prove(m, distance=2).verdict is Verdict.PROVED


def test_distance_is_refused_where_it_means_nothing():
    local = dp.mechanism(
        name="rr_k",
        records=Finite((0, 1, 2)),
        relation=Substitute(),
        input="record",
        steps=dp.randomized_response(1),
        claim=PureDP(5),
    )
    assert prove(local, distance=2).verdict is Verdict.UNPROVEN
    hand_proved = prove(get("median")(), distance=2)
    assert hand_proved.verdict is Verdict.UNPROVEN and "distance 1" in hand_proved.notes[0]
    one = prove(get("clamped_count")())  # a catalog class declared from parts: answered (twice its ε)
    two = prove(get("clamped_count")(), distance=2)
    assert one.verdict is Verdict.PROVED and two.verdict is not Verdict.PROVED and two.bound == 2 * one.bound
    vector = prove(get("laplace")(), distance=2)  # vector input: its relation already says how far inputs are
    assert vector.verdict is Verdict.UNPROVEN
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ParameterError, match="distance="):
            prove(_count(dp.laplace(scale=1), PureDP(1)), distance=bad)
