"""Exact laws and extreme neighbouring pairs of mechanisms declared from parts
(:mod:`dpharness.mechanisms.parts`): both are read off the same step structure the sampler executes.

``leaves(m, data)`` lists each noise measurement with the exact value it adds noise to on ``data``
(the transformations applied exactly), in output order; the law of the whole output is the product
of the leaves' laws (independent randomness), each coordinate a discrete Laplace or discrete
Gaussian on its grid centred at the rounded value. On a one-record input (``input="record"``) the
leaves are local randomizers (:class:`LocalLeaf`): k-ary randomized response, Warner's randomized
response and RAPPOR's bit flipping, each with its exact pmf."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.core import AddRemove, BoundedChange, Deferred, DiscreteLaw, FunctionLaw, IntegerRange, RealBox
from dpharness.errors import UnsupportedError

from dpharness.mechanisms._noise import discrete_laplace_logpmf, on_grid_units

from ._base import LEAVES, Chain, heads_chain, Space, Step, Transformation, record_value, walk_nodes
from ._grid import _centres
from ._structure import _domain_bounds, has_post, has_sampling, measurement_leaves
from .combinators import Compose, Iterate, Parallel, Repeat
from .local import (
    _MAX_CATEGORIES,
    LocalRandomizedResponse,
    LocalRandomizer,
    LocalRappor,
    LocalWarner,
    category_index,
    category_values,
)
from .noise import GridGaussian, GridLaplace
from .transformations import Clamp

__all__ = ["leaves", "law", "extreme_pairs", "Leaf", "LocalLeaf"]


class Leaf:
    """One noise measurement, the exact value it perturbs on some input, and its rounded centres."""

    def __init__(self, measurement: Any, value: Any, space: Space) -> None:
        self.measurement = measurement
        self.value = value
        self.space = space
        self.g = Fraction(measurement.granularity)
        self.centres = _centres(value, self.g, saturate=False)  # as the sampler: exact, never capped

    def log_prob(self, cols: np.ndarray) -> np.ndarray:
        """ln P of the leaf's output columns (shape (n, len(centres)))."""
        return _grid_log_prob(self, cols)


