"""Audit targets for IBM's diffprivlib (``pip install diffprivlib``).

Written from diffprivlib's public documentation: ``diffprivlib.mechanisms`` (``Laplace``,
``Gaussian``, ``GaussianAnalytic``, ``GaussianDiscrete``, ``Geometric``: constructed with
``epsilon``, ``delta``, ``sensitivity``, ``random_state``; ``randomise(value)`` releases one noisy
value) and ``diffprivlib.tools`` (``sum``, ``mean`` with ``bounds``, ``epsilon``, ``random_state``,
``accountant``). Claims are read from the library: a mechanism's ``epsilon`` and ``delta``
attributes (after its own validation), and for the tools the budget a ``BudgetAccountant`` records
as spent by one call.

Randomness: the mechanisms accept ``random_state``; each chunk of samples builds the mechanism
with a ``numpy.random.RandomState`` seeded from the auditor's ``rng``, so audits are reproducible
and forked workers draw independent streams. (Without ``random_state`` diffprivlib uses
``secrets.SystemRandom``; the seeded path runs the same sampling code with another uniform source.)

Neighbour relation: the mechanisms release a scalar query answer of the given ``sensitivity``
(pair 0 vs ``sensitivity``: 0 is where float rounding leaks show first); the tools clip records to
``bounds`` and compute the sensitivity for a data set of known size, i.e. substitute-one-record
(bounded DP): ``upper - lower`` for the sum, ``(upper - lower) / n`` for the mean (pair: three
zeros vs two zeros and a 1.0).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from dpharness.core import BoundedChange, Substitute

from ._registry import Param, pair_params, register

_LIB, _MOD, _EXTRA = "diffprivlib", "diffprivlib", "diffprivlib"


def _seed(rng: np.random.Generator) -> np.random.RandomState:
    return np.random.RandomState(int(rng.integers(0, 2**32)))


def _mechanism_sampler(make: Callable[[Any], Any], cast: Callable) -> Callable:
    """``fn(data, size, rng)``: a mechanism seeded from ``rng``, ``randomise`` called ``size`` times."""

    def fn(data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        mech = make(_seed(rng))
        value = cast(data)
        return np.asarray([mech.randomise(value) for _ in range(int(size))])

    return fn


def _mechanism_target(cls_name: str, v: dict, *, integer: bool, with_delta: bool) -> dict:
    import diffprivlib.mechanisms as mechs

    cls = getattr(mechs, cls_name)
    kwargs = {"epsilon": v["epsilon"], "sensitivity": v["sensitivity"]}
    if with_delta:
        kwargs["delta"] = v["delta"]
    try:
        probe = cls(**kwargs)
    except (ValueError, TypeError) as exc:
        from dpharness.errors import ParameterError

        raise ParameterError(f"diffprivlib refused the parameters {kwargs}: {exc}; pass values it accepts.") from exc
    eps, delta = float(probe.epsilon), float(getattr(probe, "delta", 0.0))
    cast = int if integer else float
    sens = v["sensitivity"]
    return dict(
        fn=_mechanism_sampler(lambda rs: cls(**kwargs, random_state=rs), cast), vectorized=True,
        data=cast(v["data"]), neighbor=cast(v["neighbor"]), epsilon=eps, delta=delta,
        relation=f"scalar query answers at absolute distance <= {sens} (the mechanism's sensitivity={sens})",
        claim_source=(f"diffprivlib {cls_name}(**{kwargs}).epsilon = {eps!r} and .delta = {delta!r} "
                      f"(the mechanism's own validated parameters)"),
        neighbor_relation=BoundedChange(sens, "l1"),
    )


_EPS = Param("epsilon", 1.0, "positive", "the mechanism's epsilon")
_SENS = Param("sensitivity", 1.0, "positive", "the query's sensitivity")
_ISENS = Param("sensitivity", 1, "positive_int", "the integer query's sensitivity")
_DELTA = Param("delta", 1e-5, "probability", "the mechanism's delta")


@register("diffprivlib:laplace", library=_LIB, module=_MOD, extra=_EXTRA,
          description="mechanisms.Laplace.randomise on a float scalar (delta=0: pure ε-DP)",
          params=(_EPS, Param("delta", 0.0, "nonnegative", "the mechanism's delta (0: pure DP)"), _SENS,
                  *pair_params(0.0, 1.0)))
def _laplace(v: dict) -> dict:
    return _mechanism_target("Laplace", v, integer=False, with_delta=True)


@register("diffprivlib:gaussian", library=_LIB, module=_MOD, extra=_EXTRA,
          description="mechanisms.Gaussian (classic, epsilon <= 1) on a float scalar",
          params=(Param("epsilon", 0.5, "positive", "the mechanism's epsilon (diffprivlib requires <= 1)"), _DELTA,
                  _SENS, *pair_params(0.0, 1.0)))
def _gaussian(v: dict) -> dict:
    return _mechanism_target("Gaussian", v, integer=False, with_delta=True)


@register("diffprivlib:gaussian_analytic", library=_LIB, module=_MOD, extra=_EXTRA,
          description="mechanisms.GaussianAnalytic (Balle-Wang calibration) on a float scalar",
          params=(_EPS, _DELTA, _SENS, *pair_params(0.0, 1.0)))
def _gaussian_analytic(v: dict) -> dict:
    return _mechanism_target("GaussianAnalytic", v, integer=False, with_delta=True)


@register("diffprivlib:discrete_gaussian", library=_LIB, module=_MOD, extra=_EXTRA,
          description="mechanisms.GaussianDiscrete on an integer scalar",
          params=(_EPS, _DELTA, _ISENS, *pair_params(0, 1)))
def _discrete_gaussian(v: dict) -> dict:
    return _mechanism_target("GaussianDiscrete", v, integer=True, with_delta=True)


@register("diffprivlib:geometric", library=_LIB, module=_MOD, extra=_EXTRA,
          description="mechanisms.Geometric on an integer scalar",
          params=(_EPS, _ISENS, *pair_params(0, 1)))
def _geometric(v: dict) -> dict:
    return _mechanism_target("Geometric", v, integer=True, with_delta=False)


def _tool_target(tool: str, v: dict) -> dict:
    import diffprivlib.tools as tools
    from diffprivlib.accountant import BudgetAccountant

    fn_tool = getattr(tools, tool)
    bounds = (float(v["lower"]), float(v["upper"]))
    eps = v["epsilon"]
    data = [float(x) for x in np.atleast_1d(v["data"])]
    nb = [float(x) for x in np.atleast_1d(v["neighbor"])]
    probe = BudgetAccountant()
    fn_tool(np.asarray(data), epsilon=eps, bounds=bounds, random_state=0, accountant=probe)
    spent_eps, spent_delta = (float(x) for x in probe.total())

    def fn(d: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        arr = np.asarray(d, dtype=float)
        rs = _seed(rng)
        acc = BudgetAccountant()  # a private ledger per chunk: the global default one would grow without bound
        return np.asarray([fn_tool(arr, epsilon=eps, bounds=bounds, random_state=rs, accountant=acc)
                           for _ in range(int(size))], dtype=float)

    n = len(data)
    sens = "upper - lower" if tool == "sum" else "(upper - lower) / n"
    return dict(
        fn=fn, vectorized=True, data=data, neighbor=nb, epsilon=spent_eps, delta=spent_delta,
        relation=(f"data sets of {n} records clipped to bounds={bounds} that differ in one record (substitution; "
                  f"diffprivlib.tools.{tool} calibrates to sensitivity {sens} for the array's size)"),
        claim_source=(f"diffprivlib BudgetAccountant.total() after one tools.{tool}(epsilon={eps}, bounds={bounds}) "
                      f"call: (ε, δ) = ({spent_eps!r}, {spent_delta!r})"),
        neighbor_relation=Substitute(),
    )


_BOUNDS = (Param("lower", 0.0, "value", "lower bound of a record"), Param("upper", 1.0, "value", "upper bound"))


@register("diffprivlib:sum", library=_LIB, module=_MOD, extra=_EXTRA,
          description="tools.sum of float records in bounds (truncated Laplace)",
          params=(_EPS, *_BOUNDS, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 1.0])))
def _sum(v: dict) -> dict:
    return _tool_target("sum", v)


@register("diffprivlib:mean", library=_LIB, module=_MOD, extra=_EXTRA,
          description="tools.mean of float records in bounds (truncated Laplace)",
          params=(_EPS, *_BOUNDS, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 1.0])))
def _mean(v: dict) -> dict:
    return _tool_target("mean", v)
