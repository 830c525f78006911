"""Hypothesis strategies drawing mechanism structures over every family of parts, for the soundness
property test (``tests/test_soundness_property.py``) and its oracle (``tests/_exact_laws.py``).

A drawn structure (:class:`FamilyDrawn`) is a domain, a neighbour relation (add/remove, substitution
with or without a declared size, add/remove one user), a ``distance`` (1, sometimes 2 or 3) and steps
built from every family and combinator:

* transformations: clamp, column, map_records (a deterministic function, some of which return NaN, ±∞
  or raise on some records: the total rule), clip_norm (l1, l2, linf), count, sum, sum_squares,
  sum_products, histogram (edges, categories), quantile_score;
* noise: laplace / discrete_laplace, gaussian / discrete_gaussian, geometric, truncated_geometric, and
  their budgets (``laplace(epsilon=)``, ``gaussian(rho=)``, ``gaussian(epsilon=, delta=)``);
* selection: report_noisy_max (laplace, gumbel with k, exponential), exponential, quantile (and their
  ``epsilon=`` budgets); threshold: above_threshold (query transformations or dp.query with its true
  sensitivity, or a vector's coordinates; c >= 1);
* grouping: group_by with partition_select (with and without a per-key part), and bound_contributions
  under AddRemoveUser;
* sampling: poisson_sample, sample(m) under Substitute with a declared size;
* combinators: compose (with and without a split budget ``epsilon=`` / ``delta=``), parallel, repeat,
  iterate (a deterministic update with known breakpoints), post (injective only).

Parameters are coarse (granularities 1 to 1/4, scales of a few grid steps, 2-3 candidates, keys or
queries, 1-3 rounds) so the brute force over every neighbouring pair of small data sets stays cheap; the
coverage is every family, combinator, relation, claim type and distance. ``FamilyDrawn.tags`` names the
families a structure holds (for the run's statistics), ``budget`` the claim a calibration promises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st

from dpharness import AddRemove, ApproxDP, IntegerRange, PureDP, RealBox, RealInterval, RenyiDP, Substitute
from dpharness import parts as dp


def identity(*outputs):
    """The post-processing every drawn ``dp.post`` uses: injective, so privacy is exactly unchanged."""
    return outputs


identity._exact_injective = True  # the oracle reads an injective post as no post


# --------------------------------------------------------------------------- user functions (deterministic)


def _double(r):
    return 2 * r


def _shift(r):
    return r - 0.5


def _square(r):
    return r * r


def _recip(r):
    return 1 / (r - 0.5)  # ±inf (numpy) at 0.5: the largest double by the total rule, then clipped


def _nan_above(r):
    return float("nan") if r > 0.5 else r


def _raise_at_one(r):
    if r == 1:
        raise ZeroDivisionError("a user function failing on one record")
    return r


def _pair(r):
    return [r, 1 - r]


_MAPS_1 = (_double, _shift, _square, _recip, _nan_above, _raise_at_one)


def _state_times(s, r):
    return r * (1 + s[0])


def _state_minus(s, r):
    return r - s[0]


class _Update:
    """update(state, release) -> [one number]: a step function of the release with known breakpoints
    (``breaks``), as the oracle reads them."""

    def __init__(self, name: str, breaks: tuple, fn) -> None:
        self.__name__ = name
        self.breaks = breaks
        self._fn = fn

    def __call__(self, state, release):
        return [float(self._fn(float(np.asarray(state).ravel()[0]), float(release)))]


_UPDATES = (
    _Update("sign", (0.5,), lambda s, r: 1.0 if r >= 0.5 else 0.0),
    _Update("bucket", (1.0, 2.0), lambda s, r: 0.0 if r < 1 else 1.0 if r < 2 else 2.0),
    _Update("toggle", (0.5,), lambda s, r: 1.0 - s if r >= 0.5 else s),
    _Update("keep", (), lambda s, r: s),
)


def _sensitive_count(x):
    return len(x)


def _count_at_least_half(x):
    arr = np.asarray(x, dtype=float)
    first = arr if arr.ndim == 1 else arr[:, 0]
    return int(np.sum(first >= 0.5))


# --------------------------------------------------------------------------- parts


@dataclass(frozen=True)
class Part:
    """A step, the Python code that builds it (a readable falsifying example), its leaves (cost), the
    families it holds and, for a calibrated part, the budget it spends (a claim)."""

    step: Any
    code: str
    leaves: int = 1
    tags: frozenset = frozenset()
    budget: Any = None


def _chain(*parts: Part) -> Part:
    step = parts[0].step
    for p in parts[1:]:
        step = step >> p.step
    budgets = [p.budget for p in parts if p.budget is not None]
    return Part(
        step,
        " >> ".join(p.code for p in parts),
        max(p.leaves for p in parts),
        frozenset().union(*[p.tags for p in parts]),
        budgets[0] if budgets else None,
    )


def _t(step: Any, code: str, *tags: str) -> Part:
    return Part(step, code, 0, frozenset(tags))


def _num(x: Any) -> str:
    return f"Fraction({x.numerator}, {x.denominator})" if isinstance(x, Fraction) else repr(x)


@dataclass(frozen=True)
class Ctx:
    """What the next step receives: ``dim`` columns, ``bounded`` (sums allowed), ``integer`` (values are
    integers), pools that fit the domain, and whether a state reaches map functions (inside iterate)."""

    dim: int
    bounded: bool
    clamps: tuple
    keys: tuple
    edges: tuple
    categories: tuple
    in_iterate: bool = False

    def but(self, **kw: Any) -> "Ctx":
        d = dict(self.__dict__)
        d.update(kw)
        return Ctx(**d)


@dataclass(frozen=True)
class Domain:
    name: str
    records: Any
    code: str
    values: tuple  # candidate values per column for the brute force
    ctx: Ctx


DOMAINS = (
    Domain(
        "int",
        IntegerRange(-1, 2),
        "IntegerRange(-1, 2)",
        ((-1.0, 0.0, 1.0, 2.0),),
        Ctx(
            1,
            True,
            ((0, 1), (-1, 1), (0, 2)),
            (-1, 0, 1, 2),
            ((-1, 0, 2), (0, 1, 2), (0, 2)),
            ((0, 1), (-1, 2), (0, 1, 2)),
        ),
    ),
    Domain(
        "interval",
        RealInterval(0, 1),
        "RealInterval(0, 1)",
        ((0.0, 0.375, 0.5, 1.0),),
        Ctx(
            1,
            True,
            ((0, 1), (0, 0.5), (0.25, 1)),
            (0, 0.5, 1),
            ((0, 0.5, 1), (0, 0.25, 1), (0, 1)),
            ((0, 1), (0.375, 1), (0.5,)),
        ),
    ),
    Domain(
        "line",
        RealInterval(),
        "RealInterval()",
        ((-1.0, 0.0, 0.375, 1.0, 2.0),),
        Ctx(1, False, ((0, 1), (-1, 1), (0, 0.5)), (0, 1, -1), ((0, 0.5, 1), (-1, 0, 1)), ((0, 1), (0.375, -1))),
    ),
    Domain(
        "box",
        RealBox(0, 1, 2),
        "RealBox(0, 1, 2)",
        ((0.0, 0.375, 1.0),) * 2,
        Ctx(2, True, ((0, 0.5), (0.25, 1)), (0, 1, 0.375), ((0, 0.5, 1), (0, 1)), ((0, 1), (0.375,))),
    ),
)

USERS = Domain(
    "users",
    RealBox(0, 3, 2),
    "RealBox(0, 3, 2)",
    ((0.0, 1.0, 2.0, 3.0), (0.0, 1.0, 2.0, 0.5)),
    Ctx(2, True, ((0, 1),), (0, 1, 2), (), ()),
)

SCALES = (0.5, 1, 2, 3, Fraction(4, 3))
SIGMAS = (0.5, 1, 2)
GRIDS = (1, 0.5, 0.25)


# --------------------------------------------------------------------------- noise


@st.composite
def noise(draw, integer: bool = False, budget_ok: bool = True, budget_only: bool = False) -> Part:
    kind = draw(
        st.sampled_from(
            (
                ["laplace", "laplace", "gaussian", "discrete_laplace", "discrete_gaussian", "geometric"]
                if not budget_only
                else []
            )
            + (["laplace_eps", "gaussian_rho", "gaussian_eps"] if budget_ok else [])
        )
    )
    g = draw(st.sampled_from(GRIDS))
    if kind == "laplace":
        s = draw(st.sampled_from(SCALES))
        return Part(
            dp.laplace(s, granularity=g), f"dp.laplace({_num(s)}, granularity={g!r})", 1, frozenset({"laplace"})
        )
    if kind == "gaussian":
        s = draw(st.sampled_from(SIGMAS))
        return Part(
            dp.gaussian(s, granularity=g), f"dp.gaussian({_num(s)}, granularity={g!r})", 1, frozenset({"gaussian"})
        )
    if kind in ("discrete_laplace", "geometric"):
        s = draw(st.sampled_from(SCALES))
        fn = dp.discrete_laplace if kind == "discrete_laplace" else dp.geometric
        return Part(fn(s), f"dp.{kind}({_num(s)})", 1, frozenset({"discrete_laplace"}))
    if kind == "discrete_gaussian":
        s = draw(st.sampled_from(SIGMAS))
        return Part(dp.discrete_gaussian(s), f"dp.discrete_gaussian({_num(s)})", 1, frozenset({"discrete_gaussian"}))
    if kind == "laplace_eps":
        e = draw(st.sampled_from([0.5, 1, 2]))
        return Part(
            dp.laplace(epsilon=e, granularity=g),
            f"dp.laplace(epsilon={e!r}, granularity={g!r})",
            1,
            frozenset({"laplace", "calibration"}),
            PureDP(e),
        )
    if kind == "gaussian_rho":
        r = draw(st.sampled_from([0.125, 0.5, 1]))
        return Part(
            dp.gaussian(rho=r, granularity=g),
            f"dp.gaussian(rho={r!r}, granularity={g!r})",
            1,
            frozenset({"gaussian", "calibration"}),
            ("rho", r),
        )
    e, d = draw(st.sampled_from([(1, 1e-5), (2, 1e-3), (0.5, 0.05)]))
    return Part(
        dp.gaussian(epsilon=e, delta=d, granularity=g),
        f"dp.gaussian(epsilon={e!r}, delta={d!r}, granularity={g!r})",
        1,
        frozenset({"gaussian", "calibration"}),
        ApproxDP(e, d),
    )


# --------------------------------------------------------------------------- aggregates and leaves


@st.composite
def aggregate(draw, ctx: Ctx) -> list:
    """Record-wise steps down to one aggregate (a list of Parts)."""
    pre: list = []
    bounded = ctx.bounded
    dim = ctx.dim
    roll = draw(st.integers(0, 9))
    if ctx.in_iterate and dim == 1:
        fn = draw(st.sampled_from([_state_times, _state_minus]))
        pre.append(_t(dp.map_records(fn), f"dp.map_records({fn.__name__})", "map_records"))
        bounded = False
    elif roll == 0 and dim == 1:
        fn = draw(st.sampled_from(_MAPS_1))
        pre.append(_t(dp.map_records(fn), f"dp.map_records({fn.__name__})", "map_records"))
        bounded = False
    elif roll == 1 and dim == 1:
        pre.append(_t(dp.map_records(_pair, columns=2), "dp.map_records(_pair, columns=2)", "map_records"))
        bounded, dim = False, 2
    if not bounded and draw(st.booleans()):
        b = draw(st.sampled_from([1, 0.5, 2]))
        norm = draw(st.sampled_from(["l2", "l1", "linf"])) if dim == 2 else "l2"
        pre.append(_t(dp.clip_norm(b, norm=norm), f"dp.clip_norm({b!r}, norm={norm!r})", "clip_norm"))
        bounded = True
        clipped = dim == 2 and norm != "linf"
    else:
        clipped = False
    if draw(st.sampled_from([False, False, True])) and not clipped:
        lo, hi = draw(st.sampled_from(ctx.clamps))
        pre.append(_t(dp.clamp(lo, hi), f"dp.clamp({lo!r}, {hi!r})", "clamp"))
        bounded = True
    kinds = ["count", "sum", "sum", "sum_squares"] + (["sum_products"] if dim >= 2 else [])
    if not clipped and not ctx.in_iterate:  # inside iterate a round releases one number
        kinds.append("histogram")
    kind = draw(st.sampled_from(kinds))
    if kind in ("sum", "sum_squares", "sum_products") and not bounded:
        lo, hi = draw(st.sampled_from(ctx.clamps))
        pre.append(_t(dp.clamp(lo, hi), f"dp.clamp({lo!r}, {hi!r})", "clamp"))
    if kind in ("sum", "sum_squares", "histogram") and dim >= 2:
        j = draw(st.integers(0, dim - 1))
        pre.append(_t(dp.column(j), f"dp.column({j})", "column"))
    if kind == "count":
        pre.append(_t(dp.count(), "dp.count()", "count"))
    elif kind == "sum":
        pre.append(_t(dp.sum(), "dp.sum()", "sum"))
    elif kind == "sum_squares":
        pre.append(_t(dp.sum_squares(), "dp.sum_squares()", "sum_squares"))
    elif kind == "sum_products":
        pre.append(_t(dp.sum_products(0, 1), "dp.sum_products(0, 1)", "sum_products"))
    else:
        pre.append(_histogram(draw, ctx))
    return pre


def _histogram(draw, ctx: Ctx) -> Part:
    if draw(st.booleans()) and ctx.edges:
        e = draw(st.sampled_from(ctx.edges))
        return _t(dp.histogram(edges=list(e)), f"dp.histogram(edges={list(e)!r})", "histogram")
    c = draw(st.sampled_from(ctx.categories))
    return _t(dp.histogram(categories=list(c)), f"dp.histogram(categories={list(c)!r})", "histogram")


@st.composite
def noise_leaf(draw, ctx: Ctx, budget_ok: bool = True) -> Part:
    pre = draw(aggregate(ctx))
    if pre[-1].code == "dp.count()" and draw(st.sampled_from([False] * 5 + [True])):
        s = draw(st.sampled_from(SCALES))
        lo, hi = draw(st.sampled_from([(0, 3), (-1, 2), (0, 5)]))
        return _chain(
            *pre,
            Part(
                dp.truncated_geometric(s, lo, hi),
                f"dp.truncated_geometric({_num(s)}, {lo}, {hi})",
                1,
                frozenset({"truncated_geometric"}),
            ),
        )
    return _chain(*pre, draw(noise(budget_ok=budget_ok)))


def _one_col(draw, ctx: Ctx) -> list:
    """Steps that leave one-column records."""
    if ctx.dim >= 2:
        j = draw(st.integers(0, ctx.dim - 1))
        return [_t(dp.column(j), f"dp.column({j})", "column")]
    return []


@st.composite
def selection_leaf(draw, ctx: Ctx, budget_ok: bool = True, budget_only: bool = False) -> Part:
    pre = _one_col(draw, ctx)
    kind = draw(st.sampled_from(["rnm_laplace", "rnm_gumbel", "rnm_exponential", "exponential", "quantile"]))
    s = draw(st.sampled_from([0.25, 0.5, 0.5, 1, 2, 4]))  # small scales: the truth nears the worst case
    budget = budget_only or (budget_ok and draw(st.sampled_from([False, False, False, True])))
    eps = draw(st.sampled_from([0.5, 1, 2])) if budget else None
    if kind == "quantile":
        alpha = draw(st.sampled_from([0.5, 0.25, 0.75, 0, 1]))
        cands = sorted(
            set(draw(st.sampled_from([c for c in ctx.categories + ctx.edges if len(set(c)) >= 2] or [(0, 1)])))
        )
        if not ctx.bounded:
            lo, hi = draw(st.sampled_from(ctx.clamps))
            pre.append(_t(dp.clamp(lo, hi), f"dp.clamp({lo!r}, {hi!r})", "clamp"))
        arg = f"epsilon={eps!r}" if budget else f"scale={s!r}"
        step = dp.quantile(alpha, candidates=list(cands), **({"epsilon": eps} if budget else {"scale": s}))
        tags = {"quantile", "selection"} | ({"calibration"} if budget else set())
        return _chain(
            *pre,
            Part(
                step,
                f"dp.quantile({alpha!r}, candidates={list(cands)!r}, {arg})",
                1,
                frozenset(tags),
                PureDP(eps) if budget else None,
            ),
        )
    pre.append(_histogram(draw, ctx))
    bins = len(pre[-1].step.edges) - 1 if pre[-1].step.edges is not None else len(pre[-1].step.categories)
    if kind == "rnm_laplace":
        g = draw(st.sampled_from([1, 0.5]))
        kw = {"epsilon": eps} if budget else {"scale": s}
        step = dp.report_noisy_max(noise="laplace", granularity=g, **kw)
        arg = f"epsilon={eps!r}" if budget else f"{s!r}"
        code = (
            f"dp.report_noisy_max({arg}, noise='laplace', granularity={g!r})"
            if not budget
            else f"dp.report_noisy_max(noise='laplace', granularity={g!r}, {arg})"
        )
        tags = {"report_noisy_max", "selection"}
    elif kind == "rnm_exponential":
        kw = {"epsilon": eps} if budget else {"scale": s}
        step = dp.report_noisy_max(noise="exponential", **kw)
        code = f"dp.report_noisy_max(noise='exponential', {'epsilon' if budget else 'scale'}={eps if budget else s!r})"
        tags = {"permute_and_flip", "selection"}
    else:
        k = draw(st.integers(1, min(2, bins)))
        kw = {"epsilon": eps} if budget else {"scale": s}
        if kind == "rnm_gumbel":
            step = dp.report_noisy_max(noise="gumbel", k=k, **kw)
            code = f"dp.report_noisy_max(noise='gumbel', k={k}, {'epsilon' if budget else 'scale'}={eps if budget else s!r})"
        else:
            step = dp.exponential(k=k, **kw)
            code = f"dp.exponential(k={k}, {'epsilon' if budget else 'scale'}={eps if budget else s!r})"
        tags = {"exponential", "selection"}
    if budget:
        tags.add("calibration")
    return _chain(*pre, Part(step, code, 1, frozenset(tags), PureDP(eps) if budget else None))


@st.composite
def threshold_leaf(draw, ctx: Ctx) -> Part:
    pre = _one_col(draw, ctx)
    T = draw(st.sampled_from([0, 1, 2, 0.5]))
    s = draw(st.sampled_from([0.5, 1, 2]))
    c = draw(st.integers(1, 2))
    g = draw(st.sampled_from([1, 0.5]))
    qs = draw(st.sampled_from([None, None, 0.5, 1]))  # None: the default 2c·scale
    qs_arg = "" if qs is None else f", query_scale={qs!r}"
    qs_kw = ""
    if draw(st.booleans()):
        pre.append(_histogram(draw, ctx))
        step = dp.above_threshold(T, scale=s, query_scale=qs, c=c, granularity=g)
    else:
        n = draw(st.sampled_from([1, 1, 2, 2, 3, 5]))
        queries, codes = [], []
        cats = sorted({v for c_ in ctx.categories for v in c_})
        for _ in range(n):
            q = draw(st.sampled_from(["count", "hist", "sum", "user_count", "user_half", "category", "category"]))
            if q == "category":  # one category's count: categories move opposite ways under substitution
                v = draw(st.sampled_from(cats))
                queries.append(dp.histogram(categories=[v]))
                codes.append(f"dp.histogram(categories=[{v!r}])")
            elif q == "count":
                queries.append(dp.count())
                codes.append("dp.count()")
            elif q == "hist":
                e = draw(st.sampled_from(ctx.edges)) if ctx.edges else (0, 1)
                queries.append(dp.histogram(edges=[e[0], e[-1]]))
                codes.append(f"dp.histogram(edges={[e[0], e[-1]]!r})")
            elif q == "sum":
                lo, hi = draw(st.sampled_from(ctx.clamps))
                queries.append(dp.clamp(lo, hi) >> dp.sum())
                codes.append(f"dp.clamp({lo!r}, {hi!r}) >> dp.sum()")
            elif q == "user_count":
                queries.append(dp.query(_sensitive_count, sensitivity=1, increasing=True))
                codes.append("dp.query(_sensitive_count, sensitivity=1, increasing=True)")
            else:
                queries.append(dp.query(_count_at_least_half, sensitivity=1))
                codes.append("dp.query(_count_at_least_half, sensitivity=1)")
        step = dp.above_threshold(T, queries=queries, scale=s, query_scale=qs, c=c, granularity=g)
        qs_kw = f"queries=[{', '.join(codes)}], "
    return _chain(
        *pre,
        Part(
            step,
            f"dp.above_threshold({T!r}, {qs_kw}scale={s!r}{qs_arg}, c={c}, granularity={g!r})",
            1,
            frozenset({"above_threshold"}),
        ),
    )


@st.composite
def group_leaf(draw, ctx: Ctx, user: bool = False) -> Part:
    by = draw(st.integers(0, ctx.dim - 1)) if not user else 1
    keys = draw(st.lists(st.sampled_from(ctx.keys), min_size=1, max_size=2 if user else 3, unique=True))
    T = draw(st.sampled_from([1, 2, 1.5, 3]))
    t = draw(st.sampled_from([0.5, 1, 2]))
    part, pcode = None, ""
    if draw(st.sampled_from([False, False, True])) and not (user and len(keys) > 1):
        ps = draw(st.sampled_from([1, 2]))
        if draw(st.booleans()) or ctx.dim < 2:
            part, pcode = (
                dp.count() >> dp.laplace(ps, granularity=1),
                f", part=dp.count() >> dp.laplace({ps}, granularity=1)",
            )
        else:
            j = 1 - by
            part = dp.column(j) >> dp.clamp(0, 1) >> dp.sum() >> dp.laplace(ps, granularity=0.5)
            pcode = f", part=dp.column({j}) >> dp.clamp(0, 1) >> dp.sum() >> dp.laplace({ps}, granularity=0.5)"
    step = dp.group_by(by=by, keys=keys, select=dp.partition_select(threshold=T, scale=t), part=part)
    code = f"dp.group_by(by={by}, keys={keys!r}, select=dp.partition_select(threshold={T!r}, scale={t!r}){pcode})"
    tags = {"group_by"} | ({"group_by_part"} if part is not None else set())
    if not user:
        return Part(step, code, len(keys), frozenset(tags))
    k = draw(st.integers(1, 2))
    m = draw(st.integers(1, 2))
    ell = draw(st.sampled_from([None, None, 1]))
    b = dp.bound_contributions(user=0, by=1, max_records=k, max_per_partition=m, max_partitions=ell)
    bcode = (
        f"dp.bound_contributions(user=0, by=1, max_records={k}, max_per_partition={m}"
        + ("" if ell is None else f", max_partitions={ell}")
        + ")"
    )
    return Part(b >> step, f"{bcode} >> {code}", len(keys), frozenset(tags | {"bound_contributions"}))


@st.composite
def leaf(draw, ctx: Ctx, budget_ok: bool = True) -> Part:
    kind = draw(
        st.sampled_from(
            ["noise", "noise", "selection", "threshold", "group"] if not ctx.in_iterate else ["noise", "selection"]
        )
    )
    if kind == "noise":
        return draw(noise_leaf(ctx, budget_ok))
    if kind == "selection":
        return draw(selection_leaf(ctx, budget_ok))
    if kind == "threshold":
        return draw(threshold_leaf(ctx))
    return draw(group_leaf(ctx))


# --------------------------------------------------------------------------- heads and combinators


@st.composite
def sampled(draw, ctx: Ctx, relation: str, size: int | None) -> Part:
    """poisson_sample(q) >> leaf (any relation) or sample(m) >> leaf (substitution with a declared size)."""
    inner = draw(st.sampled_from(["noise", "noise", "selection"]))
    body = draw(noise_leaf(ctx, budget_ok=False)) if inner == "noise" else draw(selection_leaf(ctx, budget_ok=False))
    if relation == "substitute" and size is not None and draw(st.sampled_from([True, True, False])):
        m = draw(st.integers(1, size))
        head = Part(dp.sample(m), f"dp.sample({m})", 0, frozenset({"sample"}))
    else:
        q = draw(st.sampled_from([0.5, 0.25, Fraction(1, 3), 1]))
        head = Part(dp.poisson_sample(q), f"dp.poisson_sample({_num(q)})", 0, frozenset({"poisson_sample"}))
    return _chain(head, body)


@st.composite
def iterated(draw, ctx: Ctx) -> Part:
    """iterate(T, part): a one-number release per round, the state reaching the map functions."""
    times = draw(st.integers(1, 3))
    inner_ctx = ctx.but(in_iterate=True)
    kind = draw(st.sampled_from(["noise", "noise", "selection", "poisson"]))
    if kind == "selection":
        part = draw(selection_leaf(ctx, budget_ok=False))
        if part.step.describe().count("k=2"):
            part = draw(noise_leaf(inner_ctx, budget_ok=False))
    else:
        part = draw(noise_leaf(inner_ctx, budget_ok=False))
        if kind == "poisson":
            q = draw(st.sampled_from([0.5, 0.25]))
            part = _chain(
                Part(dp.poisson_sample(q), f"dp.poisson_sample({q!r})", 0, frozenset({"poisson_sample"})), part
            )
    update = draw(st.sampled_from(_UPDATES))
    init = draw(st.sampled_from([[0.0], [1.0]]))
    output = draw(st.sampled_from(["state", "releases"]))
    if output == "releases":
        times = min(times, 2)  # the transcript of cells grows as cells^times
    step = dp.iterate(times, part.step, init=init, update=update, output=output)
    code = (
        f"dp.iterate({times}, {part.code}, init={init!r}, update=_UPDATES[{_UPDATES.index(update)}], output={output!r})"
    )
    return Part(step, code, times * part.leaves, part.tags | {"iterate"})


@st.composite
def split_budget(draw, ctx: Ctx) -> Part:
    """compose(parts, epsilon=) of Laplace parts, or compose(parts, epsilon=, delta=) of Gaussian parts,
    each part's noise unparametrised: its scale calibrated to its share."""
    gauss = draw(st.booleans())
    n = draw(st.integers(1, 3))
    parts = []
    for _ in range(n):
        pre = draw(aggregate(ctx.but(in_iterate=False)))
        g = draw(st.sampled_from(GRIDS))
        if gauss:
            parts.append(
                _chain(
                    *pre,
                    Part(dp.gaussian(granularity=g), f"dp.gaussian(granularity={g!r})", 1, frozenset({"gaussian"})),
                )
            )
        else:
            parts.append(
                _chain(
                    *pre, Part(dp.laplace(granularity=g), f"dp.laplace(granularity={g!r})", 1, frozenset({"laplace"}))
                )
            )
    e = draw(st.sampled_from([0.5, 1, 2]))
    if gauss:
        d = draw(st.sampled_from([1e-5, 1e-3]))
        step = dp.compose(*[p.step for p in parts], epsilon=e, delta=d)
        code = "dp.compose(" + ", ".join(p.code for p in parts) + f", epsilon={e!r}, delta={d!r})"
        budget = ApproxDP(e, d)
    else:
        step = dp.compose(*[p.step for p in parts], epsilon=e)
        code = "dp.compose(" + ", ".join(p.code for p in parts) + f", epsilon={e!r})"
        budget = PureDP(e)
    return Part(step, code, n, frozenset().union(*[p.tags for p in parts]) | {"calibration", "compose"}, budget)


