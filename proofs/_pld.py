"""A certified privacy-loss-distribution (PLD) accountant: every number it returns is a proven upper
bound (``pessimistic=True``) or a proven lower bound (``pessimistic=False``) on the true quantity, with
the discretisation, the truncation and the floating-point error all bounded in the safe direction, so
its result can be a step of a proof.

Math (Koskela, Jälkö & Honkela 2020; Meiser & Mohammadi 2018 "privacy buckets"; Zhu, Dong & Wang 2022,
"Optimal accounting of differential privacy via characteristic function", Thm on dominating pairs):

* For a pair (P, Q) on a countable space, the privacy loss is ``L(y) = ln P(y)/Q(y) ∈ (−∞, +∞]`` and
  the hockey-stick divergence is ``δ(ε) = E_{y~P}[f_ε(L(y))]`` with ``f_ε(l) = max(0, 1 − e^{ε−l})``,
  ``f_ε(+∞) = 1``. ``f_ε`` is non-negative and non-decreasing on ``[−∞, +∞]``.
* A mechanism is (ε, δ)-DP for a neighbour relation when δ(ε) <= δ for its dominating pair(s); for
  add/remove neighbours both directions (P, Q) and (Q, P) are needed (:class:`PLDPair`).
* The composition of independent mechanisms is dominated by the product of their dominating pairs,
  whose privacy loss is the SUM of independent losses: its law is the convolution of the laws.

Numbers: losses on a uniform grid ``x_i = (offset + i)·w`` with ``w`` a power of two (so every
``x_i`` is an exact float); masses are float64 certified bounds. All floating-point error is bounded
and added (or subtracted) explicitly; see :class:`PLD` for the invariant and :func:`compose` for the
convolution error bound. mpmath at 30 digits (more where cancellation needs it) is trusted to the working precision (as elsewhere in
:mod:`dpharness.proofs`); every mpmath value is widened by 1e-22 relative before it is rounded to a
float in the safe direction.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from dpharness.errors import ParameterError

__all__ = [
    "PLD",
    "PLDPair",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_response",
    "compose",
    "self_compose",
    "DEFAULT_W",
    "DEFAULT_TAIL",
]

DEFAULT_W = 2.0**-11  # loss grid spacing (≈ 4.9e-4): ε(δ) is over-stated by at most T·w for T leaves
DEFAULT_TAIL = 1e-15  # mass each truncation may move (pessimistic: up; optimistic: drop)
_MAX_BUCKETS = 1 << 22  # coarsen (w -> 2w, pessimistically) beyond this many buckets
_ENUMERATE_MAX = 60_000  # enumerate the integer noise values up to this many, else group analytically
_DPS = 30
_REL = 1e-22  # relative widening of every mpmath value
_U = 2.0**-53  # unit roundoff of float64
_DELTA_REL = 1e-12  # relative slack of the float δ(ε) sum (see PLD.delta)


# --------------------------------------------------------------------------- rounding helpers


def _up(x: Any) -> float:
    """A float >= x (x an mpmath number): x is widened by _REL, rounded to nearest (error <= half an
    ulp) and stepped up one ulp."""
    x = x * (1 + _REL) if x >= 0 else x * (1 - _REL)
    return math.nextafter(float(x), math.inf)


def _down(x: Any) -> float:
    """A float <= x (widened by _REL first), and >= 0 when x >= 0."""
    x = x * (1 - _REL) if x >= 0 else x * (1 + _REL)
    f = math.nextafter(float(x), -math.inf)
    return max(f, 0.0) if x >= 0 else f


def _fsum_up(values: Iterable[float]) -> float:
    """An upper bound on the exact sum of floats (math.fsum is correctly rounded; step up once)."""
    s = math.fsum(values)
    return math.nextafter(s, math.inf) if s != 0 else 0.0


def _fsum_down(values: Iterable[float]) -> float:
    s = math.fsum(values)
    return max(math.nextafter(s, -math.inf), 0.0) if s != 0 else 0.0


def _err_sum(err2: float, n: int) -> float:
    """An upper bound on Σ_{k in K} |e_k| for |K| = n and ||e||₂ <= err2: err2·√n, rounded up."""
    if err2 == 0 or n == 0:
        return 0.0
    return math.nextafter(err2 * math.sqrt(n) * (1 + 4 * _U), math.inf)


# the orders λ of the MGF bounds a PLD carries: λ = −1 bounds its lower tail, the others its upper tail
LAMBDAS = (-1.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


def _log_up(shift: float, s: float) -> float:
    """An upper bound on ``shift + ln s`` (s > 0): math.log is within an ulp; a relative 1e-15 and an
    absolute 1e-300 above cover it and the sum's rounding."""
    v = shift + math.log(s)
    return math.nextafter(v + 1e-15 * (abs(shift) + abs(math.log(s))) + 1e-300, math.inf)


def _log_sum_exp_up(log_a: np.ndarray, z: np.ndarray) -> float:
    """An upper bound on ``ln Σ_i e^{log_a[i] + z[i]}`` (−inf for no terms), ``log_a`` computed logarithms
    (within an ulp) and ``z`` exact. Each exponent ``a_i = log_a[i] + z[i]`` is off by at most
    ``2u(|log_a[i]| + |z[i]|) + u|log_a[i]|`` (u = 2^-53) and its difference from the largest by ``u`` of
    itself (at most 745 where the term does not underflow; an underflowed term is below 2^-1074 of the
    largest, which counts 1: all of them add at most n·2^-1074); exp and fsum add a few u relative. So
    the log of the sum is raised by ``4u·max(|log_a| + |z|) + 1e-12`` and rounded up."""
    if not len(z):
        return -math.inf
    a = log_a + z
    top = float(a.max())
    s = math.fsum(np.exp(a - top).tolist()) + len(a) * 2.0**-1074  # >= 1: the largest term is e^0
    slack = 4 * _U * float(np.max(np.abs(log_a) + np.abs(z))) + 1e-12
    return _log_up(top + slack, s)


def _log_add_up(v: float, mass: float, z: float) -> float:
    """An upper bound on ``ln(e^v + mass·e^z)`` (mass >= 0), without overflow: the larger exponent plus
    ``ln(1 + e^{−gap})``, raised by a relative 1e-15 (log1p and exp are within an ulp)."""
    if mass <= 0:
        return v
    c = math.log(mass) + z
    if v == -math.inf:
        hi, gap = c, math.inf
    else:
        hi, gap = max(v, c), abs(v - c)
    r = hi + (math.log1p(math.exp(-gap)) if gap < 800 else 0.0)
    return math.nextafter(r + 1e-15 * (abs(hi) + abs(math.log(mass)) + abs(z)) + 1e-300, math.inf)


