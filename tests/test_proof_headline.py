"""What a proof says of an (ε, δ) claim it does not prove: the ε derived at the claim's own δ (or the δ at
its ε, for partition selection), with the certified bracket where the proof certifies a lower end, never a
δ above 1 (the zCDP conversion's δ at the claimed ε is vacuous far below the mechanism's ε: "δ ≤ 2503");
the printed ε is rounded up, so that it is itself PROVED; the gate line carries it. And a PROVED claim
prints a bound that is itself proved (1.8291 reads 1.8291, never 1.829)."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import numpy as np
import pytest

import dpharness
from dpharness import AddRemove, ApproxDP, IntegerRange, PureDP, RealBox, RealInterval, parts as dp, prove
from dpharness.proofs import Verdict


def _grad(theta, record):  # d/dθ of the logistic loss at one record (the guide's DP-SGD)
    x, y = record
    return (1 / (1 + np.exp(-theta[0] * x)) - y) * x


def _step(theta, noisy_sum):
    return theta - 0.5 * noisy_sum / 100


def _dpsgd(claim, *, times=1000, sigma=1):
    return dp.mechanism(
        name="team_dpsgd",
        records=RealBox(-1, 1, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            times,
            dp.poisson_sample(0.01) >> dp.map_records(_grad) >> dp.clip_norm(1) >> dp.sum() >> dp.gaussian(sigma=sigma),
            init=[0.0],
            update=_step,
        ),
        claim=claim,
    )


def _two_laplace_counts(claim):
    return dp.mechanism(
        name="two_counts",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.compose(dp.count() >> dp.laplace(epsilon=0.5), dp.count() >> dp.laplace(epsilon=0.5)),
        claim=claim,
    )


def _partition(claim):
    return dp.mechanism(
        name="records_per_key",
        records=IntegerRange(0, 9),
        relation=AddRemove(),
        steps=dp.group_by(by=0, keys=range(10), select=dp.partition_select(threshold=3, scale=1)),
        claim=claim,
    )


def _delta_numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"δ(?:\(ε = [^)]*\))? (?:≤|=|<=) ([0-9.e+-]+)", text)]


def _unproven_mechanisms():
    """Claims not PROVED, by every route: post-processing keeps the prover from refuting them."""
    ten = dp.repeat(10, dp.count() >> dp.gaussian(sigma=1))
    return [
        _dpsgd(ApproxDP(6, 1e-5), times=100, sigma=0.5),  # the "σ halved" (zCDP's δ at ε = 6: 5e13)
        _post("gaussian_post", dp.count() >> dp.gaussian(sigma=1), ApproxDP(0.5, 1e-5)),  # exact DG profile
        _post("ten_gaussians_post", ten, ApproxDP(6, 1e-5)),  # PLD
        _post("two_laplace_post", _two_laplace_counts(PureDP(1)).steps, ApproxDP(0.5, 1e-5)),  # PLD
        dpharness.get("laplace")().replace(dim=2, claim=ApproxDP(0.5, 0.25)),  # zCDP conversion
        _post("partition_post", _partition(PureDP(1)).steps, ApproxDP(1, 1e-3)),  # δ(ε) of partition selection
        # REFUTED ones state their derived pair too
        dp.mechanism(
            name="ten_gaussians", records=RealInterval(0, 1), relation=AddRemove(), steps=ten, claim=ApproxDP(6, 1e-5)
        ),
        dpharness.get("gaussian")().replace(claim=ApproxDP(0.5, 1e-5)),
        dpharness.get("laplace")().replace(claim=ApproxDP(0.5, 1e-5)),
        _partition(ApproxDP(1, 1e-3)),
    ]


def _post(name, steps, claim):
    records = IntegerRange(0, 9) if name.startswith("partition") else RealInterval(0, 1)
    return dp.mechanism(
        name=name, records=records, relation=AddRemove(), steps=steps >> dp.post(lambda *x: x), claim=claim
    )


@pytest.mark.parametrize("m", _unproven_mechanisms(), ids=lambda m: f"{m.name}")
def test_an_unproven_headline_never_shows_a_delta_above_one(m):
    proof = prove(m)
    assert proof.verdict is not Verdict.PROVED
    assert proof.verdict is Verdict.REFUTED or "post" not in m.name or proof.derived is not None
    assert proof.delta_bound is None or proof.delta_bound <= 1, proof.delta_bound
    text = proof.headline
    assert all(d <= 1 for d in _delta_numbers(text)), text
    if proof.verdict is Verdict.UNPROVEN and proof.delta_bound == float(m.claim.delta):
        # at the claim's own δ: the printed ε (rounded up) is itself PROVED
        printed = re.search(r"ε\(δ = [^)]*\) (?:≤|∈ \[[^,]*,) ([0-9.e+-]+)", text).group(1)
        assert float(printed) >= proof.bound
        assert prove(m.replace(claim=ApproxDP(float(printed), m.claim.delta))).verdict is Verdict.PROVED


def test_the_halved_noise_dpsgd_states_epsilon_at_its_delta_and_the_gate_line_carries_it():
    from dpharness.cli import _gate_line
    from dpharness.pipeline import Check, Policy, ProofSummary, Sandwich

    m = _dpsgd(ApproxDP(6, 1e-5), times=100, sigma=0.5)
    proof = prove(m)
    assert proof.verdict is Verdict.UNPROVEN and proof.delta_bound == 1e-5 and proof.bound > 6
    # led by what fails and by how much (never by a quantity that holds), then the derived bound
    assert proof.headline.startswith("ε exceeds the claim by ") and proof.headline.endswith("> claim 6")
    assert ": derived ε(δ = 1e-05) ≤ " in proof.headline
    summary = ProofSummary.of(proof)
    assert ProofSummary.from_json(json.loads(json.dumps(summary.to_json()))) == summary
    c = Check(
        name=m.name,
        buggy=False,
        claim=m.claim.describe(),
        policy=Policy.UNPROVEN,
        proof=summary,
        sandwich=Sandwich(None, proof.bound, 6.0),
        audit_error="skipped",
    )
    assert f"proof UNPROVEN ({proof.derived})" in _gate_line(c)


def test_a_proved_claim_displays_a_bound_that_is_itself_proved(capsys):
    m = _dpsgd(ApproxDP(1.8291, 1e-5))
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED and proof.headline.startswith("proven bound: ε ≤ 1.8291,")
    assert "1.829," not in proof.headline
    assert Fraction(1.8291) == Fraction(proof.bound)


def test_a_refuted_claim_states_the_bracket_where_a_pair_attains_it():
    """Ten discrete Laplace counts: one pair moves every count at once, so the PLD's lower end is certified
    and a claim below it is REFUTED, with the derived ε at the claim's δ and its bracket."""
    proof = prove(_ten_laplace(ApproxDP(2, 1e-5)))
    assert proof.verdict is Verdict.REFUTED and proof.delta_bound == 1e-5
    assert proof.bound_lower is not None and 2 < proof.bound_lower <= proof.bound
    assert proof.derived.startswith("derived ε(δ = 1e-05) ∈ [") and proof.derived.endswith("> claim 2")
    assert proof.headline == proof.derived