@st.composite
def part(draw, ctx: Ctx, depth: int, relation: str, size: int | None) -> Part:
    kinds = (
        ["leaf", "leaf", "compose", "parallel", "repeat", "iterate", "sampled", "clamp_then"]
        if depth > 0
        else ["leaf", "leaf", "leaf", "sampled"]
    )
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        out = draw(leaf(ctx))
    elif kind == "sampled":
        out = draw(sampled(ctx, relation, size))
    elif kind == "iterate":
        out = draw(iterated(ctx))
    elif kind == "repeat":
        p = draw(part(ctx, depth - 1, relation, size))
        k = draw(st.integers(2, 4))
        out = Part(
            dp.repeat(k, p.step), f"dp.repeat({k}, {p.code})", k * p.leaves, p.tags | {"repeat"}, _times(p.budget, k)
        )
    elif kind == "compose":
        if draw(st.sampled_from([False, False, True])):
            out = draw(split_budget(ctx))
        else:
            ps = draw(st.lists(part(ctx, depth - 1, relation, size), min_size=2, max_size=3))
            out = Part(
                dp.compose(*[p.step for p in ps]),
                "dp.compose(" + ", ".join(p.code for p in ps) + ")",
                sum(p.leaves for p in ps),
                frozenset().union(*[p.tags for p in ps]) | {"compose"},
                _sum_budgets([p.budget for p in ps]),
            )
    elif kind == "parallel":
        by = draw(st.integers(0, ctx.dim - 1))
        keys = draw(st.lists(st.sampled_from(ctx.keys), min_size=1, max_size=2, unique=True))
        p = draw(part(ctx, depth - 1, relation, size))
        out = Part(
            dp.parallel(p.step, by=by, keys=keys),
            f"dp.parallel({p.code}, by={by}, keys={keys!r})",
            len(keys) * p.leaves,
            p.tags | {"parallel"},
        )
    else:
        lo, hi = draw(st.sampled_from(ctx.clamps))
        p = draw(part(ctx.but(bounded=True), depth - 1, relation, size))
        out = Part(
            dp.clamp(lo, hi) >> p.step,
            f"dp.clamp({lo!r}, {hi!r}) >> ({p.code})",
            p.leaves,
            p.tags | {"clamp"},
            p.budget,
        )
    if draw(st.sampled_from([False] * 9 + [True])):
        out = Part(
            out.step >> dp.post(identity),
            f"({out.code}) >> dp.post(identity)",
            out.leaves,
            out.tags | {"post"},
            out.budget,
        )
    return out


