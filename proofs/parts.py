"""The proof of a mechanism declared from parts (:mod:`dpharness.mechanisms.parts`), derived by
walking the same step structure its sampler executes.

Each node adds named obligations, prefixed by its path in the structure (``compose[1] › count ›
laplace``), so a report shows the derivation as a tree:

* transformations: the stability map for the mechanism's neighbour relation (add/remove,
  substitution, or bounded change of a query vector), checked with z3/sympy on the exact bounds;
* noise measurements: the family's privacy map proved once (grid Laplace: normaliser, log-space loss,
  triangle inequality, grid rounding; discrete Gaussian: Rényi divergence by completing the square,
  Canonne, Kamath & Steinke 2020) and instantiated at the node's input distance;
* local randomizers on one record (``input="record"``, any two records neighbours): k-ary randomized
  response (the pmf ratio is e^L, 1 or e^{−L}, symbolically in k and L), Warner's randomized response
  (binary randomized response with L = ln(p/(1 − p))), RAPPOR's bit flipping (one-hot encodings differ
  in two bits, each a binary randomized response: 2 ln((1 − f/2)/(f/2)); Erlingsson, Pihur & Korolova
  2014), each proved once per family and instantiated at the node's parameter;
* combinators: basic composition (ε adds), zCDP/Rényi composition (ρ adds; Bun & Steinke 2016),
  advanced composition (Dwork & Roth 2014 Thm 3.20), parallel composition (McSherry 2009),
  post-processing (Dwork & Roth 2014 Thm 2.1).

The verdict compares the tightest accounting that applies with the claim. A pure-DP claim whose
derived bound is exceeded is REFUTED only with an exact counterexample evaluated on the code's own
law (and never through a post-processing step, which may discard information)."""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from dpharness.errors import ParameterError
from dpharness.core import AddRemove, ApproxDP, BoundedChange, Event, PureDP, RenyiDP, Substitute, Witness, exact
from dpharness.mechanisms import parts as P
from dpharness.mechanisms._parts_law import LocalLeaf, extreme_pairs, leaves
from dpharness.proof_registry import patched_code, proves

from . import _account as A
from . import _lemmas as lemmas
from ._kernel import ProofBuilder, confirm_violation, discharge, exact_sign, exceeds, sym
from ._model import Obligation, Proof

__all__ = ["prove", "Profile"]


Profile = A.Account  # the name the walk's results had before the account got its own module


def _F(x: Fraction) -> sp.Rational:
    return sp.Rational(x.numerator, x.denominator)


