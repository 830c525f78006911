"""Property test of the accounting (issue 15): random compositions of Laplace and Gaussian counts,
Poisson-subsampled or not and repeated, and of k-ary randomized response on one record, proved against an independent accountant, Google's
dp_accounting (installed by the test extra): its pessimistic PLD (connect the dots) bounds ε(δ) from
above and its optimistic PLD (privacy buckets) from below, both at discretisation 1e-4. The proven
ε(δ) must be PROVED at 1% above the pessimistic reference and never at 0.5% below the optimistic one.

Deterministic (seeded hypothesis draws); the default run draws 5 compositions, the slow run 60.
δ is drawn from 1e-3 .. 1e-6: at δ = 1e-8 after about a hundred leaves the certified FFT error (a
2-norm bound) and the tails it moves to +∞ cost more than 1% (measured: 101 Laplace leaves, proven
ε(1e-8) 35.97 against dp_accounting's 35.54, +1.2%), a known gap (README, Accounting)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from dpharness import AddRemove, ApproxDP, Finite, RealInterval, Substitute, parts as dp, prove
from dpharness.proofs import Verdict

dp_accounting = pytest.importorskip("dp_accounting", reason="the test extra installs dp-accounting")
from dp_accounting.pld import privacy_loss_distribution as pldm  # noqa: E402

_LEAF = st.tuples(
    st.sampled_from(["laplace", "gaussian"]),
    st.sampled_from([0.5, 1.0, 2.0, 4.0]),
    st.sampled_from([1.0, 0.5, 0.1, 0.02]),
    st.sampled_from([1, 2, 5, 20, 100]),
)
_COMPOSITIONS = st.lists(_LEAF, min_size=1, max_size=3)


def _composed_reference(leaves, delta, make):
    """(optimistic, pessimistic) ε(δ) by dp_accounting for the product of the leaves: ``make(leaf,
    pessimistic)`` builds one leaf's PLD, ``leaf[-1]`` is how many times it repeats."""
    out = []
    for pessimistic in (False, True):
        total = None
        for leaf in leaves:
            one = make(leaf, pessimistic)
            one = one.self_compose(leaf[-1]) if leaf[-1] > 1 else one
            total = one if total is None else total.compose(one)
        out.append(total.get_epsilon_for_delta(delta))
    return tuple(out)


def _reference(leaves, delta):
    """(optimistic, pessimistic) ε(δ) of Laplace / Gaussian leaves (kind, scale, rate, times)."""

    def make(leaf, pessimistic):
        kind, scale, rate, _ = leaf
        build = pldm.from_laplace_mechanism if kind == "laplace" else pldm.from_gaussian_mechanism
        return build(
            scale,
            sampling_prob=rate,
            value_discretization_interval=1e-4,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
        )

    return _composed_reference(leaves, delta, make)


def _mechanism(leaves, eps, delta):
    parts = []
    for kind, scale, rate, times in leaves:
        noise = dp.laplace(scale=scale) if kind == "laplace" else dp.gaussian(sigma=scale)
        part = (dp.poisson_sample(rate) >> dp.count() >> noise) if rate < 1 else (dp.count() >> noise)
        parts.append(dp.repeat(times, part) if times > 1 else part)
    return dp.mechanism(
        name="drawn",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.compose(*parts) if len(parts) > 1 else parts[0],
        claim=ApproxDP(eps, delta),
    )


def _check(leaves, delta):
    lo, hi = _reference(leaves, delta)
    assert lo <= hi * (1 + 1e-9)
    proof = prove(_mechanism(leaves, hi * 1.01 + 1e-3, delta))
    assert proof.verdict is Verdict.PROVED, f"{leaves}: not PROVED 1% above dp_accounting's ε = {hi}"
    below = prove(_mechanism(leaves, lo * 0.995, delta))
    assert below.verdict is not Verdict.PROVED, f"{leaves}: PROVED below dp_accounting's lower bound {lo}"


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_COMPOSITIONS, st.sampled_from([1e-5, 1e-6, 1e-3]))
def test_random_compositions_agree_with_an_independent_accountant(leaves, delta):
    _check(leaves, delta)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_COMPOSITIONS, st.sampled_from([1e-5, 1e-6, 1e-3]))
def test_many_random_compositions_agree_with_an_independent_accountant(leaves, delta):
    _check(leaves, delta)


_RR = st.tuples(
    st.sampled_from([2, 4, 10]),
    st.lists(st.tuples(st.sampled_from([0.9, 0.6, 0.3]), st.sampled_from([1, 3, 20])), min_size=1, max_size=2),
)


def _rr_check(drawn, delta):
    """k-ary randomized response composed on one record (local DP, any two records neighbours):
    dp_accounting's RR with noise parameter p (true value w.p. 1 − p + p/k) is ours with log-odds
    L = ln((1 − p + p/k)·k/p), the float nearest it."""
    import math

    k, leaves = drawn
    lo, hi = _composed_reference(
        leaves,
        delta,
        lambda leaf, pessimistic: pldm.from_randomized_response(
            leaf[0], k, pessimistic_estimate=pessimistic, value_discretization_interval=1e-4
        ),
    )

    def mech(eps):
        parts = [dp.randomized_response(math.log((1 - p + p / k) * k / p)) for p, _ in leaves]
        parts = [dp.repeat(times, part) if times > 1 else part for part, (_, times) in zip(parts, leaves)]
        return dp.mechanism(
            name="rr_drawn",
            records=Finite(tuple(range(k))),
            relation=Substitute(),
            input="record",
            steps=dp.compose(*parts) if len(parts) > 1 else parts[0],
            claim=ApproxDP(eps, delta),
        )

    assert prove(mech(hi * 1.01 + 1e-3)).verdict is Verdict.PROVED, f"{drawn}: not PROVED 1% above {hi}"
    assert prove(mech(lo * 0.995)).verdict is not Verdict.PROVED, f"{drawn}: PROVED below {lo}"


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_RR, st.sampled_from([1e-5, 1e-3]))
def test_randomized_response_compositions_agree_with_an_independent_accountant(leaves, delta):
    _rr_check(leaves, delta)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_RR, st.sampled_from([1e-5, 1e-6, 1e-3]))
def test_many_randomized_response_compositions_agree_with_an_independent_accountant(leaves, delta):
    _rr_check(leaves, delta)