class LocalLeaf:
    """One local randomizer (:class:`~dpharness.mechanisms.parts.LocalRandomizer`), the record it
    randomizes and that record's category index ``index`` among the ``k`` categories."""

    def __init__(self, measurement: Any, value: Any, space: Space) -> None:
        self.measurement = measurement
        self.value = value
        self.space = space
        self.k = len(space.record_categories)
        self.index = category_index(space, value)

    @property
    def width(self) -> int:
        return self.k if isinstance(self.measurement, LocalRappor) else 1

    def probabilities(self) -> tuple[Any, Any]:
        """Exact (sympy) per-coordinate probabilities (truth, other): RR P(y = x) = e^L/(e^L + k − 1)
        and P(y = a given other category) = 1/(e^L + k − 1); Warner p and 1 − p; RAPPOR, per bit,
        kept 1 − f/2 and flipped f/2."""
        import sympy as sp

        from dpharness.core import exact

        m = self.measurement
        if isinstance(m, LocalRandomizedResponse):
            e_l = sp.exp(exact(m.L))
            return e_l / (e_l + self.k - 1), 1 / (e_l + self.k - 1)
        if isinstance(m, LocalWarner):
            p = exact(m.p_exact)
            return p, 1 - p
        half = exact(m.f_exact) / 2
        return 1 - half, half

    def log_probabilities(self) -> tuple[float, float]:
        """ln of :meth:`probabilities` as floats, computed without underflow (e.g. ln P(lie) = −L −
        ln(1 + (k − 1)e^{−L}) at L = 1000)."""
        import mpmath

        m = self.measurement
        with mpmath.workdps(50):
            if isinstance(m, LocalRandomizedResponse):
                L = mpmath.mpf(m.L.numerator) / m.L.denominator
                t = mpmath.log1p((self.k - 1) * mpmath.exp(-L))
                return float(-t), float(-L - t)
            q = m.p_exact if isinstance(m, LocalWarner) else 1 - m.f_exact / 2
            q_mp = mpmath.mpf(q.numerator) / q.denominator
            return float(mpmath.log(q_mp)), float(mpmath.log(1 - q_mp))

    def table(self) -> list[tuple[tuple, Any]] | None:
        """Every output (a tuple of ``width`` coordinates) with its exact probability; None above
        2**10 outputs (RAPPOR with k > 10)."""
        truth, other = self.probabilities()
        cats = self.space.record_categories
        if not isinstance(self.measurement, LocalRappor):
            return [((c,), truth if j == self.index else other) for j, c in enumerate(cats)]
        if self.k > _MAX_ENUMERATED_BITS:
            return None
        onehot = tuple(1 if j == self.index else 0 for j in range(self.k))
        rows = []
        for bits in itertools.product((0, 1), repeat=self.k):
            agree = sum(1 for a, b in zip(bits, onehot) if a == b)
            rows.append((bits, truth**agree * other ** (self.k - agree)))
        return rows

    def prob(self, y: tuple) -> Any:
        """The exact probability of the output ``y`` (a tuple of ``width`` coordinates)."""
        import sympy as sp

        truth, other = self.probabilities()
        if isinstance(self.measurement, LocalRappor):
            if any(b not in (0, 1) for b in y) or len(y) != self.k:
                return sp.Integer(0)
            agree = sum(1 for j, b in enumerate(y) if b == int(j == self.index))
            return truth**agree * other ** (self.k - agree)
        (v,) = y
        cats = self.space.record_categories
        return truth if v == cats[self.index] else other if v in cats else sp.Integer(0)

    def truthful_output(self) -> tuple:
        """The output that reports the record unchanged (its category; RAPPOR: its one-hot bits)."""
        if isinstance(self.measurement, LocalRappor):
            return tuple(int(j == self.index) for j in range(self.k))
        return (self.space.record_categories[self.index],)

    def log_prob(self, cols: np.ndarray) -> np.ndarray:
        """ln P of the rows of ``cols`` (shape (n, width)); −inf off the support."""
        lt, lo = self.log_probabilities()
        if isinstance(self.measurement, LocalRappor):
            onehot = np.zeros(self.k)
            onehot[self.index] = 1
            valid = np.all((cols == 0) | (cols == 1), axis=1)
            agree = (cols == onehot).sum(axis=1)
            return np.where(valid, agree * lt + (self.k - agree) * lo, -np.inf)
        c = cols[:, 0]
        cats = category_values(self.space).astype(float)
        return np.where(c == cats[self.index], lt, np.where(np.isin(c, cats), lo, -np.inf))

    def expr(self, symbols: tuple) -> Any:
        """The exact pmf in the output symbols of this leaf (0 off the support)."""
        import sympy as sp

        from dpharness.core import exact

        truth, other = self.probabilities()
        if isinstance(self.measurement, LocalRappor):
            return sp.Mul(
                *[
                    sp.Piecewise(
                        (truth, sp.Eq(s, int(j == self.index))), (other, sp.Eq(s, int(j != self.index))), (0, True)
                    )
                    for j, s in enumerate(symbols)
                ]
            )
        (s,) = symbols
        cats = [exact(c) for c in self.space.record_categories]
        return sp.Piecewise(
            (truth, sp.Eq(s, cats[self.index])), (other, sp.Contains(s, sp.FiniteSet(*cats))), (0, True)
        )


_MAX_ENUMERATED_BITS = 10  # RAPPOR laws list every output up to 2**10
_MAX_TABLE = 1024  # outputs of a product law listed as a DiscreteLaw (exact probabilities)


def leaves(m: Any, data: Any) -> list:
    """Each noise measurement with the exact value it perturbs on ``data``, in output order
    (:class:`Leaf` for grid noise, :class:`LocalLeaf` for a local randomizer). A structure with a
    random subsample has none (its noise perturbs a random subsample's value)."""
    if has_sampling(m.steps):
        raise UnsupportedError(
            f"{m.name} draws a random subsample; its noise leaves perturb a random value, so there is "
            "no fixed leaf per data set"
        )
    if m.shape == "record":
        return _walk(m.steps, record_value(data), m.space)
    value = np.asarray(data, dtype=float)
    if m.shape == "dataset" and value.ndim == 1 and m.space.dim > 1:
        value = value.reshape(-1, m.space.dim)
    return _walk(m.steps, value, m.space)