def _low_tail_bound(log_mgf: tuple, x: float) -> float:
    """An upper bound on ``Σ_{x_i <= x} R_i``: ``e^{x}·Σ_i R_i e^{−x_i}`` (λ = −1 of :data:`LAMBDAS`), rounded up
    as in :func:`_tail_bound`."""
    v = log_mgf[LAMBDAS.index(-1.0)]
    return _exp_up(v + x + 1e-15 * (abs(v) + abs(x)))


def _tail_bound(log_mgf: tuple, x: float) -> float:
    """Chernoff: an upper bound on ``Σ_{x_i >= x} R_i`` from the bounds ``log_mgf`` on ``ln Σ_i R_i e^{λ x_i}``
    (``Σ_{x_i >= x} R_i <= e^{−λx} Σ_i R_i e^{λ x_i}`` for every λ > 0), the best λ of :data:`LAMBDAS`; the
    float exponent is raised by a relative 1e-15 and math.exp's result (within an ulp) by 4 units."""
    return _exp_up(min(lm - lam * x + 1e-15 * (abs(lm) + abs(lam * x)) for lam, lm in zip(LAMBDAS, log_mgf) if lam > 0))


def _exp_up(t: float) -> float:
    """An upper bound on ``e^t`` for a float exponent already raised for its own error: math.exp's result
    (within an ulp) raised by 4 units; 0 at −inf, +inf from 700 on."""
    if t == -math.inf:
        return 0.0
    return math.nextafter(math.exp(t) * (1 + 4 * _U), math.inf) if t < 700 else math.inf


def _check_w(w: Any) -> float:
    w = float(w)
    if not (w > 0 and math.isfinite(w)) or math.frexp(w)[0] != 0.5:
        raise ParameterError(f"w={w!r} must be a positive power of two (e.g. 2**-11) so grid losses are exact floats")
    return w


