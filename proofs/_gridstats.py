"""Shared proof steps for hand-written mechanisms that release exact grid statistics (counts,
clamped sums) each with independent grid-Laplace noise: the gallery's ``clamped_sum_unclamped`` and
``noisy_histogram_scale_bug`` (the correct catalog statistics are declared from parts and proved by
:mod:`dpharness.proofs.parts`).

Method: each statistic's sensitivity is derived by interval arithmetic from the snapped clamping
bounds (one record's contribution lies in an interval [a, b]; add/remove moves the statistic by at
most max(|a|, |b|), substitution by at most b − a), followed by the rounding lemma when a
statistic computed in a finer unit is snapped to the grid. The law is a product of 1-D grid
Laplace pmfs, so the log-space loss is the sum of the coordinates' losses, each bounded by
Δ_i/b_i (triangle inequality) — sequential composition of the statistics (Dwork & Roth Thm 3.16).

Records and bounds are read as the binary doubles the code computes with; parameters (scales,
claim) through ``dpharness.core.exact``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np
import sympy as sp

from dpharness.core import AddRemove, Substitute, exact

from . import _lemmas as lemmas
from ._common import LaplaceProfile, judge_pure
from ._kernel import ProofBuilder, discharge, sym
from ._model import Proof
from .laplace import laplace_l1_steps

__all__ = ["rhu", "units", "GridStat", "contribution_sensitivity", "clamp_snap_steps", "prove_grid_stats", "accepts"]


def rhu(u: Fraction) -> int:
    """floor(u + 1/2), the grid rounding of dpharness.mechanisms._noise."""
    return math.floor(u + Fraction(1, 2))


def units(value: Any, g: Fraction) -> int:
    """A record or bound snapped to grid units, read as the binary double the code uses."""
    return rhu(Fraction(float(value)) / g)


def accepts(mechanism: Any, data: Any) -> bool:
    """Whether the mechanism runs on ``data`` (its law is defined: the input is in the domain and the
    statistics fit the grid, |units| < 2^52); the proofs' pairs and probes must be such inputs."""
    from dpharness.errors import ParameterError

    try:
        mechanism.law(data)
    except ParameterError:
        return False
    return True


@dataclass
class GridStat:
    """One released statistic: ``name``, derived centre sensitivity ``delta`` (in grid units),
    the noise ``scale`` (exact value), and the obligations of its derivation."""

    name: str
    delta_units: int
    scale: sp.Expr
    steps: list = field(default_factory=list)


