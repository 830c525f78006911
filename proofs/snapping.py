"""Proof for the snapping mechanism (Mironov 2012, "On significance of the least significant bits for
differential privacy", CCS, §5):

    f̃(D) = clamp_B( ⌊ clamp_B(f(D)) ⊕ S ⊗ λ ⊗ LN(U*) ⌉_Λ ),

S a uniform sign, U* uniform on the doubles in (0, 1) (each with probability proportional to its
spacing), LN a correctly rounded natural logarithm, ⊕/⊗ IEEE-754 double operations, ⌊·⌉_Λ rounding
to the nearest multiple of Λ, the smallest power of two >= λ.

Mironov's theorem: for f of sensitivity 1 and λ < B < 2^46·λ, f̃ is (1/λ + 2^{−49}·B/λ)-DP in the
IEEE-754 double model. The prover checks the side conditions exactly, that the implementation's
outputs have the snapped form (multiples of Λ inside [−B, B], on sampled outputs), instantiates the
theorem (cited, checker "lemma") and compares ε' with the claim. For sensitivity Δ != 1 the
theorem is applied to f/Δ (the mechanism must scale accordingly: λ and B in units of Δ)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp

from dpharness.core import Event, Witness

from ._kernel import ProofBuilder, param
from ._model import Obligation, Proof
from dpharness.mechanisms import snapping as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove", "snapping_epsilon"]


def snapping_epsilon(lam: sp.Expr, B: sp.Expr) -> sp.Expr:
    """ε' = 1/λ + 2^{−49} B/λ (Mironov 2012, §5.2, as stated)."""
    return 1 / lam + sp.Rational(1, 2**49) * B / lam


def _lam(m: _mechs.Snapping):
    for name in ("scale", "lam", "lambda_", "lambda"):
        if hasattr(m, name):
            return name, getattr(m, name)
    raise AttributeError("snapping mechanism without a scale field")