def _times(budget: Any, k: int) -> Any:
    if budget is None:
        return None
    if isinstance(budget, PureDP):
        return PureDP(budget.epsilon * k)
    if isinstance(budget, tuple):
        return ("rho", budget[1] * k)
    return "composed"  # an (ε, δ) budget repeated: no single claim (the budget check skips it)


def _sum_budgets(budgets: list) -> Any:
    if all(b is None for b in budgets):
        return None
    if all(isinstance(b, PureDP) for b in budgets):
        return PureDP(sum(b.epsilon for b in budgets))
    if all(isinstance(b, tuple) for b in budgets):
        return ("rho", sum(b[1] for b in budgets))
    return "composed"


# --------------------------------------------------------------------------- the declaration


class FamilyDrawn:
    """A drawn declaration; its repr is the Python code that builds it."""

    def __init__(self, domain: Domain, relation: Any, relation_code: str, size: Any, part: Part, distance: int) -> None:
        self.domain, self.relation, self.relation_code, self.size = domain, relation, relation_code, size
        self.steps, self.code, self.distance = part.step, part.code, distance
        self.tags = part.tags
        self.budget = part.budget
        self.leaves = part.leaves

    @property
    def values(self) -> list:
        return [list(v) for v in self.domain.values]

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
            f"prove(dp.mechanism(name='drawn', records={self.domain.code}, relation={self.relation_code}{size}, "
            f"steps={self.code}, claim={claim!r}), distance={self.distance})"
        )

    def __repr__(self) -> str:
        return (
            f"FamilyDrawn(records={self.domain.code}, relation={self.relation_code}, size={self.size}, "
            f"distance={self.distance}, steps={self.code})"
        )


