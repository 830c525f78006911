"""Exact laws and extreme neighbouring pairs of mechanisms declared from parts
(:mod:`dpharness.mechanisms.parts`): both are read off the same step structure the sampler executes.

``leaves(m, data)`` lists each noise measurement with the exact value it adds noise to on ``data``
(the transformations applied exactly), in output order; the law of the whole output is the product
of the leaves' laws (independent randomness), each coordinate a discrete Laplace or discrete
Gaussian on its grid centred at the rounded value."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.core import AddRemove, BoundedChange, FunctionLaw, RealBox
from dpharness.errors import UnsupportedError

from . import parts as P
from ._noise import discrete_laplace_logpmf, on_grid_units

__all__ = ["leaves", "law", "extreme_pairs", "Leaf"]


class Leaf:
    """One noise measurement, the exact value it perturbs on some input, and its rounded centres."""

    def __init__(self, measurement: Any, value: Any, space: P.Space) -> None:
        self.measurement = measurement
        self.value = value
        self.space = space
        self.g = Fraction(measurement.granularity)
        self.centres = P._centres(value, self.g)


def leaves(m: P.PartsMechanism, data: Any) -> list[Leaf]:
    value = np.asarray(data, dtype=float)
    if m.shape == "dataset" and value.ndim == 1 and m.space.dim > 1:
        value = value.reshape(-1, m.space.dim)
    return _walk(m.steps, value, m.space)


def _walk(step: P.Step, value: Any, space: P.Space) -> list[Leaf]:
    if isinstance(step, (P.GridLaplace, P.GridGaussian)):
        return [Leaf(step, value, space)]
    if isinstance(step, P.Chain):
        if isinstance(step.first, P.Transformation):
            return _walk(step.second, step.first.apply(value), step.first.out_space(space))
        return _walk(step.first, value, space)  # what follows is post-processing
    if isinstance(step, P.Compose):
        return [leaf for p in step.parts for leaf in _walk(p, value, space)]
    if isinstance(step, P.Parallel):
        arr = np.asarray(value, dtype=float)
        key_col = arr[:, step.by] if arr.ndim == 2 else arr
        return [leaf for key in step.keys for leaf in _walk(step.part, arr[key_col == float(key)], space)]
    return []


def _gaussian_log_norm(tau2: Fraction) -> float:
    """log Σ_k exp(-k²/(2τ²)) (float; the theta sum converges fast)."""
    t2 = float(tau2)
    if t2 > 1e4:  # Poisson summation: Σ = sqrt(2πτ²)(1 + 2Σ e^{-2π²τ²k²}) = sqrt(2πτ²) to double precision
        return 0.5 * math.log(2 * math.pi * t2)
    n = int(math.ceil(math.sqrt(2 * t2 * 50))) + 2
    k = np.arange(-n, n + 1, dtype=float)
    return float(np.log(np.exp(-k * k / (2 * t2)).sum()))


def law(m: P.PartsMechanism, data: Any) -> FunctionLaw:
    """The exact law of the output (when no post-processing follows the noise)."""
    if P.has_post(m.steps):
        raise UnsupportedError(f"{m.name} post-processes its noisy outputs; its output law has no closed form here "
                               "(the proof works on the law before post-processing).")
    import sympy as sp

    from dpharness.core import exact

    ls = leaves(m, data)
    coords = [(leaf, i) for leaf in ls for i in range(len(leaf.centres))]
    width = len(coords)

    def log_prob(outputs: np.ndarray) -> np.ndarray:
        out = np.asarray(outputs, dtype=float).reshape(-1, width)
        total = np.zeros(len(out))
        for j, (leaf, i) in enumerate(coords):
            units, ok = on_grid_units(out[:, j], float(leaf.g))
            k = units - leaf.centres[i]
            if isinstance(leaf.measurement, P.GridLaplace):
                lp = discrete_laplace_logpmf(k, float(leaf.measurement.t))
            else:
                lp = -k * k / (2 * float(leaf.measurement.tau2)) - _gaussian_log_norm(leaf.measurement.tau2)
            total = total + np.where(ok, lp, -np.inf)
        return total

    symbols = tuple(sp.Symbol(f"y{j}", real=True) for j in range(width))
    expr = sp.Integer(1)
    for sym_, (leaf, i) in zip(symbols, coords):
        g = exact(leaf.g)
        k = sym_ / g - leaf.centres[i]
        if isinstance(leaf.measurement, P.GridLaplace):
            t = exact(leaf.measurement.t)
            expr = expr * sp.tanh(1 / (2 * t)) * sp.exp(-sp.Abs(k) / t)
        else:
            expr = expr * sp.exp(-k ** 2 / (2 * exact(leaf.measurement.tau2)))  # unnormalised
    return FunctionLaw("discrete", log_prob, symbols, expr)


def _record_extremes(m: P.PartsMechanism) -> list:
    dom = m.records
    if isinstance(dom, RealBox):
        lo, hi = float(dom.lo), float(dom.hi)
        corners = []
        for bits in range(2 ** min(dom.dim, 4)):
            corners.append(np.array([hi if (bits >> j) & 1 else lo for j in range(dom.dim)]))
        return corners
    vals = list(dom.extremes())
    lo, hi = P._domain_bounds(dom)
    if lo < 0 < hi and 0.0 not in vals:
        vals.append(0.0)
    return [float(v) for v in vals]


def extreme_pairs(m: P.PartsMechanism) -> list[tuple[Any, Any]]:
    """Neighbouring pairs built from the domain's extreme records, each accepted by the mechanism's
    own ``validate_pair``; the first is the default ``example_pair``."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(m.relation, BoundedChange):
        dim = int(m.dim)
        delta = Fraction(m.relation.sensitivity)
        x = np.zeros(dim)
        y = np.zeros(dim)
        if m.relation.norm == "linf":
            y[:] = float(delta)
        else:
            y[0] = float(delta)
        pairs.append((x, y))
    else:
        ext = _record_extremes(m)
        box = isinstance(m.records, RealBox)
        empty = np.zeros((0, m.records.dim)) if box else np.zeros(0)
        if isinstance(m.relation, AddRemove):
            for e in sorted(ext, key=lambda v: -float(np.max(np.abs(v)))):
                pairs.append((empty, np.array([e]) if box else np.array([e])))
        else:
            n = int(m.size) if m.size is not None else 1
            for a in ext:
                for b in ext:
                    if np.array_equal(np.asarray(a), np.asarray(b)):
                        continue
                    base = np.array([a] * n)
                    other = base.copy()
                    other[0] = b
                    pairs.append((base, other))
    good = []
    for d, d2 in pairs:
        try:
            m.input_spec.validate_pair(d, d2)
        except Exception:
            continue
        good.append((d, d2))
    if not good:
        raise UnsupportedError(f"{m.name}: no neighbouring pair could be built from the domain's extremes.")
    return good