class _Walk:
    def __init__(self, pb: ProofBuilder) -> None:
        self.pb = pb
        self.families: set[str] = set()

    # --- obligations with the node's path -------------------------------------------
    def _tag(self, path: str, text: str) -> str:
        return f"[{path}] {text}" if path else text

    def check(self, path: str, text: str, formula: Any, why: str, hypotheses=()) -> Obligation:
        return self.pb.check(self._tag(path, text), formula, why, hypotheses=hypotheses)

    def fact(self, path: str, text: str, why: str) -> Obligation:
        return self.pb.fact(self._tag(path, text), why)

    def evaluate(self, path: str, text: str, formula: Any, why: str) -> Obligation:
        return self.pb.evaluate(self._tag(path, text), formula, why)

    # --- stability -------------------------------------------------------------------
    def transformation(self, path: str, t: P.Transformation, space: P.Space, d: P.Distance) -> P.Distance:
        if type(t) in P._family_step_types():
            return _family_proof(t).stability(self, path, t, space, d)
        out = t.stability(space, d)
        rel = d.relation
        if isinstance(t, (P.Clamp, P.Column, P.MapRecords, P.ClipNorm)):
            self.fact(path, f"{t.describe()} maps each record on its own, so neighbouring data sets stay neighbouring "
                            f"({rel.describe() if rel else d.describe()})",
                      "a record-wise map sends the one added/removed/substituted record to one record"
                      + (" (whatever the function, and whatever state it is given)" if isinstance(t, P.MapRecords) else ""))
            if isinstance(t, P.ClipNorm):
                self.fact(path, f"{t.describe()}: every output record has {t.norm} norm <= {t.bound}, so each column lies in "
                                f"[−{t.bound}, {t.bound}]", "checked exactly (rationals) by the sampler after the float "
                                "scaling; one column: exactly clamp(−bound, bound)")
            return out
        if isinstance(t, P.Count):
            n = sym("n", nonnegative=True)
            if isinstance(rel, AddRemove):
                self.check(path, "count: |(n + 1) − n| = 1 under add/remove", sp.Eq(sp.Abs((n + 1) - n), 1), "algebra")
            else:
                self.check(path, "count: substitution keeps n, so the count moves by 0", sp.Eq(n - n, 0), "algebra")
            return out
        if isinstance(t, (P.Sum, P.SumSquares, P.SumProducts)):
            lo, hi = t.contribution(space)
            L, U = _F(lo), _F(hi)
            what = {P.Sum: "x", P.SumSquares: "x²", P.SumProducts: f"x_{getattr(t, 'i', 0)}·x_{getattr(t, 'j', 1)}"}[type(t)]
            self._contribution_range(path, t, space, what, L, U)
            x, x2 = sym("c"), sym("c'")
            hyps = [sp.Le(L, x), sp.Le(x, U), sp.Le(L, x2), sp.Le(x2, U)]
            if isinstance(rel, AddRemove):
                bound = max(abs(L), abs(U))
                self.check(path, f"{t.describe()} under add/remove: the sum moves by one contribution c ∈ [{L}, {U}], "
                                 f"|c| <= {bound}", sp.Le(sp.Abs(x), bound), "z3 on the exact bounds", hyps[:2])
            else:
                bound = U - L
                self.check(path, f"{t.describe()} under substitution: the sum moves by c − c' with c, c' ∈ [{L}, {U}], "
                                 f"|c − c'| <= {bound}", sp.Le(sp.Abs(x - x2), bound), "z3 on the exact bounds", hyps)
            self.evaluate(path, f"stability of {t.describe()}: {bound}", sp.Eq(_F(out.l1), bound), "exact arithmetic")
            return out
        if isinstance(t, P.Histogram):
            if isinstance(rel, AddRemove):
                self.fact(path, f"{t.describe()}: one added/removed record changes one bin by 1 "
                                "(L1 = L2² = L∞ = 1)", "each record falls in at most one bin")
            else:
                self.fact(path, f"{t.describe()}: a substituted record leaves one bin and enters another "
                                "(L1 = 2, L2² = 2, L∞ = 1)", "each record falls in at most one bin")
            return out
        raise AssertionError(f"no stability lemma for {t!r}")  # pragma: no cover - every transformation is listed

    def _contribution_range(self, path: str, t: Any, space: P.Space, what: str, L: sp.Expr, U: sp.Expr) -> None:
        x, y = sym("x"), sym("y")
        if isinstance(t, P.Sum):
            self.fact(path, f"records lie in [{L}, {U}] (the record domain and clamps), so each contribution {what} does",
                      "the input spec validates every record; clamping is exact")
            return
        if isinstance(t, P.SumSquares):
            lo, hi = _F(space.lo[0]), _F(space.hi[0])
            self.check(path, f"x ∈ [{lo}, {hi}] ⇒ x² ∈ [{L}, {U}]", sp.And(sp.Le(L, x ** 2), sp.Le(x ** 2, U)),
                       "nonlinear real arithmetic (z3)", [sp.Le(lo, x), sp.Le(x, hi)])
            return
        i, j = t.i, t.j
        li, hi_, lj, hj = _F(space.lo[i]), _F(space.hi[i]), _F(space.lo[j]), _F(space.hi[j])
        hyps = [sp.Le(li, x), sp.Le(x, hi_), sp.Le(lj, y), sp.Le(y, hj)]
        prod = x * y if i != j else x * x
        if i == j:
            hyps = hyps[:2]
        self.check(path, f"x_{i} ∈ [{li}, {hi_}], x_{j} ∈ [{lj}, {hj}] ⇒ x_{i}·x_{j} ∈ [{L}, {U}] (interval arithmetic)",
                   sp.And(sp.Le(L, prod), sp.Le(prod, U)), "nonlinear real arithmetic (z3)", hyps)

    # --- noise --------------------------------------------------------------------------
    def grid_units(self, path: str, m: Any, space: P.Space, d: P.Distance) -> tuple[sp.Expr, sp.Expr]:
        """(D₁, D₂²): bounds on the L1 and squared-L2 distance of the rounded centres, in grid steps."""
        g = m.g
        d1, d2, how = P.grid_steps(space, d, g)
        if d.l1 != 0:
            self.fact(path, "the sampler saturates each rounded centre to [−2**52, 2**52] grid steps: "
                            "|sat(c) − sat(c')| <= |c − c'| per coordinate, so the bounds below hold for the saturated centres",
                      "saturation (clamping to an interval) is 1-Lipschitz")
        if how == "zero":
            self.fact(path, "the value is the same on neighbouring inputs (distance 0), so the rounded centres agree",
                      "stability 0")
        elif how == "exact":
            self.fact(path, f"values are multiples of {space.quantum}, a multiple of the grid g = {g}: rounding to the grid "
                            "is exact, so distances in grid steps are the distances divided by g",
                      "floor(v/g + 1/2) = v/g when v/g is an integer")
        else:
            self.pb.add(self._rounding())
            if how == "scalar":
                self.evaluate(path, f"rounding to g = {g}: |c − c'| <= ceil(Δ/g) = {d1} grid steps",
                              sp.Eq(sp.ceiling(_F(d.l1 / g)), _F(d1)), "grid-rounding lemma, exact arithmetic")
            else:
                self.evaluate(path, f"rounding to g = {g}: ||c − c'||₁ <= ceil(Δ₁/g) + dim − 1 = {d1} grid steps; "
                                    f"||c − c'||₂² <= Σ(d_i + 1)² <= Δ₂²/g² + 2Δ₁/g + dim = {d2}",
                              sp.Eq(sp.ceiling(_F(d.l1 / g)) + space.dim - 1, _F(d1)),
                              "grid-rounding lemma (per coordinate |r(u) − r(v)| <= |u − v| + 1)")
        return _F(d1), _F(d2)

    @functools.cached_property
    def _rounding_obs(self) -> list:
        return lemmas.grid_rounding()

    def _rounding(self) -> list:
        if "rounding" in self.families:
            return []
        self.families.add("rounding")
        return self._rounding_obs

    def laplace_family(self) -> None:
        if "laplace" in self.families:
            return
        self.families.add("laplace")
        from .laplace import laplace_l1_steps

        before = len(self.pb.steps)
        laplace_l1_steps(self.pb, 2, grid="discrete Laplace on the grid, in grid steps (b = t = scale/g)")
        for i in range(before, len(self.pb.steps)):
            o = self.pb.steps[i]
            self.pb.steps[i] = Obligation("[family: grid Laplace] " + o.statement, o.formula, o.justification, o.checker,
                                          o.discharged, o.detail)

    def gaussian_family(self) -> None:
        if "gaussian" in self.families:
            return
        self.families.add("gaussian")
        y, a, d, sg = sym("y"), sym("alpha", positive=True), sym("d", positive=True), sym("tau2", positive=True)
        tag = "[family: discrete Gaussian] "
        self.pb.check(tag + "completing the square: α y² + (1−α)(y − d)² = (y − (1−α)d)² + α(1−α)d²",
                      sp.Eq(sp.expand(a * y ** 2 + (1 - a) * (y - d) ** 2),
                            sp.expand((y - (1 - a) * d) ** 2 + a * (1 - a) * d ** 2)), "polynomial identity")
        self.pb.check(tag + "hence D_α(N_Z(c, τ²) || N_Z(c', τ²)) <= (1/(α−1))·α(α−1)d²/(2τ²) = α d²/(2τ²)",
                      sp.Eq(sp.simplify(-a * (1 - a) * d ** 2 / (2 * sg) / (a - 1)), a * d ** 2 / (2 * sg)), "algebra")
        self.pb.add([Obligation(tag + "Σ_y e^{−(y − s)²/(2τ²)} <= Σ_y e^{−y²/(2τ²)} for every real shift s", sp.true,
                                "cited: Canonne, Kamath & Steinke 2020 (the discrete Gaussian's theta sum is maximal "
                                "at integer shifts), so the shifted normaliser never exceeds Z", "lemma", True)])
        self.pb.add([Obligation(tag + "independent coordinates: Rényi divergences add, so D_α <= α ||c − c'||₂²/(2τ²); "
                                      "i.e. ρ-zCDP with ρ = D₂²/(2τ²)", sp.true,
                                "Rényi divergence of a product measure is the sum (Mironov 2017)", "lemma", True)])

    def _family(self, name: str, obligations: tuple) -> None:
        """Add a family's lemma (proved once, symbolically) the first time a node of it appears."""
        if name in self.families:
            return
        self.families.add(name)
        tag = f"[family: {name}] "
        self.pb.add([Obligation(tag + o.statement, o.formula, o.justification, o.checker, o.discharged, o.detail)
                     for o in obligations])

    def local(self, path: str, m: P.LocalRandomizer, space: P.Space) -> Profile:
        """A local randomizer on one record: its family's lemma, instantiated at the node's parameter,
        and the node's law (as ``law`` reads it) checked to be the lemma's pmf."""
        k = len(space.categories)
        truth, other = LocalLeaf(m, space.categories[0], space).probabilities()
        rr = None
        if isinstance(m, P.LocalRandomizedResponse):
            self._family("k-ary randomized response", _rr_family())
            L = _F(m.L)
            model = (sp.exp(L) / (sp.exp(L) + k - 1), 1 / (sp.exp(L) + k - 1))
            eps, rr = L, (k, L)
            self.evaluate(path, f"{m.describe()} on k = {k} categories: L = {L} >= 0, so ε = L = {eps}", sp.Ge(L, 0),
                          "the family's privacy map (hypothesis L >= 0), exact arithmetic")
        elif isinstance(m, P.LocalWarner):
            self._family("k-ary randomized response", _rr_family())
            self._family("Warner randomized response", _warner_family())
            p = _F(m.p_exact)
            model = (p, 1 - p)
            eps = sp.log(p / (1 - p))
            rr = (2, eps)
            self.evaluate(path, f"{m.describe()}: binary randomized response with L = ln(p/(1 − p)) = {eps} >= 0 "
                                f"(p = {p} >= 1/2), so ε = L", sp.Ge(eps, 0),
                          "the family's reduction to k-ary randomized response at k = 2; exact evaluation")
        else:
            self._family("RAPPOR bit flipping", _rappor_family())
            f = _F(m.f_exact)
            model = (1 - f / 2, f / 2)
            ell = sp.log((2 - f) / f)
            eps = 2 * ell
            self.evaluate(path, f"{m.describe()} on k = {k} categories: per-bit log-odds ℓ = ln((1 − f/2)/(f/2)) = {ell} "
                                f">= 0 (f = {f} <= 1), so ε = 2ℓ = {eps}", sp.Ge(ell, 0),
                          "the family's privacy map (hypothesis ℓ >= 0); exact evaluation")
        self.evaluate(path, f"the node's law (as dpharness.mechanisms._parts_law reads it) is the lemma's pmf: "
                            f"({truth}, {other}) per {'bit (kept, flipped)' if isinstance(m, P.LocalRappor) else 'report (truth, each other category)'}",
                      sp.And(sp.Eq(truth, model[0]), sp.Eq(other, model[1])), "exact comparison")
        return A.leaf(eps, eps ** 2 / 2, None if rr is None else ("rr", *rr), None if rr is None else (("rr", *rr),))

    def measurement(self, path: str, m: Any, space: P.Space, d: P.Distance) -> Profile:
        from dpharness.mechanisms._parts_grouping import GroupBy

        if type(m) is GroupBy:
            from . import _parts_grouping

            return _parts_grouping.account(self, path, m, space, d)
        if type(m) in P._family_step_types():
            return _family_proof(m).account(self, path, m, space, d)
        if isinstance(m, P.LocalRandomizer):
            return self.local(path, m, space)
        d1, d2 = self.grid_units(path, m, space, d)
        if isinstance(m, P.GridLaplace):
            self.laplace_family()
            t = _F(m.t)
            eps = d1 / t
            self.evaluate(path, f"{m.describe()}: t = scale/g = {t}; ε = D/t = {d1}/{t} = {eps}",
                          sp.Eq(eps, d1 / t), "the family's privacy map at distance D (triangle inequality)")
            one_d = ("laplace", int(d1), _F(m.scale_exact), _F(m.g)) if space.dim == 1 else None
            return A.leaf(eps, eps ** 2 / 2, one_d, _pld_leaf("laplace", t, d1, space))
        self.gaussian_family()
        tau2 = _F(m.tau2)
        rho = d2 / (2 * tau2)
        self.evaluate(path, f"{m.describe()}: τ² = (σ/g)² = {tau2}; ρ = D₂²/(2τ²) = {rho}",
                      sp.Eq(rho, d2 / (2 * tau2)), "the family's privacy map at distance D₂")
        one_d = ("gaussian", tau2, int(d1)) if space.dim == 1 and int(d1) != 0 else None
        return A.leaf(None if rho != 0 else sp.Integer(0), rho, one_d, _pld_leaf("gaussian", tau2, d1, space))

    # --- structure ------------------------------------------------------------------------
    def walk(self, path: str, step: P.Step, space: P.Space, d: P.Distance) -> Profile | tuple:
        """A Profile for randomized steps; (space, distance) for transformations."""
        if isinstance(step, P.Transformation):
            return step.out_space(space), self.transformation(path, step, space, d)
        if isinstance(step, P.Measurement):
            return self.measurement(path, step, space, d)
        if P.is_bounded_group(step):
            from . import _parts_grouping

            return _parts_grouping.account_bounded(self, path, step, space, d)
        if isinstance(step, P.Chain) and isinstance(step.first, P.PoissonSample):
            return self.subsample(path, step, space, d)
        if isinstance(step, P.Repeat):
            return self.repeat(path, step, space, d)
        if isinstance(step, P.Iterate):
            return self.iterate(path, step, space, d)
        if isinstance(step, P.Chain):
            first = self.walk(_join(path, _label(step.first)), step.first, space, d)
            if isinstance(first, Profile):  # what follows is post-processing
                self._post(path, step.second)
                return first
            mid_space, mid_d = first
            return self.walk(path, step.second, mid_space, mid_d)
        if isinstance(step, P.Compose):
            profiles = [self.walk(_join(path, f"part {i + 1}"), p, space, d) for i, p in enumerate(step.parts)]
            return self.compose(path, profiles)
        if isinstance(step, P.Parallel):
            return self.parallel(path, step, space, d)
        raise AssertionError(f"unexpected step {step!r}")  # pragma: no cover

    def _post(self, path: str, step: P.Step) -> None:
        if isinstance(step, P.Post):
            for o in lemmas.post_processing(step.describe()):
                self.pb.add([Obligation(self._tag(path, o.statement), o.formula, o.justification, o.checker, o.discharged, o.detail)])
        elif isinstance(step, P.Chain):
            self._post(path, step.first)
            self._post(path, step.second)

    def compose(self, path: str, profiles: list[Profile]) -> Profile:
        eps = None if any(p.eps is None for p in profiles) else sp.Add(*[p.eps for p in profiles])
        rho = sp.Add(*[p.rho for p in profiles])
        if eps is not None:
            obs = lemmas.sequential_composition([p.eps for p in profiles])
            self.pb.add([Obligation(self._tag(path, o.statement), o.formula, o.justification, o.checker, o.discharged, o.detail)
                         for o in obs])
        self.fact(path, f"zCDP composition: ρ = Σ ρ_i = {rho}" + (" (each pure ε_i gives ρ_i = ε_i²/2)" if eps is not None else ""),
                  "Bun & Steinke 2016, Lemma 2.3 (composition) and Prop. 1.4 (ε-DP implies ε²/2-zCDP)")
        return A.compose(profiles)

    def subsample(self, path: str, step: P.Chain, space: P.Space, d: P.Distance) -> Profile:
        """``poisson_sample(q) >> rest`` under add/remove: the rest's account, amplified."""
        q = Fraction(step.first.rate)
        inner = self.walk(_join(path, "on the subsample"), step.second, space, d)
        if not isinstance(d.relation, AddRemove):
            self.pb.add([Obligation(self._tag(path, f"{step.first.describe()} under {d.describe()}"), sp.false,
                                    "amplification by Poisson subsampling is proved here for add/remove neighbours only; "
                                    "declare relation=AddRemove()", "lemma", False, "not proved for this relation")])
            return inner
        qs = sp.Rational(q.numerator, q.denominator)
        self.fact(path, f"{step.first.describe()}: each record is kept independently with probability exactly q = {qs} "
                        "(exact Bernoulli), a fresh subsample per release; the rest runs on the kept records",
                  "the sampler executes this structure (dpharness.mechanisms.parts._subsampled)")
        out = A.poisson(inner, q)
        if inner.eps is not None:
            self.evaluate(path, f"amplification by subsampling: ε' = ln(1 + q(e^ε − 1)) = {out.eps} with ε = {inner.eps}",
                          sp.Eq(out.eps, sp.log(1 + qs * (sp.exp(inner.eps) - 1))),
                          "Balle, Barthe & Gaboardi 2018 (Poisson subsampling, add/remove neighbours)")
        self.fact(path, f"zCDP: ρ = {inner.rho} unchanged (an upper bound: subsampling never raises a Rényi divergence)",
                  "e^{(α−1)D_α(P‖Q)} is jointly convex: the outputs on two neighbours are mixtures, with the same weights "
                  "(the other records' subsample), of pairs each within the inner bound, and mixing Q into P or P into Q "
                  "moves each pair towards equality")
        if out.pld:
            self.fact(path, "privacy-loss distribution: the subsampled leaf's dominating pairs are ((1 − q)Q + qP, Q) "
                            "(remove) and (Q, (1 − q)Q + qP) (add), with (P, Q) the leaf's worst shift pair",
                      "Zhu, Dong & Wang 2022, Thm 11 (Poisson subsampling of a mechanism with a dominating pair)")
        return out

    def repeat(self, path: str, step: P.Repeat, space: P.Space, d: P.Distance) -> Profile:
        inner = self.walk(_join(path, f"each of {step.times} rounds"), step.part, space, d)
        self.fact(path, f"repeat: {step.times} independent runs of the part on the same input, the sequential "
                        f"composition of {step.times} copies (ε and ρ multiply by {step.times}; the PLD self-composes)",
                  "Dwork & Roth 2014, Thm 3.16; Bun & Steinke 2016, Lemma 2.3; Zhu, Dong & Wang 2022, Thm 10")
        return A.repeat(inner, step.times)

    def iterate(self, path: str, step: P.Iterate, space: P.Space, d: P.Distance) -> Profile:
        inner = self.walk(_join(path, f"each of {step.times} rounds"), step.part, space, d)
        self.fact(path, f"iterate: {step.times} rounds, each round's account the part's whatever the state (the state reaches "
                        "only record-wise maps, 1-stable for every function); adaptive sequential composition of "
                        f"{step.times} rounds (ε and ρ multiply by {step.times}; the PLD self-composes)",
                  "adaptive composition: Dwork & Roth 2014, Thm 3.16 (ε), Bun & Steinke 2016, Lemma 2.3 (zCDP), "
                  "Zhu, Dong & Wang 2022, Thm 10 (dominating pairs, adaptively chosen mechanisms)")
        self.fact(path, f"the state update {getattr(step.update, '__name__', 'update')} and the final state are "
                        "post-processing of the releases", "Dwork & Roth 2014, Prop. 2.1")
        return A.repeat(inner, step.times)

    def parallel(self, path: str, step: P.Parallel, space: P.Space, d: P.Distance) -> Profile:
        ar = self.walk(_join(path, "part (add/remove)"), step.part, space, P.Distance(AddRemove()))
        if isinstance(d.relation, AddRemove):
            self.fact(path, f"parallel over {len(step.keys)} disjoint partitions: an added/removed record lands in one "
                            "partition, whose part sees add/remove; the others see the same data",
                      "McSherry 2009 (parallel composition); independent randomness per partition")
            return A.parallel_add_remove(ar)
        sub = self.walk(_join(path, "part (substitute)"), step.part, space, P.Distance(Substitute()))
        self.fact(path, "parallel under substitution: the record either changes inside one partition (the part's "
                        "substitution loss) or moves between two (two parts each see add/remove: twice that loss)",
                  "McSherry 2009; composition over the two partitions touched")
        out = A.parallel_substitute(sub, ar)
        if out.units[0] is not None:
            self.fact(path, f"for advanced composition the parallel step counts as {len(out.units)} units of at most "
                            f"ε₀ = {out.units[0]} each (the larger scenario: {len(sub.units)} units inside one partition, "
                            f"2 × {len(ar.units)} across two)", "padding a composition with 0-DP units changes nothing")
        return out


