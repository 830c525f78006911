"""Audit targets for OpenMined's PyDP (``pip install python-dp``; Python bindings of Google's C++
differential-privacy library).

Written from PyDP's public documentation: ``pydp.algorithms.numerical_mechanisms``
(``LaplaceMechanism(epsilon, sensitivity)``, ``GaussianMechanism(epsilon, delta, sensitivity)``,
``add_noise(value)``) and ``pydp.algorithms.laplacian`` (``BoundedSum``, ``BoundedMean`` with
``epsilon``, ``lower_bound``, ``upper_bound``, ``dtype``; ``add_entries`` then ``result``).
Claims are the objects' own ``epsilon`` / ``delta`` properties.

Randomness: Google's library draws from its own secure generator and takes no seed; audits are
reproducible only up to the library's randomness (the result says so in ``extra["notes"]``). The
targets are per-call functions (``vectorized=False``); the auditor's worker processes are started by
fork+exec, so each has the library's generator fresh, and none repeats another's draws. PyDP's
mechanisms are C++ objects that do not pickle: a sampler holds the mechanism's parameters and each
process builds the mechanism on first use (cached per process), so the worker pool can ship it.

Neighbour relation: the mechanisms release a scalar of the given sensitivity (pair 0 vs
``sensitivity``; 0 is where float rounding leaks show first). The bounded algorithms follow Google's
model: add or remove one privacy unit contributing one record (``l0_sensitivity = linf_sensitivity =
1``), records clamped to ``[lower, upper]`` (pair: three zeros vs three zeros and a 1.0, exact sums 0
and 1).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dpharness.core import AddRemove, BoundedChange

from ._registry import Param, pair_params, register

_LIB, _MOD, _EXTRA = "python-dp", "pydp", "pydp"
_UNSEEDED = (
    "PyDP draws from Google's C++ library's own secure generator, which takes no seed; the seed fixes the "
    "events and pairs tested, not the outputs"
)


@functools.lru_cache(maxsize=64)
def _noise(kind: str, epsilon: float, delta: float, sensitivity: float) -> Any:
    """PyDP's ``LaplaceMechanism`` (``delta`` unused) or ``GaussianMechanism``, built once per process."""
    from pydp.algorithms import numerical_mechanisms as nm

    if kind == "laplace":
        return nm.LaplaceMechanism(epsilon=epsilon, sensitivity=sensitivity)
    return nm.GaussianMechanism(epsilon=epsilon, delta=delta, sensitivity=sensitivity)


def _mechanism(kind: str, v: dict) -> dict:
    recipe = (kind, v["epsilon"], v.get("delta", 0.0), v["sensitivity"])
    mech = _noise(*recipe)
    if kind == "laplace":
        eps, delta = float(mech.epsilon), 0.0
        source = f"PyDP LaplaceMechanism(epsilon={v['epsilon']}, sensitivity={v['sensitivity']}).epsilon = {eps!r}"
    else:
        eps, delta = float(mech.epsilon), float(mech.delta)
        source = (
            f"PyDP GaussianMechanism(epsilon={v['epsilon']}, delta={v['delta']}, sensitivity={v['sensitivity']})"
            f".epsilon = {eps!r}, .delta = {delta!r} (L2 sensitivity {float(mech.l2_sensitivity)!r}, "
            f"std {float(mech.std)!r})"
        )

    def fn(data: Any) -> float:
        return float(_noise(*recipe).add_noise(float(data)))

    sens = v["sensitivity"]
    return dict(
        fn=fn,
        vectorized=False,
        data=float(v["data"]),
        neighbor=float(v["neighbor"]),
        epsilon=eps,
        delta=delta,
        relation=f"scalar query answers at absolute distance <= {sens} (sensitivity={sens})",
        claim_source=source,
        neighbor_relation=BoundedChange(sens, "l1"),
        unseeded=_UNSEEDED,
    )


_EPS = Param("epsilon", 1.0, "positive", "the mechanism's epsilon")
_SENS = Param("sensitivity", 1.0, "positive", "the query's sensitivity")


@register(
    "pydp:laplace",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="numerical_mechanisms.LaplaceMechanism.add_noise on a float scalar (per call)",
    params=(_EPS, _SENS, *pair_params(0.0, 1.0)),
)
def _laplace(v: dict) -> dict:
    return _mechanism("laplace", v)


@register(
    "pydp:gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="numerical_mechanisms.GaussianMechanism.add_noise on a float scalar (per call)",
    params=(_EPS, Param("delta", 1e-5, "probability", "the mechanism's delta"), _SENS, *pair_params(0.0, 1.0)),
)
def _gaussian(v: dict) -> dict:
    return _mechanism("gaussian", v)


def _bounded(cls_name: str, v: dict) -> dict:
    from pydp.algorithms import laplacian

    cls = getattr(laplacian, cls_name)
    lo, hi = float(v["lower"]), float(v["upper"])
    kwargs = dict(epsilon=v["epsilon"], lower_bound=lo, upper_bound=hi, dtype="float")
    probe = cls(**kwargs)
    eps, delta = float(probe.epsilon), float(probe.delta)

    def fn(data: Any) -> float:
        alg = cls(**kwargs)
        alg.add_entries([float(x) for x in data])
        return float(alg.result())

    data = [float(x) for x in np.atleast_1d(v["data"])]
    nb = [float(x) for x in np.atleast_1d(v["neighbor"])]
    return dict(
        fn=fn,
        vectorized=False,
        data=data,
        neighbor=nb,
        epsilon=eps,
        delta=delta,
        relation=(
            f"data sets that differ by adding or removing one privacy unit with one record "
            f"(l0_sensitivity = linf_sensitivity = 1), records clamped to [{lo}, {hi}]"
        ),
        claim_source=f"PyDP {cls_name}(**{kwargs}).epsilon = {eps!r}, .delta = {delta!r}",
        neighbor_relation=AddRemove(),
        unseeded=_UNSEEDED,
    )


_BOUNDS = (Param("lower", 0.0, "value", "lower_bound"), Param("upper", 1.0, "value", "upper_bound"))


@register(
    "pydp:bounded_sum",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="laplacian.BoundedSum (dtype float) of records in [lower, upper] (per call)",
    params=(_EPS, *_BOUNDS, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])),
)
def _bounded_sum(v: dict) -> dict:
    return _bounded("BoundedSum", v)


@register(
    "pydp:bounded_mean",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="laplacian.BoundedMean (dtype float) of records in [lower, upper] (per call)",
    params=(_EPS, *_BOUNDS, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])),
)
def _bounded_mean(v: dict) -> dict:
    return _bounded("BoundedMean", v)
