"""Proof attempt for the gallery's textbook Laplace mechanism ``x + numpy.random.laplace(0, b)``.

Under the ideal-reals model the output density is exp(−|y − x|/b)/(2b) and the loss is at most
Δ/b (triangle inequality). The IMPLEMENTATION computes in IEEE-754 doubles (Mironov 2012, "On
significance of the least significant bits for differential privacy", CCS): the output is
``fl(x + n)`` for a double n, and which doubles can come out depends on x. So the ideal-reals
derivation is recorded but does not prove the claim, and the prover looks for a float
counterexample:

* data x = 0: the output is ``fl(0 + n) = n`` itself, any double the noise sampler produced;
* neighbour x' = Δ: an output y in (0, Δ/2) needs a real sum Δ + n in (0, Δ/2) (rounding to nearest
  is monotone and fixes the doubles 0 and Δ/2), so n lies in (−Δ, −Δ/2); by Sterbenz's lemma
  (b/2 <= a <= 2b ⇒ a − b exact) ``Δ + n`` is then computed exactly, so y = Δ + n is a multiple of
  the spacing u of the doubles in [Δ/2, Δ) — an exact, data-independent fact about doubles;
* so an output y in (0, Δ/2) that is NOT a multiple of u and that the implementation actually
  produced on x = 0 (observed with a fixed seed: observed means possible) has probability 0 on x':
  the privacy loss is infinite. Both facts are checked exactly (``fractions.Fraction``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp

from dpharness.core import Event, Witness

from ._kernel import ProofBuilder, param
from ._lemmas import l1_triangle
from ._model import Obligation, Proof
from dpharness.mechanisms import textbook_laplace as _mechs
from dpharness.proof_registry import proves

__all__ = ["prove", "sterbenz_spacing"]

_SAMPLES = 4096


def sterbenz_spacing(delta: float) -> Fraction:
    """The spacing of doubles in [Δ/2, Δ): every output in (0, Δ/2) of fl(Δ + n) is a multiple of it."""
    _, e = math.frexp(delta / 2)  # delta/2 = m * 2^e with m in [0.5, 1)
    return Fraction(2) ** (e - 1 - 52)  # ulp of the binade containing delta/2 (the smallest in [Δ/2, Δ))


@proves(_mechs.TextbookLaplace)
def prove(m: _mechs.TextbookLaplace) -> Proof:
    pb = ProofBuilder(m)
    b = param(m.scale)
    d = param(getattr(m, "sensitivity", 1))
    dim = int(getattr(m, "dim", 1) or 1)
    param(m.claim.epsilon)  # read exactly (raises on a non-exact claim)
    pb.precondition(f"neighbour relation: {m.input_spec.relation.describe()}")
    pb.precondition(f"parameters: scale b = {b}, sensitivity Δ = {d}, dim = {dim}")
    pb.precondition(
        "numeric model of the IMPLEMENTATION: IEEE-754 binary64 (Mironov 2012); the ideal-reals "
        "derivation below is about the real-number specification only"
    )
    pb.pseudocode("return x + numpy.random.Generator.laplace(0, b)   (float64 arithmetic)")
    with pb.phase("ideal reals"):
        obs = l1_triangle(dim)
        pb.note(
            f"ideal-reals specification: loss <= Δ/b = {d / b} by the L1 triangle inequality "
            f"({'discharged' if obs[-1].discharged else 'NOT discharged'}; not a proof of the implementation)"
        )
        pb.add(
            [
                Obligation(
                    "the implementation computes in the ideal reals",
                    sp.false,
                    "it computes fl(x + n) in IEEE-754 doubles; the set of possible outputs depends on x "
                    "(Mironov 2012)",
                    "lemma",
                    False,
                    "numeric model mismatch: the ideal-reals proof does not transfer to float outputs",
                )
            ]
        )
    bound = d / b
    with pb.phase("float counterexample"):
        w = _float_witness(pb, m, dim)
    if w is None:
        pb.note(
            "no float counterexample confirmed; UNPROVEN (the numeric model of the implementation is "
            "IEEE floats, Mironov 2012)"
        )
        return pb.finish(bound)
    return pb.finish(sp.oo, witness=w)


def _float_witness(pb: ProofBuilder, m: _mechs.TextbookLaplace, dim: int) -> Witness | None:
    delta = float(getattr(m, "sensitivity", 1))
    zero = np.zeros(dim) if m.input_spec.shape == "vector" else 0.0
    shifted = zero.copy() if isinstance(zero, np.ndarray) else 0.0
    if isinstance(shifted, np.ndarray):
        shifted[0] = delta
    else:
        shifted = delta
    if not m.input_spec.relation.is_neighbour(np.asarray(zero), np.asarray(shifted)):
        return None
    u = sterbenz_spacing(delta)
    rng = np.random.default_rng(0)
    out = np.asarray(m.sample(zero, _SAMPLES, rng), dtype=float).reshape(_SAMPLES, -1)[:, 0]
    # consistency check of the float model on the neighbour: its outputs in (0, Δ/2) are all multiples of u
    out2 = np.asarray(m.sample(shifted, _SAMPLES, np.random.default_rng(1)), dtype=float).reshape(_SAMPLES, -1)[:, 0]
    inside2 = [Fraction(float(y)) for y in out2 if 0 < y < delta / 2]
    if any((y / u).denominator != 1 for y in inside2):
        pb.note(
            "float model check FAILED: an output on x' in (0, Δ/2) is not a multiple of the Sterbenz spacing; "
            "the implementation is not fl(x + n)"
        )
        return None
    pb.add(
        [
            Obligation(
                f"float model check: all {len(inside2)} sampled outputs on x' = Δ in (0, Δ/2) are multiples of u = {u}",
                sp.true,
                "exact Fraction arithmetic",
                "exact",
                True,
            )
        ]
    )
    for y in out:
        if not 0 < y < delta / 2:
            continue
        fy = Fraction(float(y))
        if (fy / u).denominator == 1:
            continue
        # exact confirmation: y is not a multiple of u, y in (0, Δ/2)
        pb.add(
            [
                Obligation(
                    f"output y = {float(y)!r} (= {fy}) observed on x = 0 is not a multiple of u = {u}",
                    sp.Ne(
                        sp.Rational(fy.numerator, fy.denominator) / sp.Rational(u.numerator, u.denominator),
                        sp.floor(sp.Rational(fy.numerator, fy.denominator) / sp.Rational(u.numerator, u.denominator)),
                    ),
                    "exact rational arithmetic",
                    "exact",
                    True,
                )
            ]
        )
        yv = float(y)
        desc = (
            f"output y = {yv!r} on coordinate 0: produced by the implementation on x = 0 (numpy Generator, seed 0; "
            f"observed, so P_x(y) > 0) and impossible on x' = Δ = {delta} (every output of fl(Δ + n) in "
            f"(0, Δ/2) equals Δ + n exactly by Sterbenz's lemma, a multiple of {u}; y/u = {fy / u} is not an integer): "
            "loss = ∞"
        )
        ev = Event(lambda o: np.asarray(o, dtype=float).reshape(len(o), -1)[:, 0] == yv, f"output[0] = {yv!r}")
        w = Witness(data=zero, neighbor=shifted, event=ev, output=yv, loss=math.inf, description=desc)
        pb.refute(w, desc)
        return w
    return None
