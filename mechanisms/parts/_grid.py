"""The grid every noise-adding family rounds to: the rounded centres ``floor(v/g + 1/2)`` (saturated),
the float release ``g * (c + noise)``, the limit on noise scales in grid steps, and the rule bounding
the distance of rounded centres (:func:`grid_steps`, which the prover states and calibrations use).
Shared by the noise, selection, threshold and grouping families."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.errors import ParameterError

from ._base import Distance, Space, _frac, _rhu

# the exact discrete Laplace sampler's smallest scale, in grid steps (mechanisms._exact.discrete_laplace)
LAPLACE_MIN_UNITS = Fraction(1, 2**1000)


def _centres_units(units: np.ndarray, exponent: int, g: Fraction) -> np.ndarray:
    """``_centres`` of the scalar values ``units[i] · 2**exponent`` (Python ints), in integer arithmetic
    on the whole array: floor(v/g + 1/2) = floor((2·u·g_d + 2**E·g_n) / (2**(E+1)·g_n)) with E = −exponent
    (or v = u·2**exponent an integer multiple when exponent >= 0)."""
    gn, gd = g.numerator, g.denominator
    u = np.asarray(units, dtype=object)
    if exponent >= 0:
        num, den = 2 * u * (gd << exponent) + gn, 2 * gn
    else:
        num, den = 2 * u * gd + (gn << -exponent), gn << (1 - exponent)
    centres = num // den
    if not len(centres):
        return np.zeros(0, dtype=np.int64)
    if -_MAX_UNITS <= centres.min() and centres.max() <= _MAX_UNITS:  # nothing to saturate: int64 at once
        return centres.astype(np.int64)
    return np.array([max(-_MAX_UNITS, min(_MAX_UNITS, int(c))) for c in centres.tolist()], dtype=np.int64)


def _centres(value: Any, g: Fraction) -> list[int]:
    """The rounded centres ``floor(v/g + 1/2)`` of every coordinate, saturated to ``[−2**52, 2**52]``."""
    if isinstance(value, np.ndarray):
        vals = [Fraction(float(x)) for x in value.ravel().tolist()]
    else:
        vals = list(value) if isinstance(value, tuple) else [value]
    # saturate at ±2**52 grid steps (as OpenDP's saturating sums do): a statistic beyond it is released
    # as if at the bound, never as an error (whether a mechanism raises is itself an output). Saturation
    # is 1-Lipschitz in each coordinate, so the centres' distances, and the proof, are unchanged.
    return [max(-_MAX_UNITS, min(_MAX_UNITS, _rhu(Fraction(v) / g))) for v in vals]


_MAX_SCALE_UNITS = Fraction(2**45)


_MAX_UNITS = 2**52


def _check_scale_units(name: str, value: Any, granularity: Any) -> None:
    units = _frac(name, value) / Fraction(granularity)
    if units > _MAX_SCALE_UNITS:
        need = _frac(name, value) / _MAX_SCALE_UNITS
        coarser = 2.0 ** math.ceil(math.log2(need))
        raise ParameterError(
            f"{name}={value!r} is {float(units):.3g} grid steps of granularity={granularity!r}, above the "
            f"2**45 limit where outputs stay exact grid floats; pass granularity={coarser!r} or coarser."
        )


def _release(centres: Any, noise: np.ndarray, g: Fraction) -> np.ndarray:
    """Float outputs ``g * (c + noise)``: exact while |c + noise| < 2**53, else the round-to-nearest
    of the exact grid value (a deterministic function of the exact integer: post-processing)."""
    if isinstance(centres, np.ndarray) and centres.dtype == np.int64:  # saturated centres: |c| <= 2**52
        c = centres
    else:
        c = (
            np.asarray(centres, dtype=object)
            if any(abs(x) >= 2**62 for x in centres)
            else np.asarray(centres, dtype=np.int64)
        )
    if c.dtype == object or int(np.abs(noise).max(initial=0)) >= 2**62 - int(np.abs(c).max(initial=0)):
        units = noise.astype(object) + c.astype(object)
        return np.vectorize(lambda u: float(u) * float(g), otypes=[float])(units)
    units = noise + c
    return units.astype(float) * float(g)


def grid_steps(space: Space, d: Distance, granularity: Any) -> tuple[Fraction, Fraction, str]:
    """``(D1, D2sq, how)``: bounds on the L1 distance and the squared L2 distance, in grid steps, of the
    rounded centres ``floor(v/g + 1/2)`` of two values at distance ``d`` (the rule the prover states
    and calibrations use). Values that are multiples of the grid round exactly; otherwise each
    coordinate gains less than one step: ``|r(u) − r(v)| <= ceil(|u − v|)``, so
    ``D1 = ceil(Δ1/g) + dim − 1`` and ``D2² <= Σ (d_i + 1)² <= Δ2²/g² + 2Δ1/g + dim`` (one coordinate:
    ``ceil(Δ/g)²``)."""
    g = Fraction(granularity)
    if d.l1 == 0:
        return Fraction(0), Fraction(0), "zero"
    q = space.quantum
    if q is not None and (q / g).denominator == 1:
        return d.l1 / g, d.l2sq / (g * g), "exact"
    steps = math.ceil(d.l1 / g)
    if space.dim == 1:
        return Fraction(steps), Fraction(steps) ** 2, "scalar"
    return Fraction(steps + space.dim - 1), d.l2sq / (g * g) + 2 * d.l1 / g + space.dim, "vector"


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
