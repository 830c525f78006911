"""Amplification by subsampling (:mod:`dpharness.mechanisms.parts.sampling`). ``poisson_sample(q) >> rest``
under add/remove neighbours is the rest's account amplified: ε' = ln(1 + q(e^ε − 1)) (Balle, Barthe &
Gaboardi 2018), ρ unchanged, and the privacy-loss distribution of the subsampled leaf by its dominating
pair (Zhu, Dong & Wang 2022). ``sample(m) >> rest`` under substitution on data sets of a declared size n:
the same ε amplification at q = m/n (Balle, Barthe & Gaboardi 2018, Thm 9), δ → qδ, ρ unchanged."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy as sp

from dpharness.core import AddRemove, Substitute
from dpharness.mechanisms.parts._base import Chain, Distance, Space
from dpharness.mechanisms.parts._structure import samples_see_whole_data_set
from dpharness.mechanisms.parts.sampling import FixedSample, PoissonSample

from .. import _account as A
from .._model import Obligation
from ._walk import Profile, _join, head


@head(PoissonSample)
def subsample(walk: Any, path: str, step: Chain, space: Space, d: Distance) -> Profile:
    """``poisson_sample(q) >> rest`` under add/remove: the rest's account, amplified."""
    assert isinstance(step.first, PoissonSample)  # the head this hook is registered for
    q = Fraction(step.first.rate)
    inner = walk.walk(_join(path, "on the subsample"), step.second, space, d)
    if not isinstance(d.relation, AddRemove):
        walk.pb.add(
            [
                Obligation(
                    walk._tag(path, f"{step.first.describe()} under {d.describe()}"),
                    sp.false,
                    "amplification by Poisson subsampling is proved here for add/remove neighbours only; "
                    "declare relation=AddRemove()",
                    "lemma",
                    False,
                    "not proved for this relation",
                )
            ]
        )
        return inner
    qs = sp.Rational(q.numerator, q.denominator)
    walk.fact(
        path,
        f"{step.first.describe()}: each record is kept independently with probability exactly q = {qs} "
        "(exact Bernoulli), a fresh subsample per release; the rest runs on the kept records",
        "the sampler executes this structure (dpharness.mechanisms.parts.sampling._subsampled)",
    )
    out = A.poisson(inner, q)
    if inner.eps is not None:
        walk.evaluate(
            path,
            f"amplification by subsampling: ε' = ln(1 + q(e^ε − 1)) = {out.eps} with ε = {inner.eps}",
            sp.Eq(out.eps, sp.log(1 + qs * (sp.exp(inner.eps) - 1))),
            "Balle, Barthe & Gaboardi 2018 (Poisson subsampling, add/remove neighbours)",
        )
    walk.fact(
        path,
        f"zCDP: ρ = {inner.rho} unchanged (an upper bound: subsampling never raises a Rényi divergence)",
        "e^{(α−1)D_α(P‖Q)} is jointly convex: the outputs on two neighbours are mixtures, with the same weights "
        "(the other records' subsample), of pairs each within the inner bound, and mixing Q into P or P into Q "
        "moves each pair towards equality",
    )
    if out.pld:
        walk.fact(
            path,
            "privacy-loss distribution: the subsampled leaf's dominating pairs are ((1 − q)Q + qP, Q) "
            "(remove) and (Q, (1 − q)Q + qP) (add), with (P, Q) the leaf's worst shift pair",
            "Zhu, Dong & Wang 2022, Thm 11 (Poisson subsampling of a mechanism with a dominating pair)",
        )
    return out


@head(FixedSample)
def fixed_sample(walk: Any, path: str, step: Chain, space: Space, d: Distance) -> Profile:
    """``sample(m) >> rest`` under substitution with n records declared: the rest's account, amplified at
    q = m/n."""
    assert isinstance(step.first, FixedSample)  # the head this hook is registered for
    m = step.first.size
    inner = walk.walk(_join(path, "on the subsample"), step.second, space, d)
    subject = getattr(walk.pb.mechanism, "parts", walk.pb.mechanism)
    n = getattr(subject, "size", None)
    whole = subject is not None and samples_see_whole_data_set(subject.steps)
    if not isinstance(d.relation, Substitute) or n is None or n < m or not whole:
        why = (
            "declare relation=Substitute()"
            if not isinstance(d.relation, Substitute)
            else f"declare the data-set size (size=n, n >= {m})"
            if n is None or n < m
            else "it must see the whole data set of n records (not a partition or a subsample of it)"
        )
        walk.pb.add(
            [
                Obligation(
                    walk._tag(path, f"{step.first.describe()} under {d.describe()}" + (f", size={n}" if n else "")),
                    sp.false,
                    "amplification by sampling without replacement is proved here for substitution neighbours on "
                    f"data sets of a declared size n >= {m}; {why}",
                    "lemma",
                    False,
                    "not proved for this relation or size",
                )
            ]
        )
        return inner
    q = Fraction(m, n)
    qs = sp.Rational(q.numerator, q.denominator)
    walk.fact(
        path,
        f"{step.first.describe()}: {m} of the n = {n} records drawn uniformly without replacement (every "
        f"{m}-subset equally likely), a fresh subsample per release; the rest runs on them; q = m/n = {qs}",
        "the sampler executes this structure (dpharness.mechanisms.parts.sampling.FixedSample.execute_head)",
    )
    out = A.fixed_sample(inner, q)
    if inner.eps is not None:
        walk.evaluate(
            path,
            f"amplification by sampling without replacement: ε' = ln(1 + q(e^ε − 1)) = {out.eps} with ε = {inner.eps}",
            sp.Eq(out.eps, sp.log(1 + qs * (sp.exp(inner.eps) - 1))),
            "Balle, Barthe & Gaboardi 2018, Thm 9 (sampling without replacement, substitution neighbours)",
        )
    walk.fact(
        path,
        f"zCDP: ρ = {inner.rho} unchanged (an upper bound)",
        "the outputs on two neighbours are mixtures with the same weights (the uniform m-subset of indices) of "
        "pairs that are identical or substitution neighbours of size m; the Rényi divergence is jointly "
        "quasi-convex (van Erven & Harremoës 2014, Thm 13)",
    )
    return out
