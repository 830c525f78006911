"""Proof kernel semantics, the lemma library, and the proofs of the simple mechanisms.

Deterministic (sympy, z3, exact evaluation); no statistical tests here."""

from __future__ import annotations

import sympy as sp
import pytest

from dpharness.proofs import _kernel as K
from dpharness.proofs import _lemmas as L
from dpharness.proofs._model import Verdict


# --------------------------------------------------------------------------- kernel semantics

def test_sympy_none_is_a_failure_not_a_pass():
    z = K.sym("z")
    ob = K.discharge("undecidable sign", sp.Ge(sp.sin(z) + 2 * z, 0), "none")
    assert not ob.discharged
    assert "None is a failure" in ob.detail


def test_false_obligation_is_not_discharged_and_z3_finds_the_counterexample():
    z = K.sym("z")
    ob = K.discharge("z >= 0 for a real z", sp.Ge(z, 0), "none")
    assert not ob.discharged
    assert "counterexample" in ob.detail


def test_true_linear_obligation_is_checked_by_both():
    d = K.slack("d")
    b = K.sym("b", positive=True)
    ob = K.discharge("slack", sp.Le(-d / b, 0), "slack")
    assert ob.discharged and ob.checker == "sympy+z3"


def test_z3_alone_discharges_when_sympy_is_undecided():
    z = K.sym("z")
    ob = K.discharge("exp monotone", sp.Le(sp.exp(z) / (sp.exp(z) + 1), sp.E / (sp.exp(z) + 1)), "exp increasing",
                     hypotheses=[sp.Le(z, 1)])
    assert ob.discharged and ob.checker == "z3"


def test_floats_are_refused():
    ob = K.discharge("float", sp.Le(K.sym("q"), sp.Float(0.5) * K.sym("w")), "x")
    assert not ob.discharged and "Float" in ob.detail


def test_disagreement_sympy_true_z3_counterexample_raises(monkeypatch):
    z = K.sym("z")
    monkeypatch.setattr(K, "sympy_decide", lambda f: (True, "forced"))
    with pytest.raises(K.CheckerDisagreement):
        K.discharge("wrongly proved", sp.Ge(z, 0), "none")


def test_disagreement_sympy_false_z3_proof_raises(monkeypatch):
    z = K.sym("z")
    monkeypatch.setattr(K, "sympy_decide", lambda f: (False, "forced"))
    with pytest.raises(K.CheckerDisagreement):
        K.discharge("wrongly refuted", sp.Ge(z ** 2, 0), "none")


def test_ordering_cases_cover_all_permutations_and_prove_the_triangle_inequality():
    y, x, x2 = K.sym("y"), K.sym("x"), K.sym("x2")
    cases = K.ordering_cases([y, x, x2])
    assert len(cases) == 6
    obs = K.check_cases("tri", sp.Le(sp.Abs(y - x2) - sp.Abs(y - x), sp.Abs(x - x2)), cases, "cases")
    assert all(o.discharged for o in obs)
    # a false variant fails in some case
    bad = K.check_cases("bad", sp.Le(sp.Abs(y - x2) - sp.Abs(y - x), sp.Abs(x - x2) / 2), cases, "cases")
    assert not all(o.discharged for o in bad)
    assert not bad[-1].discharged


def test_abs_sign_cases():
    x = K.sym("x")
    cases = K.abs_sign_cases(sp.Abs(x) + sp.Abs(x - 1))
    assert len(cases) == 4
    obs = K.check_cases("abs", sp.Ge(sp.Abs(x) + sp.Abs(x - 1), 1), cases, "cases")
    assert all(o.discharged for o in obs)  # the infeasible case (x <= 0, x >= 1) is vacuous for z3


def test_exact_sign_and_violation():
    assert K.exact_sign(sp.exp(sp.Rational(1, 2)) * 2 - 3) == 1  # 2 sqrt(e) = 3.297
    assert K.exact_sign(sp.log(3) - sp.log(3)) == 0
    assert K.confirm_violation(sp.Rational(3, 4), sp.Rational(1, 4), sp.log(2))  # 3/4 > 2 * 1/4
    assert not K.confirm_violation(sp.Rational(3, 4), sp.Rational(1, 4), sp.log(3))  # equality is no violation
    assert K.exceeds(sp.log(3), 1) and not K.exceeds(1, sp.log(3))


def test_builder_verdicts():
    from dpharness.core import Witness

    class _M:  # a stand-in carrying a claim; the builder only reads .claim
        from dpharness.core import PureDP
        claim = PureDP(1)

    pb = K.ProofBuilder(_M())
    pb.precondition("none")
    pb.claim_bound(sp.Rational(1, 2))
    assert pb.verdict() is Verdict.PROVED
    pb.claim_bound(sp.Integer(2))
    assert pb.verdict() is Verdict.UNPROVEN
    pb.refute(Witness(0, 1, output=0, loss=2.0), "forced")
    proof = pb.finish(sp.Integer(2))
    assert proof.verdict is Verdict.REFUTED and proof.bound == 2.0 and "total" in proof.timings


# --------------------------------------------------------------------------- lemmas

@pytest.mark.parametrize("lemma", [
    L.triangle_inequality, lambda: L.l1_triangle(3), lambda: L.logsumexp_monotone(3), L.gaussian_profile,
    lambda: L.gaussian_rdp()[0], lambda: L.sequential_composition([1, 1, 1], total_eps=3),
    lambda: L.advanced_composition(10, sp.Rational(1, 10), 0, sp.Rational(1, 10 ** 5))[0],
    lambda: L.rdp_to_dp(2, 1, sp.Rational(1, 10 ** 5))[0], lambda: L.group_privacy(2, 1)[0],
    lambda: L.post_processing("std from sums"),
])
def test_lemmas_discharge(lemma):
    obs = lemma()
    assert obs and all(o.discharged for o in obs), [o.statement for o in obs if not o.discharged]
    assert obs[-1].checker == "lemma"


def test_composition_lemma_fails_when_totals_exceed():
    obs = L.sequential_composition([1, 1, 1], total_eps=sp.Rational(29, 10))
    assert not obs[-1].discharged


def test_lemmas_refuse_floats():
    from dpharness.errors import ParameterError
    with pytest.raises(ParameterError):
        L.sequential_composition([sp.Float(0.5)])


def test_gaussian_profile_matches_balle_wang_numerically():
    from scipy.stats import norm
    expr = L.gaussian_profile_expr(sp.Integer(2), sp.Integer(1), sp.Rational(1, 2))
    s, d, e = 2.0, 1.0, 0.5
    import math
    ref = norm.cdf(d / (2 * s) - e * s / d) - math.exp(e) * norm.cdf(-d / (2 * s) - e * s / d)
    assert abs(float(expr) - ref) < 1e-12