def _ten_laplace(claim):
    return dp.mechanism(
        name="ten_laplace",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.repeat(10, dp.count() >> dp.discrete_laplace(2)),
        claim=claim,
    )


def test_an_unproven_headline_leads_with_the_violated_quantity_and_its_exact_excess():
    """A derived bound a hair above the claim (ε = 1 + 1.5e-12, δ within the claim) reads as that excess,
    not as ``δ(ε = 1.001)``, which reads as a 0.1% overshoot; a δ above the claim with ε within it leads
    with the δ."""
    from dpharness.proofs._model import Proof

    def headline(bound, delta):
        return Proof(
            mechanism=None,
            claim=ApproxDP(1, 1e-6),
            verdict=Verdict.UNPROVEN,
            bound_expr=None,
            bound=bound,
            assumptions=(),
            steps=(),
            witness=None,
            delta_bound=delta,
        ).headline

    assert headline(1.000000000001526, 9.917e-07).startswith("ε exceeds the claim by 1.526e-12: derived δ(ε = ")
    assert headline(0.9, 2e-6).startswith("δ exceeds the claim by 1e-06: derived δ(ε = 0.9) ≤ 2e-06 > claim 1e-06")
    assert headline(1.5, 2e-6).startswith("ε exceeds the claim by 0.5 and δ exceeds the claim by 1e-06: ")


def test_ten_parts_of_a_tenth_are_within_a_claim_of_one():
    """Ten dp.laplace(epsilon=0.1) parts under ε = 1: the float 0.1 is 1/10 + 5.6e-18, but a budget is read
    as the smaller of its binary value and its decimal, so the parts spend exactly 1/10 each."""
    m = dp.mechanism(
        name="ten",
        records=RealBox(0, 1, 1),
        relation=AddRemove(),
        steps=dp.compose(*[dp.count() >> dp.laplace(epsilon=0.1) for _ in range(10)]),
        claim=PureDP(1),
    )
    p = prove(m)
    assert p.verdict is Verdict.PROVED and p.bound_expr == 1, p.headline


def test_a_refuted_claim_leads_with_its_exact_excess():
    """A bound 2**-54 over the claim is a float equal to it: a REFUTED headline leads with the excess, never
    "proven bound: ε ≤ 1" over a refuted claim of 1."""
    t = Fraction(36028797018963968, 3602879701896397)  # 1/t is the binary value of 0.1, above 1/10
    m = dp.mechanism(
        name="ten_binary",
        records=RealBox(0, 1, 1),
        relation=AddRemove(),
        steps=dp.compose(*[dp.count() >> dp.laplace(scale=t) for _ in range(10)]),
        claim=PureDP(1),
    )
    p = prove(m)
    assert p.verdict is Verdict.REFUTED
    assert p.headline == "ε exceeds the claim by 5.552e-17: derived ε ≤ 1 + 5.552e-17 > claim 1", p.headline
    assert "proven bound" not in p.headline