# --------------------------------------------------------------------------- local randomizers: one lemma per family

def _argued(statement: str, justification: str) -> Obligation:
    return Obligation(statement, sp.true, justification, "structural", True, "argued in the justification")


@functools.lru_cache(maxsize=None)
def _rr_family() -> tuple[Obligation, ...]:
    """k-ary randomized response, symbolically in k and L (k never enumerated): for x ≠ x' the pmf
    ratio P(y|x)/P(y|x') is e^L (y = x), e^{−L} (y = x') or 1 (otherwise), so ε = L."""
    K = sym("k", integer=True, positive=True)
    L = sym("L", nonnegative=True)
    Z = sp.exp(L) + K - 1
    p_true, p_other = sp.exp(L) / Z, 1 / Z
    obs = [
        discharge("pmf: P(y = x) = e^L/Z and P(y = c) = 1/Z for each of the k − 1 other categories c, Z = e^L + k − 1; "
                  "it sums to 1", sp.Eq(p_true + (K - 1) * p_other, 1), "algebra"),
        discharge("every category has positive probability (Z > 0), so every loss is finite",
                  sp.And(sp.Gt(p_true, 0), sp.Gt(p_other, 0)), "e^L > 0 and k >= 1"),
    ]
    for hyp, loss, value in (("y = x, so y ≠ x'", sp.log(p_true) - sp.log(p_other), L),
                             ("y = x', so y ≠ x", sp.log(p_other) - sp.log(p_true), -L),
                             ("y ∉ {x, x'} (k >= 3)", sp.log(p_other) - sp.log(p_other), sp.Integer(0))):
        obs.append(discharge(f"[case {hyp}] ln P(y|x) − ln P(y|x') = {value} (Z cancels in log space)",
                             sp.Eq(loss, value), "expand_log; Z > 0"))
        obs.append(discharge(f"[case {hyp}] the loss {value} is <= L", sp.Le(value, L), "L >= 0"))
    obs.append(_argued("the three cases are exhaustive for x ≠ x', so sup_y ln P(y|x) − ln P(y|x') = L (attained at y = x): "
                       "ε = L, pure DP for any two records", "y = x, y = x', or neither (Kairouz, Oh & Viswanath 2014)"))
    return tuple(obs)


