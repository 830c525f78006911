"""Soundness of the parts prover: a claim PROVED is never violated by the exact truth.

Property tests (hypothesis) draw random mechanism structures declared from parts, over every
combinator (``>>``, ``dp.compose``, nested compose, ``dp.parallel`` inside compose and compose inside
parallel, ``dp.post``), both neighbour relations (add/remove, substitution, with or without a fixed
size) and every claim type (``PureDP``, ``ApproxDP``, ``RenyiDP``), on small record domains
(``RealBox(0, 1, 2)``, ``RealBox(-1, 1, 2)``, ``IntegerRange(-1, 2)``, ``RealInterval(-1, 2)``, the real line with clamps),
with noise scales that keep losses at a few units and granularities 1, 1/2, 1/4, 2 and the default.
The claim is drawn near the exact truth (its ε a factor u in [0.2, 1.5] of the truth's scale), so a
wrong proof is a PROVED verdict. The oracle is ``tests/_exact_truth.py``: its own interpreter of the
structure and a brute force over neighbouring pairs of small data sets, giving a rigorous LOWER bound
on the true ε (pure), δ(ε) (approximate) or D_α (Rényi). Property: when the verdict is PROVED,

* PureDP(ε): the exact truth ε_true <= ε, and <= the reported bound;
* ApproxDP(ε, δ): δ_true(ε) <= δ (a relative margin of 1e-9 for float summation), and
  δ_true(bound) <= the reported δ at the reported bound;
* RenyiDP(α, ε): D_α,true <= ε, and <= the reported bound.

Every ``dp.post`` drawn is the identity (an injective map keeps the truth unchanged, so the truth of
the outputs before post-processing is the truth of the mechanism).

A focused regression test covers the soundness issue this property was written for: a
``dp.parallel`` under substitution inside a ``dp.compose`` was skipped by advanced composition, so an
(ε, δ) claim was PROVED while the true ε was about 10 (the issue's example and variants), with the
brute force as the oracle.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from _exact_truth import exact_truth, leaf_centres

from dpharness import AddRemove, ApproxDP, IntegerRange, PureDP, RealBox, RealInterval, RenyiDP, Substitute
from dpharness import parts as dp
from dpharness.errors import ParameterError
from dpharness.proofs import prove
from dpharness.proofs._model import Verdict

DELTA_MARGIN = 1e-9  # relative: float summation of the brute-force δ (its own error is below 1e-11)
DELTA_FLOOR = 1e-15  # absolute


def identity(*outputs):
    """The post-processing every drawn ``dp.post`` uses: injective, so privacy is exactly unchanged."""
    return outputs


# --------------------------------------------------------------------------- drawing structures


@dataclass(frozen=True)
class _Ctx:
    """What the next step receives: records of ``dim`` columns, ``bounded`` (sums allowed), and the
    pools of parameters that fit the domain (clamp bounds, partition keys, bin edges, categories)."""

    dim: int
    bounded: bool
    clamps: tuple
    keys: tuple
    edges: tuple
    categories: tuple


@dataclass(frozen=True)
class _Domain:
    name: str
    records: Any
    code: str
    values: tuple  # candidate values per column for the brute force
    ctx: _Ctx


_DOMAINS = (
    _Domain(
        "box",
        RealBox(0, 1, 2),
        "RealBox(0, 1, 2)",
        ((0.0, 0.375, 1.0),) * 2,
        _Ctx(
            2,
            True,
            ((0, 0.5), (0.25, 1), (0.375, 0.75)),
            (0, 0.375, 1, 0.5),
            ((0, 0.5, 1), (0, 0.25, 0.75), (0, 1)),
            ((0, 1), (0.375,), (0, 0.375, 1)),
        ),
    ),
    _Domain(
        "signed_box",
        RealBox(-1, 1, 2),
        "RealBox(-1, 1, 2)",
        ((-1.0, 0.375, 1.0),) * 2,
        _Ctx(
            2,
            True,
            ((0, 1), (-0.5, 0.5), (-1, 0.375)),
            (-1, 0.375, 1),
            ((-1, 0, 1), (-0.5, 0.5), (0, 1)),
            ((-1, 1), (0.375,), (-1, 0.375, 1)),
        ),
    ),
    _Domain(
        "int",
        IntegerRange(-1, 2),
        "IntegerRange(-1, 2)",
        ((-1.0, 0.0, 1.0, 2.0),),
        _Ctx(
            1, True, ((0, 1), (-1, 1), (0, 2)), (-1, 0, 1, 2), ((-1, 0, 2), (0, 1, 2), (0, 2)), ((0, 1), (-1, 2), (1,))
        ),
    ),
    _Domain(
        "interval",
        RealInterval(-1, 2),
        "RealInterval(-1, 2)",
        ((-1.0, 0.0, 0.375, 0.5, 1.0, 2.0),),
        _Ctx(
            1,
            True,
            ((0, 1), (0, 0.5), (-0.5, 1)),
            (0, 0.5, 1, 2),
            ((0, 0.5, 1), (-1, 0, 2), (0, 2)),
            ((0, 1), (0.375, 2), (0.5,)),
        ),
    ),
    _Domain(
        "line",
        RealInterval(),
        "RealInterval()",
        ((-2.0, -1.0, 0.0, 0.375, 1.0, 2.0),),
        _Ctx(1, False, ((0, 1), (-1, 1), (0, 0.5)), (0, 1, -1), ((0, 0.5, 1), (-1, 0, 1)), ((0, 1), (0.375, -1))),
    ),
)

_SCALES = (0.25, 0.5, 1, 2, 3, 0.2, Fraction(5, 3))
_SIGMAS = (0.5, 1, 2, 3)
_GRIDS = (None, 1, 0.5, 0.25, 2)  # None: the default granularity


def _num(x: Any) -> str:
    return f"Fraction({x.numerator}, {x.denominator})" if isinstance(x, Fraction) else repr(x)


@dataclass(frozen=True)
class _Part:
    """A step and the Python code that builds it (for a readable falsifying example)."""

    step: Any
    code: str
    leaves: int


@st.composite
def _noise(draw) -> _Part:
    g = draw(st.sampled_from(_GRIDS))
    gk = "" if g is None else f", granularity={g!r}"
    kw = {} if g is None else {"granularity": g}
    if draw(st.sampled_from([True, True, True, False])):
        s = draw(st.sampled_from(_SCALES))
        return _Part(dp.laplace(s, **kw), f"dp.laplace({_num(s)}{gk})", 1)
    s = draw(st.sampled_from(_SIGMAS))
    return _Part(dp.gaussian(s, **kw), f"dp.gaussian({_num(s)}{gk})", 1)


def _chain(*parts: _Part) -> _Part:
    step = parts[0].step
    for p in parts[1:]:
        step = step >> p.step
    return _Part(step, " >> ".join(p.code for p in parts), max(p.leaves for p in parts))


def _t(step: Any, code: str) -> _Part:
    return _Part(step, code, 0)


@st.composite
def _leaf(draw, ctx: _Ctx) -> _Part:
    """Transformations down to an aggregate, then one noise measurement."""
    pre = []
    bounded = ctx.bounded
    if draw(st.sampled_from([False, False, False, True])):
        lo, hi = draw(st.sampled_from(ctx.clamps))
        pre.append(_t(dp.clamp(lo, hi), f"dp.clamp({lo!r}, {hi!r})"))
        bounded = True
    kinds = ["count", "histogram", "sum", "sum", "sum_squares"] + (["sum_products"] if ctx.dim >= 2 else [])
    kind = draw(st.sampled_from(kinds))
    if kind in ("sum", "sum_squares", "sum_products") and not bounded:
        lo, hi = draw(st.sampled_from(ctx.clamps))
        pre.append(_t(dp.clamp(lo, hi), f"dp.clamp({lo!r}, {hi!r})"))
    if kind in ("sum", "sum_squares", "histogram") and ctx.dim >= 2:
        j = draw(st.integers(0, ctx.dim - 1))
        pre.append(_t(dp.column(j), f"dp.column({j})"))
    if kind == "count":
        agg = _t(dp.count(), "dp.count()")
    elif kind == "sum":
        agg = _t(dp.sum(), "dp.sum()")
    elif kind == "sum_squares":
        agg = _t(dp.sum_squares(), "dp.sum_squares()")
    elif kind == "sum_products":
        i, j = draw(st.integers(0, ctx.dim - 1)), draw(st.integers(0, ctx.dim - 1))
        agg = _t(dp.sum_products(i, j), f"dp.sum_products({i}, {j})")
    elif draw(st.booleans()):
        e = draw(st.sampled_from(ctx.edges))
        agg = _t(dp.histogram(edges=list(e)), f"dp.histogram(edges={list(e)!r})")
    else:
        c = draw(st.sampled_from(ctx.categories))
        agg = _t(dp.histogram(categories=list(c)), f"dp.histogram(categories={list(c)!r})")
    return _chain(*pre, agg, draw(_noise()))


def _post(p: _Part) -> _Part:
    return _Part(p.step >> dp.post(identity), f"{_wrap(p)} >> dp.post(identity)", p.leaves)


def _wrap(p: _Part) -> str:
    return f"({p.code})" if " >> " in p.code else p.code


@st.composite
def _parallel(draw, ctx: _Ctx, depth: int) -> _Part:
    """``dp.parallel`` of a part one level shallower, on up to 3 keys of the domain."""
    by = draw(st.integers(0, ctx.dim - 1))
    keys = draw(st.lists(st.sampled_from(ctx.keys), min_size=1, max_size=3, unique=True))
    p = draw(_part(ctx, depth - 1))
    return _Part(
        dp.parallel(p.step, by=by, keys=keys), f"dp.parallel({p.code}, by={by}, keys={keys!r})", len(keys) * p.leaves
    )


@st.composite
def _part(draw, ctx: _Ctx, depth: int, top: bool = False) -> _Part:
    """A randomized part: a leaf, or (``depth`` > 0) a combinator of parts one level shallower; the
    top of a structure is a combinator. Combinators come first in the list: hypothesis draws the
    first choice more often than the others."""
    kinds = (
        ["compose", "parallel", "repeat_plus", "repeat", "compose", "parallel", "clamp_then"]
        + (["column_then"] if ctx.dim >= 2 else [])
        if depth > 0
        else []
    ) + ([] if top and depth > 0 else ["leaf"])
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        out = draw(_leaf(ctx))
    elif kind == "compose":  # parts picked from a small palette, so equal parts recur (advanced composition)
        palette = draw(st.lists(_part(ctx, depth - 1), min_size=1, max_size=3))
        picks = draw(st.lists(st.integers(0, len(palette) - 1), min_size=2, max_size=5))
        parts = [palette[i] for i in picks]
        out = _Part(
            dp.compose(*[p.step for p in parts]),
            "dp.compose(" + ", ".join(p.code for p in parts) + ")",
            sum(p.leaves for p in parts),
        )
    elif kind == "repeat":  # equal parts: advanced composition applies
        p = draw(_part(ctx, depth - 1))
        k = draw(st.integers(2, 8))
        out = _Part(dp.compose(*[p.step] * k), f"dp.compose(*[{p.code}] * {k})", k * p.leaves)
    elif kind == "repeat_plus":  # equal parts and one more (as in a mean, a variance or a correlation)
        p = draw(_part(ctx, depth - 1))
        k = draw(st.integers(2, 8))
        q = draw(_part(ctx, depth - 1))
        out = _Part(
            dp.compose(*[p.step] * k, q.step), f"dp.compose(*[{p.code}] * {k}, {q.code})", k * p.leaves + q.leaves
        )
    elif kind == "parallel":
        out = draw(_parallel(ctx, depth))
    elif kind == "clamp_then":
        lo, hi = draw(st.sampled_from(ctx.clamps))
        p = draw(_part(_Ctx(ctx.dim, True, ctx.clamps, ctx.keys, ctx.edges, ctx.categories), depth - 1))
        out = _Part(dp.clamp(lo, hi) >> p.step, f"dp.clamp({lo!r}, {hi!r}) >> {_wrap(p)}", p.leaves)
    else:
        j = draw(st.integers(0, ctx.dim - 1))
        p = draw(_part(_Ctx(1, ctx.bounded, ctx.clamps, ctx.keys, ctx.edges, ctx.categories), depth - 1))
        out = _Part(dp.column(j) >> p.step, f"dp.column({j}) >> {_wrap(p)}", p.leaves)
    if draw(st.sampled_from([False] * 7 + [True])):
        out = _post(out)
    return out


class Drawn:
    """A drawn declaration: its repr is the Python code that builds it (a plain class, so hypothesis
    prints that code, not the step objects, in a falsifying example)."""

    def __init__(self, domain: _Domain, relation: Any, relation_code: str, size: int | None, steps: Any, code: str):
        self.domain, self.relation, self.relation_code = domain, relation, relation_code
        self.size, self.steps, self.code = size, steps, code

    def mechanism(self, claim: Any):
        return dp.mechanism(
            name="drawn",
            records=self.domain.records,
            relation=self.relation,
            steps=self.steps,
            claim=claim,
            size=self.size,
        )

    def snippet(self, claim: Any) -> str:
        size = "" if self.size is None else f", size={self.size}"
        return (
            f"dp.mechanism(name='drawn', records={self.domain.code}, relation={self.relation_code}{size}, "
            f"steps={self.code}, claim={claim!r})"
        )

    def __repr__(self) -> str:
        return f"Drawn(records={self.domain.code}, relation={self.relation_code}, size={self.size}, steps={self.code})"


_MAX_LEAVES = 16


@st.composite
def _composition(draw, ctx: _Ctx) -> _Part:
    """Sequential composition of k equal parts (mostly leaves) and one combinator (a parallel, a
    compose, a clamp or column before one; a second part of any kind one time in four), possibly one
    compose deeper: the structures where the accounting routes differ (basic, zCDP, advanced
    composition of equal pure parts) and where a route could miss a part."""
    p = draw(_leaf(ctx)) if draw(st.sampled_from([True, True, True, False])) else draw(_part(ctx, 1))
    k = draw(st.integers(2, 8))
    depth = draw(st.sampled_from([1, 2]))
    others = [draw(_parallel(ctx, depth)) if draw(st.booleans()) else draw(_part(ctx, depth, top=True))]
    if draw(st.sampled_from([False, False, False, True])):
        others.append(draw(_part(ctx, draw(st.sampled_from([0, 1, 2])))))
    if draw(st.booleans()):
        out = _Part(
            dp.compose(*[p.step] * k, *[q.step for q in others]),
            f"dp.compose(*[{p.code}] * {k}, " + ", ".join(q.code for q in others) + ")",
            k * p.leaves + sum(q.leaves for q in others),
        )
    else:
        inner = _Part(dp.compose(*[p.step] * k), f"dp.compose(*[{p.code}] * {k})", k * p.leaves)
        out = _Part(
            dp.compose(inner.step, *[q.step for q in others]),
            f"dp.compose({inner.code}, " + ", ".join(q.code for q in others) + ")",
            inner.leaves + sum(q.leaves for q in others),
        )
    return _post(out) if draw(st.sampled_from([False] * 7 + [True])) else out


@st.composite
def structures(draw) -> Drawn:
    """A declaration: a domain, a relation (substitution three times in four, a fixed size in one of
    those), and steps: half the time any structure of depth <= 3, half the time a composition of equal
    parts with other parts (:func:`_composition`)."""
    domain = draw(st.sampled_from(_DOMAINS))
    with_relation = draw(st.sampled_from(["substitute", "add_remove", "substitute", "substitute_sized"]))
    try:
        if draw(st.booleans()):
            part = draw(_composition(domain.ctx))
        else:
            part = draw(_part(domain.ctx, draw(st.sampled_from([2, 1, 3, 0])), top=True))
    except ParameterError:
        assume(False)
    assume(part.leaves <= _MAX_LEAVES)
    if with_relation == "add_remove":
        return Drawn(domain, AddRemove(), "AddRemove()", None, part.step, part.code)
    size = draw(st.integers(1, 3)) if with_relation == "substitute_sized" else None
    return Drawn(domain, Substitute(), "Substitute()", size, part.step, part.code)


# --------------------------------------------------------------------------- claims near the truth

_RENYI_ORDERS = (2, 3, 5, 8, 16, 32, 64)


def _approx_scale(truth: Any, delta: float) -> float:
    """A scale of the true ε(δ): the smaller of the exact pure ε and the Rényi conversion
    min_α D_α + ln(1/δ)/(α − 1) of the brute-force divergences."""
    ren = min(truth.renyi(a) + math.log(1 / delta) / (a - 1) for a in _RENYI_ORDERS)
    return min(float(truth.pure_epsilon()), ren)


@st.composite
def claims(draw, truth: Any) -> Any:
    """A claim near the truth: pure (ε = u × the exact ε), approximate (δ in {1e-6, 1e-5, 1e-3, 0.05},
    ε = u × :func:`_approx_scale`, or ε = 0 one time in ten) or Rényi (α in {2, 3, 8, 32}, ε = u × the
    exact D_α), u in [0.2, 1.5]: a prover that undercounts a part PROVES a claim between its bound and
    the truth."""
    kind = draw(st.sampled_from(["approx", "pure", "approx", "renyi", "approx"]))
    u = draw(st.integers(20, 150)) / 100
    if kind == "pure":
        base = float(truth.pure_epsilon())
        if math.isinf(base):
            base = _approx_scale(truth, 1e-5)
        return PureDP(float(f"{(base or 1.0) * u:.6g}"))
    if kind == "approx":
        delta = draw(st.sampled_from([1e-6, 1e-5, 1e-3, 0.05]))
        base = _approx_scale(truth, delta)
        if draw(st.sampled_from([False] * 9 + [True])):
            u = 0.0  # ε = 0: δ is the total variation distance
        return ApproxDP(float(f"{(base or 1.0) * u:.6g}"), delta)
    alpha = draw(st.sampled_from([2, 3, 8, 32]))
    base = truth.renyi(alpha)
    return RenyiDP(alpha, float(f"{(base or 1.0) * u:.6g}"))


# --------------------------------------------------------------------------- the property


def _violations(claim: Any, proof: Any, truth: Any) -> list[str]:
    """What a PROVED verdict asserts that the brute-force lower bound on the truth contradicts."""
    out = []
    if isinstance(claim, PureDP):
        eps = truth.pure_epsilon()
        if eps > Fraction(claim.epsilon):
            out.append(f"exact ε = {float(eps)!r} > claimed ε = {claim.epsilon} (pair {truth.pure_witness()})")
        if proof.bound is not None and eps > Fraction(float(proof.bound)) * (1 + Fraction(1, 10**12)):
            out.append(f"exact ε = {float(eps)!r} > proven bound {proof.bound!r}")
    elif isinstance(claim, ApproxDP):
        d = truth.delta(claim.epsilon)
        if d > float(claim.delta) * (1 + DELTA_MARGIN) + DELTA_FLOOR:
            out.append(
                f"exact δ(ε = {claim.epsilon}) >= {d!r} > claimed δ = {claim.delta} "
                f"(pair {truth.delta_witness(claim.epsilon)})"
            )
        if proof.bound is not None and proof.delta_bound is not None and math.isfinite(proof.bound):
            d2 = truth.delta(proof.bound)
            if d2 > float(proof.delta_bound) * (1 + DELTA_MARGIN) + DELTA_FLOOR:
                out.append(f"exact δ(ε = {proof.bound!r}) >= {d2!r} > proven δ = {proof.delta_bound!r} at the proven ε")
    else:
        r = truth.renyi(claim.alpha)
        if r > float(claim.epsilon) * (1 + DELTA_MARGIN) + DELTA_FLOOR:
            out.append(f"exact D_{claim.alpha} >= {r!r} > claimed ε = {claim.epsilon}")
        if proof.bound is not None and r > float(proof.bound) * (1 + DELTA_MARGIN) + DELTA_FLOOR:
            out.append(f"exact D_{claim.alpha} >= {r!r} > proven bound {proof.bound!r}")
    return out


def _check_one(data: Any) -> None:
    drawn = data.draw(structures(), label="structure")
    try:
        m0 = drawn.mechanism(PureDP(1))
    except ParameterError:
        assume(False)
    truth = exact_truth(m0, values=list(drawn.domain.values), posts_are_injective=True)
    claim = data.draw(claims(truth), label="claim")
    m = drawn.mechanism(claim)
    proof = prove(m)
    note(
        f"verdict {proof.verdict.value}, bound {proof.bound!r}, δ bound {proof.delta_bound!r}; truth over "
        f"{truth.pairs} pairs: pure ε {float(truth.pure_epsilon())!r}"
    )
    if proof.verdict is not Verdict.PROVED:
        return
    bad = _violations(claim, proof, truth)
    assert not bad, (
        "PROVED but the exact truth violates it:\n  " + "\n  ".join(bad) + f"\n  reproduce: {drawn.snippet(claim)}"
    )


_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    print_blob=True,
)


@settings(max_examples=300, derandomize=True, **_COMMON)
@given(st.data())
def test_a_proved_claim_is_never_violated_by_the_exact_truth(data):
    """300 drawn structures, fixed seed (derandomize). Measured: about 60 s on one core when every
    example passes (prover 0.05-1 s and brute force 0.01-0.1 s per structure, plus 15-25% invalid
    draws). On the code before the fix of parallel under substitution in advanced composition it
    fails within 2.5 min (20 s to 2.3 min measured over the seeds tried): the first falsifying
    structure within the first 250 examples (14 to 234), then 10 s to 2 min of shrinking to
    ``compose(compose(*[count() >> laplace(0.25)] * 2), parallel(count() >> laplace(0.25), by=0,
    keys=[0]))`` on ``RealBox(0, 1, 2)`` under ``Substitute()`` claiming ``ApproxDP(0.8, 1e-6)``:
    PROVED with bound 0, the exact ε is 4."""
    _check_one(data)


_SLOW_EXAMPLES = int(os.environ.get("DPHARNESS_SOUNDNESS_EXAMPLES", "10000"))
_SLOW_SEED = os.environ.get("DPHARNESS_SOUNDNESS_SEED")


def _slow_settings(f):
    f = settings(max_examples=_SLOW_EXAMPLES, derandomize=_SLOW_SEED is None, **_COMMON)(f)
    return hypothesis_seed(int(_SLOW_SEED))(f) if _SLOW_SEED is not None else f


@pytest.mark.slow
@_slow_settings
@given(st.data())
def test_a_proved_claim_is_never_violated_by_the_exact_truth_many_structures(data):
    """10^4 drawn structures (``DPHARNESS_SOUNDNESS_EXAMPLES`` overrides; ``DPHARNESS_SOUNDNESS_SEED``
    switches from the fixed derandomized seed to that seed). Measured: 43 min on one core of a
    2-core machine with other work running (10^4 passing and about 3300 invalid draws, about 0.26 s
    per structure; 28 min in an earlier, lighter-loaded run)."""
    _check_one(data)


# --------------------------------------------------------------------------- the oracle is the code's structure


@settings(max_examples=40, derandomize=True, **_COMMON)
@given(structures(), st.randoms(use_true_random=False))
def test_the_brute_force_reads_the_structure_as_the_sampler_runs_it(drawn, rnd):
    """The oracle's own interpreter gives the same rounded centres as the library's law reader
    (``leaves``: the values the sampler adds noise to) on data sets from the brute-force grid; a
    disagreement would make the oracle's truth a different mechanism's."""
    from dpharness.mechanisms.parts._law import leaves

    try:
        m = drawn.mechanism(PureDP(1))
    except ParameterError:
        assume(False)
    cols = drawn.domain.values
    for n in (0, 1, 2, 3):
        data = [[rnd.choice(c) for c in cols] for _ in range(n)]
        arr = np.array(data, dtype=float).reshape(n, len(cols))
        arr = arr if len(cols) > 1 else arr[:, 0]
        mine = [c for _, c in leaf_centres(m, arr, posts_are_injective=True)]
        theirs = [c for leaf in leaves(m, arr) for c in leaf.centres]
        assert mine == theirs, (drawn, data)


# --------------------------------------------------------------------------- the issue and variants


def _issue_mechanism(claim=ApproxDP(1, 1e-5)):
    steps = dp.compose(
        dp.parallel(dp.count() >> dp.laplace(scale=0.2), by=0, keys=[0, 1]),
        dp.column(1) >> dp.sum() >> dp.laplace(scale=10),
        dp.column(1) >> dp.sum() >> dp.laplace(scale=10),
    )
    return dp.mechanism(name="par_adv", records=RealBox(0, 1, 2), relation=Substitute(), steps=steps, claim=claim)


def _nested_mechanism():
    """The parallel under substitution one compose deeper, its part itself a compose."""
    inner = dp.compose(
        dp.parallel(
            dp.compose(dp.count() >> dp.laplace(scale=0.25), dp.count() >> dp.laplace(scale=0.5)), by=0, keys=[0, 1]
        ),
        dp.column(1) >> dp.sum() >> dp.laplace(scale=10),
    )
    steps = dp.compose(inner, dp.column(1) >> dp.sum() >> dp.laplace(scale=10)) >> dp.post(identity)
    return dp.mechanism(
        name="par_nested", records=RealBox(0, 1, 2), relation=Substitute(), steps=steps, claim=ApproxDP(1, 1e-5)
    )


def _renyi_mechanism():
    steps = dp.compose(
        dp.parallel(dp.count() >> dp.laplace(scale=0.2), by=0, keys=[0, 1]),
        dp.column(1) >> dp.sum() >> dp.laplace(scale=10),
        dp.column(1) >> dp.sum() >> dp.laplace(scale=10),
    )
    return dp.mechanism(
        name="par_renyi", records=RealBox(0, 1, 2), relation=Substitute(), steps=steps, claim=RenyiDP(2, 1)
    )


def _many_leaves_mechanism():
    """Advanced composition of 12 equal Laplace leaves would prove ε = 3 at δ = 1e-5 on its own; the
    parallel count (ε = 2·2 = 4 under substitution) is one more part, the truth far above the claim."""
    leaf = dp.column(1) >> dp.sum() >> dp.laplace(scale=8)
    steps = dp.compose(*[leaf] * 12, dp.parallel(dp.count() >> dp.laplace(scale=0.5, granularity=1), by=0, keys=[0, 1]))
    return dp.mechanism(
        name="par_many", records=RealBox(0, 1, 2), relation=Substitute(), steps=steps, claim=ApproxDP(3, 1e-5)
    )


@pytest.mark.parametrize(
    "build",
    [_issue_mechanism, _nested_mechanism, _renyi_mechanism, _many_leaves_mechanism],
    ids=["issue", "nested_compose", "renyi", "advanced_composition"],
)
def test_parallel_under_substitution_inside_compose_is_not_proved_beyond_the_truth(build):
    m = build()
    truth = exact_truth(m, posts_are_injective=True)
    claim = m.claim
    if isinstance(claim, ApproxDP):
        violated = truth.delta(claim.epsilon)
        assert violated > 100 * float(claim.delta), violated  # the brute force: the claim is false
    else:
        violated = truth.renyi(claim.alpha)
        assert violated > 2 * float(claim.epsilon), violated
    proof = prove(m)
    assert proof.verdict is not Verdict.PROVED, (m.describe(), proof.bound, proof.delta_bound, violated)


def test_the_issue_example_truth_is_about_ten():
    """The oracle on the issue's example: pure ε = 2/0.2 + 2·(1/10) (the key column moves a record
    between the two partitions; the sums move by 1), and ε(δ = 1e-5) is about 10.2."""
    truth = exact_truth(_issue_mechanism())
    assert truth.pure_epsilon() == 2 / Fraction(0.2) + 2 / Fraction(10)
    assert truth.delta(10.1) > 1e-5 > truth.delta(10.3)
