"""Tests that kill the mutants of the gate's pass rule (``harness/pipeline.py``: ``proof_policy``,
``ProofSummary.of``, what ``check`` records) which survived ``bash mutation/run.sh gate`` with the
gate's own tests (see mutation/SURVIVORS.md). Deterministic (fixed seeds, small audits)."""

from __future__ import annotations

import pytest

from dpharness.pipeline import Policy, ProofSummary, check, pass_rule, proof_policy
from dpharness.mechanisms.randomized_response import RandomizedResponse
from dpharness.proofs import prove, unproven


def test_proof_policy_of_each_verdict():
    correct = RandomizedResponse()
    assert proof_policy("randomized_response", prove(correct)) is Policy.PROVED
    refuted = prove(RandomizedResponse(log_odds=2.0))  # claims ε = 1 with ε = 2 of noise: REFUTED
    assert refuted.verdict.value == "REFUTED"
    assert proof_policy("randomized_response", refuted) is Policy.REFUTED
    assert proof_policy("randomized_response", unproven(correct, "an obligation failed")) is Policy.UNPROVEN
    assert proof_policy("not_opted_in", unproven(correct, "no proof: nothing registered")) is Policy.NO_PROOF


def test_proof_summary_keeps_the_bound_expression():
    proof = prove(RandomizedResponse())
    assert proof.bound_expr is not None
    summary = ProofSummary.of(proof)
    assert summary.bound_expr == str(proof.bound_expr) and summary.verdict == "PROVED"


@pytest.mark.parametrize("name, buggy", [("rappor_unhalved", True), ("randomized_response", False)])
def test_check_records_what_the_mechanism_is(name, buggy):
    """A gallery bug is judged as one (it passes by being caught); its claim is recorded as text."""
    c = check(name, samples=2_000, seed=0)
    assert c.buggy is buggy and c.claim == "ε = 1 (pure DP)"
    assert (c.passed, c.caught) == (True, buggy)
    assert tuple(pass_rule(buggy=buggy, policy=c.policy, audit_passed=c.audit.passed, crashed=False))[:2] == (
        c.passed,
        c.caught,
    )