@functools.lru_cache(maxsize=None)
def _warner_family() -> tuple[Obligation, ...]:
    """Warner's randomized response with truth probability p in (0, 1) is k-ary randomized response at
    k = 2 with L = ln(p/(1 − p)) (then ε = L; L >= 0 iff p >= 1/2, checked at each node)."""
    r = sym("r", positive=True)  # r = p/(1 − p) > 0 for p in (0, 1), and p = r/(1 + r)
    p = r / (1 + r)
    L = sp.log(r)
    return (
        discharge("p ↦ r = p/(1 − p) is inverted by p = r/(1 + r): (r/(1 + r))/(1 − r/(1 + r)) = r",
                  sp.Eq(p / (1 - p), r), "algebra"),
        discharge("with L = ln r = ln(p/(1 − p)): P(y = x) = p = e^L/(e^L + 2 − 1) and P(y ≠ x) = 1 − p = 1/(e^L + 2 − 1), "
                  "the pmf of k-ary randomized response at k = 2",
                  sp.And(sp.Eq(p, sp.exp(L) / (sp.exp(L) + 1)), sp.Eq(1 - p, 1 / (sp.exp(L) + 1))), "exp(ln r) = r, r > 0"),
        _argued("hence ε = L = ln(p/(1 − p)) by the k-ary randomized response lemma (its hypothesis L >= 0 is p >= 1/2)",
                "Warner 1965; the same law, so the same privacy loss"),
    )


@functools.lru_cache(maxsize=None)
def _rappor_family() -> tuple[Obligation, ...]:
    """RAPPOR's permanent randomized response on a one-hot encoding (Erlingsson, Pihur & Korolova 2014,
    §3, with Bloom-filter size k and one hash): each bit flipped independently with probability f/2;
    with ℓ = ln((1 − f/2)/(f/2)), ε = 2ℓ (two bits differ between any two records)."""
    r = sym("r", positive=True)  # r = (2 − f)/f > 0 for f in (0, 2), and f = 2/(1 + r)
    f = 2 / (1 + r)
    ell = sym("ell", nonnegative=True)
    keep, flip = sp.exp(ell) / (1 + sp.exp(ell)), 1 / (1 + sp.exp(ell))
    obs = [
        discharge("f ↦ r = (1 − f/2)/(f/2) = (2 − f)/f is inverted by f = 2/(1 + r)",
                  sp.Eq((1 - f / 2) / (f / 2), r), "algebra"),
        discharge("with ℓ = ln r: a bit is flipped with probability f/2 = 1/(1 + e^ℓ) and kept with probability "
                  "1 − f/2 = e^ℓ/(1 + e^ℓ)",
                  sp.And(sp.Eq(f / 2, 1 / (1 + sp.exp(sp.log(r)))), sp.Eq(1 - f / 2, sp.exp(sp.log(r)) / (1 + sp.exp(sp.log(r))))),
                  "exp(ln r) = r, r > 0"),
        discharge("each bit's law sums to 1 and both outcomes have positive probability",
                  sp.And(sp.Eq(keep + flip, 1), sp.Gt(keep, 0), sp.Gt(flip, 0)), "algebra; e^ℓ > 0"),
        _argued("independence: ln P(y|x) = Σ_j ln P(y_j | b_j), b = onehot(x)", "the sampler draws k independent flips"),
        _argued("onehot(x) and onehot(x') differ exactly in bits x and x' (x ≠ x'); the other k − 2 factors are equal "
                "and cancel in ln P(y|x) − ln P(y|x')", "one-hot encoding"),
        discharge("a differing bit reported as its value under x contributes ln(keep/flip) = ℓ",
                  sp.Eq(sp.log(keep) - sp.log(flip), ell), "expand_log"),
        discharge("a differing bit reported as its value under x' contributes ln(flip/keep) = −ℓ",
                  sp.Eq(sp.log(flip) - sp.log(keep), -ell), "expand_log"),
    ]
    for a, b in itertools.product((True, False), repeat=2):
        v = (ell if a else -ell) + (ell if b else -ell)
        how = {True: "reported as under x", False: "reported as under x'"}
        obs.append(discharge(f"[case bit x {how[a]}, bit x' {how[b]}] "
                             f"loss {v} <= 2ℓ", sp.Le(v, 2 * ell), "ℓ >= 0"))
    obs.append(_argued("the four cases are exhaustive, so sup_y ln P(y|x) − ln P(y|x') = 2ℓ (attained at y = onehot(x)): "
                       "ε = 2ℓ = 2 ln((1 − f/2)/(f/2))", "Erlingsson, Pihur & Korolova 2014, Thm 1 (h = 1)"))
    return tuple(obs)


def _pld_leaf(kind: str, param: sp.Expr, d1: sp.Expr, space: P.Space) -> tuple | None:
    """The worst pair of a scalar grid leaf for the PLD accountant: centres at most D = floor(d1) grid steps
    apart (the centres are integers), and the leaf's hockey-stick divergence grows with the shift, so
    the pair (0, D) dominates. None for a vector leaf (no single scalar pair dominates it here)."""
    if space.dim != 1:
        return None
    shift = int(sp.floor(d1))
    return () if shift == 0 else ((kind, Fraction(int(param.p), int(param.q)), shift),)


