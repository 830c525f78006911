"""Exact privacy of a mechanism declared from parts, by brute force: a rigorous LOWER bound on the truth.

Test support for the soundness property tests (``tests/test_soundness_property.py``): the oracle a
PROVED verdict is checked against. It shares no code with the library's law
(``dpharness.mechanisms.parts._law``) or prover (``dpharness.proofs.parts``): it reads the public
fields of the step structure (``lo``, ``hi``, ``j``, ``edges``, ``scale``, ``granularity``, ``part``,
``by``, ``keys``, ...) and is its own small interpreter of what the sampler executes
(``mechanisms/parts/``):

* records are exact binary floats, read as Fractions; ``clamp`` clamps every column; ``column(j)``
  keeps column j; ``count`` is the number of records; ``sum``, ``sum_squares``, ``sum_products(i, j)``
  are exact sums; ``histogram(edges=e)`` counts records in ``[e_k, e_{k+1})`` (the last bin closed,
  records outside every bin dropped), ``histogram(categories=c)`` counts exact equality;
* ``parallel(part, by, keys)`` runs ``part`` on the records whose column ``by`` equals each key, in
  the order of ``keys``; ``compose`` concatenates its parts' outputs; ``post`` is post-processing;
* each noise leaf rounds each coordinate of its input to its grid, ``c = floor(v/g + 1/2)``, and adds
  independent integer noise: discrete Laplace ``P(k) ∝ exp(−|k|/t)``, ``t = scale/g``, or discrete
  Gaussian ``P(y) ∝ exp(−y²/(2τ²))``, ``τ = sigma/g``.

So on a data set D the output law is the product over coordinates of a symmetric integer noise
centred at ``c_i(D)``, and for a neighbouring pair (D, D') every privacy quantity depends only on the
shifts ``s_i = |c_i(D) − c_i(D')|`` (a translation, and a reflection of any coordinate, maps the pair
to itself since each noise is symmetric; in particular both directions, D vs D' and D' vs D, have
the same loss distribution). :func:`exact_truth` enumerates the neighbouring pairs of every data set
of size 0..3 (fewer when the record grid is large) whose records come from a small grid of values
(the domain's extremes, clamp bounds, partition keys, bin edges, categories, 0 and one value off
every dyadic grid), collects the distinct shift vectors, and evaluates:

* pure ε: ``max Σ_i s_i/t_i`` over Laplace coordinates (exact, Fractions); ``inf`` when a Gaussian
  coordinate has ``s_i > 0``;
* Rényi ``D_α`` (integer α): the sum over coordinates of each coordinate's exact divergence
  (discrete Laplace: a closed-form geometric sum; discrete Gaussian at integer shift and integer α:
  ``α s²/(2τ²)`` exactly, by completing the square, the shifted theta sum being the unshifted one);
* δ(ε) = ``E_D[(1 − e^{ε − L})_+]`` (L the privacy loss) for the product law, from each coordinate's
  privacy-loss distribution convolved on a grid of width h: every loss is rounded DOWN to the grid
  and every mass is a lower bound (Laplace masses exact; Gaussian masses over a normaliser bounded
  above by Poisson summation, the far tails dropped, blocks of many points counted at their smallest
  point), so the result never exceeds the truth; at most ``_MAX_COORDS`` coordinates with the
  largest shifts are kept (dropping coordinates is post-processing, so it only lowers δ).

Every quantity is a maximum over a SUBSET of neighbouring pairs of a lower bound, hence a lower
bound on the mechanism's true privacy parameter. Floating point: every mass is multiplied by
``1 − 1e-12`` and every loss lowered by ``1e-12·|L| + 1e-15`` before rounding down, which covers
the float rounding of the closed forms (relative errors of order 1e-14); a caller comparing with a
claim should still allow a relative margin (the tests flag ``δ_lower > δ·(1 + 1e-9) + 1e-15``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness import AddRemove, Finite, IntegerRange, RealBox, RealInterval, Substitute
from dpharness.mechanisms import parts as dp  # the step classes (public names of the structure)

__all__ = ["Noise", "ExactTruth", "exact_truth", "leaf_centres", "record_grid"]

_MAX_COORDS = 10  # coordinates kept per shift vector for δ (the largest shifts)
_MAX_ROWS_DELTA = 12  # shift vectors evaluated for δ (the Pareto-maximal ones, largest first)
_MAX_DATASETS = 1500  # data sets evaluated (the maximum size is lowered to stay below)
_BINS = 2**14  # target number of loss bins for δ (the bin width h adapts, at most _H_MAX)
_H_MIN = 2.0**-12
_MASS_SAFETY = 1 - 1e-12  # every float mass is scaled by this (covers float rounding of the closed forms)


# --------------------------------------------------------------------------- the interpreter


@dataclass(frozen=True)
class Noise:
    """One output coordinate's noise: ``kind`` "laplace" (``param`` = t = scale/g) or "gaussian"
    (``param`` = τ² = (sigma/g)²), exact."""

    kind: str
    param: Fraction

    def describe(self) -> str:
        return f"{self.kind}({'t' if self.kind == 'laplace' else 'τ²'}={self.param})"


def _fr(x: Any) -> Fraction:
    return Fraction(x.item() if isinstance(x, np.generic) else x)


def _is_transformation(step: Any) -> bool:
    return isinstance(step, (dp.Clamp, dp.Column, dp.Count, dp.Sum, dp.SumSquares, dp.SumProducts, dp.Histogram))


def _transform(t: Any, value: Any) -> Any:
    """A transformation applied exactly to a list of records (tuples of Fractions)."""
    if isinstance(t, dp.Clamp):
        lo, hi = Fraction(float(t.lo)), Fraction(float(t.hi))  # the sampler clamps with float bounds
        return [tuple(min(max(x, lo), hi) for x in r) for r in value]
    if isinstance(t, dp.Column):
        return [(r[int(t.j)],) for r in value]
    if isinstance(t, dp.Count):
        return Fraction(len(value))
    if isinstance(t, dp.Sum):
        return sum((r[0] for r in value), Fraction(0))
    if isinstance(t, dp.SumSquares):
        return sum((r[0] * r[0] for r in value), Fraction(0))
    if isinstance(t, dp.SumProducts):
        return sum((r[int(t.i)] * r[int(t.j)] for r in value), Fraction(0))
    if isinstance(t, dp.Histogram):
        if t.edges is not None:
            e = [Fraction(float(x)) for x in t.edges]  # the sampler compares records with float edges
            counts = [0] * (len(e) - 1)
            for (x,) in value:
                if x == e[-1]:
                    counts[-1] += 1
                    continue
                for k in range(len(e) - 1):
                    if e[k] <= x < e[k + 1]:
                        counts[k] += 1
                        break
            return tuple(Fraction(c) for c in counts)
        cats = [Fraction(float(c)) for c in t.categories]
        return tuple(Fraction(sum(1 for (x,) in value if x == c)) for c in cats)
    raise TypeError(f"not a transformation: {t!r}")


def _post_only(step: Any) -> bool:
    if isinstance(step, dp.Post):
        return True
    return isinstance(step, dp.Chain) and _post_only(step.first) and _post_only(step.second)


def _run(step: Any, value: Any, posts_are_injective: bool) -> list[tuple[Noise, int]]:
    """The (noise, centre) of every output coordinate of the randomized ``step`` on ``value``."""
    if isinstance(step, (dp.GridLaplace, dp.GridGaussian)):
        if isinstance(value, list):
            raise TypeError("noise applied to records; aggregate first")
        g = _fr(step.granularity)
        coords = list(value) if isinstance(value, tuple) else [value]
        if isinstance(step, dp.GridLaplace):
            noise = Noise("laplace", _fr(step.scale) / g)
        else:
            noise = Noise("gaussian", (_fr(step.sigma) / g) ** 2)
        return [(noise, math.floor(Fraction(v) / g + Fraction(1, 2))) for v in coords]
    if isinstance(step, dp.Chain):
        if _is_transformation(step.first):
            return _run(step.second, _transform(step.first, value), posts_are_injective)
        out = _run(step.first, value, posts_are_injective)
        if not _post_only(step.second):
            raise TypeError(f"only post-processing may follow noise: {step.second!r}")
        if not posts_are_injective:
            raise ValueError(
                "the structure post-processes its outputs: the truth of the outputs before post-processing is "
                "the truth of the mechanism only for an injective post; pass posts_are_injective=True if so"
            )
        return out
    if isinstance(step, dp.Compose):
        return [c for p in step.parts for c in _run(p, value, posts_are_injective)]
    if isinstance(step, dp.Parallel):
        by = int(step.by)
        out = []
        for key in step.keys:
            k = Fraction(float(key))  # the sampler matches records to keys as floats
            out.extend(_run(step.part, [r for r in value if r[by] == k], posts_are_injective))
        return out
    if isinstance(step, dp.Post):
        raise TypeError("dp.post must follow noise")
    raise TypeError(f"unsupported step for the brute force: {step!r}")


def leaf_centres(m: Any, data: Any, *, posts_are_injective: bool = False) -> list[tuple[Noise, int]]:
    """The (noise, rounded centre) of every output coordinate of ``m`` on ``data`` (a sequence of
    records; a record is a number, or a sequence of numbers for ``RealBox`` records), in output order."""
    recs = []
    for r in data:
        r = np.atleast_1d(np.asarray(r, dtype=float))
        recs.append(tuple(Fraction(float(x)) for x in r))
    return _run(m.steps, recs, posts_are_injective)


# --------------------------------------------------------------------------- the record grid and the pairs


def _structure_values(step: Any) -> list[Fraction]:
    """Clamp bounds, partition keys, bin edges and categories of the structure (values where the
    mechanism's behaviour changes)."""
    if isinstance(step, dp.Clamp):
        return [Fraction(float(step.lo)), Fraction(float(step.hi))]
    if isinstance(step, dp.Histogram):
        vals = step.edges if step.edges is not None else step.categories
        return [Fraction(float(v)) for v in vals]
    if isinstance(step, dp.Chain):
        return _structure_values(step.first) + _structure_values(step.second)
    if isinstance(step, dp.Compose):
        return [v for p in step.parts for v in _structure_values(p)]
    if isinstance(step, dp.Parallel):
        return [Fraction(float(k)) for k in step.keys] + _structure_values(step.part)
    return []


def _dyadic_inside(lo: Fraction, hi: Fraction) -> Fraction:
    """A value strictly inside [lo, hi], 3/8 of the way (off the grids 1, 1/2 and 1/4 when lo, hi are
    multiples of 1 and 1/4 apart or more), as an exact float."""
    return Fraction(float(lo + (hi - lo) * Fraction(3, 8)))


def record_grid(records: Any, steps: Any = None) -> list[list[Fraction]]:
    """Candidate values for each column of a record: the domain's finite extremes, the structure's
    clamp bounds, keys, edges and categories inside the domain, 0 when inside, and one value off the
    dyadic grids. ``IntegerRange`` of at most 6 integers: every integer; ``Finite``: its values."""
    if isinstance(records, Finite):
        return [sorted({Fraction(float(v)) for v in records.values})]
    if isinstance(records, IntegerRange):
        lo, hi = int(records.lo), int(records.hi)
        if hi - lo <= 5:
            return [[Fraction(v) for v in range(lo, hi + 1)]]
        vals = {Fraction(lo), Fraction(hi), Fraction(lo + 1), Fraction(hi - 1)}
        vals |= {
            v for v in (_structure_values(steps) if steps is not None else []) if lo <= v <= hi and v.denominator == 1
        }
        if lo <= 0 <= hi:
            vals.add(Fraction(0))
        return [sorted(vals)]
    if isinstance(records, RealBox):
        lo, hi, dim = Fraction(float(records.lo)), Fraction(float(records.hi)), int(records.dim)
    elif isinstance(records, RealInterval):
        lo = Fraction(float(records.lo)) if math.isfinite(records.lo) else None
        hi = Fraction(float(records.hi)) if math.isfinite(records.hi) else None
        dim = 1
    else:
        raise TypeError(f"unsupported record domain {records!r}")
    inner = [
        v
        for v in (_structure_values(steps) if steps is not None else [])
        if (lo is None or v >= lo) and (hi is None or v <= hi)
    ]
    vals = set(inner)
    a = lo if lo is not None else (min(inner) - 1 if inner else Fraction(-1))
    b = hi if hi is not None else (max(inner) + 1 if inner else Fraction(1))
    vals |= {a, b, _dyadic_inside(a, b)}
    if a <= 0 <= b:
        vals.add(Fraction(0))
    return [sorted(vals)] * dim


@dataclass
class ExactTruth:
    """The distinct shift vectors of the enumerated neighbouring pairs and the privacy they imply
    (lower bounds on the mechanism's true parameters; see the module docstring).

    ``coords``: each output coordinate's noise; ``shifts``: one row per distinct vector of
    ``|c_i(D) − c_i(D')|`` (int64); ``examples``: one (D, D') per row (tuples of records);
    ``pairs``: number of neighbouring pairs enumerated; ``datasets``: number of data sets; ``max_size``."""

    coords: tuple
    shifts: np.ndarray
    examples: list
    pairs: int
    datasets: int
    max_size: int
    _pld: dict = field(default_factory=dict, repr=False)
    _rows: list | None = field(default=None, repr=False)

    # ---- pure ε
    def _row_pure(self, row: np.ndarray) -> Fraction | float:
        total = Fraction(0)
        for noise, s in zip(self.coords, row.tolist()):
            if s == 0:
                continue
            if noise.kind == "gaussian":
                return math.inf
            total += Fraction(s) / noise.param
        return total

    def pure_epsilon(self) -> Fraction | float:
        """max over the pairs of sup_y ln P_D(y)/P_D'(y) = Σ s_i/t_i (exact; inf with a shifted Gaussian)."""
        best: Fraction | float = Fraction(0)
        for row in self.shifts:
            v = self._row_pure(row)
            if v > best:
                best = v
        return best

    def pure_witness(self) -> tuple:
        """The (D, D') attaining :meth:`pure_epsilon`."""
        vals = [self._row_pure(r) for r in self.shifts]
        i = max(range(len(vals)), key=lambda k: vals[k]) if vals else None
        return self.examples[i] if i is not None else None

    # ---- Rényi
    def renyi(self, alpha: Any) -> float:
        """max over the pairs of D_α(P_D || P_D') (integer α >= 2), a sum over coordinates."""
        a = Fraction(alpha)
        if a.denominator != 1 or a < 2:
            raise ValueError(f"alpha={alpha!r}: the brute force computes integer orders >= 2")
        a = int(a)
        cache: dict = {}
        best = 0.0
        for row in self.shifts:
            total = 0.0
            for noise, s in zip(self.coords, row.tolist()):
                if s == 0:
                    continue
                key = (noise, s)
                if key not in cache:
                    cache[key] = _renyi_coordinate(noise, s, a)
                total += cache[key]
            best = max(best, total)
        return best

    # ---- δ(ε)
    def delta(self, eps: Any) -> float:
        """max over (a subset of) the pairs of a lower bound on δ(ε) = E_D[(1 − e^{ε − L})_+]."""
        e = float(eps)
        best = 0.0
        for k in self._delta_rows():
            if k not in self._pld:
                self._pld[k] = _product_pld(self.coords, self.shifts[k])
            idx0, h, mass = self._pld[k]
            if mass.size == 0:
                continue
            losses = (idx0 + np.arange(mass.size)) * h
            w = -np.expm1(np.minimum(e - losses, 0.0))
            best = max(best, float(np.dot(mass, w)))
        return best

    def delta_witness(self, eps: Any) -> tuple:
        """The (D, D') attaining :meth:`delta` at ``eps``."""
        e = float(eps)
        best, which = -1.0, None
        for k in self._delta_rows():
            idx0, h, mass = self._pld.get(k) or _product_pld(self.coords, self.shifts[k])
            losses = (idx0 + np.arange(mass.size)) * h
            d = float(np.dot(mass, -np.expm1(np.minimum(e - losses, 0.0)))) if mass.size else 0.0
            if d > best:
                best, which = d, k
        return self.examples[which] if which is not None else None

    def _delta_rows(self) -> list[int]:
        """The rows to evaluate: canonical (shifts sorted within coordinates of the same noise),
        Pareto-maximal (a row below another in every coordinate dropped), the largest first. Any
        subset is sound (the maximum over fewer pairs is still a lower bound)."""
        if self._rows is None:
            groups: dict = {}
            for i, noise in enumerate(self.coords):
                groups.setdefault(noise, []).append(i)
            order = [idx for idx in groups.values()]
            canon = (
                np.concatenate([-np.sort(-self.shifts[:, idx], axis=1) for idx in order], axis=1)
                if self.shifts.size
                else self.shifts
            )
            _, first = np.unique(canon, axis=0, return_index=True)
            first = sorted(first.tolist())
            keep = []
            for i in first:
                ci = canon[i]
                dominated = any(j != i and np.all(canon[j] >= ci) and np.any(canon[j] > ci) for j in first)
                if not dominated and np.any(ci > 0):
                    keep.append(i)
            score = {i: _score(self.coords, self.shifts[i]) for i in keep}
            keep.sort(key=lambda i: -score[i])
            self._rows = keep[:_MAX_ROWS_DELTA]
        return self._rows


def _score(coords: tuple, row: np.ndarray) -> float:
    """A rough size of a shift vector's privacy loss (Laplace Σ s/t plus the Gaussian √(2ρ)), to
    order rows."""
    lap = sum(s / float(n.param) for n, s in zip(coords, row.tolist()) if n.kind == "laplace")
    rho = sum(s * s / (2 * float(n.param)) for n, s in zip(coords, row.tolist()) if n.kind == "gaussian")
    return lap + math.sqrt(2 * rho)


def exact_truth(
    m: Any, *, values: list | None = None, max_size: int | None = None, posts_are_injective: bool = False
) -> ExactTruth:
    """Enumerate neighbouring pairs of small data sets for the mechanism ``m`` (its ``records``,
    ``relation``, ``size`` and ``steps``) and collect the distinct shift vectors of their rounded
    centres. ``values``: the candidate values per column (default :func:`record_grid`); ``max_size``:
    the largest data set (default 3, lowered while there are more than 1500 data sets);
    ``posts_are_injective``: every ``dp.post`` in the structure is an injective function (then the
    truth before post-processing is the truth after it)."""
    cols = values if values is not None else record_grid(m.records, m.steps)
    if isinstance(m.records, RealBox) and len(cols) == 1:
        cols = cols * int(m.records.dim)
    records = [tuple(r) for r in itertools.product(*cols)]
    R = len(records)
    fixed = getattr(m, "size", None)
    if max_size is None:
        max_size = 3
        while max_size > 1 and sum(math.comb(R + n - 1, n) for n in range(max_size + 1)) > _MAX_DATASETS:
            max_size -= 1
    if isinstance(m.relation, AddRemove):
        bases = [b for n in range(max_size) for b in itertools.combinations_with_replacement(range(R), n)]
        raw = [(b, tuple(sorted(b + (r,)))) for b in bases for r in range(R)]
    elif isinstance(m.relation, Substitute):
        sizes = [fixed] if fixed is not None else list(range(1, max_size + 1))
        bases = [b for n in sizes for b in itertools.combinations_with_replacement(range(R), n - 1)]
        raw = [
            (tuple(sorted(b + (a,))), tuple(sorted(b + (c,)))) for b in bases for a in range(R) for c in range(a + 1, R)
        ]
    else:
        raise TypeError(f"relation={m.relation!r}: the brute force enumerates AddRemove and Substitute pairs")
    index: dict = {}
    for d, d2 in raw:
        for x in (d, d2):
            if x not in index:
                index[x] = len(index)
    table = []
    coords = None
    for x in index:
        out = _run(m.steps, [records[i] for i in x], posts_are_injective)
        layout = tuple(n for n, _ in out)
        if coords is None:
            coords = layout
        elif layout != coords:
            raise AssertionError("the output layout depends on the data")
        table.append([c for _, c in out])
    C = np.array(table, dtype=object if any(abs(c) >= 2**61 for row in table for c in row) else np.int64)
    i1 = np.array([index[d] for d, _ in raw], dtype=np.int64)
    i2 = np.array([index[d2] for _, d2 in raw], dtype=np.int64)
    S = np.abs(C[i1] - C[i2])
    rows, first = np.unique(S.astype(np.int64), axis=0, return_index=True)
    examples = [([records[i] for i in raw[k][0]], [records[i] for i in raw[k][1]]) for k in first.tolist()]
    return ExactTruth(
        coords=coords or (), shifts=rows, examples=examples, pairs=len(raw), datasets=len(index), max_size=max_size
    )


# --------------------------------------------------------------------------- per-coordinate divergences


def _renyi_coordinate(noise: Noise, s: int, alpha: int) -> float:
    """D_α(N + 0 || N + s) for one coordinate (exact closed forms, evaluated in log space)."""
    lam = alpha - 1
    if noise.kind == "gaussian":
        # Σ_y P(y)^α P(y − s)^{1−α} = e^{α(α−1)s²/(2τ²)} Σ_y N(y − (1−α)s) / Z, and (1−α)s is an integer:
        # the shifted theta sum equals Z, so D_α = α s²/(2τ²) exactly (integer α, integer s)
        return alpha * s * s / (2 * float(noise.param))
    a = 1 / float(noise.param)  # 1/t
    log1p_r = math.log1p(math.exp(-a))
    terms = [
        -log1p_r + lam * s * a,  # k <= 0: P = 1/(1+r), L = s/t
        -s * a - log1p_r - lam * s * a,
    ]  # k >= s: P = r^s/(1+r), L = −s/t
    if s >= 2:  # 0 < k < s: P = (1−r)/(1+r) r^k, L = (s − 2k)/t
        b = (1 + 2 * lam) * a
        log_a = math.log(-math.expm1(-a)) - log1p_r
        terms.append(log_a + lam * s * a - b + math.log(-math.expm1(-(s - 1) * b)) - math.log(-math.expm1(-b)))
    top = max(terms)
    return (top + math.log(sum(math.exp(t - top) for t in terms))) / lam


def _gaussian_log_z_upper(tau2: float) -> float:
    """ln of an upper bound on Σ_y e^{−y²/(2τ²)} = √(2πτ²)(1 + 2Σ_{k>=1} e^{−2π²τ²k²}) (Poisson summation)."""
    series = sum(math.exp(-2 * math.pi**2 * tau2 * k * k) for k in range(1, 40))
    return 0.5 * math.log(2 * math.pi * tau2) + math.log1p(2 * series) + 1e-12


def _floor_index(losses: np.ndarray, h: float) -> np.ndarray:
    """floor(L/h) after lowering L by its float error (so index·h <= the exact loss)."""
    lowered = losses - (np.abs(losses) * 1e-12 + 1e-15)
    return np.floor(lowered / h).astype(np.int64)


def _laplace_pld(t: Fraction, s: int, h: float) -> tuple[np.ndarray, np.ndarray]:
    """(bin indices, masses) of the loss L = (|k − s| − |k|)/t, k ~ discrete Laplace(t), rounded down."""
    a = float(1 / t)
    log1p_r = math.log1p(math.exp(-a))
    idx = [_floor_index(np.array([s * a]), h), _floor_index(np.array([-s * a]), h)]
    logm = [np.array([-log1p_r]), np.array([-s * a - log1p_r])]
    if s >= 2 and s - 1 <= 200_000:
        k = np.arange(1, s, dtype=np.float64)
        idx.append(_floor_index((s - 2 * k) * a, h))
        logm.append(math.log(-math.expm1(-a)) - log1p_r - k * a)
    elif s >= 2:
        # blocks of consecutive k whose loss lies in one bin [b h, (b+1) h): k in (K(b+1), K(b)] with
        # K(b) = floor((s − b h t)/2); mass A r^{k1} (1 − r^n)/(1 − r); credited to bin b − 1 (safety
        # against a float boundary error)
        tf = float(t)
        b_hi = math.floor(s * a / h) + 1
        b_lo = math.floor(-s * a / h) - 1
        bins = np.arange(b_lo, b_hi + 1, dtype=np.float64)
        K = np.floor((s - bins * h * tf) / 2)
        K_next = np.floor((s - (bins + 1) * h * tf) / 2)
        k2 = np.minimum(K, s - 1)
        k1 = np.maximum(K_next + 1, 1)
        ok = k2 >= k1
        n = (k2 - k1 + 1)[ok]
        idx.append(bins[ok].astype(np.int64) - 1)
        logm.append(-log1p_r - k1[ok] * a + np.log(-np.expm1(-n * a)))
    return np.concatenate(idx), np.exp(np.concatenate(logm)) * _MASS_SAFETY


def _gaussian_pld(tau2: Fraction, s: int, h: float) -> tuple[np.ndarray, np.ndarray]:
    """(bin indices, mass lower bounds) of the loss L = (s² − 2sy)/(2τ²), y ~ discrete Gaussian(τ²),
    |y| <= M = s + 9τ + 2 (the rest dropped), rounded down."""
    t2 = float(tau2)
    tau = math.sqrt(t2)
    log_z = _gaussian_log_z_upper(t2)
    M = s + math.ceil(9 * tau) + 2
    if 2 * M + 1 <= 400_000:
        y = np.arange(-M, M + 1, dtype=np.float64)
        losses = (s * s - 2 * s * y) / (2 * t2)
        return _floor_index(losses, h), np.exp(-y * y / (2 * t2) - log_z) * _MASS_SAFETY
    # blocks: y with L in [b h, (b+1) h) are (Y(b+1), Y(b)], Y(b) = (s² − 2τ² b h)/(2s); mass at least
    # (count) × (the smaller end value); credited to bin b − 1
    b_hi = math.floor((s * s + 2 * s * M) / (2 * t2) / h) + 1
    b_lo = math.floor((s * s - 2 * s * M) / (2 * t2) / h) - 1
    bins = np.arange(b_lo, b_hi + 1, dtype=np.float64)
    Y = lambda b: (float(s) * s - 2 * t2 * b * h) / (2 * s)  # noqa: E731
    y_hi = np.minimum(np.floor(Y(bins)), M)
    y_lo = np.maximum(np.floor(Y(bins + 1)) + 1, -M)
    ok = y_hi >= y_lo
    y_hi, y_lo, b = y_hi[ok], y_lo[ok], bins[ok]
    far = np.maximum(np.abs(y_hi), np.abs(y_lo))
    logm = np.log(y_hi - y_lo + 1) - far * far / (2 * t2) - log_z
    return b.astype(np.int64) - 1, np.exp(logm) * _MASS_SAFETY


def _coordinate_range(noise: Noise, s: int) -> float:
    if noise.kind == "laplace":
        return 2 * s / float(noise.param)
    tau = math.sqrt(float(noise.param))
    return 2 * s * (s + 9 * tau + 2) / float(noise.param)


def _product_pld(coords: tuple, row: np.ndarray) -> tuple[int, float, np.ndarray]:
    """(first bin index, h, masses) of the privacy-loss distribution of the product law for one shift
    vector: every loss rounded down to the grid h·Z, every mass a lower bound."""
    items = [(n, int(s)) for n, s in zip(coords, row.tolist()) if s > 0]
    items.sort(key=lambda it: -_coordinate_range(*it))
    items = items[:_MAX_COORDS]  # the rest marginalised out: δ only decreases
    total = sum(_coordinate_range(n, s) for n, s in items)
    h = max(_H_MIN, 2.0 ** math.ceil(math.log2(max(total, 1e-300) / _BINS)))
    while True:
        parts = []
        for noise, s in items:
            idx, mass = (_laplace_pld if noise.kind == "laplace" else _gaussian_pld)(noise.param, s, h)
            keep = mass > 0
            idx, mass = idx[keep], mass[keep]
            lo = int(idx.min())
            dense = np.bincount(idx - lo, weights=mass)
            parts.append((lo, dense, int(np.count_nonzero(dense))))
        cost = 0
        size = 1
        for _, dense, nnz in parts:
            cost += size * min(nnz, dense.size)
            size += dense.size
        if cost <= 3 * 10**7 or h >= 1:
            break
        h *= 2
    acc, acc_lo = np.ones(1), 0
    for lo, dense, nnz in parts:
        if nnz <= 64:
            out = np.zeros(acc.size + dense.size - 1)
            for j in np.flatnonzero(dense):
                out[j : j + acc.size] += acc * dense[j]
            acc = out
        else:
            acc = np.convolve(acc, dense)
        acc_lo += lo
    return acc_lo, h, acc