def _walk(step: Step, value: Any, space: Space) -> list:
    if isinstance(step, Chain) and heads_chain(step.first) and type(step.first) in LEAVES:  # e.g. contribution bounding
        return [LEAVES[type(step.first)](step, value, space, _walk)]
    if type(step) in LEAVES:
        return [LEAVES[type(step)](step, value, space, _walk)]
    if isinstance(step, LocalRandomizer):
        return [LocalLeaf(step, value, space)]
    if isinstance(step, (GridLaplace, GridGaussian)):
        return [Leaf(step, value, space)]
    if isinstance(step, Chain):
        if isinstance(step.first, Transformation):
            return _walk(step.second, step.first.apply(value), step.first.out_space(space))
        return _walk(step.first, value, space)  # what follows is post-processing
    if isinstance(step, Compose):
        return [leaf for p in step.parts for leaf in _walk(p, value, space)]
    if isinstance(step, Repeat):
        return _walk(step.part, value, space) * step.times
    if isinstance(step, Iterate):
        raise UnsupportedError("an iterated structure's leaves perturb values that depend on earlier releases")
    if isinstance(step, Parallel):
        arr = np.asarray(value, dtype=float)
        key_col = arr[:, step.by] if arr.ndim == 2 else arr
        return [leaf for key in step.key_values for leaf in _walk(step.part, arr[key_col == float(key)], space)]
    return []


def _gaussian_log_norm(tau2: Fraction) -> float:
    """log Σ_k exp(-k²/(2τ²)) (float; the theta sum converges fast)."""
    t2 = float(tau2)
    if t2 > 1e4:  # Poisson summation: Σ = sqrt(2πτ²)(1 + 2Σ e^{-2π²τ²k²}) = sqrt(2πτ²) to double precision
        return 0.5 * math.log(2 * math.pi * t2)
    n = int(math.ceil(math.sqrt(2 * t2 * 50))) + 2
    k = np.arange(-n, n + 1, dtype=float)
    return float(np.log(np.exp(-k * k / (2 * t2)).sum()))


def law(m: Any, data: Any) -> FunctionLaw | DiscreteLaw:
    """The exact law of the output (when no post-processing follows the noise)."""
    if has_post(m.steps):
        raise UnsupportedError(
            f"{m.name} post-processes its noisy outputs; its output law has no closed form here "
            "(the proof works on the law before post-processing)."
        )
    if has_sampling(m.steps):
        raise UnsupportedError(
            f"{m.name} draws a random subsample per release; its output law is a mixture over the "
            "subsamples, not listed here (the proof accounts for it by amplification)."
        )
    from .grouping import discovered_head

    if discovered_head(m.steps) is not None:
        raise UnsupportedError(
            f"{m.name} releases a mapping of the keys found in the data; its law over mappings is not "
            "listed here (the proof is universe-free and needs no law)."
        )
    import sympy as sp

    from dpharness.core import exact

    ls = leaves(m, data)
    if m.shape == "record":
        return _local_law(ls)
    if any(not isinstance(leaf, Leaf) for leaf in ls):
        return _mixed_law(ls)
    coords = [(leaf, i) for leaf in ls for i in range(len(leaf.centres))]
    width = len(coords)

    def log_prob(outputs: np.ndarray) -> np.ndarray:
        out = np.asarray(outputs, dtype=float).reshape(-1, width)
        total = np.zeros(len(out))
        for j, (leaf, i) in enumerate(coords):
            units, ok = on_grid_units(out[:, j], float(leaf.g))
            k = units - leaf.centres[i]
            if isinstance(leaf.measurement, GridLaplace):
                lp = discrete_laplace_logpmf(k, float(leaf.measurement.t))
            else:
                lp = -k * k / (2 * float(leaf.measurement.tau2)) - _gaussian_log_norm(leaf.measurement.tau2)
            total = total + np.where(ok, lp, -np.inf)
        return total

    symbols = tuple(sp.Symbol(f"y{j}", real=True) for j in range(width))

    def build_expr():
        expr = sp.Integer(1)
        for sym_, (leaf, i) in zip(symbols, coords):
            g = exact(leaf.g)
            k = sym_ / g - leaf.centres[i]
            if isinstance(leaf.measurement, GridLaplace):
                t = exact(leaf.measurement.t)
                expr = expr * sp.tanh(1 / (2 * t)) * sp.exp(-sp.Abs(k) / t)
            else:
                expr = expr * sp.exp(-(k**2) / (2 * exact(leaf.measurement.tau2)))  # unnormalised
        return expr

    return FunctionLaw("discrete", log_prob, symbols, Deferred(build_expr))


def _grid_log_prob(leaf: Leaf, cols: np.ndarray) -> np.ndarray:
    """ln P of a grid-noise leaf's output columns (shape (n, len(centres)))."""
    total = np.zeros(len(cols))
    for i, c in enumerate(leaf.centres):
        units, ok = on_grid_units(cols[:, i], float(leaf.g))
        k = units - c
        if isinstance(leaf.measurement, GridLaplace):
            lp = discrete_laplace_logpmf(k, float(leaf.measurement.t))
        else:
            lp = -k * k / (2 * float(leaf.measurement.tau2)) - _gaussian_log_norm(leaf.measurement.tau2)
        total = total + np.where(ok, lp, -np.inf)
    return total