def _family_proof(step: P.Step) -> Any:
    """The privacy map of a family kept in its own module: ``dpharness.proofs.<name>`` for the family module
    ``dpharness.mechanisms.<name>`` whose ``STEP_TYPES`` holds the step's type (found by what it is)."""
    import importlib

    name = P.family_module(step).__name__.rsplit(".", 1)[1]
    return importlib.import_module(f"{__package__}.{name}")


def _label(step: P.Step) -> str:
    if isinstance(step, P.Chain):
        return _label(step.first)
    text = step.describe()
    return text.split("(")[0]


def _join(path: str, part: str) -> str:
    return f"{path} › {part}" if path else part


# --------------------------------------------------------------------------- judging the claim

def _zcdp_log_delta(rho: sp.Expr, eps: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(ln δ, α): ρ-zCDP gives (ε, δ)-DP with δ = e^{(α−1)(αρ − ε)}/(α−1) · (1 − 1/α)^α for every α > 1
    (Canonne, Kamath & Steinke 2020, Prop. 12). α is chosen numerically and rounded to a simple
    rational (any α > 1 is valid); ln δ at that α is an exact closed form."""
    r, e = float(rho), float(eps)
    best = (math.inf, 2.0)
    for a in np.concatenate([np.linspace(1.0001, 3, 300), np.geomspace(3, 1e9, 600)]):
        val = (a - 1) * (a * r - e) - math.log(a - 1) + a * math.log1p(-1 / a)
        if val < best[0]:
            best = (val, float(a))
    alpha = sp.Rational(Fraction(best[1]).limit_denominator(64))
    if alpha <= 1:
        alpha = sp.Rational(65, 64)
    log_delta = (alpha - 1) * (alpha * rho - eps) - sp.log(alpha - 1) + alpha * sp.log(1 - 1 / alpha)
    return log_delta, alpha


def _dg_delta_bounds(eps: sp.Expr, d: int, tau2: Fraction) -> tuple[float, float]:
    """Rigorous [lo, hi] around δ(ε) = P[Y > a1] − e^ε P[Y > a2], a1 = ετ²/d − d/2, a2 = ετ²/d + d/2,
    Y ~ N_Z(0, τ²), from sum–integral comparisons (valid when τ√(2π) > 1). Evaluated with mpmath at
    60 digits; the endpoints are widened by 1e-40 (relative) and 1e-300 (absolute) in the safe direction."""
    import mpmath

    with mpmath.workdps(60):
        t2 = mpmath.mpf(tau2.numerator) / tau2.denominator
        tau = mpmath.sqrt(t2)
        c = tau * mpmath.sqrt(2 * mpmath.pi)
        if c <= 2:  # the comparison bounds on Z need τ√(2π) > 1; too loose below 2 to be useful
            return 0.0, 1.0
        z_lo, z_hi = c - 1, c + 1
        tail = lambda x: c * mpmath.erfc(x / (tau * mpmath.sqrt(2))) / 2  # ∫_x^∞ f = τ√(2π) Φ̄(x/τ)

        def s_bounds(m: int) -> tuple:
            """Bounds on P[Y >= m]."""
            if m >= 1:
                return tail(m) / z_hi, tail(m - 1) / z_lo
            lo_c, hi_c = s_bounds(1 - m)  # P[Y >= m] = 1 − P[Y <= m − 1] = 1 − P[Y >= 1 − m]
            return 1 - hi_c, 1 - lo_c

        e = mpmath.mpf(str(sp.N(eps, 70)))
        dd = mpmath.mpf(d)
        a1 = e * t2 / dd - dd / 2
        a2 = e * t2 / dd + dd / 2
        m1 = int(mpmath.floor(a1)) + 1
        m2 = int(mpmath.floor(a2)) + 1
        s1, s2 = s_bounds(m1), s_bounds(m2)
        ee = mpmath.exp(e)
        lo = s1[0] - ee * s2[1]
        hi = s1[1] - ee * s2[0]
        widen = mpmath.mpf(10) ** -40
        return float(lo - abs(lo) * widen - mpmath.mpf(10) ** -300), float(hi + abs(hi) * widen + mpmath.mpf(10) ** -300) * (1 + 2 ** -50)


# the exact discrete-Gaussian profile sums ~ sqrt(τ²) terms in interval arithmetic: used up to this τ²
_MAX_ENCLOSURE_TAU2 = 10 ** 6
_MAX_ENCLOSURE_SHIFT = 10 ** 4  # and it sums ~ d terms for a shift of d grid steps


def _judge(pb: ProofBuilder, prof: Profile, m: P.PartsMechanism | None = None) -> tuple[sp.Expr | None, float | None]:
    claim = pb.claim
    if prof.delta != 0:  # an (ε, δ) part (partition selection): basic composition with its exact δ
        from . import _parts_grouping

        return _parts_grouping.judge(pb, prof, m)
    if isinstance(claim, PureDP):
        if prof.eps is None:
            pb.add([Obligation("pure ε-DP: every noise is pure DP", sp.false,
                               "a Gaussian measurement is not pure DP", "lemma", False, "not pure DP")])
            return None, None
        pb.claim_bound(prof.eps)
        return prof.eps, None
    if isinstance(claim, RenyiDP):
        alpha, eps_c = exact(claim.alpha), exact(claim.epsilon)
        bound = alpha * prof.rho
        if prof.eps is not None:
            bound = sp.Min(bound, prof.eps)
        pb.fact(f"Rényi DP of order α = {alpha}: ρ-zCDP gives D_α <= αρ; pure ε-DP gives D_α <= ε",
                "Bun & Steinke 2016 Def. 1.1; D_α <= D_∞")
        pb.claim_bound(bound, eps_c, what="Rényi ε")
        return bound, None
    eps_c, delta_c = exact(claim.epsilon), exact(claim.delta)
    # (a) pure
    if prof.eps is not None and not exceeds(prof.eps, eps_c):
        pb.note("pure DP with the derived ε implies (ε, δ)-DP for every δ >= 0")
        pb.claim_bound(prof.eps)
        return prof.eps, 0.0
    # (a'') a single k-ary randomized response (Warner: k = 2): its exact profile, the same for every pair
    if prof.rr_1d is not None and m is not None:
        return _rr_profile(pb, m, prof, eps_c, delta_c)
    # (a') a single scalar grid Laplace: the exact profile of its dominating pair
    if prof.laplace_1d is not None and m is not None:
        return _laplace_profile(pb, m, prof, eps_c, delta_c)
    # (b) a single scalar discrete Gaussian: its exact (ε, δ) profile (CKS 2020 Thm 7), evaluated by
    # interval arithmetic for small τ² and by sum-integral comparison bounds for large τ²
    if prof.gaussian_1d is not None:
        tau2, d_units = prof.gaussian_1d
        if tau2 <= _MAX_ENCLOSURE_TAU2 and d_units <= _MAX_ENCLOSURE_SHIFT:
            from .discrete_gaussian import delta_enclosure

            lo, hi, _ = delta_enclosure(eps_c, d_units, tau2)
            how = "truncated sum plus geometric tail bound in interval arithmetic (mpmath.iv)"
        else:
            lo, hi = _dg_delta_bounds(eps_c, d_units, tau2)
            how = ("sum–integral comparison: for f(y) = e^{−y²/(2τ²)} decreasing on [0, ∞), ∫_m^∞ f <= Σ_{y>=m} f(y) "
                   "<= ∫_{m−1}^∞ f (m >= 1) and τ√(2π) − 1 <= Z <= τ√(2π) + 1; tails by erfc at 60 digits, "
                   "rounded outward")
        ok = Fraction(hi) <= Fraction(int(delta_c.p), int(delta_c.q)) if delta_c.is_Rational else hi <= float(delta_c)
        pb.add([Obligation(f"δ(ε = {eps_c}) of the discrete Gaussian (τ² = {float(tau2):.6g}) for a {d_units}-sensitive "
                           f"integer query: δ ∈ [{lo:.6g}, {hi:.6g}] <= claimed δ = {claim.delta}",
                           sp.Le(sym("delta_eps"), delta_c),
                           "δ = P[Y > ετ²/Δ − Δ/2] − e^ε P[Y > ετ²/Δ + Δ/2] for every Δ-sensitive integer query "
                           "(Canonne, Kamath & Steinke 2020, Thm 7); " + how, "exact", bool(ok), f"bounds [{lo!r}, {hi!r}]")])
        if ok:
            return eps_c, hi
    # (c) zCDP conversion, in log space
    log_delta, alpha = _zcdp_log_delta(prof.rho, eps_c)
    gap = sp.log(delta_c) - log_delta
    sign = exact_sign(gap)
    zc = Obligation(f"ρ-zCDP with ρ = {prof.rho} ⇒ (ε, δ)-DP at α = {alpha}: ln δ = (α−1)(αρ−ε) − ln(α−1) + α ln(1−1/α) "
                    f"<= ln(claimed δ = {claim.delta})", sp.Le(log_delta, sp.log(delta_c), evaluate=False),
                    "Canonne, Kamath & Steinke 2020 Prop. 12 (valid at every α > 1); exact evaluation", "exact",
                    sign in (0, 1), f"sign of the gap: {sign}")
    delta_value = float(sp.N(sp.exp(log_delta), 20))
    if zc.discharged:
        pb.add([zc])
        return eps_c, delta_value
    # (d) advanced composition over the account's units (every unit counted; ε₀ the largest)
    if A.advanced_units(prof) is not None:
        k, e0 = A.advanced_units(prof)
        adv, e_tot, d_tot = lemmas.advanced_composition(k, e0, 0, delta_c)
        if not exceeds(e_tot, eps_c):
            pb.check(f"the structure is a composition of k = {k} units, each ε_i-DP with ε_i <= ε₀ = {e0}",
                     sp.And(*[sp.Le(u, e0) for u in prof.units]), "the walk's account: every unit of every node")
            pb.add(adv)
            pb.claim_bound(e_tot)
            return e_tot, float(delta_c)
    # (e) privacy-loss distributions: the product of the leaves' worst pairs, composed with certified error
    pld = _pld_route(pb, prof, eps_c, delta_c, m)
    if pld is not None:
        return eps_c, pld
    pb.add([zc])
    return eps_c, delta_value


# PLD routes are tried only up to this many leaves (each costs a convolution; long compositions wait for
# self-composition by squaring in the account)
_MAX_PLD_LEAVES = 64


# a leaf whose typical privacy loss exceeds this many nats is not discretised (its loss grid would need
# astronomically many buckets; and an (ε, δ) claim it could prove is far above what a release needs)
_MAX_PLD_LOSS = 256


def _typical_loss(entry: tuple) -> float:
    """The scale of a leaf's privacy loss: D/t (Laplace), D²/(2τ²) + D/τ (Gaussian: the loss is normal
    with mean D²/(2τ²) and standard deviation D/τ), L (randomized response); a subsampled leaf's is at
    most its leaf's."""
    kind, a, b = entry[:3]
    if kind == "laplace":
        return float(Fraction(b) / Fraction(a))
    if kind == "gaussian":
        return float(Fraction(b) ** 2 / (2 * Fraction(a))) + b / math.sqrt(float(a))
    return float(sp.N(b))


