"""The sparse vector technique (SVT) and its published variants.

Source: M. Lyu, D. Su, N. Li, "Understanding the Sparse Vector Technique for Differential
Privacy", PVLDB 10(6), 2017 -- Algorithm 1 (their correct instantiation, the catalog's
``sparse_vector``) and Algorithms 3-6 (variants from the literature, in the gallery with the true
ε the paper derives). The numerical variant follows Algorithm 1 plus a FRESH Laplace draw for each
released value (Dwork & Roth 2014 §3.6 "NumericSparse"; the budget split ε/3 + ε/3 + ε/3 of
Wang, Ding, Wang, Kifer & Zhang, "Proving differential privacy with shadow execution", PLDI 2019,
which is DP-Sniper's and StatDP's "NumericalSVT").

Common shape: input a vector q of n query answers, neighbours when ``|q - q'|_inf <= Δ``;
threshold noise ``ρ ~ Lap(rho_scale)`` drawn once; for each query ``ν_i ~ Lap(nu_scale)``;
the query is answered ⊤ when ``q_i + ν_i >= T + ρ`` and ⊥ otherwise; after the ``c``-th ⊤ the
algorithm stops (cutoff) and the remaining queries are "not answered".

Output encodings (first axis = samples):

* pattern-only variants: int8 array ``(size, n_queries)`` with 1 = ⊤, 0 = ⊥, -1 = not answered;
* value-releasing variants (Alg. 3, numerical SVT): float64 ``(size, n_queries)`` holding the
  released value for ⊤, the finite sentinels :data:`BOTTOM` (= -2**62) for ⊥ and :data:`STOPPED`
  (= -2**63) for "not answered" (finite so the auditors accept them; no released value can reach
  them: answers are limited to ``|q_i| < 2**40``).

Exact laws: for a fixed input q, conditional on ρ = r the answers are independent, so
``P(pattern a) = ∫ f_ρ(r) Π_{i answered} P(a_i | r) dr`` with ``P(⊤ | r) = P(ν >= T + r - q_i)``
and ``P(⊥ | r) = P(ν < T + r - q_i)``; a pattern is possible only if it respects the cutoff.
The 1-D integral over the threshold noise is computed by adaptive quadrature split at the kinks
``r = 0`` and ``r = q_i - T`` (all patterns at once); the sympy expression is that Integral,
unevaluated. Without query noise (Alg. 5) the integral has the closed form
``F_ρ(min_⊤ (q_i - T)) - F_ρ(max_⊥ (q_i - T))``.

The noise is numpy's float Laplace: the pattern outputs release only comparison results, never
low-order bits. The numerical variant releases values on the grid ``granularity * Z``
(grid-discrete Laplace from :mod:`dpharness.mechanisms._noise`), so no float bits leak there either.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import sympy as sp

from dpharness import _validate as _v
from dpharness.core import (
    BoundedChange,
    Deferred,
    DiscreteLaw,
    FunctionLaw,
    InputSpec,
    Mechanism,
    PureDP,
    RealInterval,
    exact,
)
from dpharness.errors import ParameterError
from dpharness.registry import register

from ._literature import (
    exact_ratio,
    gauss_legendre_line,
    laplace_logcdf,
    log_laplace_interval,
    laplace_logpdf,
    laplace_logsf,
    statdp_patterns,
    sym_laplace_cdf,
    sym_laplace_pdf,
)
from ._noise import (
    DEFAULT_GRANULARITY,
    check_granularity,
    discrete_laplace,
    discrete_laplace_logpmf,
    grid_sensitivity,
    on_grid_units,
    round_half_up,
    to_units,
)

__all__ = [
    "TOP",
    "BOT",
    "NOT_ANSWERED",
    "BOTTOM",
    "STOPPED",
    "answer_patterns",
    "statdp_patterns",
    "SparseVector",
    "NumericalSparseVector",
    "SparseVectorAlg3",
    "SparseVectorAlg4",
    "SparseVectorAlg5",
    "SparseVectorAlg6",
]

TOP, BOT, NOT_ANSWERED = 1, 0, -1
BOTTOM = -(2.0**62)
STOPPED = -(2.0**63)
_MAX_ANSWER = 2.0**40


def answer_patterns(n: int, c: int | None) -> np.ndarray:
    """Every possible output pattern (int8 rows over {1, 0, -1}) of SVT on n queries with cutoff c
    (``None``: no cutoff, all 2^n rows of ⊤/⊥)."""
    if c is None:
        return np.array(list(itertools.product((TOP, BOT), repeat=n)), dtype=np.int8).reshape(-1, n)
    rows: list[list[int]] = []

    def walk(prefix: list[int], tops: int) -> None:
        if tops == c:
            rows.append(prefix + [NOT_ANSWERED] * (n - len(prefix)))
            return
        if len(prefix) == n:
            rows.append(prefix)
            return
        walk(prefix + [TOP], tops + 1)
        walk(prefix + [BOT], tops)

    walk([], 0)
    return np.array(rows, dtype=np.int8).reshape(-1, n)


@dataclass(frozen=True, kw_only=True)
class _SparseVectorBase(Mechanism):
    n_queries: int = 10
    threshold: Any = 1
    c: int = 1
    rho_scale: Any = 2
    nu_scale: Any = 4
    sensitivity: Any = 1

    cutoff: ClassVar[bool] = True

    # --- validation and spec ---------------------------------------------------
    def _check(self) -> None:
        _v.integer("n_queries", self.n_queries, minimum=1)
        _v.real("threshold", self.threshold)
        _v.integer("c", self.c, minimum=1)
        _v.positive("rho_scale", self.rho_scale)
        self._check_nu()
        _v.positive("sensitivity", self.sensitivity)

    def _check_nu(self) -> None:
        _v.positive("nu_scale", self.nu_scale)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(
            RealInterval(-_MAX_ANSWER, _MAX_ANSWER),
            BoundedChange(self.sensitivity, "linf"),
            "vector",
            dim=self.n_queries,
        )

    def example_pair(self) -> tuple[Any, Any]:
        """StatDP's "X shape" pair ([1]*h + [0]*(n-h), [0]*h + [1]*(n-h)), h = n // 2: ⊥ answers on
        the first half and ⊤ on the second are likelier under the second input."""
        return statdp_patterns(self.n_queries)[-1]

    # --- sampling -------------------------------------------------------------
    def _answers(
        self, q: np.ndarray, size: int, rng: np.random.Generator, values: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """``size`` independent runs of the algorithm on ``q``: ``(codes, noisy)``, the int8 answers
        (1 = ⊤, 0 = ⊥, -1 = not answered) and, with ``values``, the float ``q_i + ν_i`` of every
        answered query (NaN where the query was not answered; None without ``values``).

        With a cutoff the runs go in lockstep, query by query, as the pseudocode does: ``ρ`` for every
        run first, then for query i a ``ν_i`` for each run still answering only; a run stops after
        its c-th ⊤ and draws no more noise. Each draw is fresh (independent of everything drawn
        before), so the joint law of the answers is the algorithm's, the law :meth:`_law` computes;
        the ``ν`` of queries after the stop are never drawn (an earlier version drew all of them,
        sample by sample, and discarded them: the same law at about 4 times the cost of the noise).
        Without a cutoff every query is answered and all the noise is drawn at once."""
        n = self.n_queries
        q = np.asarray(q, dtype=float)
        bnu = float(self.nu_scale)
        if not self.cutoff:
            bar = rng.laplace(0.0, float(self.rho_scale), (size, 1))
            bar += float(self.threshold)  # T + ρ
            answers = rng.laplace(0.0, bnu, (size, n)) if bnu > 0 else np.zeros((size, n))
            answers += q[None, :]  # q_i + ν_i
            return (answers >= bar).astype(np.int8), (answers if values else None)
        bar = rng.laplace(0.0, float(self.rho_scale), size)
        bar += float(self.threshold)  # T + ρ of each run still answering (compacted with `live`)
        codes = np.full((n, size), NOT_ANSWERED, dtype=np.int8)  # query-major while filling
        noisy = np.full((n, size), np.nan) if values else None
        live = np.arange(size)  # the runs still answering
        tops = np.zeros(size, dtype=np.int64) if self.c > 1 else None  # ⊤ answers so far (c > 1)
        for i in range(n):
            if not len(live):
                break
            value = rng.laplace(0.0, bnu, len(live)) if bnu > 0 else np.zeros(len(live))
            value += q[i]  # q_i + ν_i
            above = value >= bar
            codes[i, live] = above
            if noisy is not None:
                noisy[i, live] = value
            if tops is None:  # c = 1: a run stops at its first ⊤
                going = ~above
            else:
                tops[live] += above
                going = tops[live] < self.c
            live, bar = live[going], bar[going]
        return np.ascontiguousarray(codes.T), (None if noisy is None else np.ascontiguousarray(noisy.T))

    def _sample(self, data, size, rng):
        return self._answers(data, size, rng)[0]

    # --- exact law ------------------------------------------------------------
    @property
    def _c_or_none(self) -> int | None:
        return self.c if self.cutoff else None

    def _valid(self, codes: np.ndarray) -> np.ndarray:
        """Whether each row of codes is a pattern the algorithm can output."""
        codes = np.asarray(codes)
        ok = np.all(np.isin(codes, (TOP, BOT, NOT_ANSWERED)), axis=1)
        tops = codes == TOP
        stopped = codes == NOT_ANSWERED
        if not self.cutoff:
            return ok & ~stopped.any(axis=1)
        before = np.cumsum(tops, axis=1) - tops
        should_stop = before >= self.c
        return ok & np.all(should_stop == stopped, axis=1)

    def _pattern_probs(self, q: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """P(pattern) for each row of ``codes`` (assumed valid), by quadrature over ρ."""
        q = np.asarray(q, dtype=float)
        T = float(self.threshold)
        brho, bnu = float(self.rho_scale), float(self.nu_scale)
        tops = (codes == TOP).astype(float)
        bots = (codes == BOT).astype(float)
        if len(codes) == 0:
            return np.zeros(0)
        if bnu == 0:  # no query noise: ⊤ iff r <= q_i - T, ⊥ iff r > q_i - T
            cut = q - T
            upper = np.min(np.where(tops > 0, cut[None, :], np.inf), axis=1)
            lower = np.max(np.where(bots > 0, cut[None, :], -np.inf), axis=1)
            lo_cdf = np.exp(laplace_logcdf(lower, brho))
            hi_cdf = np.exp(laplace_logcdf(upper, brho))
            return np.where(upper > lower, hi_cdf - lo_cdf, 0.0)

        def log_integrand(r: np.ndarray) -> np.ndarray:
            z = T + r[None, :] - q[:, None]  # (n, R)
            return laplace_logpdf(r, brho)[None, :] + tops @ laplace_logsf(z, bnu) + bots @ laplace_logcdf(z, bnu)

        # the integrand is at most the density of ρ: |r| > 45·rho_scale carries < e^-45 of its mass
        reach = 45 * brho
        probs = gauss_legendre_line(
            log_integrand, [0.0, *(q - T)], step=min(brho, bnu), tail=reach, lo=-reach, hi=reach
        )
        return np.clip(probs, 0.0, 1.0)

    def _pattern_expr(self, q: np.ndarray) -> tuple[tuple, sp.Expr]:
        r = sp.Symbol("r", real=True)
        a = sp.symbols(f"a1:{self.n_queries + 1}", integer=True)
        T, brho = exact(self.threshold), exact(self.rho_scale)
        qs = [exact(float(v)) for v in np.asarray(q, dtype=float)]
        factors = []
        for i in range(self.n_queries):
            z = T + r - qs[i]
            if float(self.nu_scale) == 0:
                above, below = sp.Heaviside(-z), sp.Heaviside(z)
            else:
                bnu = exact(self.nu_scale)
                below = sym_laplace_cdf(z, bnu)
                above = 1 - below
            factors.append(_select(a[i], above, below))
        return a, sp.Integral(sym_laplace_pdf(r, brho) * sp.Mul(*factors), (r, -sp.oo, sp.oo))

    def _law(self, data):
        patterns = answer_patterns(self.n_queries, self._c_or_none)
        probs = self._pattern_probs(data, patterns)
        symbols = sp.symbols(f"a1:{self.n_queries + 1}", integer=True)
        return DiscreteLaw(
            outcomes=tuple(tuple(int(x) for x in row) for row in patterns),
            probs=tuple(float(p) for p in probs),
            symbols=symbols,
            expr=Deferred(lambda: self._pattern_expr(data)[1]),
        )


def _select(a: sp.Symbol, if_top: sp.Expr, if_bot: sp.Expr) -> sp.Expr:
    """The factor of query i in a pattern pmf: ``if_top`` for a_i = 1, ``if_bot`` for a_i = 0,
    1 for a_i = -1 (not answered), written with Kronecker deltas (not Piecewise, see
    :func:`sym_laplace_cdf`)."""
    return sp.KroneckerDelta(a, TOP) * if_top + sp.KroneckerDelta(a, BOT) * if_bot + sp.KroneckerDelta(a, NOT_ANSWERED)


# --------------------------------------------------------------------------- Alg. 1


@register(proof="audit-only")  # numpy's float noise: no proof covers the code (see its proof)
@dataclass(frozen=True, kw_only=True)
class SparseVector(_SparseVectorBase):
    """Sparse vector technique, Lyu, Su & Li 2017, Algorithm 1.

    ``ρ ~ Lap(rho_scale)``, ``ν_i ~ Lap(nu_scale)``; ⊤ iff ``q_i + ν_i >= T + ρ``; stop after c ⊤.
    pmf of a pattern a: ``∫ f_ρ(r) Π_{a_i=⊤} P(ν >= T + r - q_i) Π_{a_i=⊥} P(ν < T + r - q_i) dr``.
    Neighbours: ``|q - q'|_inf <= sensitivity``. Claim: PureDP(ε) with ε1 = ε/2, ε2 = ε/2,
    ``rho_scale = Δ/ε1 = 2Δ/ε``, ``nu_scale = 2cΔ/ε2 = 4cΔ/ε`` (Lyu et al. Thm. 2: ε1 + ε2 = ε).
    Defaults: ε = 1, Δ = 1, c = 1, n = 10 queries, T = 1 (StatDP/DP-Sniper "SVT1" shape).
    Output: int8 ``(size, n_queries)``, 1 = ⊤, 0 = ⊥, -1 = not answered."""

    name: ClassVar[str] = "sparse_vector"
    source: ClassVar[str] = "Lyu, Su & Li 2017, Algorithm 1"

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, c: int = 1, n_queries: int = 10, threshold: Any = 1, sensitivity: Any = 1):
        epsilon = _v.positive("epsilon", epsilon)
        return cls(
            n_queries=n_queries,
            threshold=threshold,
            c=c,
            sensitivity=sensitivity,
            rho_scale=exact_ratio(2 * sensitivity, epsilon),
            nu_scale=exact_ratio(4 * c * sensitivity, epsilon),
            claim=PureDP(epsilon),
        )


# --------------------------------------------------------------------------- numerical SVT


class _ValueOutput:
    """Decoding of float outputs with sentinels (mixin for value-releasing SVTs)."""

    def _decode(self, outputs: np.ndarray) -> np.ndarray:
        out = np.asarray(outputs, dtype=float)
        if out.ndim == 1:
            out = out.reshape(1, -1)
        codes = np.full(out.shape, TOP, dtype=np.int8)
        codes[out == BOTTOM] = BOT
        codes[out == STOPPED] = NOT_ANSWERED
        return codes


@register(proof="audit-only")  # numpy's float noise: no proof covers the code (see its proof)
@dataclass(frozen=True, kw_only=True)
class NumericalSparseVector(_ValueOutput, _SparseVectorBase):
    """Numerical SVT: Algorithm 1 of Lyu et al. 2017, and for each ⊤ a FRESH noisy value
    ``round_g(q_i) + g·K_i``, ``K_i ~ DiscreteLaplace(value_scale / g)`` (grid-Laplace).

    pmf of an output (pattern a, values v on the ⊤ coordinates):
    ``P(a) · Π_{a_i=⊤} tanh(g/(2 value_scale)) exp(-|v_i - round_g(q_i)| / value_scale)``, with P(a)
    the pattern integral of :class:`SparseVector`. Neighbours: ``|q - q'|_inf <= Δ``.
    Claim: PureDP(ε), split ε/3 each (Wang et al. PLDI 2019): ``rho_scale = 3Δ/ε``,
    ``nu_scale = 6cΔ/ε``, ``value_scale = 3cΔ_g/ε`` with ``Δ_g = ceil(Δ/g)·g`` the sensitivity of the
    rounded answers (= Δ when Δ is a multiple of g). Cost: Δ/rho_scale + c(2Δ/nu_scale + Δ_g/value_scale) = ε.
    Output: float64 ``(size, n_queries)``: the value for ⊤, :data:`BOTTOM` for ⊥, :data:`STOPPED`
    for not answered. Defaults ε = 1, Δ = 1, c = 1, n = 10, T = 1, g = 2**-20."""

    name: ClassVar[str] = "numerical_sparse_vector"
    source: ClassVar[str] = (
        "Lyu, Su & Li 2017 Alg. 1 + fresh value noise (Dwork & Roth 2014 §3.6 NumericSparse; "
        "split of Wang et al. PLDI 2019)"
    )

    rho_scale: Any = 3
    nu_scale: Any = 6
    value_scale: Any = 3
    granularity: float = DEFAULT_GRANULARITY

    def _check(self) -> None:
        super()._check()
        _v.positive("value_scale", self.value_scale)
        check_granularity("granularity", self.granularity)

    @classmethod
    def calibrated(
        cls,
        epsilon: Any = 1,
        *,
        c: int = 1,
        n_queries: int = 10,
        threshold: Any = 1,
        sensitivity: Any = 1,
        granularity: float = DEFAULT_GRANULARITY,
    ):
        epsilon = _v.positive("epsilon", epsilon)
        g = check_granularity("granularity", granularity)
        dg: int | Fraction = grid_sensitivity(sensitivity, g)
        dg = int(dg) if dg.denominator == 1 else dg
        return cls(
            n_queries=n_queries,
            threshold=threshold,
            c=c,
            sensitivity=sensitivity,
            granularity=granularity,
            rho_scale=exact_ratio(3 * sensitivity, epsilon),
            nu_scale=exact_ratio(6 * c * sensitivity, epsilon),
            value_scale=exact_ratio(3 * c * dg, epsilon),
            claim=PureDP(epsilon),
        )

    def _sample(self, data, size, rng):
        """The pattern as :class:`SparseVector` draws it (:meth:`_answers`), then one value noise ``K``
        per ⊤ answer, drawn for the ⊤ answers only, in row-major order (sample by sample, query by
        query), after all the patterns of the batch: the pseudocode's "for each ⊤ a FRESH draw" (Dwork &
        Roth's NumericSparse draws none for a ⊥ answer or a query not answered).

        Law: the K are i.i.d. DiscreteLaplace(value_scale/g) and independent of the pattern noise, so
        given the patterns the released values are independent, ``round_g(q_i) + g·K`` at each ⊤ --
        the law of :meth:`_law` (the same as drawing a K for every query and keeping those at the ⊤
        answers, which an earlier version did at about 10 times the cost). The patterns are those a
        :class:`SparseVector` with the same n_queries, threshold, c, rho_scale and nu_scale draws from
        the same ``rng``."""
        codes = self._answers(data, size, rng)[0]
        g = float(self.granularity)
        centre = to_units("data", data, g)
        out = np.where(codes == BOT, BOTTOM, STOPPED)
        rows, cols = np.nonzero(codes == TOP)  # row-major order
        units = centre[cols] + discrete_laplace(float(self.value_scale) / g, len(cols), rng)
        out[rows, cols] = units.astype(float) * g
        return out

    def _law(self, data):
        q = np.asarray(data, dtype=float)
        g = float(self.granularity)
        centre = to_units("data", q, g)
        t = float(self.value_scale) / g
        symbols = sp.symbols(f"a1:{self.n_queries + 1}", integer=True)
        v = sp.symbols(f"v1:{self.n_queries + 1}", real=True)

        def build_expr():
            gs, vs = exact(self.granularity), exact(self.value_scale)
            value_pmf = sp.Mul(
                *[
                    _select(
                        symbols[i], sp.tanh(gs / (2 * vs)) * sp.exp(-sp.Abs(v[i] - gs * exact(int(centre[i]))) / vs), 1
                    )
                    for i in range(self.n_queries)
                ]
            )
            return self._pattern_expr(q)[1] * value_pmf

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1, self.n_queries)
            codes = self._decode(out)
            valid = self._valid(codes)
            units, on_grid = on_grid_units(np.where(codes == TOP, out, 0.0), g)
            valid &= np.all(on_grid | (codes != TOP), axis=1)
            value_lp = np.where(codes == TOP, discrete_laplace_logpmf(units - centre[None, :], t), 0.0).sum(axis=1)
            result = np.full(len(out), -np.inf)
            if valid.any():
                uniq, inverse = np.unique(codes[valid], axis=0, return_inverse=True)
                probs = self._pattern_probs(q, uniq)
                with np.errstate(divide="ignore"):
                    result[valid] = np.log(probs)[inverse.reshape(-1)] + value_lp[valid]
            return result

        return FunctionLaw("discrete", log_prob, tuple(symbols) + tuple(v), Deferred(build_expr))


# --------------------------------------------------------------------------- gallery: Alg. 3-6


@register
@dataclass(frozen=True, kw_only=True)
class SparseVectorAlg3(_ValueOutput, _SparseVectorBase):
    """GALLERY. Lyu et al. 2017 Algorithm 3 (SVT in Roth's 2011 lecture notes): as Alg. 1 but the
    ⊤ answers release ``q_i + ν_i``, the SAME noisy value used in the comparison;
    ``rho_scale = Δ/ε1 = 2Δ/ε``, ``nu_scale = cΔ/ε2 = 2cΔ/ε``, cutoff c. The released value is
    rounded to the grid ``granularity * Z`` (``w_i = g·floor((q_i + ν_i)/g + 1/2)``), a
    post-processing that removes the float low-order bits (Mironov 2012) so that the only leak
    is the algorithm's own.

    pmf of an output (pattern a, grid values w on the ⊤ coordinates), with cells
    ``C_i = [w_i - g/2, w_i + g/2)``:
    ``∫ f_ρ(r) Π_{⊥} P(ν < T + r - q_i) Π_{⊤} P(q_i + ν ∈ C_i, q_i + ν >= T + r) dr``
    (quadrature over r, split at every kink). Neighbours: ``|q - q'|_inf <= Δ``.
    Claim: PureDP(ε) (wrongly).

    True ε = ∞ (Lyu et al. §3: not ε'-DP for any finite ε'): a released value pins ν_i, so the
    ⊥ answers' shift of ρ can no longer be absorbed, and the loss grows without bound in the
    number of ⊥ answers. For a FIXED n_queries the loss is finite -- at most
    ``Δ/rho_scale + nΔ/nu_scale``, the output being a post-processing of (ρ, q + ν) -- but it is
    unbounded as n grows.
    Output: float64 ``(size, n)``: the grid value for ⊤, :data:`BOTTOM`, :data:`STOPPED`."""

    name: ClassVar[str] = "svt3"
    source: ClassVar[str] = "Lyu, Su & Li 2017, Algorithm 3 (Roth 2011 lecture notes)"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "releases the noisy answer q_i + ν_i that was compared with the threshold"
    true_epsilon: ClassVar[float] = math.inf

    nu_scale: Any = 2
    granularity: float = DEFAULT_GRANULARITY

    def _check(self) -> None:
        super()._check()
        check_granularity("granularity", self.granularity)

    @classmethod
    def calibrated(
        cls,
        epsilon: Any = 1,
        *,
        c: int = 1,
        n_queries: int = 10,
        threshold: Any = 1,
        sensitivity: Any = 1,
        granularity: float = DEFAULT_GRANULARITY,
    ):
        epsilon = _v.positive("epsilon", epsilon)
        return cls(
            n_queries=n_queries,
            threshold=threshold,
            c=c,
            sensitivity=sensitivity,
            granularity=granularity,
            rho_scale=exact_ratio(2 * sensitivity, epsilon),
            nu_scale=exact_ratio(2 * c * sensitivity, epsilon),
            claim=PureDP(epsilon),
        )

    def _sample(self, data, size, rng):
        codes, noisy = self._answers(data, size, rng, values=True)
        g = float(self.granularity)
        out = round_half_up(np.where(codes == TOP, noisy, 0.0) / g).astype(float) * g
        out[codes == BOT] = BOTTOM
        out[codes == NOT_ANSWERED] = STOPPED
        return out

    def _law(self, data):
        q = np.asarray(data, dtype=float)
        T = float(self.threshold)
        g = float(self.granularity)
        brho, bnu = float(self.rho_scale), float(self.nu_scale)
        r = sp.Symbol("r", real=True)
        a = sp.symbols(f"a1:{self.n_queries + 1}", integer=True)
        w = sp.symbols(f"w1:{self.n_queries + 1}", real=True)
        Ts, br, bn, gs = exact(self.threshold), exact(self.rho_scale), exact(self.nu_scale), exact(self.granularity)
        qs = [exact(float(x)) for x in q]
        factors = [
            _select(
                a[i],
                sp.Max(
                    0,
                    sym_laplace_cdf(w[i] + gs / 2 - qs[i], bn)
                    - sym_laplace_cdf(sp.Max(w[i] - gs / 2, Ts + r) - qs[i], bn),
                ),
                sym_laplace_cdf(Ts + r - qs[i], bn),
            )
            for i in range(self.n_queries)
        ]
        expr = sp.Integral(sym_laplace_pdf(r, br) * sp.Mul(*factors), (r, -sp.oo, sp.oo))

        def one(codes: np.ndarray, vals: np.ndarray) -> float:
            top = codes == TOP
            bot = codes == BOT
            lo_cell, hi_cell = vals[top] - g / 2, vals[top] + g / 2
            qt, qb = q[top], q[bot]
            cap = float(np.min(hi_cell)) - T if top.any() else math.inf

            def log_integrand(x: np.ndarray) -> np.ndarray:
                out = laplace_logpdf(x, brho) + np.sum(laplace_logcdf(T + x[None, :] - qb[:, None], bnu), axis=0)
                if top.any():
                    start = np.maximum(lo_cell[:, None], T + x[None, :])
                    out = out + np.sum(log_laplace_interval(start - qt[:, None], (hi_cell - qt)[:, None], bnu), axis=0)
                return out

            reach = 45 * brho  # the integrand is at most f_ρ, which falls by e^-45 over this distance
            mass = float(
                gauss_legendre_line(
                    log_integrand,
                    [0.0, *(qb - T), *(lo_cell - T)],
                    step=min(brho, bnu),
                    tail=reach,
                    lo=min(-reach, cap - reach),
                    hi=min(cap, reach),
                )
            )
            return math.log(mass) if mass > 0 else -math.inf

        def log_prob(outputs: np.ndarray) -> np.ndarray:
            out = np.asarray(outputs, dtype=float).reshape(-1, self.n_queries)
            codes = self._decode(out)
            _, on_grid = on_grid_units(np.where(codes == TOP, out, 0.0), g)
            valid = self._valid(codes) & np.all(on_grid, axis=1)
            return np.array([one(cd, row) if ok else -math.inf for cd, row, ok in zip(codes, out, valid)])

        return FunctionLaw("discrete", log_prob, tuple(a) + tuple(w), expr)


@register
@dataclass(frozen=True, kw_only=True)
class SparseVectorAlg4(_SparseVectorBase):
    """GALLERY. Lyu et al. 2017 Algorithm 4 (SVT of Lee & Clifton 2014): ε1 = ε/4,
    ``rho_scale = Δ/ε1 = 4Δ/ε``, ε2 = 3ε/4 and ``nu_scale = Δ/ε2 = 4Δ/(3ε)`` -- the query noise
    lacks the factor 2c; cutoff c.

    pmf: as :class:`SparseVector`. Neighbours: ``|q - q'|_inf <= Δ``. Claim: PureDP(ε) (wrongly).

    True ε = (1 + 6c)/4 · ε (Lyu et al. §3), 7/4 at the defaults ε = 1, c = 1: ρ's shift by Δ costs
    ε1 = ε/4 and each of the c ⊤ answers needs its ν shifted by up to 2Δ, costing 2Δ/nu_scale = 3ε/2.
    The supremum is approached (not attained) by the pattern ⊥⊥⊤ on q = (x, x, T) vs
    q' = (x + Δ, x + Δ, T - Δ) as x - T -> ∞: after the alignment r -> r + Δ the ⊥ factors agree,
    and for r >= 0 both Laplace ratios are exact (e^{ε1} for ρ, e^{2Δ/nu_scale} for the ⊤ tail);
    two (or more) ⊥ answers push almost all the mass to r ≈ x - T > 0 (one ⊥ does not: its
    factor's growth e^{r/nu_scale} is cancelled by the ⊤ tail). Numerically (ε = 1, c = 1):
    x - T = 10, 20, 40 give losses 1.74903, 1.749993, 1.7499999997.
    Output: int8 patterns as :class:`SparseVector`."""

    name: ClassVar[str] = "svt4"
    source: ClassVar[str] = "Lyu, Su & Li 2017, Algorithm 4 (Lee & Clifton 2014)"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "query noise Lap(Δ/ε2) misses the factor 2c (and ε1 = ε/4): true ε = (1+6c)ε/4"
    true_epsilon: ClassVar[float] = 1.75

    rho_scale: Any = 4
    nu_scale: Any = Fraction(4, 3)

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, c: int = 1, n_queries: int = 10, threshold: Any = 1, sensitivity: Any = 1):
        epsilon = _v.positive("epsilon", epsilon)
        return cls(
            n_queries=n_queries,
            threshold=threshold,
            c=c,
            sensitivity=sensitivity,
            rho_scale=exact_ratio(4 * sensitivity, epsilon),
            nu_scale=exact_ratio(4 * sensitivity, 3 * epsilon),
            claim=PureDP(epsilon),
        )


@register
@dataclass(frozen=True, kw_only=True)
class SparseVectorAlg5(_SparseVectorBase):
    """GALLERY. Lyu et al. 2017 Algorithm 5 (SVT of Stoddard et al. 2014): no query noise
    (``nu_scale`` must be 0) and no cutoff; ``rho_scale = 2Δ/ε``.

    pmf (closed form): ``P(a) = F_ρ(min_{a_i=⊤}(q_i - T)) - F_ρ(max_{a_i=⊥}(q_i - T))`` when positive, else 0.
    Neighbours: ``|q - q'|_inf <= Δ``. Claim: PureDP(ε) (wrongly).

    True ε = ∞ already for two queries: q = (0, 1), q' = (1, 0) with the pattern (⊥, ⊤) needs
    ``ρ ∈ (-T, 1 - T]`` under q and ``ρ ∈ (1 - T, -T]`` (empty) under q'.
    Output: int8 ``(size, n)`` over {1, 0} (never -1)."""

    name: ClassVar[str] = "svt5"
    source: ClassVar[str] = "Lyu, Su & Li 2017, Algorithm 5 (Stoddard et al. 2014)"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "no noise on the query answers (and no cutoff): comparisons reveal the order of the answers"
    true_epsilon: ClassVar[float] = math.inf
    cutoff: ClassVar[bool] = False

    nu_scale: Any = 0

    def _check_nu(self) -> None:
        if self.nu_scale != 0:
            raise ParameterError(
                f"nu_scale={self.nu_scale!r} must be 0 for svt5 (Alg. 5 adds no query noise); "
                "pass nu_scale=0 or use sparse_vector."
            )

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, c: int = 1, n_queries: int = 10, threshold: Any = 1, sensitivity: Any = 1):
        epsilon = _v.positive("epsilon", epsilon)
        return cls(
            n_queries=n_queries,
            threshold=threshold,
            c=c,
            sensitivity=sensitivity,
            rho_scale=exact_ratio(2 * sensitivity, epsilon),
            nu_scale=0,
            claim=PureDP(epsilon),
        )


@register
@dataclass(frozen=True, kw_only=True)
class SparseVectorAlg6(_SparseVectorBase):
    """GALLERY. Lyu et al. 2017 Algorithm 6 (SVT of Chen et al. 2015): ``rho_scale = Δ/ε1 = 2Δ/ε``,
    ``nu_scale = Δ/ε2 = 2Δ/ε``, and NO cutoff: every query is answered (``c`` is ignored).

    pmf: as :class:`SparseVector` over all 2^n ⊤/⊥ patterns. Neighbours: ``|q - q'|_inf <= Δ``.
    Claim: PureDP(ε) (wrongly).

    True ε = ∞ (Lyu et al. §3): each ⊤ answer costs up to 2Δ/nu_scale = ε and there is no bound
    on their number. For a FIXED n_queries the loss is finite -- at most Δ/rho_scale + nΔ/nu_scale,
    the output being a post-processing of (ρ, q + ν) -- but unbounded as n grows. Output: int8 ``(size, n)`` over {1, 0}."""

    name: ClassVar[str] = "svt6"
    source: ClassVar[str] = "Lyu, Su & Li 2017, Algorithm 6 (Chen et al. 2015)"
    buggy: ClassVar[bool] = True
    bug: ClassVar[str] = "no cutoff: answers every query, so the number of costly ⊤ answers is unbounded"
    true_epsilon: ClassVar[float] = math.inf
    cutoff: ClassVar[bool] = False

    nu_scale: Any = 2

    @classmethod
    def calibrated(cls, epsilon: Any = 1, *, c: int = 1, n_queries: int = 10, threshold: Any = 1, sensitivity: Any = 1):
        epsilon = _v.positive("epsilon", epsilon)
        return cls(
            n_queries=n_queries,
            threshold=threshold,
            c=c,
            sensitivity=sensitivity,
            rho_scale=exact_ratio(2 * sensitivity, epsilon),
            nu_scale=exact_ratio(2 * sensitivity, epsilon),
            claim=PureDP(epsilon),
        )


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
