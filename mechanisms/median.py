"""The exponential-mechanism median over the integer grid ``0..2^bits - 1``: the exponential
mechanism (McSherry & Talwar 2007, "Mechanism design via differential privacy", FOCS) with the
rank score of the median, sampled by intervals: between consecutive data points the score is
constant, so the runs of equal score are drawn together with weight ``points * exp(beta * score)``,
exactly (:func:`dpharness.mechanisms._exact.categorical_counts`: no float probability, so no run is
dropped by underflow), and then a point uniformly inside them. The cost is O(n log n) in the number
of records and independent of ``bits`` (``bits = 32`` never enumerates 2^32 values).

Score ``u(v) = -| #{x > v} - #{x < v} |``: one added or removed record moves it by at most 1,
one substituted record by at most 2. The mechanism is ``2·beta·Δ``-DP.

The gallery twin :class:`MedianSubstituteBug` uses substitution neighbours but calibrates beta
for sensitivity 1 (``beta = ε/2``): true ε is 2ε."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    AddRemove,
    Claim,
    FunctionLaw,
    InputSpec,
    IntegerRange,
    Mechanism,
    PureDP,
    Relation,
    Substitute,
    exact,
)
from dpharness.errors import ParameterError
from dpharness.registry import register

from ._exact import categorical_counts, exact_rational
from ._noise import ratio_down

__all__ = ["ExponentialMedian", "MedianSubstituteBug", "median_segments"]

_MAX_BITS = 52
_ENUMERATE_BITS = 12  # up to 2**12 grid points the law lists its support


def median_segments(data: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, lengths, scores)`` of the maximal runs of the grid ``0..2^bits-1`` on which the
    median score ``-| #{x > v} - #{x < v} |`` is constant: each distinct data value is a run of
    length 1 and each non-empty gap between (and around) them is one run. Sorted by start."""
    top = (1 << bits) - 1
    x = np.asarray(data, dtype=np.int64).ravel()
    n = x.size
    if n == 0:
        return np.array([0], np.int64), np.array([top + 1], np.int64), np.array([0], np.int64)
    w, c = np.unique(x, return_counts=True)
    below = np.cumsum(c) - c  # #{x < w_j}
    starts = [w]
    lengths = [np.ones_like(w)]
    scores = [-np.abs(n - 2 * below - c)]
    gap_len = w[1:] - w[:-1] - 1
    keep = gap_len > 0
    starts.append((w[:-1] + 1)[keep])
    lengths.append(gap_len[keep])
    scores.append(-np.abs(n - 2 * (below[:-1] + c[:-1]))[keep])
    if w[0] > 0:
        starts.append(np.array([0]))
        lengths.append(np.array([w[0]]))
        scores.append(np.array([-n]))
    if w[-1] < top:
        starts.append(np.array([w[-1] + 1]))
        lengths.append(np.array([top - w[-1]]))
        scores.append(np.array([-n]))
    s, ln, sc = (np.concatenate(a).astype(np.int64) for a in (starts, lengths, scores))
    order = np.argsort(s, kind="stable")
    return s[order], ln[order], sc[order]