# PLD routes take at most this many leaves in all (a long repetition self-composes by squaring)
_MAX_PLD_TOTAL = 10 ** 6


@functools.lru_cache(maxsize=16)
def _leaf_pair(entry: tuple, pessimistic: bool):
    """The certified PLD pair of one leaf entry of the account, or None when none is built here. Cached:
    a deterministic function of the entry, and the pairs are never modified (the privacy profile and a
    report re-read the pairs a proof built)."""
    from . import _pld, _pld_shift

    kind, a, b = entry[:3]
    if len(entry) == 4:
        return _pld_shift.shift_pair(kind, a, b, entry[3], pessimistic=pessimistic)
    if kind == "laplace":
        return _pld.discrete_laplace(a, b, pessimistic=pessimistic)
    if kind == "gaussian":
        return _pld.discrete_gaussian(a, b, pessimistic=pessimistic)
    return _pld.randomized_response(a, b, pessimistic=pessimistic)


def _composed(counted: dict, pessimistic: bool):
    """The composition of every leaf: each distinct leaf self-composed by squaring, then all composed."""
    from . import _pld

    parts = []
    for entry, n in counted.items():
        pair = _leaf_pair(entry, pessimistic)
        if pair is None:
            return None
        parts.append(_pld.self_compose(pair, n) if n > 1 else pair)
    return _pld.compose(parts)


def _leaf_text(entry: tuple) -> str:
    kind, a, b = entry[:3]
    names = {"laplace": f"discrete Laplace t = {a}", "gaussian": f"discrete Gaussian τ² = {a}",
             "rr": f"randomized response k = {a}"}
    text = names[kind] + (f", shift {b}" if kind != "rr" else f", L = {b}")
    return text + (f", Poisson-subsampled at rate {entry[3]}" if len(entry) == 4 else "")


def _pld_route(pb: ProofBuilder, prof: Profile, eps_c: sp.Expr, delta_c: sp.Expr,
               m: P.PartsMechanism | None = None) -> float | None:
    """δ(ε) of the composition by privacy-loss distributions (:mod:`._pld`, :mod:`._pld_shift`): each
    leaf's worst pair (centres 0 and D grid steps; the hockey-stick divergence of discrete Laplace,
    discrete Gaussian and randomized response grows with the shift; a Poisson-subsampled leaf's
    dominating pairs), their product dominating the composition (Zhu, Dong & Wang 2022, Thm 10),
    discretised pessimistically (losses rounded up, or split between neighbouring grid losses by
    connecting the dots) with every rounding, truncation and floating-point error bounded upward.
    Repeated leaves are self-composed by squaring. Adds the obligation and returns the certified δ when
    it is within the claim, else None (and a note with the bracket); a claim below the certified lower
    end is refuted when one neighbouring pair attains every leaf's worst pair (:mod:`._pld_witness`)."""
    if not prof.pld or len(prof.pld) > _MAX_PLD_TOTAL:
        return None
    counted: dict = {}
    for e in prof.pld:
        counted[e] = counted.get(e, 0) + 1
    if len(counted) > _MAX_PLD_LEAVES or any(_typical_loss(e) > _MAX_PLD_LOSS for e in counted):
        return None
    upper = _composed(counted, True)
    if upper is None:
        return None
    eps_f = float(eps_c)
    if Fraction(eps_f) > Fraction(str(sp.N(eps_c, 40))) if not eps_c.is_Rational else Fraction(eps_f) > Fraction(int(eps_c.p), int(eps_c.q)):
        eps_f = math.nextafter(eps_f, -math.inf)  # δ(ε) decreases in ε: a smaller ε is the safe side
    hi = upper.delta(eps_f)
    claimed = Fraction(int(delta_c.p), int(delta_c.q)) if delta_c.is_Rational else Fraction(float(delta_c))
    ok = Fraction(hi) <= claimed
    leaves_text = "; ".join(f"{n} × {_leaf_text(e)}" if n > 1 else _leaf_text(e) for e, n in counted.items())
    up_eps = upper.epsilon(float(delta_c))
    # the lower end rounds every loss down, losing up to w per leaf: computed only where that loss is small
    leaves_n = sum(counted.values())
    lower = _composed(counted, False) if leaves_n * upper.forward.w <= 0.05 * max(up_eps, 0.1) else None
    lo_eps = lower.epsilon(float(delta_c)) if lower is not None else None
    bracket = (f"ε(δ = {float(delta_c):.6g}) ∈ [{lo_eps:.6g}, {up_eps:.6g}]" if lo_eps is not None
               else f"ε(δ = {float(delta_c):.6g}) <= {up_eps:.6g} (no certified lower end: rounding {leaves_n} leaves' "
                    f"losses down would lose up to {leaves_n * upper.forward.w:.3g} nats)")
    if not ok:
        lo_delta = f"{lower.delta(eps_f):.6g}" if lower is not None else "?"
        pb.note(f"PLD accounting (the product of the leaves' worst pairs: {leaves_text}): δ(ε = {eps_f:.6g}) ∈ "
                f"[{lo_delta}, {hi:.6g}], above the claimed δ = {float(delta_c):.6g}; the same accounting brackets "
                f"{bracket} (the lower end is certified for these worst pairs; it bounds the true δ from below when one "
                "neighbouring pair attains every leaf's worst shift)")
        if lower is not None and eps_c.is_Rational:
            from . import _pld_witness

            _pld_witness.refute(pb, m, counted, lower, Fraction(int(eps_c.p), int(eps_c.q)), claimed)
        return None
    pb.add([Obligation(f"privacy-loss distribution of the composition ({leaves_text}): δ(ε = {eps_f:.6g}) <= {hi:.6g} "
                       f"<= claimed δ = {float(delta_c):.6g}; bracket {bracket}", sp.Le(sym("delta_pld"), delta_c),
                       "each leaf's worst pair (centres 0 and D: the hockey-stick divergence of a log-concave integer "
                       "noise grows with the shift; a Poisson-subsampled leaf's dominating pairs, Zhu, Dong & Wang 2022, "
                       "Thm 11); the product of dominating pairs dominates the composition (Zhu, Dong & Wang 2022, "
                       "Thm 10); pessimistic discretisation (losses rounded up, or split between the neighbouring grid "
                       "losses by connecting the dots, Doroshenko et al. 2022), masses bounded above, tails moved to +∞, "
                       "convolution error bounded in the 2-norm and added upward (dpharness.proofs._pld, ._pld_shift)",
                       "numeric (certified upper bound)", True, f"δ upper bound {hi!r}")])
    return hi