def _ceil_div(n: int, d: int) -> int:
    return -((-n) // d)


# --------------------------------------------------------------------------- the value


@dataclass(frozen=True, eq=False)
class PLD:
    """A certified bound on the privacy-loss distribution of ONE ordered pair (P, Q).

    Grid: ``x_i = (offset + i)·w``, ``i = 0 .. len(masses) − 1``, ``w`` a power of two.
    Let ``μ = Σ_i masses[i]·δ_{x_i} + infinity_mass·δ_{+∞}`` (a measure on ``[−∞, +∞]``) and let
    ``ℒ`` be the law of ``L(y) = ln P(y)/Q(y)`` for ``y ~ P``.

    Invariant, ``pessimistic=True`` (upper): for EVERY non-decreasing ``f: [−∞, +∞] -> [0, ∞)``,
    ``E_ℒ[f] <= ∫ f dμ``. Leaves establish it bucket-wise: ``masses[0] >= P[L <= x_0]``,
    ``masses[i] >= P[x_i − w < L <= x_i]`` (0 < i < n), ``infinity_mass >= P[L > x_{n−1}]``
    (including ``L = +∞``): each loss is moved UP to its grid point and each mass is rounded up, and
    moving mass up or adding mass can only increase ``∫ f dμ`` for ``f >= 0`` non-decreasing.
    Hence ``δ(ε) = E_ℒ[f_ε] <= Σ_i masses[i]·max(0, 1 − e^{ε − x_i}) + infinity_mass``.
    The invariant is kept by composition (if μ₁, μ₂ dominate independent L₁, L₂ then μ₁*μ₂ dominates
    L₁ + L₂: for fixed l₁, ``l₁ -> ∫ f(l₁ + x) dμ₂(x)`` is again non-negative and non-decreasing), by
    truncation (mass moved up, to a kept grid point or to +∞) and by coarsening (merged buckets take
    the upper loss). ``Σ masses + infinity_mass`` may exceed 1 slightly (every bucket is an upper
    bound, convolution slack is added to every entry): that is sound, the invariant asks only for an
    upper bound on ``∫ f`` for non-negative ``f``; the excess is part of the certified overestimate.

    Equivalently (moving a loss up, with the released Q-mass put at −∞, is again a pair that dominates),
    the masses are pointwise at least the loss law of SOME pair that dominates (P, Q) in every
    hockey-stick divergence: the form the connect-the-dots leaves of :mod:`._pld_shift` establish (they
    move mass down as well as up, keeping E[e^{−L}]), and the one composition keeps (the product of
    dominating pairs dominates the product; pointwise bounds convolve).

    ``err2``: float error not yet added to the masses, bounded in the 2-norm: the (dominating) masses are
    at most ``masses + e`` (pessimistic; at least ``masses − e`` optimistic) with ``||e||₂ <= err2``.
    Every sum over a set K of buckets then carries at most ``err2·√|K|`` more (Cauchy–Schwarz), far
    less than adding err2 to every bucket (what an FFT's norm-wise error bound would otherwise need).

    ``log_mgf`` (pessimistic only): upper bounds, one per λ of :data:`LAMBDAS`, on ``ln Σ_i R_i e^{λ x_i}``,
    the moment generating function of the finite part of that dominating law ``R`` (``R_i`` its mass at
    ``x_i``, at most ``masses[i] + e_i``); None: computed from the masses when needed (:meth:`mgf_bounds`).
    A composition carries the sum of its operands' bounds (the finite part of a product of laws is the
    product of their finite parts), so its truncation can bound its upper tail by Chernoff's inequality,
    ``Σ_{x_i >= x} R_i <= e^{ln M(λ) − λx}``, instead of by its computed masses, which below about 1e-16
    of the largest are floating-point noise of the convolution (see :func:`_truncate`).

    ``pessimistic=False`` (lower): ``∫ f dμ <= E_ℒ[f]`` for every such ``f``; bucket-wise
    ``masses[i] <= P[x_i <= L < x_i + w]``, losses rounded DOWN, masses rounded down, truncated tails
    dropped, ``infinity_mass`` a lower bound on ``P[L = +∞]`` (0 unless known). Then the same sum is a
    certified LOWER bound on δ(ε).
    """

    w: float
    offset: int
    masses: np.ndarray
    infinity_mass: float
    pessimistic: bool = True
    err2: float = 0.0
    log_mgf: tuple | None = None

    def __post_init__(self) -> None:
        m = np.ascontiguousarray(self.masses, dtype=np.float64)
        if m.ndim != 1 or len(m) == 0 or not np.all(np.isfinite(m)) or np.any(m < 0):
            raise ParameterError("masses must be a non-empty 1-D array of finite non-negative floats")
        m.setflags(write=False)
        object.__setattr__(self, "masses", m)
        _check_w(self.w)
        if not (self.infinity_mass >= 0 and math.isfinite(self.infinity_mass)):
            raise ParameterError(f"infinity_mass={self.infinity_mass!r} must be finite and >= 0")
        if not (self.err2 >= 0 and math.isfinite(self.err2)):
            raise ParameterError(f"err2={self.err2!r} must be finite and >= 0")
        if self.log_mgf is not None:
            lm = tuple(float(v) for v in self.log_mgf)
            if len(lm) != len(LAMBDAS) or any(math.isnan(v) or v == math.inf for v in lm) or not self.pessimistic:
                raise ParameterError(
                    f"log_mgf={self.log_mgf!r} must hold one bound below +inf per λ of LAMBDAS, for a pessimistic PLD"
                )
            object.__setattr__(self, "log_mgf", lm)

    # ---------------------------------------------------------------- views
    @property
    def losses(self) -> np.ndarray:
        """The grid losses x_i (exact floats)."""
        return (self.offset + np.arange(len(self.masses), dtype=np.float64)) * self.w

    def total_mass(self) -> float:
        """Certified bound on the total mass (finite part plus +∞), the 2-norm error included."""
        if self.pessimistic:
            return _fsum_up(list(self.masses) + [self.infinity_mass, _err_sum(self.err2, len(self.masses))])
        return max(_fsum_down(list(self.masses) + [self.infinity_mass]) - _err_sum(self.err2, len(self.masses)), 0.0)

    def __repr__(self) -> str:
        kind = "upper" if self.pessimistic else "lower"
        return (
            f"PLD({kind}, w=2**{int(math.log2(self.w))}, losses [{self.offset * self.w:.6g}, "
            f"{(self.offset + len(self.masses) - 1) * self.w:.6g}], {len(self.masses)} buckets, "
            f"infinity_mass={self.infinity_mass:.3g})"
        )

    def mgf_bounds(self) -> tuple:
        """Upper bounds on ``ln Σ_i R_i e^{λ x_i}`` for each λ of :data:`LAMBDAS` (pessimistic only): the
        carried ones, or from the masses: ``Σ_i (masses[i] + e_i) e^{λ x_i} <= Σ_i masses[i] e^{λ x_i} +
        err2·||e^{λx}||₂`` (Cauchy–Schwarz), each sum in log space (:func:`_log_sum_exp_up`)."""
        if self.log_mgf is not None:
            return self.log_mgf
        if not self.pessimistic:
            raise ParameterError("mgf_bounds() bounds a pessimistic PLD only")
        x = self.losses
        held = self.masses > 0
        log_m = np.log(self.masses[held])
        out = []
        for lam in LAMBDAS:
            z = lam * x  # exact: λ a power of two (or −1), x a multiple of w
            v = _log_sum_exp_up(log_m, z[held])  # ln Σ masses e^{λx}
            if self.err2:  # ln(err2·||e^{z}||₂) = ln err2 + ½ ln Σ e^{2z}
                e = 0.5 * _log_sum_exp_up(np.zeros(len(z)), 2 * z)
                v = _log_add_up(v, self.err2, e)
            out.append(v)
        return tuple(out)

    # ---------------------------------------------------------------- δ(ε)
    def _delta_fast(self, eps: float) -> float:
        """Uncertified float evaluation (used only to locate ε before certifying it)."""
        x = self.losses
        k = np.searchsorted(x, eps, side="right")
        terms = self.masses[k:] * -np.expm1(eps - x[k:])
        return float(np.sum(terms)) + self.infinity_mass

    def delta(self, eps: float) -> float:
        """Certified bound on δ(ε) (upper if pessimistic, lower otherwise).

        Error analysis: only terms with x_i > ε are non-zero (exact float comparison). Each term
        ``masses[i]·(−expm1(ε − x_i))`` is computed in float64: the subtraction, expm1 (numpy's,
        assumed accurate to < 1e-13 relative — it is within a few ulp) and the product each contribute
        at most a few units of u = 2^-53 relative (1 − e^{−z} has relative condition number <= 1 in z),
        and math.fsum is correctly rounded; a relative slack of 1e-12 (≈ 9000 u) covers all of it.
        """
        eps = float(eps)
        if math.isnan(eps):
            raise ParameterError("eps=nan is not a number")
        x = self.losses
        k = int(np.searchsorted(x, eps, side="right"))  # x[k:] > eps
        terms = self.masses[k:] * -np.expm1(eps - x[k:])
        s = math.fsum(terms.tolist())
        # the 2-norm error: Σ_k e_k·f_ε(x_k) <= ||e||₂·||f_ε||₂ <= err2·√(number of x_k > ε), f_ε ∈ [0, 1]
        e = _err_sum(self.err2, len(x) - k)
        if self.pessimistic:
            s = s * (1 + _DELTA_REL) + self.infinity_mass + e
            s = math.nextafter(s * (1 + 4 * _U), math.inf)
            return s
        s = s * (1 - _DELTA_REL) + self.infinity_mass - e
        return max(math.nextafter(s * (1 - 4 * _U), -math.inf), 0.0)

    def epsilon(self, delta: float) -> float:
        """Pessimistic: a float ε with a CERTIFIED δ(ε) <= delta (so the pair is (ε, delta)-DP), found
        near the smallest such ε (within ~1e-9 relative of it on this grid); +inf if none
        (``infinity_mass > delta``). Optimistic: a float ε with certified lower bound δ_lo(ε) > delta
        (so the true ε(delta) > ε), near the largest such; ``-inf`` if there is none (then only
        ε(delta) >= −inf is known)."""
        delta = float(delta)
        if not (0 <= delta <= 1):
            raise ParameterError(f"delta={delta!r} must be in [0, 1]")
        x = self.losses
        lo_e, hi_e = float(x[0]) - 1.0, float(x[-1]) + 1.0
        # δ(ε) is non-increasing in ε: bracket with the fast evaluator, then certify by stepping away
        if self.pessimistic:
            if self.delta(hi_e) > delta:
                return math.inf
            e = self._bracket(lo_e, hi_e, delta)[1]
            step = 1e-10 * max(1.0, abs(e))
            while self.delta(e) > delta:  # certify; step up if the fast guess was a hair too low
                e += step
                step *= 2
            return e
        if self.delta(lo_e) <= delta:
            return -math.inf
        e = self._bracket(lo_e, hi_e, delta)[0]
        step = 1e-10 * max(1.0, abs(e))
        while self.delta(e) <= delta:
            e -= step
            step *= 2
        return e

    def _bracket(self, lo_e: float, hi_e: float, delta: float) -> tuple[float, float]:
        """Bisection on the uncertified δ(ε): (lo, hi) with fast δ(lo) > delta >= fast δ(hi), to ~1e-12."""
        for _ in range(200):
            mid = (lo_e + hi_e) / 2
            if mid in (lo_e, hi_e) or hi_e - lo_e < 1e-12 * max(1.0, abs(hi_e)):
                break
            if self._delta_fast(mid) > delta:
                lo_e = mid
            else:
                hi_e = mid
        return lo_e, hi_e


@dataclass(frozen=True, eq=False)
class PLDPair:
    """The two directions of a neighbour pair: ``forward`` bounds the loss of (P, Q) (P the law on the
    dataset with the record, Q without: the "remove" direction), ``backward`` that of (Q, P) ("add").
    For add/remove neighbours a mechanism is (ε, δ)-DP iff both directions have δ(ε) <= δ; for
    symmetric noise with a symmetric shift both directions have the same loss law and ``backward is
    forward`` (the constructors say why)."""

    forward: PLD
    backward: PLD

    @property
    def pessimistic(self) -> bool:
        return self.forward.pessimistic

    @property
    def symmetric(self) -> bool:
        return self.backward is self.forward

    def delta(self, eps: float) -> float:
        """Certified bound on max(δ_forward(ε), δ_backward(ε))."""
        if self.symmetric:
            return self.forward.delta(eps)
        return max(self.forward.delta(eps), self.backward.delta(eps))

    def epsilon(self, delta: float) -> float:
        if self.symmetric:
            return self.forward.epsilon(delta)
        return max(self.forward.epsilon(delta), self.backward.epsilon(delta))


# --------------------------------------------------------------------------- building leaves


class _Builder:
    """Accumulates (loss bucket index, exact-ish mass) pieces in mpmath and rounds once."""

    def __init__(self, w: float, pessimistic: bool) -> None:
        self.w = w
        self.wf = Fraction(w)
        self.pess = pessimistic
        self.acc: dict[int, Any] = {}
        self.inf = 0

    def index(self, loss: Fraction) -> int:
        """The grid index of an exact loss: ceil(L/w) (pessimistic) or floor(L/w) (optimistic)."""
        q = loss / self.wf
        return _ceil_div(q.numerator, q.denominator) if self.pess else q.numerator // q.denominator

    def add(self, j: int, mass: Any) -> None:
        if mass > 0:
            self.acc[j] = self.acc.get(j, 0) + mass

    def add_infinite(self, mass: Any) -> None:
        self.inf = self.inf + mass

    def build(self) -> PLD:
        if not self.acc:
            self.acc[0] = 0
        lo, hi = min(self.acc), max(self.acc)
        rnd = _up if self.pess else _down
        masses = np.zeros(hi - lo + 1)
        for j, m in self.acc.items():
            masses[j - lo] = rnd(m)
        inf = rnd(self.inf) if self.inf != 0 else 0.0
        return PLD(self.w, lo, masses, inf, self.pess)


def _as_fraction(x: Any, name: str) -> Fraction:
    try:
        f = Fraction(x) if not isinstance(x, Fraction) else x
    except (TypeError, ValueError):
        try:
            f = Fraction(int(x.p), int(x.q))  # sympy Rational
        except Exception as e:  # noqa: BLE001
            raise ParameterError(
                f"{name}={x!r} must be an exact rational (int, Fraction, float or sympy Rational)"
            ) from e
    if f <= 0:
        raise ParameterError(f"{name}={x!r} must be > 0")
    return f


def _mpf(q: Fraction):
    import mpmath

    return mpmath.mpf(q.numerator) / q.denominator


@functools.lru_cache(maxsize=64)  # leaves are pure functions of exact parameters
def discrete_laplace(t: Any, shift: int, *, w: float = DEFAULT_W, pessimistic: bool = True) -> PLDPair:
    """PLD of the discrete Laplace pair: P = DL(t) centred at 0, Q centred at ``shift`` (integer grid
    steps), ``P(k) = tanh(1/(2t))·e^{−|k|/t}``.

    Loss (D = |shift|): ``L(k) = (|k − D| − |k|)/t``: ``D/t`` for k <= 0 (mass 1/(1+e^{−1/t})),
    ``−D/t`` for k >= D (mass e^{−D/t}/(1+e^{−1/t})), ``(D − 2k)/t`` for 0 < k < D, grouped per loss
    bucket in closed form (a geometric sum of e^{−k/t}). Directions: for y ~ Q write y = shift + z,
    z ~ P; the loss of (Q, P) is L'(z) = ln p(z)/p(z + shift) = L(−z) (p even), and −z ~ P, so both
    directions have the same loss law (and so does a negative shift): ``backward is forward``.
    """
    import mpmath

    t = _as_fraction(t, "t")
    if int(shift) != shift:
        raise ParameterError(f"shift={shift!r} must be an integer number of grid steps")
    D = abs(int(shift))
    w = _check_w(w)
    b = _Builder(w, pessimistic)
    with mpmath.workdps(_DPS):
        tm = _mpf(t)
        den = 1 + mpmath.exp(-1 / tm)
        if D == 0:
            b.add(0, mpmath.mpf(1))
        else:
            b.add(b.index(Fraction(D) / t), 1 / den)
            b.add(b.index(-Fraction(D) / t), mpmath.exp(-D / tm) / den)
            # 0 < k < D, loss (D − 2k)/t decreasing in k; bucket j holds k in [ceil((D − j w t)/2), ...]
            _group_affine(
                b,
                alpha=Fraction(D) / t,
                beta=2 / t,
                k_lo=1,
                k_hi=D - 1,
                range_mass=lambda a, c: mpmath.exp(-a / tm) * -mpmath.expm1(-(c - a + 1) / tm) / den,
            )
    pld = b.build()
    return PLDPair(pld, pld)


def _group_affine(
    b: _Builder, alpha: Fraction, beta: Fraction, k_lo: int, k_hi: int, range_mass: Callable[[int, int], Any]
) -> None:
    """Integer k in [k_lo, k_hi] with loss α − βk (β > 0): put range_mass(a, c) (a bound on the
    P-mass of k in [a, c], in the builder's direction) into each bucket's index. Pessimistic bucket j
    holds the k with (j−1)w < α − βk <= jw, i.e. k ∈ [ceil((α − jw)/β), ceil((α − (j−1)w)/β) − 1];
    optimistic bucket j holds jw <= α − βk < (j+1)w."""
    if k_lo > k_hi:
        return
    j_first, j_last = b.index(alpha - beta * k_hi), b.index(alpha - beta * k_lo)
    # (α − j w)/β = (an − j·bn)/den in integers
    A, Bw = alpha / beta, b.wf / beta
    den = A.denominator * Bw.denominator // math.gcd(A.denominator, Bw.denominator)
    an, bn = A.numerator * (den // A.denominator), Bw.numerator * (den // Bw.denominator)
    if b.pess:
        # bucket j: k in [ceil((α − jw)/β), ceil((α − (j−1)w)/β) − 1]
        def first(j: int) -> int:
            return -((j * bn - an) // den)

        ends = [(first(j), first(j - 1) - 1) for j in range(j_first, j_last + 1)]
    else:
        # bucket j: jw <= α − βk < (j+1)w, k in [floor((α − (j+1)w)/β) + 1, floor((α − jw)/β)]
        def last(j: int) -> int:
            return (an - j * bn) // den

        ends = [(last(j + 1) + 1, last(j)) for j in range(j_first, j_last + 1)]
    for j, (a, c) in zip(range(j_first, j_last + 1), ends):
        a, c = max(a, k_lo), min(c, k_hi)
        if a <= c:
            b.add(j, range_mass(a, c))


@functools.lru_cache(maxsize=64)  # leaves are pure functions of exact parameters
def randomized_response(k: int, L: Any, *, w: float = DEFAULT_W, pessimistic: bool = True) -> PLDPair:
    """PLD of k-ary randomized response with log-odds L (P(y = x) = e^L/(e^L + k − 1), every other
    value 1/(e^L + k − 1)), for any two distinct records x, x'. Under P: loss +L w.p. e^L/(e^L+k−1)
    (y = x), −L w.p. 1/(e^L+k−1) (y = x'), 0 w.p. (k−2)/(e^L+k−1). Swapping x and x' maps (Q, P) to
    (P, Q), so ``backward is forward``. ``L`` is an exact rational (Fraction, int, float) or a sympy
    expression, then enclosed to 50 digits and the enclosure's safe end used."""
    import mpmath

    if int(k) != k or k < 2:
        raise ParameterError(f"k={k!r} must be an integer >= 2")
    k = int(k)
    w = _check_w(w)
    try:
        Llo = Lhi = Fraction(L)
    except (TypeError, ValueError):
        import sympy as sp

        v = Fraction(str(sp.N(L, 60)))
        Llo, Lhi = v - Fraction(1, 10**50), v + Fraction(1, 10**50)
    if Llo < 0:
        raise ParameterError(f"L={L!r} must be >= 0")
    b = _Builder(w, pessimistic)
    with mpmath.workdps(_DPS):
        # mass of +L increases with L, the others decrease: take the end that is safe for each
        up = pessimistic
        La, Lb = (_mpf(Lhi), _mpf(Llo)) if up else (_mpf(Llo), _mpf(Lhi))
        b.add(b.index(Lhi if up else Llo), mpmath.exp(La) / (mpmath.exp(La) + k - 1))
        b.add(b.index(-Llo if up else -Lhi), 1 / (mpmath.exp(Lb) + k - 1))
        if k > 2:
            b.add(0, (k - 2) / (mpmath.exp(Lb) + k - 1))
    pld = b.build()
    return PLDPair(pld, pld)


@functools.lru_cache(maxsize=64)  # leaves are pure functions of exact parameters
def discrete_gaussian(
    tau2: Any, shift: int, *, w: float = DEFAULT_W, tail: float = DEFAULT_TAIL, pessimistic: bool = True
) -> PLDPair:
    """PLD of the discrete Gaussian pair: P = N_Z(0, τ²), Q = N_Z(shift, τ²) (integer grid steps),
    ``P(y) = e^{−y²/(2τ²)}/Z``, ``Z = Σ_y e^{−y²/(2τ²)}``.

    Loss (D = |shift|): ``L(y) = (D² − 2yD)/(2τ²)``, affine and decreasing in y; bucket j holds an
    integer range of y. Masses:

    * small supports (<= 60 000 values of y in the kept range ``|y| <= N``): each ``P(y)`` with Z
      enclosed as ``Σ_{|y|<=N} e^{..} + [0, 2∫_N^∞ e^{..}]`` (f decreasing beyond N);
    * otherwise per bucket y ∈ [a, c]: with m the middle integer and y = m + k,
      ``f(y) = f(m)·e^{−km/τ²}·e^{−k²/(2τ²)}`` and ``e^{−h²/(2τ²)} <= e^{−k²/(2τ²)} <= 1`` (h = max|k|),
      so ``Σ f(y)`` is enclosed by ``f(m)·Σ_k e^{−km/τ²}`` (a geometric sum in closed form) times
      ``[e^{−h²/(2τ²)}, 1]`` (relative width ≈ (w/2)²·τ²/D², tiny); and by Poisson summation
      ``τ√(2π) <= Z <= τ√(2π)(1 + 2e^{−2π²τ²}/(1 − e^{−2π²τ²}))`` (Z = τ√(2π)·Σ_k e^{−2π²τ²k²}).

    Truncation: the kept range |y| <= N, N ≈ τ√(2 ln(4/tail)) + D + 2; the mass beyond (each side at
    most tail/2) goes, pessimistically, to the lowest bucket (y > N: losses below the kept ones) and
    to ``infinity_mass`` (y < −N), bounded by ``f(N) + ∫_N^∞ f`` over Z; optimistically it is dropped.
    Directions: as for the discrete Laplace (f even), ``backward is forward``.
    """
    import mpmath

    tau2 = _as_fraction(tau2, "tau2")
    if int(shift) != shift:
        raise ParameterError(f"shift={shift!r} must be an integer number of grid steps")
    D = abs(int(shift))
    w = _check_w(w)
    b = _Builder(w, pessimistic)
    if D == 0:
        b.add(0, 1)
        pld = b.build()
        return PLDPair(pld, pld)
    tau = math.sqrt(float(tau2))
    N = int(math.ceil(tau * math.sqrt(2 * math.log(4 / tail)))) + D + 2
    alpha, beta = Fraction(D * D) / (2 * tau2), Fraction(D) / tau2
    extra = len(str(max(1, math.ceil(tau2)))) + 2
    with mpmath.workdps(_DPS + extra):
        t2 = _mpf(tau2)
        tm = mpmath.sqrt(t2)
        s2 = tm * mpmath.sqrt(2)

        def G(x):  # ∫_x^∞ e^{−u²/(2τ²)} du for x >= 0
            return tm * mpmath.sqrt(mpmath.pi / 2) * mpmath.erfc(x / s2)

        def f(y):
            return mpmath.exp(-(mpmath.mpf(y) ** 2) / (2 * t2))

        tail_sum = f(N) + G(mpmath.mpf(N))  # >= Σ_{y>N} f(y) >= Σ_{y>=N+1}... (f decreasing on [N, ∞))
        if 2 * N + 1 <= _ENUMERATE_MAX:
            fs = [f(y) for y in range(-N, N + 1)]
            z_in = mpmath.fsum(fs)
            z_lo, z_hi = z_in, z_in + 2 * G(mpmath.mpf(N))
            zdiv = z_lo if pessimistic else z_hi
            for y, fy in zip(range(-N, N + 1), fs):
                b.add(b.index(alpha - beta * y), fy / zdiv)
        else:
            c = tm * mpmath.sqrt(2 * mpmath.pi)
            q = mpmath.exp(-2 * mpmath.pi**2 * t2)
            z_lo, z_hi = c, c * (1 + 2 * q / (1 - q))
            zdiv = z_lo if pessimistic else z_hi

            def range_mass(a: int, cc: int):
                # y = m + k, m = the range's middle integer: f(y) = f(m)·r^k·e^{−k²/(2τ²)},
                # r = e^{−m/τ²}; 1 >= e^{−k²/(2τ²)} >= e^{−h²/(2τ²)} with h = max |k|
                m = (a + cc) // 2
                k0, n = a - m, cc - a + 1
                h = max(m - a, cc - m)
                if m == 0:
                    geo = mpmath.mpf(n)
                else:
                    lr = -mpmath.mpf(m) / t2  # ln r
                    # e^x − 1 for |x| >= 1/τ² loses <= log10(τ²) + 1 digits: the working precision
                    # carries that many extra (see workdps below), so _REL still covers the error
                    geo = (mpmath.exp(lr * n) - 1) / (mpmath.exp(lr) - 1)
                fm = mpmath.exp(-mpmath.mpf(m * m) / (2 * t2) + (lr * k0 if m else 0))  # f(m)·r^{k0}
                v = fm * geo
                if not pessimistic:
                    v = v * mpmath.exp(-mpmath.mpf(h * h) / (2 * t2))
                return v / zdiv

            _group_affine(b, alpha, beta, -N, N, range_mass)
        if pessimistic:
            b.add(b.index(alpha - beta * N), tail_sum / z_lo)  # y > N: losses below L(N)
            b.add_infinite(tail_sum / z_lo)  # y < −N: losses above L(−N)
    pld = b.build()
    return PLDPair(pld, pld)


# --------------------------------------------------------------------------- composition


def _fft_slack(a: np.ndarray, b: np.ndarray, n_fft: int) -> float:
    """Per-entry absolute bound on |fft_convolve(a, b) − a*b| for the computation in _convolve.

    Higham (Accuracy and Stability of Numerical Algorithms, 2nd ed., Thm 24.2): a radix-2 FFT
    computed with twiddle factors accurate to μ satisfies ||ŷ − y||₂ <= κ||y||₂,
    κ = log₂N·η/(1 − log₂N·η), η = μ + γ₄(√2 + μ). With the unitary DFT F_u (||F_u x||₂ = ||x||₂,
    ||F_u x||_∞ <= ||x||₁/√N) and y = √N F_u*(F_u a ⊙ F_u b): the forward errors contribute
    2κ(1 + κ)||a||₂||b||₁, the pointwise complex product √2γ₂(1 + κ)²||a||₂||b||₁ and the inverse
    transform κ(1 + ξ)||a||₂||b||₁ (ξ the preceding sum), in the 2-norm, which bounds every entry; by
    symmetry ||a||₂||b||₁ may be replaced by the smaller of it and ||a||₁||b||₂. N is a power of two,
    so numpy's 1/N scaling is exact. ASSUMPTION: numpy's pocketfft (radix-4/radix-2 passes, twiddles
    computed to ~1 ulp) obeys this bound with μ = 4u; a safety factor of 8 is applied on top, and the
    bound is checked empirically against direct summation in tests/test_pld.py.
    """
    u = _U
    lg = max(1, int(round(math.log2(n_fft))))
    mu = 4 * u
    g4 = 4 * u / (1 - 4 * u)
    eta = mu + g4 * (math.sqrt(2) + mu)
    kappa = lg * eta / (1 - lg * eta)
    gc = math.sqrt(2) * 2 * u / (1 - 2 * u)
    xi = 2 * kappa * (1 + kappa) + gc * (1 + kappa) ** 2
    total = xi + kappa * (1 + xi)
    na2, nb2 = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    na1, nb1 = float(np.sum(a)), float(np.sum(b))
    norm = min(na2 * nb1, na1 * nb2) * (1 + 1e-10)  # the norms themselves are computed to ~n u
    return 8 * total * norm + 1e-300 * n_fft


_DIRECT_MAX = 100_000_000  # len(a)·len(b) up to which the direct sum is used (see _convolve)


def _convolve(a: np.ndarray, b: np.ndarray, pessimistic: bool) -> tuple[np.ndarray, float]:
    """The convolution of non-negative a and b with a proven bound on its floating-point error.

    Direct: entry k is a sum of at most n = min(len a, len b) non-negative products in some order;
    |ŷ_k − y_k| <= γ_n y_k <= γ_n ŷ_k/(1 − γ_n) (Higham Thm 3.1/3.5), γ_n = n u/(1 − n u): every entry
    is moved up (pessimistic) or down by it, and the 2-norm error returned is 0.
    FFT: the entries as computed (negative ones raised to 0: the exact entries are >= 0, so this only
    shrinks the error) and the 2-norm bound of :func:`_fft_slack` on their error. Returns (entries, the
    2-norm error bound). The direct sum up to 10^8 products: its error is relative to each entry, while an
    FFT's bound is absolute and every later squaring doubles it; with the FFT from 4·10^6 products on, the
    bound was most of the certified δ(1e-5) of 10^5 subsampled Gaussians (ε 1.669 against 1.658 without it)."""
    n = len(a) + len(b) - 1
    if len(a) * len(b) <= _DIRECT_MAX:
        y = np.convolve(a, b)
        m = min(len(a), len(b))
        g = m * _U / (1 - m * _U)
        rel = g / (1 - g) * 1.0000001
        return (y * (1 + rel) if pessimistic else np.maximum(y * (1 - rel), 0.0)), 0.0
    n_fft = 1 << (n - 1).bit_length()
    A = np.fft.fft(a.astype(np.complex128), n_fft)
    B = np.fft.fft(b.astype(np.complex128), n_fft)
    y = np.fft.ifft(A * B)[:n].real
    return np.maximum(y, 0.0), _fft_slack(a, b, n_fft)


def _truncate(p: PLD, tail: float) -> PLD:
    """Pessimistic: move the top tail to +∞ and the bottom tail onto the lowest kept bucket; optimistic:
    drop both. Either moves mass in the safe direction, so soundness does not depend on where the cut is.

    Optimistic, each cut is where the computed masses beyond it reach tail/2. Pessimistic, the top cut is
    where Chernoff's bound (:func:`_tail_bound` of the carried MGF bounds) on the dominating law's mass
    at and above it is at most tail/2, and the bottom cut the higher of the computed masses' rule and
    the last loss where ``e^{x}·M(−1)`` (:func:`_low_tail_bound`) bounds the mass at and below it by
    tail/2. The mass moved is the
    smaller of the two bounds on it: the computed masses with their share of the 2-norm error
    (err2·√(buckets moved)), and the MGF's. Beyond about 1e-16 of the largest mass the computed masses of a
    convolution are floating-point noise: cut by them alone, a composition of 10^5 leaves kept millions of
    noise buckets and moved their error share, about 10^-4 in all, to +∞. The mass moved up from the
    bottom now sits at the lowest kept loss x_lo: the MGF bounds of λ > 0 rise by it times ``e^{λ x_lo}``."""
    m = p.masses
    if tail <= 0 or len(m) < 3:
        return p
    lm = p.mgf_bounds() if p.pessimistic else None
    sig = m
    cs = np.cumsum(sig)  # only used to choose the cut points; the moved mass is summed exactly below
    lo = int(np.searchsorted(cs, tail * 0.5, side="right"))  # m[:lo] sums to about <= tail/2
    rc = np.cumsum(sig[::-1])
    hi_cut = int(np.searchsorted(rc, tail * 0.5, side="right"))
    hi = len(m) - hi_cut
    if lm is not None:
        # the first loss x with Chernoff's bound on the mass at x and above <= tail/2, and the last one
        # with the bound e^{x}·M(−1) on the mass at x and below <= tail/2
        x_top = min((v - math.log(tail * 0.5)) / lam for lam, v in zip(LAMBDAS, lm) if lam > 0)
        if math.isfinite(x_top):  # (-inf: no finite mass at all)
            # the top by Chernoff alone: the computed masses' rule would move their error share to +∞
            hi = min(len(m), max(int(math.ceil(x_top / p.w)) - p.offset, lo + 1))
        x_bottom = math.log(tail * 0.5) - lm[LAMBDAS.index(-1.0)]
        if math.isfinite(x_bottom) and x_bottom > p.offset * p.w:
            lo = max(lo, min(int(math.floor(x_bottom / p.w)) - p.offset + 1, hi - 1))
    if hi - lo < 1:
        return p
    keep = m[lo:hi].copy()
    inf = p.infinity_mass
    if p.pessimistic:
        assert lm is not None
        if lo > 0:  # the buckets below lo onto bucket lo (its own error stays in err2)
            moved = _fsum_up(m[:lo].tolist() + [_err_sum(p.err2, lo)])
            moved = min(moved, _low_tail_bound(lm, (p.offset + lo - 1) * p.w))
            keep[0] = _fsum_up([m[lo], moved])
            x_lo = (p.offset + lo) * p.w  # the moved mass now sits here: the MGF bounds of λ > 0 rise
            lm = tuple(_log_add_up(v, moved, lam * x_lo) if lam > 0 else v for lam, v in zip(LAMBDAS, lm))
        if hi < len(m):
            moved = _fsum_up(m[hi:].tolist() + [_err_sum(p.err2, len(m) - hi)])
            moved = min(moved, _tail_bound(p.mgf_bounds(), (p.offset + hi) * p.w))
            inf = _fsum_up([inf, moved])
    return PLD(p.w, p.offset + lo, keep, inf, p.pessimistic, p.err2, lm)


def _coarsen(p: PLD) -> PLD:
    """w -> 2w. Pessimistic: grid index j goes to ceil(j/2) (the loss moves up); optimistic: floor.
    Two-float sums are rounded once to nearest, so one nextafter makes them safe."""
    m = p.masses
    start = p.offset
    if p.pessimistic:
        # pad so that pairs are (2k−1, 2k) -> k
        pad_front = 1 if start % 2 == 0 else 0
        new_off = (start - pad_front + 1) // 2
    else:
        pad_front = 1 if start % 2 != 0 else 0  # pairs (2k, 2k+1) -> k
        new_off = (start - pad_front) // 2
    arr = np.concatenate([np.zeros(pad_front), m])
    if len(arr) % 2:
        arr = np.concatenate([arr, np.zeros(1)])
    s = arr[0::2] + arr[1::2]
    s = np.nextafter(s, np.inf) if p.pessimistic else np.maximum(np.nextafter(s, -np.inf), 0.0)
    s = np.where((arr[0::2] == 0) | (arr[1::2] == 0), arr[0::2] + arr[1::2], s)  # exact when one is 0
    # merged pairs of errors: ||(e_{2k} + e_{2k+1})_k||₂ <= √2·||e||₂
    err2 = math.nextafter(p.err2 * math.sqrt(2) * (1 + 4 * _U), math.inf) if p.err2 else 0.0
    # pessimistic: every loss moves up by at most the old w, so each MGF bound rises by at most λ·(new w)
    lm = None
    if p.pessimistic:
        lm = tuple(
            math.nextafter(v + lam * p.w * 2, math.inf) if lam > 0 else v for lam, v in zip(LAMBDAS, p.mgf_bounds())
        )
    return PLD(p.w * 2, new_off, s, p.infinity_mass, p.pessimistic, err2, lm)


def _align(ps: Sequence[PLD]) -> list[PLD]:
    wmax = max(p.w for p in ps)
    out = []
    for p in ps:
        while p.w < wmax:
            p = _coarsen(p)
        out.append(p)
    return out


def _compose2(a: PLD, b: PLD, tail: float, max_buckets: int) -> PLD:
    """(m_a + e_a)*(m_b + e_b) = m_a*m_b + e_a*m_b + m_a*e_b + e_a*e_b, and by Young's inequality
    ||e_a*m_b||₂ <= ||e_a||₂·||m_b||₁, ||e_a*e_b||₂ <= ||e_a||₂·√n_b·||e_b||₂: the product's 2-norm error
    is E_a·S_b + S_a·E_b + E_a·E_b·√min(n_a, n_b) plus the convolution's own (S the finite masses' sums)."""
    a, b = _align([a, b])
    m, slack = _convolve(a.masses, b.masses, a.pessimistic)
    ta, tb = a.total_mass(), b.total_mass()
    if a.pessimistic:
        # μ_a*μ_b puts m_a∞·(|μ_b| + m_b∞) + m_b∞·|μ_a| at +∞ (|μ| the finite part's mass)
        inf = a.infinity_mass * tb + b.infinity_mass * (ta - a.infinity_mass)
        inf = math.nextafter(inf * (1 + 4 * _U), math.inf)
        sa, sb = ta - a.infinity_mass, tb - b.infinity_mass
    else:
        inf = a.infinity_mass * b.infinity_mass  # only the product is certainly at +∞; keep it low
        inf = max(math.nextafter(inf * (1 - 4 * _U), -math.inf), 0.0)
        sa = _fsum_up(a.masses.tolist()) + _err_sum(a.err2, len(a.masses))
        sb = _fsum_up(b.masses.tolist()) + _err_sum(b.err2, len(b.masses))
    err2 = a.err2 * sb + sa * b.err2 + a.err2 * b.err2 * math.sqrt(min(len(a.masses), len(b.masses))) + slack
    err2 = math.nextafter(err2 * (1 + 8 * _U), math.inf) if err2 else 0.0
    lm = None  # the product's finite part is the product of the finite parts: its MGF, the product of theirs
    if a.pessimistic:
        lm = tuple(math.nextafter(u + v, math.inf) for u, v in zip(a.mgf_bounds(), b.mgf_bounds()))
    p = _truncate(PLD(a.w, a.offset + b.offset, m, inf, a.pessimistic, err2, lm), tail)
    while len(p.masses) > max_buckets:
        p = _coarsen(p)
    return p


def _check_same_kind(ps: Sequence[PLD]) -> None:
    if len({p.pessimistic for p in ps}) > 1:
        raise ParameterError("cannot compose pessimistic (upper) and optimistic (lower) PLDs together")
    for p in ps:
        if math.log2(p.w) != int(math.log2(p.w)):
            raise ParameterError(f"w={p.w!r} must be a power of two")


def compose(
    items: Sequence[PLD | PLDPair], *, tail: float = DEFAULT_TAIL, max_buckets: int = _MAX_BUCKETS
) -> PLD | PLDPair:
    """The PLD of the composition of independent mechanisms (their PLDs, or pairs composed direction
    by direction: the product of the forward pairs and the product of the backward pairs). Grids of
    different powers of two are aligned by coarsening the finer ones pessimistically."""
    items = list(items)
    if not items:
        raise ParameterError("items=[] must hold at least one PLD")
    pairs = [i for i in items if isinstance(i, PLDPair)]
    if len(pairs) == len(items):
        fw = _compose_plds([i.forward for i in pairs], tail, max_buckets)
        if all(i.symmetric for i in pairs):
            return PLDPair(fw, fw)
        bw = _compose_plds([i.backward for i in pairs], tail, max_buckets)
        return PLDPair(fw, bw)
    plds = [i for i in items if isinstance(i, PLD)]
    if len(plds) != len(items):
        raise ParameterError("items must be all PLD or all PLDPair")
    return _compose_plds(plds, tail, max_buckets)


def _compose_plds(items: list[PLD], tail: float, max_buckets: int) -> PLD:
    """:func:`compose` of a non-empty list of PLDs."""
    _check_same_kind(items)
    acc = items[0]
    for p in items[1:]:
        acc = _compose2(acc, p, tail, max_buckets)
    return acc


def self_compose(
    item: PLD | PLDPair, times: int, *, tail: float = DEFAULT_TAIL, max_buckets: int = _MAX_BUCKETS
) -> PLD | PLDPair:
    """``times`` independent copies, by repeated squaring (O(log times) convolutions)."""
    if int(times) != times or times < 1:
        raise ParameterError(f"times={times!r} must be an integer >= 1")
    times = int(times)
    if isinstance(item, PLDPair):
        fw = _self_compose_pld(item.forward, times, tail, max_buckets)
        if item.symmetric:
            return PLDPair(fw, fw)
        return PLDPair(fw, _self_compose_pld(item.backward, times, tail, max_buckets))
    return _self_compose_pld(item, times, tail, max_buckets)


def _self_compose_pld(item: PLD, times: int, tail: float, max_buckets: int) -> PLD:
    """:func:`self_compose` of one PLD (``times`` >= 1, validated)."""
    result: PLD | None = None
    base = item
    while True:
        if times & 1:
            result = base if result is None else _compose2(result, base, tail, max_buckets)
        times >>= 1
        if not times:
            assert result is not None  # times >= 1: its highest set bit has set result
            return result
        base = _compose2(base, base, tail, max_buckets)