@register
@dataclass(frozen=True, kw_only=True)
class ExponentialMedian(Mechanism):
    """The exponential-mechanism median of integer records on the grid ``0..2^bits - 1``.

    pmf on a data set ``x`` (n records), output ``v`` in ``{0..2^bits - 1}``::

        P(v | x) = exp(beta * u(v)) / Z,   u(v) = -| sum_i sign(x_i - v) |,
        Z = sum_v exp(beta * u(v)) = sum over constant-score runs of length * exp(beta * score)

    Neighbours: ``relation`` (a field): ``AddRemove()`` (score sensitivity Δ = 1) or
    ``Substitute()`` (Δ = 2).
    Claim: ε-DP with ε = 2·beta·Δ (defaults beta = 1/2 with add/remove: ε = 1). Use
    :meth:`calibrated` to get beta = ε/(2Δ) for either relation."""

    name = "median"
    source = "seed: exponential-mechanism median (McSherry & Talwar 2007), sampled by intervals"

    bits: int = 8
    beta: Any = Fraction(1, 2)
    relation: Relation = AddRemove()
    claim: Claim = PureDP(1)

    def _check(self) -> None:
        _v.integer("bits", self.bits, minimum=2, maximum=_MAX_BITS)
        _v.nonnegative("beta", self.beta)
        if not isinstance(self.relation, (AddRemove, Substitute)):
            raise ParameterError(f"relation={self.relation!r} is not supported; pass AddRemove() or Substitute().")

    @property
    def sensitivity(self) -> int:
        """Sensitivity of the score under the relation: 1 for add/remove, 2 for substitution."""
        return 1 if isinstance(self.relation, AddRemove) else 2

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, bits: int = 8, relation: Relation = AddRemove()) -> "ExponentialMedian":
        """beta = ε / (2Δ) with Δ the score sensitivity under ``relation``; claims ε-DP."""
        claim = PureDP(epsilon)
        delta = 1 if isinstance(relation, AddRemove) else 2
        return cls(bits=bits, beta=ratio_down(claim.epsilon, 2 * delta), relation=relation, claim=claim)

    @property
    def top(self) -> int:
        return (1 << self.bits) - 1

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(IntegerRange(0, self.top), self.relation, "dataset")

    def _log_weights(self, data) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        starts, lengths, scores = median_segments(data, self.bits)
        logw = np.log(lengths.astype(float)) + float(self.beta) * scores
        return starts, lengths, scores, logw

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        # exact: a score group s (all runs with that score, T_s grid points in all) with probability
        # T_s e^{β s} / Z (β read exactly, categorical_counts), then one of its T_s points uniformly
        # (numpy's bounded integers are unbiased): P(v) = e^{β u(v)} / Z at every grid point, however
        # small (a float cdf gave the runs below 2^-1074 of the top probability 0 on one neighbour and
        # a positive probability on the other)
        starts, lengths, scores = median_segments(data, self.bits)
        order = np.lexsort((starts, -scores))  # by score, highest first, then by start
        starts, lengths, scores = starts[order], lengths[order], scores[order]
        first = np.flatnonzero(np.r_[True, scores[1:] != scores[:-1]])
        totals = np.add.reduceat(lengths, first)
        beta = exact_rational("beta", self.beta)
        group = categorical_counts(totals, scores[0] - scores[first], size, rng, unit=beta)
        pos = (np.cumsum(totals) - totals)[group] + rng.integers(0, totals[group], size=group.shape, dtype=np.int64)
        ends = np.cumsum(lengths)
        seg = np.searchsorted(ends, pos, side="right")
        return starts[seg] + (pos - (ends[seg] - lengths[seg]))

    def _law(self, data: Any) -> FunctionLaw:
        x = np.sort(np.asarray(data, dtype=np.int64).ravel())
        starts, lengths, scores, logw = self._log_weights(x)
        top_w = logw.max()
        log_z = top_w + math.log(math.fsum(np.exp(logw - top_w)))
        beta = float(self.beta)
        top = self.top

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            v = np.asarray(outputs, dtype=float).ravel()
            ok = np.isfinite(v) & (v >= 0) & (v <= top) & (np.mod(v, 1) == 0)
            vi = np.where(ok, v, 0).astype(np.int64)
            greater = x.size - np.searchsorted(x, vi, side="right")
            less = np.searchsorted(x, vi, side="left")
            return np.where(ok, -beta * np.abs(greater - less) - log_z, -np.inf)

        b = exact(self.beta)
        v = sp.Symbol("v", integer=True)
        w, c = np.unique(x, return_counts=True)
        # unevaluated: sympy's Abs/Add simplification is quadratic in the number of terms
        neg_v = sp.Mul(sp.S.NegativeOne, v, evaluate=False)
        terms = [
            sp.Mul(
                sp.Integer(int(ci)),
                sp.sign(sp.Add(sp.Integer(int(wi)), neg_v, evaluate=False), evaluate=False),
                evaluate=False,
            )
            for wi, ci in zip(w, c)
        ]
        score = sp.Mul(sp.S.NegativeOne, sp.Abs(sp.Add(*terms, evaluate=False), evaluate=False), evaluate=False)
        by_score: dict[int, int] = {}
        for ln, sc in zip(lengths.tolist(), scores.tolist()):
            by_score[sc] = by_score.get(sc, 0) + ln
        z = sp.Add(
            *[
                sp.Mul(
                    sp.Integer(ln), sp.exp(sp.Mul(b, sp.Integer(sc), evaluate=False), evaluate=False), evaluate=False
                )
                for sc, ln in sorted(by_score.items())
            ],
            evaluate=False,
        )
        expr = sp.Mul(
            sp.exp(sp.Mul(b, score, evaluate=False), evaluate=False), sp.Pow(z, -1, evaluate=False), evaluate=False
        )
        outcomes = tuple(range(top + 1)) if self.bits <= _ENUMERATE_BITS else None
        return FunctionLaw("discrete", log_prob, (v,), expr, outcomes=outcomes)

    def example_pair(self) -> tuple[Any, Any]:
        """Add/remove: ``[2]`` vs ``[2, top]``; substitution: ``[0, 2]`` vs ``[top, 2]``. Below 2 the
        score drops by Δ while on the long run (2, top) it rises by Δ, so the loss at v in {0, 1}
        (or v = 1) approaches 2·beta·Δ as the grid grows (0.99 of it at bits = 8)."""
        if isinstance(self.relation, AddRemove):
            return np.array([2]), np.array([2, self.top])
        return np.array([0, 2]), np.array([self.top, 2])


@register
@dataclass(frozen=True, kw_only=True)
class MedianSubstituteBug(ExponentialMedian):
    """The exponential median under substitution neighbours with beta calibrated for sensitivity 1.

    Same pmf as :class:`ExponentialMedian`; under ``Substitute()`` the score moves by 2, so
    beta = ε/2 gives a true privacy loss of 2·beta·2 = 2ε (a supremum over data sets: approached
    when the run where the score improves dominates the normaliser; 1.98 at bits = 8 on the example
    pair). Defaults: beta = 1/2, Substitute() claiming ε = 1 (true ε = 2)."""

    name = "median_substitute_bug"
    source = (
        "gallery: exponential-mechanism median (McSherry & Talwar 2007) with add/remove calibration under substitution"
    )
    buggy = True
    bug = (
        "beta = ε/2 assumes score sensitivity 1, but substituting one record moves the score "
        "-|#{x>v} - #{x<v}| by 2: the true privacy loss is 2ε"
    )
    true_epsilon = 2.0

    relation: Relation = Substitute()

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, bits: int = 8, relation: Relation = Substitute()) -> "MedianSubstituteBug":
        """The buggy calibration beta = ε/2 (sensitivity 1) under substitution, claiming ε-DP."""
        claim = PureDP(epsilon)
        return cls(bits=bits, beta=ratio_down(claim.epsilon, 2), relation=relation, claim=claim)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