# --------------------------------------------------------------------------- witnesses

def _worst_pair(m: P.PartsMechanism) -> tuple[Any, Any, Any, sp.Expr] | None:
    """The extreme pair with the largest exact pointwise loss at the output y = the rounded centres on
    D, all noise grid Laplace: loss = Σ_j |c_j − c'_j| / t_j. None when the structure has other noise."""
    if any(not isinstance(x, P.GridLaplace) for x in P.measurement_leaves(m.steps)):
        return None
    best = None
    for d, d2 in extreme_pairs(m)[:64]:
        a, b = leaves(m, d), leaves(m, d2)
        loss = sp.Integer(0)
        for la, lb in zip(a, b):
            t = _F(la.measurement.t)
            loss += sp.Add(*[sp.Abs(ca - cb) for ca, cb in zip(la.centres, lb.centres)]) / t
        if best is None or exact_sign(loss - best[3]) == 1:
            y = [float(c * la.g) for la in a for c in la.centres]
            best = (d, d2, y, loss)
    return best


def _local_worst_pair(m: P.PartsMechanism) -> tuple[Any, Any, list, sp.Expr]:
    """Local randomizers on one record: the first pair (d, d') of records and the output y = every
    leaf's truthful report on d; loss = ln P_d(y) − ln P_d'(y) from the exact law ``law`` reads
    (each leaf's pmf ratio: e^L for randomized response, p/(1 − p) for Warner, ((1 − f/2)/(f/2))² for
    RAPPOR, whose one-hot bits differ in two places)."""
    d, d2 = extreme_pairs(m)[0]
    ratio = sp.Integer(1)
    y: list = []
    for a, b in zip(leaves(m, d), leaves(m, d2)):
        out = a.truthful_output()
        ratio = ratio * a.prob(out) / b.prob(out)
        y.extend(out)
    return d, d2, y, sp.log(sp.simplify(ratio))


@proves(P.Composite, sealed=P.COMPOSITE_SEALED)
def prove_composite(c: P.Composite) -> Proof:
    """A catalog class declared from parts: the proof of its declaration (the structure its sampler runs)."""
    return _prove(c, c.parts)


@proves(P.PartsMechanism)
def prove(m: P.PartsMechanism) -> Proof:
    return _prove(m, m)


def _structure_refusal(subject: Any, m: Any) -> str | None:
    """Why the structure the sampler will execute is not one the walk proves, re-checked at every proof
    (it may have been swapped in, or its classes patched, after construction), or None."""
    if type(m) is not P.PartsMechanism:
        return (f"the declaration is a {type(m).__qualname__}, not a dpharness.parts mechanism; the walk proves only "
                "structures dp.mechanism(...) builds")
    if m.claim != subject.claim:
        return f"the declaration claims {m.claim.describe()}, the mechanism {subject.claim.describe()}; they must be one claim"
    try:
        m._check()
    except ParameterError as exc:
        return f"its structure is refused: {exc}"
    patched = patched_code(type(m), *{type(s) for s in P.walk_nodes(m.steps)})
    if patched is not None:
        return f"{patched} was replaced after its class statement ran (patched code); the family's lemma is about the code as defined"
    return None


def prove_at_distance(subject: Any, distance: int) -> Proof:
    """The proof of a parts mechanism (or a catalog class declared from parts) for neighbours at
    ``distance`` (k records added/removed or substituted)."""
    return _prove(subject, subject.parts if isinstance(subject, P.Composite) else subject, distance)


def _prove(subject: Any, m: P.PartsMechanism, distance: int = 1) -> Proof:
    refusal = _structure_refusal(subject, m)
    if refusal is not None:
        from . import unproven

        return unproven(subject, f"no proof: {refusal}")
    pb = ProofBuilder(subject)
    space = m.space
    d0 = P.input_distance(m.relation, space)
    pb.precondition(f"input: {m.input_spec.describe()}")
    if m.shape == "record":
        pb.precondition(f"input: one record, one of k = {len(space.categories)} categories; any two different records are "
                        "neighbours (local DP)")
        pb.precondition("numeric model: each local randomizer samples its law exactly (randomized response lies with "
                        "probability exactly (k − 1)/(e^L + k − 1), dpharness.mechanisms._exact.randomized_response; "
                        "Warner lies and RAPPOR flips by _exact.bernoulli with the exact rationals 1 − p and f/2); "
                        "parameters read as their exact binary values")
    else:
        pb.precondition("numeric model: records read as their exact binary values; aggregates computed exactly; each noise "
                        "measurement rounds its input to its grid exactly and adds integer noise from an exact sampler "
                        "(discrete Laplace / discrete Gaussian, Canonne, Kamath & Steinke 2020); the float released is a "
                        "deterministic function of the exact grid value (post-processing)")
    pb.pseudocode(m.steps.describe())
    if P.has_post(m.steps):
        pb.precondition("every post-processing function is a pure function of the noisy outputs it receives (called once "
                        "per run; no state kept between calls, no access to the data)")
    walk = _Walk(pb)
    if isinstance(m.relation, BoundedChange):
        pb.fact(f"input distance: {d0.describe()} (from {m.relation.describe()} on vectors of {space.dim})",
                "norm inequalities: ||v||₂ <= ||v||₁, ||v||₁ <= √dim ||v||₂, ||v||₁ <= dim ||v||∞")
    with pb.phase("derive"):
        prof = walk.walk("", m.steps, space, d0)
        if distance > 1:
            prof = _at_distance(pb, m, prof, distance)
    pb.postcondition(f"(ε, δ) = ({prof.eps}, {prof.delta})" if prof.delta != 0 else
                     f"ε = {prof.eps} (pure)" if prof.eps is not None else f"ρ = {prof.rho} (zCDP)")
    with pb.phase("judge"):
        bound, delta_bound = _judge(pb, prof, m)
        witness = None
        local = m.shape == "record"
        # the noise perturbs a random subsample, or the pairs are k apart: no fixed distance-1 worst output here
        sampled = P.has_sampling(m.steps) or distance > 1
        worst = None if sampled else (_local_worst_pair(m) if local else _worst_pair(m))
        if worst is not None:
            d, d2, y, loss = worst
            out = y[0] if len(y) == 1 else np.array(y)
            how = ("any two records: the loss at y = the truthful report on D (RAPPOR: its one-hot bits) is the sum of "
                   "the leaves' ε" if local else "extreme neighbouring pair: the loss at y = the rounded centres on D is "
                   "Σ |c − c'|/t")
            witness = Witness(d, d2, None, None if P.has_post(m.steps) else out, float(sp.N(loss, 20)), how)
            if isinstance(m.claim, PureDP) and not P.has_post(m.steps):
                eps_c = exact(m.claim.epsilon)
                p, q = sp.Integer(1), sp.exp(-loss)
                if exceeds(loss, eps_c) and confirm_violation(p * 1, q, eps_c) and _on_exact_range(y):
                    law_name = "local randomizers'" if local else "discrete-Laplace"
                    pb.refute(witness, f"at y = {y}: ln P_D(y) − ln P_D'(y) = {loss} > ε = {eps_c} (exact, from the "
                                       f"code's own {law_name} law)")
        elif isinstance(m.claim, ApproxDP) and prof.gaussian_1d is not None and not P.has_post(m.steps) and not sampled:
            witness = _gaussian_refutation(pb, m, prof)
        elif prof.eps is None and isinstance(m.claim, PureDP):
            pb.note("no refutation attempted: a Gaussian measurement is not pure DP (the claim is not provable)")
        if isinstance(m.claim, PureDP) and P.has_post(m.steps) and prof.eps is not None and exceeds(prof.eps, exact(m.claim.epsilon)):
            pb.note("the derived bound exceeds the claim; not refuted, since post-processing may discard information")
    if witness is None and pb.witness is None and distance == 1:
        d, d2 = extreme_pairs(m)[0]
        witness = Witness(d, d2, None, None, None, "extreme neighbouring pair (the largest stability of the structure)")
    return pb.finish(bound, witness=witness, delta_bound=delta_bound)