def _mixed_law(ls: list) -> FunctionLaw:
    """The law of a structure with family leaves (:class:`.selection.SelectionLeaf`,
    :class:`.threshold.ThresholdLeaf`) and grid noise: the product of the leaves' laws (independent randomness), numeric log-probabilities by blocks
    of columns; the finite support listed when every leaf is a family leaf (at most 1024 outputs)."""
    import sympy as sp

    widths = [leaf.width if not isinstance(leaf, Leaf) else len(leaf.centres) for leaf in ls]
    width = sum(widths)
    symbols = tuple(sp.Symbol(f"y{j}", real=True) for j in range(width))

    def log_prob(outputs: np.ndarray) -> np.ndarray:
        out = np.asarray(outputs, dtype=float).reshape(-1, width)
        total, first = np.zeros(len(out)), 0
        for leaf, w in zip(ls, widths):
            cols = out[:, first : first + w]
            total = total + (_grid_log_prob(leaf, cols) if isinstance(leaf, Leaf) else leaf.log_prob(cols))
            first += w
        return total

    outcomes = None
    if all(hasattr(leaf, "outputs") for leaf in ls):
        try:
            tables = [leaf.outputs() for leaf in ls]
        except UnsupportedError:  # a leaf with too many outputs to list
            tables = [range(_MAX_TABLE + 1)]
        if math.prod(len(t) for t in tables) <= _MAX_TABLE:
            rows: list[tuple] = [sum(combo, ()) for combo in itertools.product(*tables)]
            outcomes = tuple(r[0] if width == 1 else r for r in rows)

    def build_expr():
        raise UnsupportedError("a selection's law has no sympy expression here; use log_prob")

    return FunctionLaw("discrete", log_prob, symbols, Deferred(build_expr), outcomes=outcomes)


def _local_law(ls: list) -> DiscreteLaw | FunctionLaw:
    """The law of local randomizers on one record: the product of the leaves' laws (independent
    randomness), output coordinates in the leaves' order. A :class:`DiscreteLaw` listing every output
    with its exact probability when there are at most 1024 outputs and each probability is a positive
    float; otherwise a :class:`FunctionLaw` (the exact pmf as ``expr``; log-probabilities computed
    without underflow, e.g. a lie at log-odds 1000)."""
    import sympy as sp

    widths = [leaf.width for leaf in ls]
    width = sum(widths)
    symbols = tuple(sp.Symbol(f"y{j}", real=True) for j in range(width))
    expr, start = sp.Integer(1), 0
    for leaf, w in zip(ls, widths):
        expr = expr * leaf.expr(symbols[start : start + w])
        start += w
    tables = [leaf.table() for leaf in ls]
    outcomes = None
    if all(t is not None for t in tables):
        count = math.prod(len(t) for t in tables)
        if count <= _MAX_TABLE:
            rows: list[tuple[tuple, Any]] = [
                (sum((o for o, _ in combo), ()), sp.Mul(*[p for _, p in combo])) for combo in itertools.product(*tables)
            ]
            outcomes = tuple(o[0] if width == 1 else o for o, _ in rows)
            probs = tuple(p for _, p in rows)
            if all(float(p) > 0 for p in probs):
                return DiscreteLaw(outcomes=outcomes, probs=probs, symbols=symbols, expr=expr)
        elif count <= _MAX_CATEGORIES:
            combined: tuple[tuple, ...] = tuple(
                sum(combo, ()) for combo in itertools.product(*[[o for o, _ in t] for t in tables])
            )
            outcomes = tuple(o[0] for o in combined) if width == 1 else combined

    def log_prob(outputs: np.ndarray) -> np.ndarray:
        out = np.asarray(outputs, dtype=float).reshape(-1, width)
        total, first = np.zeros(len(out)), 0
        for leaf, w in zip(ls, widths):
            total = total + leaf.log_prob(out[:, first : first + w])
            first += w
        return total

    return FunctionLaw("discrete", log_prob, symbols, expr, outcomes=outcomes)