@proves(_mechs.Snapping)
def prove(m: _mechs.Snapping) -> Proof:
    pb = ProofBuilder(m)
    lname, lam_v = _lam(m)
    # λ as the double the code multiplies by (λ ⊗ LN(U*)): a rational scale is rounded by float()
    lam, B = param(float(lam_v)), param(m.B)
    delta = param(getattr(m, "sensitivity", 1))
    param(m.claim.epsilon)  # read exactly (raises on a non-exact claim)
    # the smallest power of two >= λ, exactly
    k = int(sp.floor(sp.log(lam, 2)))
    while sp.Integer(2) ** k < lam:
        k += 1
    while sp.Integer(2) ** (k - 1) >= lam:
        k -= 1
    Lam = sp.Integer(2) ** k
    lam_u, B_u = lam / delta, B / delta  # the theorem is for sensitivity 1: apply it to f/Δ
    pb.precondition(f"neighbour relation: {m.input_spec.relation.describe()} (sensitivity Δ = {delta})")
    pb.precondition(f"parameters: λ = {lam} ({lname}), B = {B}, Λ = {Lam} (smallest power of two >= λ)")
    pb.precondition(
        "numeric model: IEEE-754 double model per Mironov 2012 (U* uniform over the doubles in (0,1) "
        "weighted by their spacing, round-to-nearest ⊕/⊗, and the theorem's accuracy requirement on LN)"
    )
    pb.precondition(
        "LN is correctly rounded, as the theorem takes it: the sampler rounds the extended-precision logarithm "
        "(x87, 64-bit significand) to the nearest double where it lies more than 2^-60 relative from a rounding "
        "midpoint, and computes every other draw at 200 bits in mpmath (mechanisms/_exact.correctly_rounded_log). "
        "ASSUMED, not verified by the prover: the platform's extended logarithm (glibc logl) is within 4 units "
        "of its last place, and the doubles' hardest cases for ln lie beyond 2^-190 from a midpoint (Lefèvre & "
        "Muller 2001: about 2^-120)"
    )
    pb.pseudocode("clamp_B(round_Λ(clamp_B(f(D)) ⊕ S ⊗ λ ⊗ LN(U*)))")
    with pb.phase("side conditions"):
        pb.evaluate("Λ is the smallest power of two >= λ", sp.And(sp.Ge(Lam, lam), sp.Lt(Lam / 2, lam)), "exact")
        pb.evaluate(f"side condition λ < B (in units of Δ: {lam_u} < {B_u})", sp.Lt(lam_u, B_u), "exact")
        pb.evaluate("side condition B < 2^46 λ (in units of Δ)", sp.Lt(B_u, sp.Integer(2) ** 46 * lam_u), "exact")
        pb.evaluate(
            "every output is within the noise's reach from every clamped input with U* among the normal doubles: "
            "2B + Λ <= 708 λ (1022 ln 2 = 708.4; |LN(U*)| <= 1074 ln 2 = 744.4 for U* >= 2^-1074: beyond it an "
            "output is reachable from one input and not from a neighbour, and below 2^-1022 the subnormal U* are "
            "too coarse for the theorem's ratio)",
            sp.Le(2 * B + Lam, 708 * lam),
            "exact",
        )
        mLam = getattr(m, "Lam", None) or getattr(m, "Lambda", None) or getattr(m, "big_lambda", None)
        if mLam is not None:
            mv = mLam() if callable(mLam) else mLam
            pb.evaluate(f"the mechanism's Λ = {mv} equals the derived Λ", sp.Eq(param(mv), Lam), "exact")
    with pb.phase("implementation form"):
        ok, detail = _outputs_snapped(m, float(Lam), float(B))
        pb.add(
            [
                Obligation(
                    "sampled outputs are multiples of Λ or ±B, within [−B, B] (the snapped form)",
                    sp.true if ok else sp.false,
                    "exact check of 4096 outputs on two inputs (Fraction arithmetic)",
                    "exact",
                    ok,
                    detail,
                )
            ]
        )
    with pb.phase("theorem"):
        bound = snapping_epsilon(lam_u, B_u)
        side_ok = all(o.discharged for o in pb.steps)
        pb.add(
            [
                Obligation(
                    f"Mironov 2012 snapping theorem: ε' = 1/λ + 2^-49 B/λ = {sp.N(bound, 20)} (λ, B in units of Δ)",
                    sp.Eq(sp.Symbol("eps_snap"), bound),
                    "cited theorem; side conditions above",
                    "lemma",
                    side_ok,
                    "" if side_ok else "a side condition is not discharged",
                )
            ]
        )
        pb.claim_bound(bound)
        pb.note(
            f"the bound exceeds 1/λ by 2^-49·B/λ = {float(sp.N(bound - 1 / lam_u, 20)):.3g} (the price of floating point)"
        )
    zero = np.zeros(int(getattr(m, "dim", 1) or 1)) if m.input_spec.shape == "vector" else 0.0
    # tightness in the real-arithmetic model: for t <= −Λ both events {y <= t} lie in the Laplace left
    # tail, where P_0(y <= t)/P_Δ(y <= t) = e^{Δ/λ} exactly; t = −Λ keeps the event observable
    t = -float(Lam)
    ideal = delta / lam
    w = Witness(
        zero,
        zero + float(delta),
        Event.threshold(t, above=False),
        None,
        float(sp.N(ideal, 30)),
        f"inputs 0 vs Δ = {delta}, event output <= {t}: in the real-arithmetic model the ratio is exactly "
        f"e^(Δ/λ) = e^{float(sp.N(ideal, 15)):.15g} (left Laplace tail); Mironov's ε' adds 2^-49 B/λ for floats",
    )
    return pb.finish(bound, witness=w)


def _outputs_snapped(m: _mechs.Snapping, Lam: float, B: float) -> tuple[bool, str]:
    spec = m.input_spec
    dim = int(getattr(m, "dim", 1) or 1)
    inputs = [np.zeros(dim) if spec.shape == "vector" else 0.0]
    hi = getattr(spec.domain, "hi", math.inf)
    inputs.append(np.full(dim, min(B / 2, hi)) if spec.shape == "vector" else min(B / 2, hi))
    for seed, x in enumerate(inputs):
        out = np.asarray(m.sample(x, 4096, np.random.default_rng(seed)), dtype=float).ravel()
        if not np.all(np.abs(out) <= B):
            return False, f"an output exceeds B in magnitude: {out[np.abs(out) > B][:3].tolist()}"
        fl = Fraction(Lam)
        bad = [y for y in out[:512] if abs(y) != B and (Fraction(float(y)) / fl).denominator != 1]
        if bad:
            return False, f"outputs not multiples of Λ: {bad[:3]}"
    return True, "all sampled outputs are multiples of Λ in [−B, B]"
