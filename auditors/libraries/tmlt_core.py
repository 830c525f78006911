"""Audit targets for Tumult Core (``pip install tmlt.core``).

Written from Tumult Core's public documentation: ``tmlt.core.measurements.noise_mechanisms``
(``AddLaplaceNoise(input_domain, scale)``, ``AddGeometricNoise(alpha)``,
``AddDiscreteGaussianNoise(sigma_squared)``, ``AddGaussianNoise(input_domain, sigma_squared)``);
a Measurement's ``privacy_function(d_in)`` is its privacy guarantee, an exact number: ε under
``PureDP``, ρ under ``RhoZCDP`` (converted by :func:`~dpharness.auditors.libraries.zcdp_to_approx`
at the target's ``delta``). The claim is read from ``privacy_function(sensitivity)`` rounded up to a
float.

Randomness: Tumult Core draws from its own secure generator (``tmlt.core.random.rng.prng()``: a numpy
``Generator`` over randomgen's ``RDRAND``, or over ``os.urandom`` where the processor has no RDRAND)
and takes no seed. No seed can set that generator's state, and no worker repeats another's draws:
RDRAND refills its buffer from the processor (the fallback reads the operating system), and the
library builds a fresh generator in every process (it compares process ids, so even a bare fork
does not repeat the buffer). So it needs no reseeding in the auditor's worker processes
(started by fork+exec), and an audit's result says it is not reproducible by seed (the seed fixes
which events and pairs are tested, not the outputs). The sampler holds the measurement's recipe
(its kind and exact parameter), not the measurement: each process builds the measurement on first
use (:func:`_measurement`, cached per process), so no library object, and no generator the
auditor would try to reseed, travels with the job.

Not covered: Tumult Core's bounded sum and average (``create_sum_measurement``,
``create_average_measurement``) operate on Spark DataFrames; one Spark job per sample is far too
slow for an audit of 10^5 or more samples, so they are not offered as targets.

Installing: tmlt.core 0.20 pins ``numpy<2`` and ``sympy<1.13`` on Python < 3.12; install it in an
environment where those pins are acceptable.

Pairs: scalar 0 vs ``sensitivity`` (0 is where float rounding leaks show first).
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.core import BoundedChange

from ._convert import zcdp_to_approx
from ._registry import Param, pair_params, register

_LIB, _MOD, _EXTRA = "tmlt.core", "tmlt.core", "tmlt"


_UNSEEDED = (
    "Tumult Core draws from its own secure generator (RDRAND, or os.urandom without it), which takes no "
    "seed; the seed fixes the events and pairs tested, not the outputs"
)


@functools.lru_cache(maxsize=32)
def _measurement(kind: str, parameter: Fraction) -> Any:
    """The library's measurement of ``kind`` at its exact ``parameter`` (scale, alpha or sigma_squared),
    built once per process."""
    import tmlt.core.measurements.noise_mechanisms as nm
    from tmlt.core.domains.numpy_domains import NumpyFloatDomain

    if kind == "laplace":
        return nm.AddLaplaceNoise(NumpyFloatDomain(), scale=parameter)
    if kind == "geometric":
        return nm.AddGeometricNoise(alpha=parameter)
    if kind == "discrete_gaussian":
        return nm.AddDiscreteGaussianNoise(sigma_squared=parameter)
    return nm.AddGaussianNoise(NumpyFloatDomain(), sigma_squared=parameter)


def _loop(kind: str, parameter: Fraction, cast: type):
    """``fn(data, size, rng)``: ``size`` calls of the measurement, built in the drawing process from its
    recipe (``rng`` unused: the library's own generator; see the module docstring)."""

    def fn(data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        meas = _measurement(kind, parameter)
        value = cast(data)
        return np.asarray([meas(value) for _ in range(int(size))])

    return fn


_PARAMETER = {
    "laplace": ("scale", "AddLaplaceNoise"),
    "geometric": ("alpha", "AddGeometricNoise"),
    "discrete_gaussian": ("sigma_squared", "AddDiscreteGaussianNoise"),
    "gaussian": ("sigma_squared", "AddGaussianNoise"),
}


def _target(kind: str, v: dict) -> dict:
    # Tumult Core takes exact numbers: a float parameter is passed as its exact binary value
    name, cls = _PARAMETER[kind]
    parameter = Fraction(v[name])
    meas = _measurement(kind, parameter)
    what = f"{cls}({name}={v[name]})"
    integer = kind in ("geometric", "discrete_gaussian")
    cast = int if integer else float
    d_in = cast(v["sensitivity"])
    value = meas.privacy_function(d_in if integer else Fraction(d_in))
    claim = float(value.to_float(round_up=True))
    measure = type(meas.output_measure).__name__
    relation = f"scalar query answers at absolute difference <= {d_in} (Tumult Core AbsoluteDifference, d_in = {d_in})"
    common = dict(
        fn=_loop(kind, parameter, cast),
        vectorized=True,
        data=cast(v["data"]),
        neighbor=cast(v["neighbor"]),
        relation=relation,
        neighbor_relation=BoundedChange(d_in, "l1"),
        unseeded=_UNSEEDED,
    )
    if measure == "RhoZCDP":
        eps = zcdp_to_approx(claim, v["delta"])
        return dict(
            common,
            epsilon=eps,
            delta=float(v["delta"]),
            claim_source=(
                f"Tumult Core {what}.privacy_function({d_in}) = ρ = {value} (RhoZCDP), converted "
                f"to (ε, δ) at δ = {v['delta']!r} (the target's delta parameter; default 1e-6) by "
                f"zcdp_to_approx (Canonne-Kamath-Steinke 2020 Cor. 13)"
            ),
        )
    return dict(
        common,
        epsilon=claim,
        delta=0.0,
        claim_source=f"Tumult Core {what}.privacy_function({d_in}) = ε = {value} ({measure}), rounded up to a float",
    )


_DELTA = Param("delta", 1e-6, "probability", "δ at which the zCDP claim is converted to (ε, δ)")


@register(
    "tmlt.core:laplace",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="AddLaplaceNoise on a float scalar (one call per sample)",
    params=(
        Param("scale", 1.0, "positive", "Laplace scale"),
        Param("sensitivity", 1.0, "positive", "d_in"),
        *pair_params(0.0, 1.0),
    ),
)
def _laplace(v: dict) -> dict:
    return _target("laplace", v)


@register(
    "tmlt.core:geometric",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="AddGeometricNoise (two-sided geometric, scale alpha) on an integer scalar",
    params=(
        Param("alpha", 1.0, "positive", "noise scale alpha"),
        Param("sensitivity", 1, "positive_int", "d_in"),
        *pair_params(0, 1),
    ),
)
def _geometric(v: dict) -> dict:
    return _target("geometric", v)


@register(
    "tmlt.core:discrete_gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="AddDiscreteGaussianNoise on an integer scalar; zCDP ρ converted at delta (default 1e-6)",
    params=(
        Param("sigma_squared", 1.0, "positive", "variance parameter"),
        Param("sensitivity", 1, "positive_int", "d_in"),
        _DELTA,
        *pair_params(0, 1),
    ),
)
def _discrete_gaussian(v: dict) -> dict:
    return _target("discrete_gaussian", v)


@register(
    "tmlt.core:gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="AddGaussianNoise on a float scalar; zCDP ρ converted at delta (default 1e-6)",
    params=(
        Param("sigma_squared", 1.0, "positive", "variance"),
        Param("sensitivity", 1.0, "positive", "d_in"),
        _DELTA,
        *pair_params(0.0, 1.0),
    ),
)
def _gaussian(v: dict) -> dict:
    return _target("gaussian", v)