def _at_distance(pb: ProofBuilder, m: P.PartsMechanism, prof: Profile, k: int) -> Profile:
    if m.shape != "dataset":
        pb.add([Obligation(f"neighbours at distance {k}", sp.false, "a distance counts records of a data set; this "
                           "mechanism's input is one record or a vector (its relation already fixes how far apart "
                           "inputs are)", "lemma", False, "distance applies to data sets only")])
        return prof
    nodes = P.walk_nodes(m.steps)
    shifts = not any(isinstance(n, (P.Parallel, P.PoissonSample)) for n in nodes)
    out = A.group(prof, k, shifts)
    pb.precondition(f"neighbours at distance {k}: data sets that differ by {k} records "
                    f"({m.relation.describe()} applied {k} times)")
    pb.fact(f"group privacy at distance k = {k}: ε → kε = {out.eps}" if out.eps is not None else
            f"group privacy at distance k = {k}", "Dwork & Roth 2014, Thm 2.2 (pure ε); Bun & Steinke 2016, Prop. 1.9 "
            f"(ρ → k²ρ = {out.rho})")
    if out.pld:
        pb.fact(f"PLD at distance {k}: each scalar leaf's centres move by at most {k} times their distance-1 bound (the "
                "triangle inequality along a path of neighbours): its worst pair is the shift by k·D",
                "the walk's stability bounds are per neighbouring pair; the hockey-stick divergence grows with the shift")
    return out


def _gaussian_refutation(pb: ProofBuilder, m: P.PartsMechanism, prof: Profile) -> Witness | None:
    """For one scalar discrete Gaussian: on the extreme pair whose centres are d grid steps apart, the
    event S = {y on D's side beyond the loss threshold} has P_D(S) − e^ε P_D'(S) = δ(ε) exactly: the
    witness (for audits); when the rigorous lower bound on that δ exceeds the claimed δ, the claim is
    REFUTED with it."""
    from dpharness.core import Event

    tau2 = prof.gaussian_1d[0]
    eps_c, delta_c = exact(m.claim.epsilon), exact(m.claim.delta)
    for d, d2 in extreme_pairs(m)[:8]:
        (a,), (b,) = leaves(m, d), leaves(m, d2)
        c, c2 = a.centres[0], b.centres[0]
        shift = abs(c2 - c)
        if shift == 0:
            continue
        if tau2 <= _MAX_ENCLOSURE_TAU2 and shift <= _MAX_ENCLOSURE_SHIFT:
            from .discrete_gaussian import delta_enclosure

            lo, _, _ = delta_enclosure(eps_c, shift, tau2)
        else:
            lo, _ = _dg_delta_bounds(eps_c, shift, tau2)
        violated = Fraction(lo) > Fraction(int(sp.Rational(delta_c).p), int(sp.Rational(delta_c).q))
        e_f = float(eps_c)
        m1 = math.floor(e_f * float(tau2) / shift - shift / 2) + 1
        g = float(a.g)
        if c2 > c:
            cut = (c - m1) * g
            event = Event.threshold(cut, above=False)
        else:
            cut = (c + m1) * g
            event = Event.threshold(cut, above=True)
        w = Witness(d, d2, event, None, None, f"the optimal event S = {event.description} for the pair with the largest "
                                               f"shift: P_D(S) − e^ε P_D'(S) = δ(ε) >= {lo:.6g}")
        if violated:
            pb.refute(w, f"on this pair the optimal event {event.description} has P_D(S) − e^ε P_D'(S) = δ(ε) >= {lo:.6g} "
                         f"> claimed δ = {m.claim.delta} (rigorous lower bound; CKS 2020 Thm 7 is exact for the pair)")
        return w
    return None


def _rr_profile(pb: ProofBuilder, m: P.PartsMechanism, prof: Profile, eps_c: sp.Expr,
                delta_c: sp.Expr) -> tuple[sp.Expr, float]:
    """(ε', δ) below the pure bound for one k-ary randomized response (Warner: k = 2, L = ln(p/(1 − p))):
    every pair of records has the same hockey-stick divergence, δ(ε') = (e^L − e^{ε'})/(e^L + k − 1)
    (:class:`._common.RandomizedResponseProfile`). REFUTED on the first pair of records with the event
    {y = the data's category} when δ(ε') exceeds the claimed δ (never through post-processing)."""
    from ._common import RandomizedResponseProfile

    k, L = prof.rr_1d
    d, d2 = extreme_pairs(m)[0]
    refutation = RandomizedResponseProfile(k, L).judge(pb, prof.eps, eps_c, delta_c, data=d, neighbor=d2)
    if refutation is not None:
        w, detail = refutation
        if P.has_post(m.steps):
            pb.note("δ(ε) exceeds the claim before post-processing; not refuted, since post-processing may discard information")
        else:
            w = Witness(d, d2, Event.point(d), d, w.loss, f"the truthful report y = {d!r} on data {d!r}, neighbour {d2!r}")
            pb.refute(w, detail.replace("P(0|0) - e^ε P(0|1)", f"P({d}|{d}) - e^ε P({d}|{d2})"))
    delta = (sp.exp(L) - sp.exp(eps_c)) / (sp.exp(L) + k - 1)
    return eps_c, max(0.0, float(sp.N(delta, 20)))


def _laplace_profile(pb: ProofBuilder, m: P.PartsMechanism, prof: Profile, eps_c: sp.Expr,
                     delta_c: sp.Expr) -> tuple[sp.Expr, float]:
    """(ε', δ) below the pure bound for one scalar grid Laplace: δ(ε') of the dominating pair (centres K
    grid steps apart; monotone likelihood ratio and Neyman–Pearson, :class:`._common.LaplaceProfile`).
    REFUTED on the extreme pair whose centres are K steps apart when δ(ε') exceeds the claimed δ (never
    through post-processing, whose outputs the half-line event does not describe)."""
    from ._common import LaplaceProfile

    K, scale, g = prof.laplace_1d
    best = None
    for d, d2 in extreme_pairs(m)[:64]:
        (a,), (b,) = leaves(m, d), leaves(m, d2)
        shift = b.centres[0] - a.centres[0]
        if best is None or abs(shift) > abs(best[2]):
            best = (d, d2, shift, a.centres[0])
    d, d2, shift, centre = best
    profile = LaplaceProfile(steps=K, scale=scale, g=g, centre=centre, direction=1 if shift >= 0 else -1,
                             witness_steps=None if P.has_post(m.steps) else abs(shift))
    refutation = profile.judge(pb, prof.eps, eps_c, delta_c, data=d, neighbor=d2)
    if refutation is not None:
        pb.refute(*refutation)
    return eps_c, float(sp.N(profile.delta(eps_c)[0], 20))


def _on_exact_range(y: list[float]) -> bool:
    return all(abs(v) < 2.0 ** 52 for v in y)