MAX_LEAVES = 8


@st.composite
def calibrated(draw, ctx: Ctx) -> Part:
    """A structure whose noise is calibrated to a budget: a split ``compose(..., epsilon=)``, a noise part
    given its own budget, or a selection given its ε (possibly after a clamp, or with post-processing)."""
    kind = draw(st.sampled_from(["split", "noise", "selection"]))
    if kind == "split":
        out = draw(split_budget(ctx))
    elif kind == "noise":
        out = _chain(*draw(aggregate(ctx)), draw(noise(budget_only=True)))
    else:
        out = draw(selection_leaf(ctx, budget_only=True))
    if draw(st.sampled_from([False] * 4 + [True])):
        out = Part(
            out.step >> dp.post(identity),
            f"({out.code}) >> dp.post(identity)",
            out.leaves,
            out.tags | {"post"},
            out.budget,
        )
    return out


# what a drawn structure is built around: the combinators of any depth three times in ten, each family's
# own part otherwise (so every family is drawn often, alone and inside compose / repeat / parallel)
_FOCUS = ["combinators"] * 3 + [
    "selection",
    "threshold",
    "group_by",
    "users",
    "sampled",
    "iterate",
    "calibration",
    "parallel",
]


@st.composite
def family_structures(draw) -> FamilyDrawn:
    """A declaration over every family: a focus (a family, or combinators of any depth), a domain, a
    relation (add/remove; substitution with or without a declared size; add/remove one user for the
    bounded group-bys) and a distance (1 two times in three, else 2 or 3; a calibrated structure at 1)."""
    focus = draw(st.sampled_from(_FOCUS))
    distance = draw(st.sampled_from([1, 1, 1, 1, 2, 3]))
    if focus == "users":
        p = draw(group_leaf(USERS.ctx, user=True))
        if draw(st.sampled_from([False, False, True])):
            q = draw(group_leaf(USERS.ctx, user=True))
            p = Part(
                dp.compose(p.step, q.step),
                f"dp.compose({p.code}, {q.code})",
                p.leaves + q.leaves,
                p.tags | q.tags | {"compose"},
            )
        return FamilyDrawn(USERS, dp.AddRemoveUser(user=0), "dp.AddRemoveUser(user=0)", None, p, min(distance, 2))
    domain = draw(st.sampled_from(DOMAINS))
    relation = draw(st.sampled_from(["add_remove", "substitute", "add_remove", "substitute_sized"]))
    if focus == "sampled" and draw(st.booleans()):
        relation = "substitute_sized"  # sample(m) is proved there only
    size = draw(st.integers(1, 3)) if relation == "substitute_sized" else None
    rel_name = "substitute" if relation != "add_remove" else "add_remove"
    ctx = domain.ctx
    if focus == "combinators":
        p = draw(part(ctx, draw(st.sampled_from([0, 1, 1, 2])), rel_name, size))
    elif focus == "selection":
        p = draw(selection_leaf(ctx))
    elif focus == "threshold":
        p = draw(threshold_leaf(ctx))
    elif focus == "group_by":
        p = draw(group_leaf(ctx))
    elif focus == "sampled":
        p = draw(sampled(ctx, rel_name, size))
    elif focus == "iterate":
        p = draw(iterated(ctx))
    elif focus == "parallel":  # partitions: under substitution a record may move between two of them
        by = draw(st.integers(0, ctx.dim - 1))
        keys = draw(st.lists(st.sampled_from(ctx.keys), min_size=1, max_size=2, unique=True))
        q = draw(leaf(ctx, budget_ok=False))
        p = Part(
            dp.parallel(q.step, by=by, keys=keys),
            f"dp.parallel({q.code}, by={by}, keys={keys!r})",
            len(keys) * q.leaves,
            q.tags | {"parallel"},
        )
    else:
        p = draw(calibrated(ctx))
        distance = 1
    if focus != "combinators" and draw(st.sampled_from([False, False, False, True])):
        q = draw(part(ctx, 0, rel_name, size))  # beside another part
        p = Part(
            dp.compose(p.step, q.step),
            f"dp.compose({p.code}, {q.code})",
            p.leaves + q.leaves,
            p.tags | q.tags | {"compose"},
            _sum_budgets([p.budget, q.budget]),
        )
    if relation == "add_remove":
        return FamilyDrawn(domain, AddRemove(), "AddRemove()", None, p, distance)
    return FamilyDrawn(domain, Substitute(), "Substitute()", size, p, distance)