def _clamp_bounds(step: Step) -> list:
    """The bounds of every clamp in the structure (where a record's contribution is extreme)."""
    if isinstance(step, Clamp):
        return [step.lo, step.hi]
    if isinstance(step, Chain):
        return _clamp_bounds(step.first) + _clamp_bounds(step.second)
    if isinstance(step, Compose):
        return [b for p in step.parts for b in _clamp_bounds(p)]
    if isinstance(step, (Parallel, Repeat, Iterate)):
        return _clamp_bounds(step.part)
    return []


def _record_extremes(m: Any) -> list:
    dom = m.records
    if isinstance(dom, RealBox):
        lo, hi = float(dom.lo), float(dom.hi)
        corners = []
        for bits in range(2 ** min(dom.dim, 4)):  # the all-hi corner first (preferred on ties of magnitude)
            corners.append(np.array([lo if (bits >> j) & 1 else hi for j in range(dom.dim)]))
        return corners
    vals = [float(v) for v in dom.extremes()]
    lo, hi = _domain_bounds(dom)
    for b in _clamp_bounds(m.steps):  # clamp bounds inside the domain (e.g. an unbounded domain clamped)
        if lo <= Fraction(b) <= hi and float(b) not in vals:
            vals.append(float(b))
    if lo < 0 < hi and 0.0 not in vals:
        vals.append(0.0)
    return vals


def _float_toward(value: Fraction, target: Fraction) -> Fraction:
    """The float nearest ``value`` on the side of ``target`` (so a distance never grows by rounding), exactly."""
    f = float(value)
    if Fraction(f) != value and (Fraction(f) - value) * (target - value) < 0:
        f = math.nextafter(f, math.inf if target > value else -math.inf)
    return Fraction(f)


def _l1_rounding_pair(delta: Fraction, g: Fraction, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Real vectors at L1 distance <= ``delta`` (as the floats passed) whose grid-rounded centres are
    ``ceil(delta/g) + dim - 1`` grid steps apart: the pair attaining the grid-rounding bound."""
    K = delta / g
    frac = K - math.floor(K)
    eta = Fraction(1, 2 ** max(4, (4 * dim).bit_length() + 2))  # in grid steps; a small binary fraction
    if frac:
        while (dim - 1) * eta >= frac:
            eta /= 2
    a = (Fraction(1, 2) - frac + (dim - 1) * eta) if frac else Fraction(0)
    x = [a * g] + [(Fraction(1, 2) - eta) * g] * (dim - 1)
    x2 = [Fraction(float((a + K - (dim - 1) * eta) * g))] + [Fraction(float(Fraction(1, 2) * g))] * (dim - 1)
    x = [_float_toward(v, w) for v, w in zip(x, x2)]
    return np.array([float(v) for v in x]), np.array([float(v) for v in x2])


def extreme_pairs(m: Any) -> list[tuple[Any, Any]]:
    """Neighbouring pairs built from the domain's extreme records, each accepted by the mechanism's
    own ``validate_pair``; the first is the default ``example_pair``."""
    pairs: list[tuple[Any, Any]] = []
    from .grouping import AddRemoveUser, GroupBy, user_level_pairs

    if any(type(n) is GroupBy for n in walk_nodes(m.steps)):
        pairs.extend(user_level_pairs(m))  # keys of the encoding universe: where selection's δ and ε are attained
    if isinstance(m.relation, AddRemoveUser):
        pass
    elif m.shape == "record":
        # every local randomizer's law is invariant under a joint relabelling of the categories, so
        # every ordered pair of distinct records is extreme; a few, the first two categories first
        cats = m.space.record_categories
        ends = list(dict.fromkeys((cats[0], cats[1], cats[-1])))
        pairs.extend((a, b) for a in ends for b in ends if a != b)
    elif isinstance(m.relation, BoundedChange):
        dim = int(m.dim)
        delta = Fraction(m.relation.sensitivity)
        x = np.zeros(dim)
        if isinstance(m.records, IntegerRange):
            # integer coordinates: the largest whole step within the sensitivity (>= 1, refused below),
            # from a point of the domain, towards its inside
            lo, hi = int(m.records.lo), int(m.records.hi)
            x[:] = min(max(0, lo), hi)
            delta = Fraction(math.floor(delta))
            if x[0] + delta > hi:
                delta = -delta
        y = x.copy()
        if m.relation.norm == "linf":
            y[:] = x + float(delta)
        else:
            y[0] = x[0] + float(delta)
        grids = {Fraction(leaf.granularity) for leaf in measurement_leaves(m.steps)}
        if m.relation.norm == "l1" and m.space.quantum is None and len(grids) == 1:
            pairs.append(_l1_rounding_pair(delta, grids.pop(), dim))  # rounding attains its bound here
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


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
