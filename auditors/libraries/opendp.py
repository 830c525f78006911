"""Audit targets for OpenDP (``pip install opendp``; the Python bindings of the Rust library).

Written from OpenDP's public API documentation (``opendp.prelude``: ``m.make_laplace``,
``m.make_gaussian``, ``m.make_geometric``, ``t.make_sum``, ``t.make_mean``; a Measurement's
``map(d_in)`` is its privacy map). Every claim is the library's own privacy map evaluated at the
sensitivity ``d_in``: ε for ``MaxDivergence`` measurements, ρ for ``ZeroConcentratedDivergence``
ones (converted by :func:`~dpharness.auditors.libraries.zcdp_to_approx` at the target's ``delta``).

Randomness: OpenDP draws from the operating system's entropy source and takes no seed, so an
audit of these targets is reproducible only up to the library's own randomness (the auditor's
seed fixes which events are tested, not the outputs; the result says so in ``extra["notes"]``). The
auditor's worker processes draw independent outputs (the OS source holds no state to copy).
OpenDP's measurements are ctypes pointers, which do not pickle: a sampler holds the measurement's
recipe (kind and parameters) and each process builds the measurement on first use (cached per
process), so the worker pool can ship it.

Default pairs: scalar queries use 0 vs ``sensitivity`` (the full sensitivity step; 0 is the value
whose floating-point neighbourhood is densest, where Mironov-style rounding leaks show first);
data sets differ by one record at the upper bound 1.0 among zeros (the exact sums 0 and 1 are the
scalar pair again). The aggregate targets (variance, quantile, count, histogram, context_mean) declare
their records instead (``inputs``: data sets of 0..max_n floats in [lower, upper], add/remove one
record, OpenDP's SymmetricDistance) and the audit searches its pairs there.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dpharness.core import AddRemove, BoundedChange, Substitute

from ._convert import zcdp_to_approx
from ._registry import Param, pair_params, register

_LIB, _MOD, _EXTRA = "opendp", "opendp", "opendp"
_UNSEEDED = (
    "OpenDP draws from the operating system's entropy source, which takes no seed; the seed fixes the "
    "events and pairs tested, not the outputs"
)


def _dp():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


@functools.lru_cache(maxsize=64)
def _measurement(recipe: tuple) -> Any:
    """The OpenDP measurement a recipe names, built once per process: ``("scalar" | "vector", kind,
    scale, integer)`` for the noise measurements, ``("sum", lower, upper, scale)``, ``("mean", lower,
    upper, n, scale)``, and the aggregates of :func:`_aggregate`."""
    dp = _dp()
    if recipe[0] in ("scalar", "vector"):
        shape, kind, scale, integer = recipe
        T = int if integer else float
        atom = dp.atom_domain(T=T) if integer else dp.atom_domain(T=float, nan=False)
        make = {"laplace": dp.m.make_laplace, "gaussian": dp.m.make_gaussian, "geometric": dp.m.make_geometric}[kind]
        if shape == "scalar":
            return make(atom, dp.absolute_distance(T=T), scale=scale)
        metric = dp.l2_distance(T=T) if kind == "gaussian" else dp.l1_distance(T=T)
        return make(dp.vector_domain(atom), metric, scale=scale)
    if recipe[0] == "sum":
        _, lo, hi, scale = recipe
        return dp.t.make_sum(
            dp.vector_domain(dp.atom_domain(bounds=(lo, hi), nan=False)), dp.symmetric_distance()
        ) >> dp.m.then_laplace(scale=scale)
    if recipe[0] in _AGGREGATES:
        return _aggregate(dp, recipe)
    _, lo, hi, n, scale = recipe
    return dp.t.make_mean(
        dp.vector_domain(dp.atom_domain(bounds=(lo, hi), nan=False), size=n), dp.symmetric_distance()
    ) >> dp.m.then_laplace(scale=scale)


def _vector_sampler(recipe: tuple, cast):
    """``fn(data, size, rng)``: one call of the library's vector-domain measurement (``recipe``) on
    ``size`` copies of the scalar, i.e. ``size`` independent draws of the scalar mechanism (the vector
    measurement adds independent noise of the same scale to each coordinate). ``rng`` is unused (OS
    entropy)."""

    def fn(data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(_measurement(recipe)([cast(data)] * int(size)))

    return fn


def _loop_sampler(recipe: tuple, cast):
    """``fn(data, size, rng)``: ``size`` calls of the library measurement (``recipe``) on the data set (rng unused)."""

    def fn(data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        meas = _measurement(recipe)
        arg = cast(data)
        return np.asarray([meas(arg) for _ in range(int(size))])

    return fn


def _scalar_target(
    kind: str, scale: float, sensitivity: Any, v: dict, *, integer: bool, delta: float | None = None
) -> dict:
    T = int if integer else float
    scalar = _measurement(("scalar", kind, scale, integer))
    vector = ("vector", kind, scale, integer)
    d_in = int(sensitivity) if integer else float(sensitivity)
    claim = scalar.map(d_in)
    noise = {
        "laplace": "discrete Laplace" if integer else "Laplace (sampled as discrete Laplace on a 2^k grid)",
        "gaussian": "discrete Gaussian" if integer else "Gaussian (sampled as discrete Gaussian on a 2^k grid)",
        "geometric": "geometric (two-sided)",
    }[kind]
    relation = (
        f"scalar query answers at absolute distance <= {d_in} (OpenDP input metric "
        f"absolute_distance({T.__name__}), d_in = {d_in}); {noise} noise of scale {scale}"
    )
    cast = int if integer else float
    if kind == "gaussian":
        assert delta is not None  # the Gaussian targets pass theirs (default 1e-6)
        rho = float(claim)
        eps = zcdp_to_approx(rho, delta)
        source = (
            f"OpenDP privacy map: make_gaussian(scale={scale}).map({d_in}) = ρ = {rho!r} "
            f"(ZeroConcentratedDivergence), converted to (ε, δ) at δ = {delta!r} (the target's delta "
            f"parameter; default 1e-6) by zcdp_to_approx (Canonne-Kamath-Steinke 2020 Cor. 13)"
        )
        return dict(
            fn=_vector_sampler(vector, cast),
            vectorized=True,
            data=cast(v["data"]),
            neighbor=cast(v["neighbor"]),
            epsilon=eps,
            delta=float(delta),
            relation=relation,
            claim_source=source,
            neighbor_relation=BoundedChange(d_in, "l1"),
            unseeded=_UNSEEDED,
        )
    source = f"OpenDP privacy map: make_{kind}(scale={scale}).map({d_in}) = ε = {float(claim)!r} (MaxDivergence)"
    return dict(
        fn=_vector_sampler(vector, cast),
        vectorized=True,
        data=cast(v["data"]),
        neighbor=cast(v["neighbor"]),
        epsilon=float(claim),
        delta=0.0,
        relation=relation,
        claim_source=source,
        neighbor_relation=BoundedChange(d_in, "l1"),
        unseeded=_UNSEEDED,
    )


_SCALE = Param("scale", 1.0, "positive", "noise scale as OpenDP defines it")
_SENS = Param("sensitivity", 1.0, "positive", "d_in: the query's sensitivity")
_ISENS = Param("sensitivity", 1, "positive_int", "d_in: the integer query's sensitivity")
_DELTA = Param("delta", 1e-6, "probability", "δ at which the zCDP claim is converted to (ε, δ)")


@register(
    "opendp:laplace",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_laplace on a float scalar (vectorised through the vector-domain measurement)",
    params=(_SCALE, _SENS, *pair_params(0.0, 1.0)),
)
def _laplace(v: dict) -> dict:
    return _scalar_target("laplace", v["scale"], v["sensitivity"], v, integer=False)


@register(
    "opendp:gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_gaussian on a float scalar; zCDP ρ converted at delta (default 1e-6)",
    params=(_SCALE, _SENS, _DELTA, *pair_params(0.0, 1.0)),
)
def _gaussian(v: dict) -> dict:
    return _scalar_target("gaussian", v["scale"], v["sensitivity"], v, integer=False, delta=v["delta"])


@register(
    "opendp:discrete_laplace",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_laplace on an integer scalar (discrete Laplace)",
    params=(_SCALE, _ISENS, *pair_params(0, 1)),
)
def _discrete_laplace(v: dict) -> dict:
    return _scalar_target("laplace", v["scale"], v["sensitivity"], v, integer=True)


@register(
    "opendp:geometric",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_geometric on an integer scalar",
    params=(_SCALE, _ISENS, *pair_params(0, 1)),
)
def _geometric(v: dict) -> dict:
    return _scalar_target("geometric", v["scale"], v["sensitivity"], v, integer=True)


@register(
    "opendp:discrete_gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_gaussian on an integer scalar (discrete Gaussian); zCDP ρ converted at delta (default 1e-6)",
    params=(_SCALE, _ISENS, _DELTA, *pair_params(0, 1)),
)
def _discrete_gaussian(v: dict) -> dict:
    return _scalar_target("gaussian", v["scale"], v["sensitivity"], v, integer=True, delta=v["delta"])


def _floats(x: Any) -> list[float]:
    return [float(e) for e in np.atleast_1d(np.asarray(x, dtype=float))]


@register(
    "opendp:sum",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_sum of float records clamped to [lower, upper] (symmetric distance) then make_laplace; "
    "one library call per sample",
    params=(
        Param("lower", 0.0, "value", "lower bound of a record"),
        Param("upper", 1.0, "value", "upper bound"),
        _SCALE,
        *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]),
    ),
)
def _sum(v: dict) -> dict:
    lo, hi = float(v["lower"]), float(v["upper"])
    recipe = ("sum", lo, hi, v["scale"])
    eps = float(_measurement(recipe).map(1))
    data, nb = _floats(v["data"]), _floats(v["neighbor"])
    return dict(
        fn=_loop_sampler(recipe, _floats),
        vectorized=True,
        data=data,
        neighbor=nb,
        epsilon=eps,
        delta=0.0,
        relation=(
            f"data sets of floats in [{lo}, {hi}] at symmetric distance 1 (add or remove one record; "
            f"OpenDP SymmetricDistance, d_in = 1); the sum's sensitivity is max(|lower|, |upper|) plus "
            f"OpenDP's floating-point rounding allowance"
        ),
        claim_source=f"OpenDP privacy map: (make_sum >> then_laplace(scale={v['scale']})).map(1) = ε = {eps!r}",
        neighbor_relation=AddRemove(),
        unseeded=_UNSEEDED,
    )


@register(
    "opendp:mean",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_mean of a known number of float records in [lower, upper] then make_laplace; "
    "one library call per sample",
    params=(
        Param("lower", 0.0, "value", "lower bound of a record"),
        Param("upper", 1.0, "value", "upper bound"),
        _SCALE,
        *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 1.0]),
    ),
)
def _mean(v: dict) -> dict:
    lo, hi = float(v["lower"]), float(v["upper"])
    data, nb = _floats(v["data"]), _floats(v["neighbor"])
    n = len(data)
    recipe = ("mean", lo, hi, n, v["scale"])
    eps = float(_measurement(recipe).map(2))
    return dict(
        fn=_loop_sampler(recipe, _floats),
        vectorized=True,
        data=data,
        neighbor=nb,
        epsilon=eps,
        delta=0.0,
        relation=(
            f"data sets of exactly {n} floats in [{lo}, {hi}] that differ in one record (OpenDP "
            f"SymmetricDistance on a sized domain, d_in = 2: one substitution); sensitivity "
            f"(upper - lower) / n plus OpenDP's rounding allowance"
        ),
        claim_source=f"OpenDP privacy map: (make_mean(size={n}) >> then_laplace(scale={v['scale']})).map(2) = ε = {eps!r}",
        neighbor_relation=Substitute(),
        unseeded=_UNSEEDED,
    )


# --------------------------------------------------------------------------- aggregates
#
# Each aggregate is one OpenDP 0.16 measurement built from the library's own constructors, whose input
# space is (vector_domain(atom_domain(T=float, nan=False)), symmetric_distance()): data sets of any
# size, neighbours at symmetric distance 1, i.e. one record added or removed (OpenDP's SymmetricDistance;
# the unbounded-DP relation). The claim is the chain's privacy map at d_in = 1. Records are clamped by
# the chain itself (make_clamp, or the finite candidates / bin edges); the audit searches data sets of
# records in [lower, upper] (the box the target passes to the library): 0..max_n records, add/remove.

_AGGREGATES = ("variance", "quantile", "count", "histogram", "context_mean")


def _aggregate(dp, recipe: tuple) -> Any:
    """``("variance", lower, upper, size, ddof, scale)``: make_clamp >> make_resize(size, constant =
    midpoint) >> make_variance(ddof) >> make_laplace(scale); ``("quantile", candidates, alpha, scale)``:
    make_private_quantile (the exponential mechanism over the candidates' rank scores, Smith 2011);
    ``("count", scale)``: make_count >> make_laplace (discrete Laplace on the integer count);
    ``("histogram", edges, scale)``: make_find_bin(edges) >> make_count_by_categories(bins) >>
    make_laplace (discrete Laplace on each integer bin count); ``("context_mean", lower, upper, size,
    epsilon)``: the Context API's ``query().clamp((lower, upper)).resize(size, constant = midpoint).mean()
    .laplace()`` resolved to its measurement (OpenDP solves the Laplace scale for ``epsilon`` under
    ``unit_of(contributions=1)``)."""
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance())
    kind = recipe[0]
    if kind == "variance":
        _, lo, hi, size, ddof, scale = recipe
        return (
            space
            >> dp.t.then_clamp((lo, hi))
            >> dp.t.then_resize(size=size, constant=(lo + hi) / 2)
            >> dp.t.then_variance(ddof=ddof)
            >> dp.m.then_laplace(scale=scale)
        )
    if kind == "quantile":
        _, candidates, alpha, scale = recipe
        return dp.m.make_private_quantile(
            *space, dp.max_divergence(), candidates=list(candidates), alpha=alpha, scale=scale
        )
    if kind == "count":
        return space >> dp.t.then_count() >> dp.m.then_laplace(scale=recipe[1])
    if kind == "context_mean":
        _, lo, hi, size, epsilon = recipe
        context = dp.Context.compositor(
            data=[],  # a placeholder: only the query's measurement is kept (resolve), and called per sample
            privacy_unit=dp.unit_of(contributions=1),
            privacy_loss=dp.loss_of(epsilon=epsilon),
            split_evenly_over=1,
            domain=space[0],
        )
        return context.query().clamp((lo, hi)).resize(size=size, constant=(lo + hi) / 2).mean().laplace().resolve()
    _, edges, scale = recipe
    return (
        space
        >> dp.t.then_find_bin(edges=list(edges))
        >> dp.t.then_count_by_categories(categories=list(range(len(edges) + 1)), null_category=False)
        >> dp.m.then_laplace(scale=scale)
    )


def _aggregate_target(v: dict, recipe: tuple, *, chain: str, what: str) -> dict:
    """The fields of an aggregate target: the claim is OpenDP's privacy map at d_in = 1 (MaxDivergence),
    the pair search runs over data sets of 0..max_n records in [lower, upper] (add/remove one record)."""
    from dpharness.auditors.pairsearch import Datasets
    from dpharness.core import RealInterval
    from dpharness.errors import ParameterError

    lo, hi = float(v["lower"]), float(v["upper"])
    try:
        meas = _measurement(recipe)
        eps = float(meas.map(1))
    except Exception as exc:  # OpenDPException: the library refused the parameters
        raise ParameterError(
            f"OpenDP refused {chain} with {dict(v)!r:.120}: {exc}; pass parameters it accepts."
        ) from exc
    max_n = int(v["max_n"])
    return dict(
        fn=_loop_sampler(recipe, _floats),
        vectorized=True,
        data=_floats(v["data"]),
        neighbor=_floats(v["neighbor"]),
        epsilon=eps,
        delta=0.0,
        neighbor_relation=AddRemove(),
        inputs=Datasets(RealInterval(lo, hi), AddRemove(), (0, max_n)),
        relation=(
            f"data sets of 0..{max_n} floats in [{lo:g}, {hi:g}] at symmetric distance 1 (add or remove one "
            f"record; OpenDP input metric SymmetricDistance on vector_domain(atom_domain(T=float, nan=False)), "
            f"d_in = 1); {what}"
        ),
        claim_source=f"OpenDP privacy map: ({chain}).map(1) = ε = {eps!r} (MaxDivergence)",
        unseeded=_UNSEEDED,
    )


def _interval(v: dict) -> tuple[float, float]:
    from dpharness.errors import ParameterError

    lo, hi = v["lower"], v["upper"]
    for name, x in (("lower", lo), ("upper", hi)):
        if isinstance(x, list):
            raise ParameterError(f"{name}={x!r:.60} is a list; pass one number, the bound of every record.")
    if not float(lo) < float(hi):
        raise ParameterError(f"lower={lo!r}, upper={hi!r}: pass lower < upper (records lie in [lower, upper]).")
    return float(lo), float(hi)


_AGG_PARAMS = (
    Param("lower", 0.0, "value", "lower bound of a record"),
    Param("upper", 1.0, "value", "upper bound of a record"),
    Param("max_n", 10, "positive_int", "largest data set the pair search builds"),
)
_AGG_PAIR = pair_params([0.0], [0.0, 1.0])


@register(
    "opendp:variance",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_clamp >> make_resize(size) >> make_variance >> make_laplace on float records "
    "(symmetric distance); one library call per sample",
    params=(
        *_AGG_PARAMS,
        Param("size", 10, "positive_int", "the size make_resize pads (with the midpoint) or trims the data set to"),
        Param("ddof", 1, "int", "delta degrees of freedom of make_variance (0 or 1)"),
        Param("scale", 0.1, "positive", "Laplace noise scale as OpenDP defines it"),
        *_AGG_PAIR,
    ),
)
def _variance(v: dict) -> dict:
    from dpharness.errors import ParameterError

    lo, hi = _interval(v)
    size, ddof = int(v["size"]), int(v["ddof"])
    if ddof not in (0, 1) or size <= ddof:
        raise ParameterError(f"size={size}, ddof={ddof}: pass ddof 0 or 1 and size > ddof.")
    chain = f"make_clamp(({lo}, {hi})) >> make_resize(size={size}) >> make_variance(ddof={ddof}) >> make_laplace(scale={v['scale']})"
    return _aggregate_target(
        v,
        ("variance", lo, hi, size, ddof, float(v["scale"])),
        chain=chain,
        what=f"make_resize turns a change of one record into at most two changes among {size}",
    )


@register(
    "opendp:quantile",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_private_quantile over equally spaced candidates in [lower, upper] (exponential mechanism "
    "on rank scores, symmetric distance); one library call per sample",
    params=(
        *_AGG_PARAMS,
        Param("candidates", 11, "positive_int", "number of equally spaced candidates from lower to upper (>= 2)"),
        Param("alpha", 0.5, "probability", "the quantile (0.5: the median)"),
        Param("scale", 1.0, "positive", "noise scale of the selection as OpenDP defines it"),
        *_AGG_PAIR,
    ),
)
def _quantile(v: dict) -> dict:
    from dpharness.errors import ParameterError

    lo, hi = _interval(v)
    k = int(v["candidates"])
    if k < 2:
        raise ParameterError(f"candidates={k}: pass at least 2 candidates.")
    cands = tuple(float(x) for x in np.linspace(lo, hi, k))
    chain = f"make_private_quantile(candidates={k} points from {lo} to {hi}, alpha={v['alpha']}, scale={v['scale']})"
    return _aggregate_target(
        v,
        ("quantile", cands, float(v["alpha"]), float(v["scale"])),
        chain=chain,
        what="the output is one of the candidates",
    )


@register(
    "opendp:count",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_count >> make_laplace (discrete Laplace on the count; symmetric distance); one library call per sample",
    params=(*_AGG_PARAMS, Param("scale", 1.0, "positive", "noise scale as OpenDP defines it"), *_AGG_PAIR),
)
def _count(v: dict) -> dict:
    _interval(v)
    return _aggregate_target(
        v,
        ("count", float(v["scale"])),
        chain=f"make_count >> make_laplace(scale={v['scale']})",
        what="the count moves by 1",
    )


@register(
    "opendp:histogram",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="make_find_bin (equal-width bins on [lower, upper]) >> make_count_by_categories >> make_laplace "
    "(discrete Laplace per bin; symmetric distance); one library call per sample",
    params=(
        *_AGG_PARAMS,
        Param("bins", 4, "positive_int", "number of equal-width bins (>= 2)"),
        Param("scale", 1.0, "positive", "noise scale as OpenDP defines it"),
        *_AGG_PAIR,
    ),
)
def _histogram(v: dict) -> dict:
    from dpharness.errors import ParameterError

    lo, hi = _interval(v)
    bins = int(v["bins"])
    if bins < 2:
        raise ParameterError(f"bins={bins}: pass at least 2 bins.")
    edges = tuple(float(x) for x in np.linspace(lo, hi, bins + 1)[1:-1])
    chain = (
        f"make_find_bin(edges={list(edges)}) >> make_count_by_categories({bins} bins, null_category=False) "
        f">> make_laplace(scale={v['scale']})"
    )
    return _aggregate_target(v, ("histogram", edges, float(v["scale"])), chain=chain, what="one bin count moves by 1")


@register(
    "opendp:context_mean",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="the Context API's query().clamp().resize(size).mean().laplace() (scale solved by OpenDP for "
    "epsilon; symmetric distance); one library call per sample",
    params=(
        *_AGG_PARAMS,
        Param("size", 10, "positive_int", "the size resize pads (with the midpoint) or trims the data set to"),
        Param("epsilon", 1.0, "positive", "the privacy_loss the Context is given (loss_of(epsilon=...))"),
        *_AGG_PAIR,
    ),
)
def _context_mean(v: dict) -> dict:
    lo, hi = _interval(v)
    size, eps = int(v["size"]), float(v["epsilon"])
    chain = (
        f"Context.compositor(privacy_unit=unit_of(contributions=1), privacy_loss=loss_of(epsilon={eps})).query()"
        f".clamp(({lo}, {hi})).resize(size={size}).mean().laplace().resolve()"
    )
    return _aggregate_target(
        v,
        ("context_mean", lo, hi, size, eps),
        chain=chain,
        what=f"resize turns a change of one record into at most two changes among {size}; the Laplace scale "
        f"is OpenDP's solution for epsilon={eps}",
    )
