"""Stability lemmas of the transformations (:mod:`dpharness.mechanisms.parts.transformations`), checked
with z3/sympy on the exact bounds for the mechanism's neighbour relation: record-wise maps keep
neighbours neighbouring; a count moves by 1 (add/remove) or 0 (substitution); a sum of per-record
contributions in [L, U] by max(|L|, |U|) or U − L; a histogram by one bin (two under substitution)."""

from __future__ import annotations

from typing import Any

import sympy as sp

from dpharness.core import AddRemove
from dpharness.mechanisms._rowwise import path_phrase
from dpharness.mechanisms.parts._base import Distance, Space, Transformation
from dpharness.mechanisms.parts.transformations import (
    ClipNorm,
    Clamp,
    Column,
    Count,
    Histogram,
    MapRecords,
    Sum,
    SumProducts,
    SumSquares,
)

from .._kernel import sym
from ._walk import _F, stability


@stability(Clamp, Column, MapRecords, ClipNorm, Count, Sum, SumSquares, SumProducts, Histogram)
def _stability(walk: Any, path: str, t: Transformation, space: Space, d: Distance) -> Distance:
    out = t.stability(space, d)
    rel = d.relation
    if isinstance(t, (Clamp, Column, MapRecords, ClipNorm)):
        walk.fact(
            path,
            f"{t.describe()} maps each record on its own, so neighbouring data sets stay neighbouring "
            f"({rel.describe() if rel else d.describe()})",
            "a record-wise map sends the one added/removed/substituted record to one record"
            + (
                " (whatever the function, and whatever state it is given; the map is total: a failing call or a "
                "wrong-length value gives the all-zero record, NaN gives 0 and ±∞ the largest double of its sign)"
                + f"; fn runs {path_phrase(t.path)}"
                if isinstance(t, MapRecords)
                else ""
            ),
        )
        if isinstance(t, ClipNorm):
            walk.fact(
                path,
                f"{t.describe()}: every output record has {t.norm} norm <= {t.bound}, so each column lies in "
                f"[−{t.bound}, {t.bound}]",
                "checked exactly (rationals) by the sampler after the float "
                "scaling; one column: exactly clamp(−bound, bound)",
            )
        return out
    if isinstance(t, Count):
        n = sym("n", nonnegative=True)
        if isinstance(rel, AddRemove):
            walk.check(path, "count: |(n + 1) − n| = 1 under add/remove", sp.Eq(sp.Abs((n + 1) - n), 1), "algebra")
        else:
            walk.check(path, "count: substitution keeps n, so the count moves by 0", sp.Eq(n - n, 0), "algebra")
        return out
    if isinstance(t, (Sum, SumSquares, SumProducts)):
        lo, hi = t.contribution(space)
        L, U = _F(lo), _F(hi)
        what = {Sum: "x", SumSquares: "x²", SumProducts: f"x_{getattr(t, 'i', 0)}·x_{getattr(t, 'j', 1)}"}[type(t)]
        _contribution_range(walk, path, t, space, what, L, U)
        x, x2 = sym("c"), sym("c'")
        hyps = [sp.Le(L, x), sp.Le(x, U), sp.Le(L, x2), sp.Le(x2, U)]
        if isinstance(rel, AddRemove):
            bound = max(abs(L), abs(U))
            walk.check(
                path,
                f"{t.describe()} under add/remove: the sum moves by one contribution c ∈ [{L}, {U}], |c| <= {bound}",
                sp.Le(sp.Abs(x), bound),
                "z3 on the exact bounds",
                hyps[:2],
            )
        else:
            bound = U - L
            walk.check(
                path,
                f"{t.describe()} under substitution: the sum moves by c − c' with c, c' ∈ [{L}, {U}], "
                f"|c − c'| <= {bound}",
                sp.Le(sp.Abs(x - x2), bound),
                "z3 on the exact bounds",
                hyps,
            )
        walk.evaluate(path, f"stability of {t.describe()}: {bound}", sp.Eq(_F(out.l1), bound), "exact arithmetic")
        return out
    if isinstance(t, Histogram):
        if isinstance(rel, AddRemove):
            walk.fact(
                path,
                f"{t.describe()}: one added/removed record changes one bin by 1 (L1 = L2² = L∞ = 1)",
                "each record falls in at most one bin",
            )
        else:
            walk.fact(
                path,
                f"{t.describe()}: a substituted record leaves one bin and enters another (L1 = 2, L2² = 2, L∞ = 1)",
                "each record falls in at most one bin",
            )
        return out
    raise AssertionError(f"no stability lemma for {t!r}")  # pragma: no cover - every transformation is listed


def _contribution_range(walk: Any, path: str, t: Any, space: Space, what: str, L: sp.Expr, U: sp.Expr) -> None:
    x, y = sym("x"), sym("y")
    if isinstance(t, Sum):
        walk.fact(
            path,
            f"records lie in [{L}, {U}] (the record domain and clamps), so each contribution {what} does",
            "the input spec validates every record; clamping is exact",
        )
        return
    if isinstance(t, SumSquares):
        lo, hi = _F(space.lo[0]), _F(space.hi[0])
        walk.check(
            path,
            f"x ∈ [{lo}, {hi}] ⇒ x² ∈ [{L}, {U}]",
            sp.And(sp.Le(L, x**2), sp.Le(x**2, U)),
            "nonlinear real arithmetic (z3)",
            [sp.Le(lo, x), sp.Le(x, hi)],
        )
        return
    i, j = t.i, t.j
    li, hi_, lj, hj = _F(space.lo[i]), _F(space.hi[i]), _F(space.lo[j]), _F(space.hi[j])
    hyps = [sp.Le(li, x), sp.Le(x, hi_), sp.Le(lj, y), sp.Le(y, hj)]
    prod = x * y if i != j else x * x
    if i == j:
        hyps = hyps[:2]
    walk.check(
        path,
        f"x_{i} ∈ [{li}, {hi_}], x_{j} ∈ [{lj}, {hj}] ⇒ x_{i}·x_{j} ∈ [{L}, {U}] (interval arithmetic)",
        sp.And(sp.Le(L, prod), sp.Le(prod, U)),
        "nonlinear real arithmetic (z3)",
        hyps,
    )