# --------------------------------------------------------------------------- claims near the truth

RENYI_ORDERS = (2, 3, 5, 8, 16, 32, 64)


def approx_scale(truth: Any, delta: float) -> float:
    ren = min(truth.renyi(a) + math.log(1 / delta) / (a - 1) for a in RENYI_ORDERS)
    return min(float(truth.pure_epsilon()), ren)


def _near(base: float, u: float, fallback: Any) -> float:
    if not math.isfinite(base) or base <= 0:
        base = fallback
    return float(f"{base * u:.6g}")


@st.composite
def family_claims(draw, truth: Any) -> Any:
    """A claim near the truth (u in [0.2, 1.5] times the truth's scale; an infinite or zero truth uses
    a fixed scale in {0.5, 1, 2, 4}); an (ε, δ) claim's δ from {1e-6, 1e-5, 1e-3, 0.05} or v in [0.3, 1.5]
    times the truth's δ at that ε."""
    kind = draw(st.sampled_from(["approx", "pure", "approx", "renyi", "approx"]))
    u = draw(st.integers(20, 150)) / 100
    fallback = draw(st.sampled_from([0.5, 1, 2, 4]))
    if kind == "pure":
        base = float(truth.pure_epsilon())
        if math.isinf(base):
            base = approx_scale(truth, 1e-5)
        return PureDP(_near(base, u, fallback))
    if kind == "approx":
        delta = draw(st.sampled_from([1e-6, 1e-5, 1e-3, 0.05]))
        eps = 0.0 if draw(st.sampled_from([False] * 9 + [True])) else _near(approx_scale(truth, delta), u, fallback)
        if draw(st.booleans()):
            d = truth.delta(eps)
            if 1e-12 < d < 0.5:
                delta = float(f"{d * draw(st.integers(30, 150)) / 100:.6g}")
        return ApproxDP(eps, delta)
    alpha = draw(st.sampled_from([2, 3, 8, 32]))
    return RenyiDP(alpha, _near(truth.renyi(alpha), u, fallback))


__all__ = [
    "identity",
    "FamilyDrawn",
    "family_structures",
    "family_claims",
    "approx_scale",
    "MAX_LEAVES",
    "DOMAINS",
    "USERS",
]