def contribution_sensitivity(
    name: str,
    lo_c: Fraction,
    hi_c: Fraction,
    relation: Any,
    *,
    var_bounds: dict | None = None,
    contribution: sp.Expr | None = None,
    snap_factor: Fraction | None = None,
) -> tuple[int, list]:
    """Sensitivity (in grid units) of a sum of per-record contributions lying in [lo_c, hi_c].

    ``contribution`` (a sympy expression in the symbols of ``var_bounds`` {symbol: (lo, hi)}) is
    checked to lie in [lo_c, hi_c] by z3/sympy (interval arithmetic). Add/remove: max(|lo_c|, |hi_c|);
    substitution: hi_c − lo_c. ``snap_factor``: the sum is computed in a finer unit and snapped by
    floor(total·factor + 1/2): the rounding lemma gives ceil(Δ·factor)."""
    obs = []
    a, b = exact(lo_c), exact(hi_c)
    if contribution is not None and var_bounds:
        hyps = []
        for v, (vl, vh) in var_bounds.items():
            hyps += [sp.Ge(v, exact(vl)), sp.Le(v, exact(vh))]
        obs.append(
            discharge(
                f"{name}: one record's contribution {contribution} lies in [{a}, {b}]",
                sp.And(sp.Le(a, contribution), sp.Le(contribution, b)),
                "interval arithmetic on the snapped, clamped record (z3 over the box)",
                hypotheses=hyps,
            )
        )
    v, w = sym("v"), sym("w")
    box = [sp.Ge(v, a), sp.Le(v, b), sp.Ge(w, a), sp.Le(w, b)]
    if isinstance(relation, AddRemove):
        delta = max(abs(lo_c), abs(hi_c))
        obs.append(
            discharge(
                f"{name}: add/remove moves the sum by one contribution v, |v| <= max(|a|, |b|) = {exact(delta)}",
                sp.Le(sp.Abs(v), exact(delta)),
                "interval arithmetic",
                hypotheses=box,
            )
        )
    elif isinstance(relation, Substitute):
        delta = hi_c - lo_c
        obs.append(
            discharge(
                f"{name}: substitution moves the sum by v - w, |v - w| <= b - a = {exact(delta)}",
                sp.Le(sp.Abs(v - w), exact(delta)),
                "interval arithmetic",
                hypotheses=box,
            )
        )
    else:
        raise TypeError(f"relation={relation!r}")
    if snap_factor is not None:
        obs += lemmas.grid_rounding()
        du = math.ceil(delta * snap_factor)
        obs.append(
            discharge(
                f"{name}: snapped to the grid, the change is at most ceil({delta}·{snap_factor}) = {du} grid units",
                sp.Eq(sp.ceiling(exact(delta) * exact(snap_factor)), du),
                "rounding lemma, instantiated",
            )
        )
        return du, obs
    if Fraction(delta).denominator != 1:
        raise ValueError("contributions must be integers in grid units")
    return int(delta), obs


def clamp_snap_steps(lo: Any, hi: Any, g: Fraction) -> tuple[int, int, list]:
    """Clamping to [lo, hi] then snapping with floor(·/g + 1/2) lands in [rhu(lo/g), rhu(hi/g)] grid
    units (clamp is monotone and so is the rounding). Returns (ulo, uhi, obligations)."""
    lo_f, hi_f = Fraction(float(lo)), Fraction(float(hi))
    ulo, uhi = rhu(lo_f / g), rhu(hi_f / g)
    x = sym("x")
    m = sp.Symbol("m", integer=True)
    cl = sp.Min(sp.Max(x, exact(lo_f)), exact(hi_f))
    hyps = [sp.Le(m, cl / exact(g) + sp.Rational(1, 2)), sp.Lt(cl / exact(g) + sp.Rational(1, 2), m + 1)]
    ob = discharge(
        f"clamp to [{exact(lo_f)}, {exact(hi_f)}] then snap: the record's units m satisfy {ulo} <= m <= {uhi}",
        sp.And(sp.Le(ulo, m), sp.Le(m, uhi)),
        "m = floor(clamp(x)/g + 1/2) as integer constraints; clamp and rounding are monotone (z3)",
        hypotheses=hyps,
    )
    return ulo, uhi, [ob]


