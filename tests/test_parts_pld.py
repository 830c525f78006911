"""The PLD route of the parts prover (issue 15, accounting): compositions of scalar discrete Laplace,
discrete Gaussian and randomized-response leaves proved by privacy-loss distributions with certified
error. Deterministic; the brute-force truth is tests/_exact_truth.py (its own interpreter of the
structure, independent of the prover)."""

from __future__ import annotations

import pytest

from dpharness import AddRemove, ApproxDP, Finite, RealBox, RealInterval, Substitute, parts as dp, prove
from dpharness.proofs import Verdict

from _exact_truth import exact_truth

EXACT_TEN_GAUSSIANS = 17.857  # ε(1e-5) of ten σ = 1 Gaussian counts: the exact PLD (Google's dp_accounting agrees)


def _ten_gaussians(eps):
    return dp.mechanism(
        name="ten",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.compose(*[dp.count() >> dp.gaussian(sigma=1) for _ in range(10)]),
        claim=ApproxDP(eps, 1e-5),
    )


def test_ten_gaussian_counts_are_proved_at_their_pld_value():
    """The issue's target: (17.95, 1e-5) PROVED (zCDP alone proves only from 19.05), by the PLD route."""
    proof = prove(_ten_gaussians(17.95))
    assert proof.verdict is Verdict.PROVED
    assert any("privacy-loss distribution of the composition" in s.statement for s in proof.steps)
    assert proof.delta_bound <= 1e-5


def test_a_claim_half_a_percent_below_the_exact_value_is_not_proved():
    proof = prove(_ten_gaussians(EXACT_TEN_GAUSSIANS * 0.995))
    assert proof.verdict is not Verdict.PROVED
    note = next(n for n in proof.notes if n.startswith("PLD accounting"))
    assert "10 × discrete Gaussian" in note


def test_laplace_compositions_are_proved_near_and_never_below_the_exact_truth():
    """Three discrete Laplace counts (t = 2): the brute-force δ(ε) of the composition at the claim is at
    most the claimed δ whenever PROVED, and a claim 2% above the exact ε(δ) is PROVED."""

    def mech(eps, delta):
        return dp.mechanism(
            name="lap3",
            records=RealInterval(0, 1),
            relation=AddRemove(),
            steps=dp.compose(*[dp.count() >> dp.discrete_laplace(2) for _ in range(3)]),
            claim=ApproxDP(eps, delta),
        )

    truth = exact_truth(mech(1, 1e-3))
    for delta in (1e-3, 1e-2, 0.05):
        lo, hi = 0.0, 1.5  # the exact ε(δ) by bisection on the brute-force δ
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if truth.delta(mid) > delta else (lo, mid)
        exact_eps = hi
        for factor in (0.98, 0.995, 1.02):
            proof = prove(mech(exact_eps * factor, delta))
            if proof.verdict is Verdict.PROVED:
                assert truth.delta(exact_eps * factor) <= delta * (1 + 1e-9)
        assert prove(mech(exact_eps * 1.02, delta)).verdict is Verdict.PROVED
        assert prove(mech(exact_eps * 0.995, delta)).verdict is not Verdict.PROVED


def test_randomized_response_compositions_use_the_pld():
    m = dp.mechanism(
        name="rr2",
        records=Finite((0, 1, 2)),
        relation=Substitute(),
        input="record",
        steps=dp.compose(dp.randomized_response(1), dp.randomized_response(1)),
        claim=ApproxDP(1.9, 0.05),
    )
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED
    assert any("privacy-loss distribution" in s.statement for s in proof.steps)


def test_no_pld_route_where_no_single_pair_dominates():
    """Parallel composition under substitution has two scenarios, and a vector leaf no scalar worst pair:
    the account carries no PLD there, and the prover falls back to the other routes."""
    from dpharness.mechanisms import parts as P
    from dpharness.proofs._kernel import ProofBuilder
    from dpharness.proofs.parts import _Walk

    par = dp.mechanism(
        name="par",
        records=RealBox(0, 1, 2),
        relation=Substitute(),
        steps=dp.compose(
            dp.parallel(dp.count() >> dp.gaussian(sigma=1), by=0, keys=[0, 1]),
            dp.column(1) >> dp.sum() >> dp.gaussian(sigma=1),
        ),
        claim=ApproxDP(5, 1e-5),
    )
    vec = dp.mechanism(
        name="vec",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.compose(dp.histogram(edges=[0, 0.5, 1]) >> dp.gaussian(sigma=1), dp.count() >> dp.gaussian(sigma=1)),
        claim=ApproxDP(5, 1e-5),
    )
    for m in (par, vec):
        walk = _Walk(ProofBuilder(m))
        account = walk.walk("", m.steps, m.space, P.input_distance(m.relation, m.space))
        assert account.pld is None
    one = dp.mechanism(
        name="one",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.compose(dp.count() >> dp.gaussian(sigma=1), dp.count() >> dp.laplace(scale=1)),
        claim=ApproxDP(5, 1e-5),
    )
    walk = _Walk(ProofBuilder(one))
    account = walk.walk("", one.steps, one.space, P.input_distance(one.relation, one.space))
    assert [e[0] for e in account.pld] == ["gaussian", "laplace"]


@pytest.mark.parametrize("relation", [AddRemove(), Substitute()])
def test_a_leaf_that_sees_no_change_adds_nothing_to_the_pld(relation):
    """Under substitution a count does not move (shift 0): its leaf contributes no factor."""
    from dpharness.mechanisms import parts as P
    from dpharness.proofs._kernel import ProofBuilder
    from dpharness.proofs.parts import _Walk

    m = dp.mechanism(
        name="c",
        records=RealInterval(0, 1),
        relation=relation,
        steps=dp.compose(dp.count() >> dp.gaussian(sigma=1), dp.clamp(0, 1) >> dp.sum() >> dp.gaussian(sigma=1)),
        claim=ApproxDP(5, 1e-5),
    )
    walk = _Walk(ProofBuilder(m))
    account = walk.walk("", m.steps, m.space, P.input_distance(m.relation, m.space))
    assert len(account.pld) == (2 if isinstance(relation, AddRemove) else 1)
