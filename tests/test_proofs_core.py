"""Proof kernel semantics, the lemma library, and the proofs of the simple mechanisms.

Deterministic (sympy, z3, exact evaluation); no statistical tests here."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from dpharness.core import ApproxDP, PureDP, RenyiDP, Substitute
from dpharness.proofs import prove
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
    ob = K.discharge(
        "exp monotone",
        sp.Le(sp.exp(z) / (sp.exp(z) + 1), sp.E / (sp.exp(z) + 1)),
        "exp increasing",
        hypotheses=[sp.Le(z, 1)],
    )
    assert ob.discharged and ob.checker == "z3"


def test_statements_left_to_z3_are_ones_sympy_leaves_undecided():
    """The lemmas' ``use_sympy=False`` (sympy's simplify costs a cold proof 0.1 s) changes no checker and no
    verdict: on each of those statements sympy's full chain answers None, so the obligation was z3's
    before too. Should a sympy release decide one, this fails and the statement goes back to sympy."""
    l1 = [L._l1(d)[0][-1] for d in (1, 2, 3)]
    rounding = list(L._grid_rounding())
    for ob in l1 + rounding:
        assert ob.discharged and ob.checker == "z3" and ob.detail.startswith("sympy not attempted"), ob
        assert K.sympy_decide(ob.formula)[0] is None, ob.statement
    ob = K.discharge("slack", sp.Le(-K.slack("d"), 0), "slack", use_sympy=False)
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
        K.discharge("wrongly refuted", sp.Ge(z**2, 0), "none")


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


def test_find_violation_returns_the_first_confirmed_point():
    cands = [
        (sp.Rational(1, 2), sp.Rational(1, 2), "tie"),
        (sp.Rational(3, 4), sp.Rational(1, 4), "ratio 3"),
        (sp.Rational(1, 2), 0, "zero"),
    ]
    w, loss = K.find_violation(cands, sp.log(2))
    assert w == "ratio 3" and K.exact_sign(loss - sp.log(3)) == 0
    assert K.find_violation(cands[:1], 0) is None
    assert K.find_violation(cands[2:], 5)[1] is sp.oo


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


@pytest.mark.parametrize(
    "lemma",
    [
        L.triangle_inequality,
        lambda: L.l1_triangle(3),
        lambda: L.logsumexp_monotone(3),
        L.gaussian_profile,
        lambda: L.gaussian_rdp()[0],
        lambda: L.sequential_composition([1, 1, 1], total_eps=3),
        lambda: L.advanced_composition(10, sp.Rational(1, 10), 0, sp.Rational(1, 10**5))[0],
        lambda: L.rdp_to_dp(2, 1, sp.Rational(1, 10**5))[0],
        lambda: L.group_privacy(2, 1)[0],
        lambda: L.post_processing("std from sums"),
    ],
)
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


# --------------------------------------------------------------------------- proofs of the simple mechanisms


def _simple():
    """(id, factory, noise mutations) — a mutation is (field, factor) making the noise 10% weaker."""
    from dpharness.mechanisms.randomized_response import RandomizedResponse
    from dpharness.mechanisms.warner import WarnerRR
    from dpharness.mechanisms.rappor import Rappor
    from dpharness.mechanisms.laplace import Laplace
    from dpharness.mechanisms.discrete_laplace import DiscreteLaplace
    from dpharness.mechanisms.gaussian import Gaussian, GaussianRDP
    from dpharness.mechanisms.clamped import ClampedCount, ClampedSum, ClampedMean
    from dpharness.mechanisms.std import NoisyStd
    from dpharness.mechanisms.pearson import NoisyPearson

    cases = [
        ("rr", RandomizedResponse, [("log_odds", 1.1)]),
        ("rr_k5", lambda: RandomizedResponse.calibrated(0.5, k=5), [("log_odds", 1.1)]),
        ("warner", WarnerRR, [("p_truth", 1.1), ("p_yes", 0.9)]),
        ("rappor", Rappor, [("log_odds", 1.1)]),
        ("rappor_k7", lambda: Rappor.calibrated(2, k=7), [("log_odds", 1.1)]),
        ("laplace", Laplace, [("scale", 0.9)]),
        ("laplace_dim3", lambda: Laplace.calibrated(0.5, sensitivity=0.3, dim=3), [("scale", 0.9)]),
        ("discrete_laplace", DiscreteLaplace, [("scale", 0.9)]),
        ("gaussian_analytic", Gaussian.calibrated_analytic, [("sigma", 0.9)]),
        ("gaussian_rdp", GaussianRDP, [("sigma", 0.9)]),
        ("clamped_count", ClampedCount, [("scale", 0.9)]),
        ("clamped_sum", ClampedSum, [("scale", 0.9)]),
        ("clamped_sum_sub", lambda: ClampedSum.calibrated(1, lo=-2, hi=3, relation=Substitute()), [("scale", 0.9)]),
        ("clamped_mean", ClampedMean, [("scale", 0.9)]),
        (
            "clamped_mean_sub",
            lambda: ClampedMean.calibrated(1, lo=-1, hi=2, relation=Substitute(), n=4),
            [("scale", 0.9)],
        ),
        ("noisy_std", NoisyStd, [("scale", 0.9)]),
        ("noisy_pearson", NoisyPearson, [("scale", 0.9)]),
    ]
    # imported directly: a missing module or class is an error of the checkout, never a dropped case
    from dpharness.mechanisms.histogram import NoisyHistogram
    from dpharness.mechanisms.truncated_geometric import TruncatedGeometric

    cases.append(("noisy_histogram", NoisyHistogram, [("scale", 0.9)]))
    tg_mutations = [
        (f.name, 1.1) for f in dataclasses.fields(TruncatedGeometric) if f.name in ("log_odds", "epsilon_noise")
    ]
    assert tg_mutations, "TruncatedGeometric has neither log_odds nor epsilon_noise: update the mutation list"
    cases.append(("truncated_geometric", TruncatedGeometric, tg_mutations))
    return cases


SIMPLE = _simple()


def _tightened(claim):
    if isinstance(claim, PureDP):
        return [PureDP(float(claim.epsilon) * 0.9)]
    if isinstance(claim, ApproxDP):
        return [ApproxDP(float(claim.epsilon) * 0.9, claim.delta), ApproxDP(claim.epsilon, float(claim.delta) * 0.9)]
    return [RenyiDP(claim.alpha, float(claim.epsilon) * 0.9)]


def _mutate(value, factor):
    from fractions import Fraction

    if isinstance(value, Fraction):
        return value * Fraction(factor).limit_denominator(100)
    return float(value) * factor


@pytest.mark.parametrize("case", SIMPLE, ids=[c[0] for c in SIMPLE])
def test_simple_mechanisms_proved_at_calibration_and_mutations_flip(case):
    _, factory, mutations = case
    mech = factory()
    proof = prove(mech)
    assert proof.verdict is Verdict.PROVED, [s.statement + ": " + s.detail for s in proof.steps if not s.discharged]
    assert proof.assumptions and proof.steps and all(s.discharged for s in proof.steps)
    assert proof.bound <= float(mech.claim.epsilon) * (1 + 1e-12) or isinstance(mech.claim, ApproxDP)
    assert proof.witness is not None and "total" in proof.timings
    assert not any(isinstance(s.formula, sp.Basic) and s.formula.has(sp.Float) for s in proof.steps)
    for name, factor in mutations:
        weaker = mech.replace(**{name: _mutate(getattr(mech, name), factor)})
        assert prove(weaker).verdict is not Verdict.PROVED, f"{name} x {factor} still PROVED"
    for claim in _tightened(mech.claim):
        assert prove(mech.replace(claim=claim)).verdict is not Verdict.PROVED, f"claim {claim} still PROVED"


def _confirm_with_law(mech, w):
    """The witness's pointwise loss from the mechanism's own law (float) exceeds the claim."""
    out = np.asarray(w.output)
    rows = out.reshape(1, -1) if out.ndim else out.reshape(1)
    lp = mech.law(w.data).log_prob(rows)[0] - mech.law(w.neighbor).log_prob(rows)[0]
    return lp


@pytest.mark.parametrize("name", ["rappor_unhalved", "clamped_sum_unclamped", "noisy_histogram_scale_bug"])
def test_gallery_twins_refuted_with_exact_witness(name):
    from dpharness.registry import catalog

    gallery = catalog(gallery=True)
    assert name in gallery, f"gallery entry {name!r} is missing from the registry (registered: {sorted(gallery)})"
    mech = gallery[name]()
    proof = prove(mech)
    assert proof.verdict is Verdict.REFUTED
    w = proof.witness
    assert w is not None and w.loss > float(mech.claim.epsilon)
    assert any("confirmed by exact evaluation" in n for n in proof.notes)
    assert (
        mech.input_spec.relation.is_neighbour(w.data, w.neighbor)
        if mech.input_spec.shape != "record"
        else w.data != w.neighbor
    )
    assert _confirm_with_law(mech, w) > float(mech.claim.epsilon)


def test_classic_gaussian_is_proved_by_the_exact_profile_and_stays_proved_with_less_noise():
    """The classic calibration is loose: 10% less σ is still (1, 1e-5)-DP by the exact profile (the
    mutation rule cannot flip a true statement); the analytic calibration is the tight one."""
    from dpharness.mechanisms.gaussian import Gaussian

    mech = Gaussian()
    proof = prove(mech)
    assert proof.verdict is Verdict.PROVED
    assert any("discrete Gaussian" in o.statement and o.discharged for o in proof.steps)
    weaker = prove(mech.replace(sigma=mech.sigma * 0.9))
    assert weaker.verdict is Verdict.PROVED and weaker.delta_bound <= 1e-5
    assert prove(mech.replace(sigma=mech.sigma * 0.7)).verdict is Verdict.REFUTED


def test_gaussian_profile_proof_equals_balle_wang_symbolically():
    obs = L.gaussian_profile()
    eq = [o for o in obs if "Balle & Wang" in o.statement]
    assert eq and eq[0].discharged and eq[0].checker.startswith("sympy")


def test_laplace_grid_rounding_accounted_in_dimension_two():
    from dpharness.mechanisms.laplace import Laplace

    proof = prove(Laplace(dim=2))  # scale 1 for L1 sensitivity 1: snapping adds g
    assert proof.verdict is Verdict.REFUTED
    assert proof.bound == pytest.approx(1 + 2.0**-20)
    assert _confirm_with_law(Laplace(dim=2), proof.witness) > 1.0


# --------------------------------------------------------------------------- property tests

_rationals = st.fractions(min_value=Fraction(1, 20), max_value=Fraction(5), max_denominator=40)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(k=st.integers(2, 6), log_odds=_rationals, eps=_rationals)
def test_randomized_response_verdict_is_exactly_the_comparison(k, log_odds, eps):
    from dpharness.mechanisms.randomized_response import RandomizedResponse

    proof = prove(RandomizedResponse(k=k, log_odds=log_odds, claim=PureDP(eps)))
    assert proof.verdict is (Verdict.PROVED if log_odds <= eps else Verdict.REFUTED)
    if proof.verdict is Verdict.REFUTED:
        assert proof.witness.loss == pytest.approx(float(log_odds))


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    dim=st.integers(1, 3),
    scale=_rationals,
    sens=st.sampled_from([Fraction(1, 2), Fraction(1), Fraction(3)]),
    eps=_rationals,
)
def test_laplace_verdict_is_exactly_the_comparison(dim, scale, sens, eps):
    from dpharness.mechanisms.laplace import Laplace

    g = Fraction(1, 2**10)
    mech = Laplace(scale=scale, sensitivity=sens, dim=dim, granularity=float(g), claim=PureDP(eps))
    proof = prove(mech)
    delta_g = (math.ceil(sens / g) + dim - 1) * g
    assert proof.verdict is (Verdict.PROVED if delta_g / scale <= eps else Verdict.REFUTED)
    assert proof.bound == pytest.approx(float(delta_g / scale))