def prove_grid_stats(
    pb: ProofBuilder,
    mechanism: Any,
    stats: Sequence[GridStat],
    *,
    g: Fraction,
    centres: Callable[[Any], list[int]],
    pair: tuple[Any, Any],
    probes: Sequence[Any] = (),
    fixed: Callable[[Any], list] | None = None,
    alt_centres: Callable[[Any], list[int]] | None = None,
    alt_pair: tuple[Any, Any] | None = None,
    alt_words: str = "",
    alt_bound: sp.Expr = sp.oo,
) -> Proof:
    """Compose the statistics' 1-D Laplace bounds and judge the claim.

    ``centres(data)``: the model's exact centres in grid units (one per statistic, same order as
    the law's coordinates); ``fixed(data)``: extra law coordinates that are data-independent under
    the relation (e.g. a public count), appended after the noisy ones. The model is checked
    against ``mechanism.law`` at ``pair`` and ``probes`` (the law's mode must sit at the model's
    centres). If it does not and ``alt_centres`` (a buggy variant's model) matches instead, the
    claim is judged on the variant's model with ``alt_pair``."""
    g_val = exact(g)
    pb.precondition(
        "grid: records, bounds and statistics are snapped to g·Z; the sensitivities above are those of the "
        "snapped values (snapped bounds; statistics computed in a finer unit are covered by the rounding lemma)"
    )
    T = [sp.tanh(g_val / (2 * st.scale)) for st in stats]
    with pb.phase("derive"):
        laplace_l1_steps(pb, 1, grid="grid pmf tanh(g/(2b)) e^{-|y-c|/b}")
        for st in stats:
            pb.add(st.steps)
        eps_i = [exact(st.delta_units) * g_val / st.scale for st in stats]
        pb.fact(
            "the law is a product over the released statistics (independent noise), so the loss is the "
            "sum of the statistics' losses",
            "ln of a product",
        )
        pb.add(lemmas.sequential_composition(eps_i))
        bound = sp.Add(*eps_i)

    def matches(model: Callable[[Any], list[int]], data: Any) -> bool:
        c = model(data)
        extra = fixed(data) if fixed else []
        y = np.array([float(u * g) for u in c] + [float(v) for v in extra])
        law = mechanism.law(data)
        lp = float(np.asarray(law.log_prob(y.reshape(1, -1) if len(y) > 1 else y))[0])
        mode = float(sum(sp.N(sp.log(t), 30) for t in T))
        return abs(lp - mode) <= 1e-9 * max(1.0, abs(mode))

    with pb.phase("implementation"):
        inputs = [pair[0], pair[1], *probes]
        refused = [d for d in inputs if not accepts(mechanism, d)]
        if refused:
            pb.evaluate(
                f"the mechanism accepts the proof's inputs (it refuses {np.asarray(refused[0]).tolist()!r:.80}: "
                "out of the domain or statistics too large for the grid)",
                sp.false,
                "no representable input found to check the implementation against the model",
            )
            return pb.finish(bound)
        ok = all(matches(centres, d) for d in inputs)
        if ok:
            pb.note(
                f"checked numerically: mechanism.law has its mode at the model's centres on {len(inputs)} inputs "
                "(including records outside the bounds)"
            )
        else:
            pb.evaluate(
                "mechanism.law agrees with the model (mode at the model's centres, records outside the "
                "bounds included)",
                sp.false,
                "the implementation differs from the model",
            )

    with pb.phase("judge"):
        model, (d, d2) = centres, pair
        variant = False
        if not ok and alt_centres is not None and alt_pair is not None and all(matches(alt_centres, x) for x in inputs):
            pb.note(f"the implementation matches the variant model: {alt_words}")
            model, (d, d2) = alt_centres, alt_pair
            bound = alt_bound
            variant = True
        c, c2 = model(d), model(d2)
        diffs = [abs(a - b) for a, b in zip(c, c2)]
        p = sp.Mul(*T)
        q = sp.Mul(*[t * sp.exp(-exact(k) * g_val / st.scale) for t, k, st in zip(T, diffs, stats)])
        extra = fixed(d) if fixed else []
        y = [float(u * g) for u in c] + [float(v) for v in extra]
        profile = None
        if len(stats) == 1 and not variant:
            profile = LaplaceProfile(
                steps=int(stats[0].delta_units),
                scale=stats[0].scale,
                g=g_val,
                centre=int(c[0]),
                direction=1 if c2[0] >= c[0] else -1,
                witness_steps=int(diffs[0]),
            )
        elif len(stats) > 1:
            pb.note(
                "(ε, δ) claims below the pure bound: the exact profile is derived for one released statistic only "
                f"(here {len(stats)}, with their own scales)"
            )
        w = judge_pure(
            pb,
            bound,
            p=p,
            q=q,
            data=d,
            neighbor=d2,
            output=np.array(y) if len(y) > 1 else y[0],
            profile=profile,
            description="output at the snapped statistics of D (every coordinate's triangle inequality tight)",
        )
    return pb.finish(bound, witness=w)
