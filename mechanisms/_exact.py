"""Exact vectorised samplers: Bernoulli(p) for exactly specified p, Bernoulli(exp(-x)), the discrete
Laplace (two-sided geometric) and the discrete Gaussian on the integers, and k-ary randomized response.

"Exact" means: if ``rng`` delivers ideal independent uniform bits, the output law is exactly the
stated law, at every parameter accepted (no float rounding of a probability, no truncation).

Technique: comparison with lazily refined uniforms
--------------------------------------------------
Every decision is a deterministic function of ideal uniforms ``U`` in [0, 1), each an infinite
sequence of random bits of which only a prefix is drawn: 53 bits first (one 64-bit word of
``rng.bit_generator.random_raw``, ``h = word >> 11``; the 11 low bits serve as independent sign and
coin bits), so ``U`` lies in the dyadic interval ``[h, h + 1) * 2**-53``. A decision is

* ``U < p`` for a probability p (Bernoulli(p)), or
* ``floor(-s * ln U)`` (inversion of a geometric law: ``P(floor(-s ln U) >= j) = P(U <= e^{-j/s})
  = q^j`` with ``q = e^{-1/s}``).

It is first computed in float64, vectorised, together with a rigorous bound on its error (below);
the decision is output only when it holds for *every* U in the drawn interval. The remaining
elements (a fraction of about 2**-30 or less at the parameters used here) go to an exact resolver
that encloses the boundary with mpmath interval arithmetic (``mpmath.iv``, outward rounding) and,
when the dyadic interval of U itself straddles the boundary, draws 64 more bits of U and doubles
down. The boundaries (``e^{-x}`` for rational ``x > 0``, ``(k-1)/(e^L + k - 1)`` for rational
``L > 0``) are irrational (Lindemann), so U almost surely differs from them and refinement stops with
probability 1; a rational boundary (Bernoulli(p) with p a Fraction) is compared exactly, and a
dyadic one is decided once the prefix reaches it. So the output is the function of U itself, and
its law is exactly the law of that function of an ideal uniform. This is the "lazy uniform"
comparison of von Neumann and of Knuth & Yao (1976, "The complexity of nonuniform random number
generation"), with the float first pass playing the role of a certified filter.

Float error bounds relied on
----------------------------
Inputs are exact: ``h * 2**-53`` and ``(h + 1) * 2**-53`` are exact doubles, as are integers below
2**53 and powers of two. The elementary operations (+, -, *, /) are correctly rounded (IEEE 754,
relative error <= 2**-53). For ``numpy.log``, ``numpy.exp`` and ``numpy.expm1`` on float64 we assume
a relative error of at most 2**10 ulp (2**-42): implementations (glibc libm, numpy's SIMD kernels)
are documented and tested to a few ulp; the factor of more than 100 is the safety margin, and
``tests/test_exact_samplers.py`` checks the assumption against mpmath. Every margin below is
derived from these two facts, and then widened by a further factor (comments say by how much):

* Inversion ``y = -s * log((h + 1) 2**-53)``, ``s <= 2**11``, ``h >= 2**34``: the float y has
  relative error <= 2**-41 and y <= 37 s, so absolute error <= s 2**-35; over the interval of U,
  ``-s ln U`` grows by at most ``s ln(1 + 1/h) <= s 2**-34``. The floor is certified when the
  fractional part of y is at least ``D = s 2**-33`` from both integers.
* Bernoulli(exp(-γ)) with ``|γ_float - γ| <= dγ <= 2**-4``: ``|exp(-γ_float) - e^{-γ}| <= p (2 dγ
  + 2**-40) + 2**-1000`` (the last term covers underflow), and U is compared with both ends.

Samplers
--------
* :func:`bernoulli` — U < p with the threshold ``floor(p 2**53)`` computed once, exactly.
* :func:`bernoulli_exp` — U < exp(-x), float filter + resolver.
* :func:`discrete_laplace` — for scale t: a geometric ``G`` with ratio ``q = e^{-1/t}`` is split as
  ``G = n A + B`` with ``n = 2**k``: A is geometric with ratio ``q^n`` (by inversion with
  ``s = t/n < 2**11``) and B, independent of A, is geometric truncated to ``{0..n-1}`` (drawn as k
  uniform bits accepted with probability ``e^{-B/t}``, which exceeds ``1 - 2**-10``); the quotient
  and remainder of a geometric variable are independent with these laws, since
  ``(1-q) q^{nA+B} = (1 - q^n) q^{nA} * (1-q) q^B / (1 - q^n)``. A sign bit gives ``±G``, rejecting
  ``-0`` (Canonne, Kamath & Steinke 2020, Algorithm 2 uses the same sign step), which yields
  ``P(K = k) ∝ q^|k|``. The low bits of the output are exact at every scale.
* :func:`discrete_gaussian` — C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for
  Differential Privacy", NeurIPS 2020, Algorithm 3: propose ``Y`` discrete Laplace with scale
  ``t = floor(σ) + 1``, accept with probability ``exp(-(|Y| - σ²/t)² / (2σ²))``; both steps above.
* :func:`randomized_response` — lie with probability exactly ``(k-1)/(e^L + k - 1)``.
* :func:`categorical_exp` — index i with probability ``e^{a_i} / Σ e^{a_j}`` (through the next).
* :func:`categorical_counts` — group g with probability ``T_g e^{-x_g} / Σ T_h e^{-x_h}`` by
  inversion of one uniform against float cumulative weights with a certified error, resolved
  exactly near a boundary (any number of groups).
* :func:`permute_and_flip` — report noisy max with exponential noise, as permute-and-flip: a uniform
  order, each candidate accepted with probability ``exp((q_r - max q)/b)``.

Output: int64 arrays; :func:`discrete_laplace` returns an object array of Python ints in the rare
case that a sample does not fit in int64 (possible only for scales above about 2**56).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from dpharness.errors import ParameterError

__all__ = [
    "categorical_exp",
    "categorical_counts",
    "permute_and_flip",
    "ExactProbability",
    "exact_rational",
    "bernoulli",
    "bernoulli_indices",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_response",
    "uniform_double",
    "correctly_rounded_log",
]

_CHUNK = 1 << 16  # elements per vectorised pass (keeps the working set in cache)
_PERMUTED_ELEMENTS = 1 << 22  # permute_and_flip's orders held at once (32 MiB of int64)
_INV53 = 2.0**-53
_MIN_SCALE = Fraction(1, 2**1000)
_MAX_SCALE = Fraction(2**1000)
_MIN_SIGMA2 = Fraction(
    1, 2**32
)  # below about 2**-37 the sampler runs out of memory (its exact comparisons with exp(-1/(2σ²)))
_MAX_SIGMA2 = Fraction(2**200)
_SPLIT = 11  # A is drawn by inversion with s = t / 2**k < 2**_SPLIT
_LOG_BAND = 2.0**-33  # D = s * _LOG_BAND (see the module docstring)
_H_MIN = np.uint64(1 << 34)  # inversion is filtered only for U >= 2**-19


# --------------------------------------------------------------------------- exact numbers


def exact_rational(name: str, value: Any) -> Fraction:
    """``value`` as an exact Fraction: ints and Fractions as they are, a float as its exact binary
    value (``Fraction(0.1) != Fraction(1, 10)``). Raises ParameterError naming ``name`` otherwise."""
    if isinstance(value, bool):
        raise ParameterError(f"{name}={value!r} is a bool; pass a number (an int, Fraction or float).")
    if isinstance(value, (int, np.integer)):
        return Fraction(int(value))
    if isinstance(value, Fraction):
        return value
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise ParameterError(f"{name}={value!r} is not finite; pass a finite number.")
        return Fraction(float(value))
    try:
        import sympy as sp
    except ImportError:  # pragma: no cover - sympy is a dependency
        sp = None
    if sp is not None and isinstance(value, sp.Rational):
        return Fraction(int(value.p), int(value.q))
    raise ParameterError(f"{name}={value!r} is not an exact number; pass an int, Fraction or float.")


def _mpf_fraction(t: tuple) -> Fraction | None:
    """An mpmath raw mpf tuple ``(sign, man, exp, bc)`` as a Fraction (None for ±inf / nan)."""
    sign, man, exp, bc = t
    if not man:
        return Fraction(0) if exp == 0 and bc == 0 else None
    v = Fraction(int(man) << exp) if exp >= 0 else Fraction(int(man), 1 << -exp)
    return -v if sign else v


class _IVPrec:
    """Set ``mpmath.iv.prec`` for a block and restore it."""

    def __init__(self, prec: int):
        self.prec = prec

    def __enter__(self):
        from mpmath import iv

        self.old = iv.prec
        iv.prec = self.prec
        return iv

    def __exit__(self, *exc):
        from mpmath import iv

        iv.prec = self.old
        return False


def _iv_ends(v) -> tuple[Fraction | None, Fraction | None]:
    a, b = v._mpi_
    return _mpf_fraction(a), _mpf_fraction(b)


def _iv_rat(iv, x: Fraction):
    return iv.mpf(x.numerator) / iv.mpf(x.denominator)


@dataclass(frozen=True)
class ExactProbability:
    """An exactly specified probability ``p`` in [0, 1]: ``enclose(prec)`` returns Fractions
    ``lo <= p <= hi`` whose width shrinks to 0 as ``prec`` (bits) grows (``lo == hi`` when p is
    rational). Build with :meth:`rational`, :meth:`exp_neg` or :meth:`odds`."""

    enclose: Callable[[int], tuple[Fraction, Fraction]]
    text: str

    @classmethod
    def rational(cls, p: Any) -> "ExactProbability":
        """A rational p in [0, 1] (a float is read as its binary value)."""
        q = exact_rational("p", p)
        if not 0 <= q <= 1:
            raise ParameterError(f"p={p!r} is not a probability; pass a number in [0, 1].")
        return cls(lambda prec: (q, q), f"{q}")

    @classmethod
    def exp_neg(cls, x: Any) -> "ExactProbability":
        """``e^{-x}`` for a rational x >= 0."""
        xq = exact_rational("x", x)
        if xq < 0:
            raise ParameterError(f"x={x!r} must be >= 0 for exp(-x) to be a probability.")
        if xq == 0:
            return cls.rational(1)

        def enclose(prec: int):
            with _IVPrec(prec) as iv:
                return _iv_ends(iv.exp(-_iv_rat(iv, xq)))

        return cls(enclose, f"exp(-{xq})")

    @classmethod
    def odds(cls, m: int, log_odds: Any) -> "ExactProbability":
        """``m / (e^L + m)`` for an integer m >= 0 and rational L >= 0: the probability that
        k-ary randomized response lies (m = k - 1), or that a RAPPOR bit flips (m = 1)."""
        L = exact_rational("log_odds", log_odds)
        if L < 0 or m < 0:
            raise ParameterError(f"log_odds={log_odds!r} and m={m!r} must be >= 0.")
        if L == 0:
            return cls.rational(Fraction(m, m + 1))
        if m == 0:
            return cls.rational(0)

        def enclose(prec: int):
            with _IVPrec(prec) as iv:
                # m / (e^L + m) = m e^{-L} / (1 + m e^{-L}): no overflow for huge L
                r = iv.mpf(m) * iv.exp(-_iv_rat(iv, L))
                return _iv_ends(r / (1 + r))

        return cls(enclose, f"{m}/(exp({L}) + {m})")


def _as_probability(p: Any) -> ExactProbability:
    return p if isinstance(p, ExactProbability) else ExactProbability.rational(p)


# --------------------------------------------------------------------------- random bits


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` independent uniform 64-bit words (uint64) from the generator's bit stream."""
    return rng.bit_generator.random_raw(n)


def _small_uint_to_float(x: np.ndarray) -> np.ndarray:
    """uint64 values below 2**63 as float64, through int64 (the same integers, so the same doubles;
    numpy converts int64 to float64 several times faster than uint64). Exact for values <= 2**53."""
    return x.view(np.int64).astype(np.float64)


def _word(rng: np.random.Generator) -> int:
    return int(rng.bit_generator.random_raw())


def _count(size) -> tuple[tuple[int, ...], int]:
    shape = (int(size),) if np.ndim(size) == 0 else tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ParameterError(f"size={size!r} must be nonnegative.")
    return shape, int(np.prod(shape, dtype=np.int64)) if shape else 1


# --------------------------------------------------------------------------- exact resolvers (scalar)


def _resolve_below(prefix: int, bits: int, enclose: Callable[[int], tuple], rng) -> bool:
    """Decide ``U < p`` exactly for U uniform in ``[prefix, prefix + 1) 2**-bits``, drawing more
    bits of U as needed; ``enclose(prec)`` encloses p."""
    while True:
        lo, hi = enclose(bits + 64)
        scale = 1 << bits
        if lo is not None and (prefix + 1) <= lo * scale:
            return True
        if hi is not None and prefix >= hi * scale:
            return False
        prefix = (prefix << 64) | _word(rng)
        bits += 64


def _resolve_floor_neglog(prefix: int, bits: int, s: Fraction, rng) -> int:
    """``floor(-s ln U)`` exactly for U uniform in ``[prefix, prefix + 1) 2**-bits`` (U > 0 a.s.)."""
    while True:
        if prefix > 0:
            with _IVPrec(bits + 64 + max(s.numerator.bit_length() - s.denominator.bit_length(), 0)) as iv:
                u = iv.mpf([prefix, prefix + 1]) / iv.mpf(2) ** bits
                lo, hi = _iv_ends(-_iv_rat(iv, s) * iv.log(u))
            if lo is not None and hi is not None and math.floor(lo) == math.floor(hi):
                return math.floor(lo)
        prefix = (prefix << 64) | _word(rng)
        bits += 64


# --------------------------------------------------------------------------- vectorised primitives


def _below_approx(p: np.ndarray, err: np.ndarray, enclose_at: Callable[[int, int], tuple], rng) -> np.ndarray:
    """``U_i < p_i`` for fresh uniforms, where the float ``p`` is within ``err`` of the exact
    ``p_i`` (``err`` NaN or inf marks an element as unfiltered); ``enclose_at(i, prec)`` encloses
    the exact ``p_i``. Exact (see the module docstring)."""
    w = _words(rng, len(p))
    h = w >> np.uint64(11)
    u_lo = _small_uint_to_float(h) * _INV53
    with np.errstate(invalid="ignore", over="ignore"):
        yes = (u_lo + _INV53) <= (p - err)
        no = u_lo >= (p + err)
    out = yes
    for i in np.flatnonzero(~(yes | no)):
        out[i] = _resolve_below(int(h[i]), 53, functools.partial(enclose_at, int(i)), rng)
    return out


def _below_exp_approx(gamma: np.ndarray, dgamma: np.ndarray, exact_gamma: Callable[[int], Fraction], rng) -> np.ndarray:
    """``U_i < exp(-γ_i)`` where the float ``gamma`` is within ``dgamma`` of the exact γ_i >= 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.exp(-gamma)
        # |exp(-γ_f) - e^{-γ}| <= p (e^{dγ} - 1 + 2**-42 e^{dγ}) <= p (2 dγ + 2**-40) for dγ <= 2**-4
        err = np.where(dgamma <= 2.0**-4, p * (2.0 * dgamma + 2.0**-40) + 2.0**-1000, np.nan)

    def enclose_at(i: int, prec: int):
        return ExactProbability.exp_neg(exact_gamma(i)).enclose(prec)

    return _below_approx(p, err, enclose_at, rng)


def bernoulli(p: Any, size, rng: np.random.Generator) -> np.ndarray:
    """Booleans, True with probability exactly ``p`` (a Fraction/int, a float read as its binary
    value, or an :class:`ExactProbability`), bool array of shape ``size``.

    One 64-bit word per element: with ``c = floor(p 2**53)`` (enclosed exactly once), ``h < c``
    is True and ``h > c`` False without further work; ``h == c`` is resolved exactly."""
    prob = _as_probability(p)
    shape, n = _count(size)
    lo, hi = prob.enclose(128)
    c_lo = min(math.floor(lo * 2**53), 2**53)  # U < (h+1) 2**-53 <= lo <= p for h < c_lo
    c_hi = min(math.floor(hi * 2**53), 2**53)  # U >= h 2**-53 > hi >= p for h > c_hi
    out = np.empty(n, dtype=bool)
    for start in range(0, n, _CHUNK):
        w = _words(rng, min(_CHUNK, n - start))
        # h < c  <=>  w < c * 2**11 (h = w >> 11)
        if c_lo >= 2**53:
            res = np.ones(len(w), dtype=bool)
        else:
            res = w < np.uint64(c_lo << 11)
        if c_hi + 1 < 2**53:
            amb = ~res & (w < np.uint64((c_hi + 1) << 11))
        else:
            amb = ~res
        for i in np.flatnonzero(amb):
            res[i] = _resolve_below(int(w[i] >> np.uint64(11)), 53, prob.enclose, rng)
        out[start : start + len(w)] = res
    return out.reshape(shape)


def bernoulli_indices(p: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    """The sorted indices (int64) of the True draws among ``n`` independent Bernoulli(``p``), exactly
    (``p`` as for :func:`bernoulli`): the mask ``Poisson subsampling`` keeps, four draws per 64-bit word.

    Draw i reads 16 bits ``h`` of the stream as the leading bits of its uniform U in
    ``[h, h + 1) 2**-16``: with ``c_lo = floor(lo 2**16)`` and ``c_hi = floor(hi 2**16)`` for an
    enclosure ``lo <= p <= hi``, ``h < c_lo`` is True (U < (h + 1) 2**-16 <= lo) and ``h > c_hi`` False
    (U >= h 2**-16 > hi); the rest (``c_lo <= h <= c_hi``, about one draw in 2**16) draw further bits
    of U, in index order after the bulk, until ``p`` is decided (:func:`_resolve_below`)."""
    prob = _as_probability(p)
    n = int(n)
    if n < 0:
        raise ParameterError(f"n={n!r} must be nonnegative.")
    lo, hi = prob.enclose(128)
    c_lo = min(math.floor(lo * 2**16), 2**16)
    c_hi = min(math.floor(hi * 2**16), 2**16 - 1)
    h = _words(rng, -(-n // 4)).view(np.uint16)[:n]  # four independent 16-bit uniforms per word
    if c_lo >= 2**16:  # p = 1
        return np.arange(n, dtype=np.int64)
    low = np.flatnonzero(h <= np.uint16(c_hi)).astype(np.int64, copy=False)  # kept or undecided: one pass
    undecided = h[low] >= c_lo
    if not undecided.any():
        return low
    more = [i for i in low[undecided].tolist() if _resolve_below(int(h[i]), 16, prob.enclose, rng)]
    return np.sort(np.concatenate([low[~undecided], np.asarray(more, dtype=np.int64)]))


def bernoulli_exp(x: Any, rng: np.random.Generator, size=None) -> np.ndarray | bool:
    """Bernoulli(exp(-x)), exactly, for exact rationals x >= 0.

    ``x`` is a Fraction/int (a float is read as its binary value) — then ``size`` draws, or one
    bool when ``size`` is None — or a pair ``(numerators, denominators)`` of integer arrays, one
    draw per element (``size`` ignored)."""
    if isinstance(x, tuple):
        num = np.asarray(x[0], dtype=np.int64).ravel()
        den = np.asarray(x[1], dtype=np.int64).ravel()
        if num.shape != den.shape or (num.size and (num.min() < 0 or den.min() <= 0)):
            raise ParameterError(
                "x=(numerators, denominators) must be equal-length arrays with numerators >= 0 and denominators > 0."
            )
        g = num.astype(np.float64) / den.astype(np.float64)
        # each conversion and the division round once (3 * 2**-53 < 2**-51); doubled for safety
        dg = g * 2.0**-50
        return _below_exp_approx(g, dg, lambda i: Fraction(int(num[i]), int(den[i])), rng)
    xq = exact_rational("x", x)
    if xq < 0:
        raise ParameterError(f"x={x!r} must be >= 0; Bernoulli(exp(-x)) needs x >= 0.")
    if size is None:
        return bool(bernoulli(ExactProbability.exp_neg(xq), 1, rng)[0])
    return bernoulli(ExactProbability.exp_neg(xq), size, rng)


# --------------------------------------------------------------------------- geometric and discrete Laplace


def _check_scale(t: Any) -> Fraction:
    tq = exact_rational("t", t)
    if not _MIN_SCALE <= tq <= _MAX_SCALE:
        raise ParameterError(
            f"t={t!r} is outside [2**-1000, 2**1000], the scales the exact discrete Laplace "
            "sampler accepts; pass a scale in that range."
        )
    return tq


def _split(t: Fraction) -> tuple[int, Fraction]:
    """``(k, s)`` with ``t = 2**k s`` and ``s < 2**_SPLIT`` (k = 0 for small t; else s >= 2**(_SPLIT-1))."""
    if t < 2**_SPLIT:
        return 0, t
    e = t.numerator.bit_length() - t.denominator.bit_length()
    if Fraction(2) ** e > t:
        e -= 1
    k = e - (_SPLIT - 1)
    return k, t / (1 << k)


def _uniform_bits(k: int, m: int, rng) -> np.ndarray:
    """m uniform integers in [0, 2**k): int64 for k <= 63, else an object array of Python ints."""
    if k == 0:
        return np.zeros(m, dtype=np.int64)
    if k <= 63:
        return (_words(rng, m) >> np.uint64(64 - k)).astype(np.int64)
    words = -(-k // 64)
    raw = [_words(rng, m) for _ in range(words)]
    out = np.empty(m, dtype=object)
    for i in range(m):
        v = 0
        for r in raw:
            v = (v << 64) | int(r[i])
        out[i] = v >> (64 * words - k)
    return out


def _geometric_quotient(w: np.ndarray, s: Fraction, rng) -> np.ndarray:
    """``floor(-s ln U)`` for the uniforms whose top 53 bits are ``w >> 11`` (s < 2**_SPLIT);
    int64, or object when a resolved value exceeds int64 (probability < e^{-2**40})."""
    sf = float(s)
    h = w >> np.uint64(11)
    # y = log((h + 1) * 2**-53) * (-s), computed in place (the same operations in the same order)
    y = _small_uint_to_float(h + np.uint64(1))
    y *= _INV53
    np.log(y, out=y)
    y *= -sf
    a = np.floor(y)
    frac = y - a
    band = sf * _LOG_BAND
    ok = (frac >= band) & (frac < 1.0 - band) & (h >= _H_MIN)
    out = a.astype(np.int64)
    bad = np.flatnonzero(~ok)
    if len(bad):
        vals = [_resolve_floor_neglog(int(h[i]), 53, s, rng) for i in bad]
        if max(vals) >= 2**62:
            out = out.astype(object)
        for i, v in zip(bad, vals):
            out[i] = v
    return out


def _truncated_accept(b: np.ndarray, coin: np.ndarray, t: Fraction, rng) -> np.ndarray:
    """Accept each ``B_i`` (``0 <= B_i < t 2**-(_SPLIT-1)``, so ``x = B_i/t < 2**-10``) with
    probability ``e^{-B_i/t}``. ``coin`` holds 10 independent bits per element: the uniform is
    ``U = (coin + V)/1024``; ``coin < 1023`` means ``U < 1 - 2**-10 < e^{-x}`` (accept). For
    ``coin == 1023``: accept iff ``V < p' = 1024 e^{-x} - 1023 = 1 + 1024 expm1(-x)``."""
    acc = coin != 1023
    idx = np.flatnonzero(~acc)
    if len(idx):
        bi = b[idx]
        x = np.array([float(v) for v in bi], dtype=np.float64) / float(t)
        # expm1 within 2**-42 relative, x (two roundings) within 2**-51 relative; |1024 expm1| <= 1:
        # |p'_f - p'| <= 2**-52 + 1024 |expm1(-x)| 2**-41 <= 2**-30 (ample)
        p = 1.0 + 1024.0 * np.expm1(-x)
        err = np.full(len(idx), 2.0**-30)

        def enclose_at(i: int, prec: int):
            lo, hi = ExactProbability.exp_neg(Fraction(int(bi[i])) / t).enclose(prec)
            return 1024 * lo - 1023, 1024 * hi - 1023

        acc[idx] = _below_approx(p, err, enclose_at, rng)
    return acc


def _geometric_proposals(t: Fraction, k: int, s: Fraction, m: int, rng):
    """m proposals ``(G, negative, accepted)`` of the signed geometric with ratio e^{-1/t}."""
    w = _words(rng, m)
    a = _geometric_quotient(w, s, rng)
    negative = (w & np.uint64(1)).astype(bool)
    if k == 0:
        g = a
        accepted = np.ones(m, dtype=bool)
    else:
        b = _uniform_bits(k, m, rng)
        coin = ((w >> np.uint64(1)) & np.uint64(1023)).astype(np.int64)
        accepted = _truncated_accept(b, coin, t, rng)
        n = 1 << k
        if a.dtype != object and b.dtype != object and (int(a.max()) + 1) * n < 2**63:
            g = a * np.int64(n) + b
        else:
            g = a.astype(object) * n + b.astype(object)
    accepted &= ~(negative & (g == 0))
    return g, negative, accepted


_COMPILED_MAX_K = 63  # the compiled loops hold B in int64 (one word): t below about 2**74


def _compiled_loops(k: int) -> Any:
    """The compiled loops of :mod:`._exact_compiled` (the same outputs for the same generator state), or
    None: numba not installed, or a scale whose proposals do not fit the loops' int64 words."""
    from . import _exact_compiled

    if k > _COMPILED_MAX_K or not _exact_compiled.available():
        return None
    return _exact_compiled.kernels()


def _proposals_compiled(loops: Any, t: Fraction, k: int, s: Fraction, m: int, rng) -> tuple:
    """:func:`_geometric_proposals` with its element-wise steps compiled: the same words drawn in the same
    order, ``numpy.log`` on the same doubles, the same resolvers. Returns ``("int64", A, B, negative,
    accepted)`` (the proposals ``±(A 2**k + B)`` fit int64; ``-0`` not yet rejected) or ``("object", g,
    negative, accepted)`` exactly as :func:`_geometric_proposals` (a resolved quotient beyond int64)."""
    sf = float(s)
    band = sf * _LOG_BAND
    w = _words(rng, m)
    y = np.empty(m)
    loops.before_log(w, y)
    np.log(y, out=y)
    a = np.empty(m, dtype=np.int64)
    bad = np.empty(m, dtype=np.bool_)
    largest = int(loops.quotient(w, y, -sf, band, 1.0 - band, _H_MIN, a, bad))
    if bad.any():  # the exact resolver, in index order (as _geometric_quotient)
        idx = np.flatnonzero(bad)
        vals = [_resolve_floor_neglog(int(w[i] >> np.uint64(11)), 53, s, rng) for i in idx]
        if max(vals) >= 2**62:
            a = a.astype(object)
        for i, v in zip(idx, vals):
            a[i] = v
        largest = max(largest, max(vals))
    bits = _words(rng, m) if k else w[:0]
    b = np.zeros(m, dtype=np.int64)
    negative = np.empty(m, dtype=np.bool_)
    accepted = np.empty(m, dtype=np.bool_)
    flagged = np.empty(m, dtype=np.int64)
    nflag = loops.signs_and_coins(w, bits, k, b, negative, accepted, flagged)
    if nflag:  # coin == 1023: the exact acceptance of B, in index order (as _truncated_accept)
        idx = flagged[:nflag]
        accepted[idx] = _truncated_accept(b[idx], np.full(nflag, 1023, dtype=np.int64), t, rng)
    if a.dtype != object and (k == 0 or (largest + 1) * (1 << k) < 2**63):
        return ("int64", a, b, negative, accepted)
    g = a if k == 0 else a.astype(object) * (1 << k) + b.astype(object)
    accepted &= ~(negative & (g == 0))
    return ("object", g, negative, accepted)


def discrete_laplace(t: Any, size, rng: np.random.Generator) -> np.ndarray:
    """Integers with ``P(k) = tanh(1/(2t)) exp(-|k|/t)``, exactly, for an exact rational scale
    ``t`` in [2**-1000, 2**1000] (a Fraction or int; a float is read as its binary value).

    Returns an int64 array of shape ``size``, or an object array of Python ints if some sample does
    not fit in int64 (possible only for t above about 2**56). ~10-20 M samples/s on one core."""
    tq = _check_scale(t)
    shape, n = _count(size)
    k, s = _split(tq)
    # acceptance: 1 - (1 - q)/2 for the sign, times >= 1 - 2**-10 for B
    q = math.exp(-1.0 / float(tq)) if tq > Fraction(1, 2**10) else 0.0
    rate = (1.0 - (1.0 - q) / 2.0) * (1.0 - 2.0**-10 if k else 1.0)
    compiled = _compiled_loops(k)
    parts, filled, big = [], 0, False
    while filled < n:
        need = n - filled
        m = min(_CHUNK, int(need / rate * 1.01) + 8)
        if compiled is not None:
            got = _proposals_compiled(compiled, tq, k, s, m, rng)
            if got[0] == "int64":  # the same values as below, compacted in one compiled pass
                a, b, negative, accepted = got[1:]
                part = np.empty(need, dtype=np.int64)
                part = part[: compiled.signed_accepted(a, b, np.int64(1 << k), k, negative, accepted, need, part)]
                parts.append(part)
                filled += len(part)
                continue
            g, negative, accepted = got[1:]
        else:
            g, negative, accepted = _geometric_proposals(tq, k, s, m, rng)
        if g.dtype == object:
            idx = np.flatnonzero(accepted)[:need]
            part = np.where(negative[idx], -g[idx], g[idx])
            if all(-(2**63) <= int(v) < 2**63 for v in part):
                part = part.astype(np.int64)
            else:
                big = True
        else:  # the same values: signs on the whole chunk, then the first `need` accepted (4x cheaper)
            part = np.where(negative, -g, g)[accepted][:need]
        parts.append(part)
        filled += len(part)
    if not parts:
        return np.zeros(shape, dtype=np.int64)
    out = np.concatenate([p.astype(object) for p in parts] if big else parts)
    return out.reshape(shape)


# --------------------------------------------------------------------------- discrete Gaussian


def discrete_gaussian(sigma2: Any, size, rng: np.random.Generator) -> np.ndarray:
    """Integers with ``P(k) ∝ exp(-k²/(2σ²))``, exactly, for an exact rational ``σ²`` in
    [2**-32, 2**200] (Fraction or int; a float is read as its binary value); int64 array of shape
    ``size`` (|k| < 2**63 is guaranteed up to the astronomically unlikely; otherwise object).

    Canonne, Kamath & Steinke 2020, Algorithm 3, vectorised: ``t = floor(σ) + 1``,
    ``Y ~ DiscreteLaplace(t)`` (:func:`discrete_laplace`), accepted with probability
    ``exp(-γ)``, ``γ = (|Y| - σ²/t)² / (2σ²)``, decided by :func:`_below_exp_approx`."""
    s2 = exact_rational("sigma2", sigma2)
    if not _MIN_SIGMA2 <= s2 <= _MAX_SIGMA2:
        raise ParameterError(
            f"sigma2={sigma2!r} is outside [2**-32, 2**200], the variances the exact discrete "
            "Gaussian sampler accepts; pass a variance in that range."
        )
    shape, n = _count(size)
    t = math.isqrt(math.floor(s2)) + 1  # floor(sqrt(floor(x))) = floor(sqrt(x))
    tq = Fraction(t)
    c_exact = s2 / t
    c = float(c_exact)  # relative error <= 2**-53
    inv = 1.0 / (2.0 * float(s2))  # relative error <= 2**-52
    parts, filled = [], 0
    while filled < n:
        need = n - filled
        m = min(_CHUNK, int(need * 1.6) + 16)
        y = discrete_laplace(tq, m, rng)
        if y.dtype == object:  # |Y| >= 2**63: exact path element by element
            keep = np.array(
                [
                    _resolve_below(0, 0, ExactProbability.exp_neg((abs(int(v)) - c_exact) ** 2 / (2 * s2)).enclose, rng)
                    for v in y
                ],
                dtype=bool,
            )
        elif (loops := _compiled_loops(0)) is not None:  # the same steps below, compiled
            neg_gamma, dgamma = np.empty(len(y)), np.empty(len(y))
            loops.gaussian_gamma(y, c, inv, neg_gamma, dgamma)
            with np.errstate(over="ignore", invalid="ignore"):
                p = np.exp(neg_gamma, out=neg_gamma)
            w = _words(rng, len(y))
            keep = np.empty(len(y), dtype=np.bool_)
            undecided = np.empty(len(y), dtype=np.int64)
            for i in undecided[: loops.below(p, dgamma, w, keep, undecided)]:
                exact_gamma = (abs(int(y[i])) - c_exact) ** 2 / (2 * s2)
                keep[i] = _resolve_below(
                    int(w[i] >> np.uint64(11)), 53, ExactProbability.exp_neg(exact_gamma).enclose, rng
                )
            part = np.empty(need, dtype=np.int64)
            part = part[: loops.first_kept(y, keep, need, part)]
            parts.append(part)
            filled += len(part)
            continue
        else:
            a = np.abs(y).astype(np.float64)  # exact below 2**53, else relative error 2**-53
            d = a - c
            # |d_f - d| <= (a + c) 2**-51 =: δ (rounding of c, of a, and of the subtraction)
            delta = (a + c) * 2.0**-51
            gamma = d * d * inv
            # |γ_f - γ| <= (2|d_f| + δ) δ / (2σ²) + 4 γ_f 2**-53, with a factor 2 of slack
            dgamma = 2.0 * ((2.0 * np.abs(d) + delta) * delta * inv + gamma * 2.0**-50)
            keep = _below_exp_approx(gamma, dgamma, lambda i: (abs(int(y[i])) - c_exact) ** 2 / (2 * s2), rng)
        idx = np.flatnonzero(keep)[:need]
        parts.append(y[idx])
        filled += len(idx)
    if not parts:
        return np.zeros(shape, dtype=np.int64)
    if any(p.dtype == object for p in parts):
        return np.concatenate([p.astype(object) for p in parts]).reshape(shape)
    return np.concatenate(parts).reshape(shape)


# --------------------------------------------------------------------------- a uniform double


_SUBNORMAL_EXP = 1022  # U < 2**-1022: the doubles there are subnormal, spaced 2**-1074


def uniform_double(size, rng: np.random.Generator) -> np.ndarray:
    """Doubles ``U*`` in (0, 1), each drawn with probability equal to its spacing: an ideal uniform ``U``
    rounded down to a double, ``U* = 0`` (probability 2**-1074) redrawn. This is the ``U*`` of Mironov 2012
    (§5.2, "uniform over the doubles of (0, 1)"), exactly, down to the subnormals: the exponent ``e`` (the
    position of the first 1 bit of ``U``) is 1 plus the leading zero bits of the stream, as many words as it
    takes (``P(e = k) = 2**-k`` for every k >= 1, never capped), and the 52 bits after it, independent of
    ``e``, are one more word's top bits; ``U* = (1 + m 2**-52) 2**-e`` (exact for e <= 1022), below 2**-1022
    the multiple of 2**-1074 below ``U``. float64 array of shape ``size``."""
    shape, n = _count(size)
    out = np.empty(n)
    todo = np.arange(n)
    while len(todo):
        k = len(todo)
        e = np.ones(k, dtype=np.int64)
        open_ = np.arange(k)  # elements whose words so far were all zero
        while len(open_):
            w = _words(rng, len(open_))
            hi = (w >> np.uint64(32)).astype(np.float64)  # 32-bit halves: exact doubles
            lo = (w & np.uint64(0xFFFFFFFF)).astype(np.float64)
            length = np.where(hi > 0, 32 + np.frexp(hi)[1], np.frexp(lo)[1])  # bit length (0 for w = 0)
            e[open_] += 64 - length
            open_ = open_[w == 0]
        m = (_words(rng, k) >> np.uint64(12)).astype(np.int64)
        u = np.ldexp(1.0 + m.astype(np.float64) * 2.0**-52, -np.minimum(e, _SUBNORMAL_EXP))
        zero = np.zeros(k, dtype=bool)
        for i in np.flatnonzero(e > _SUBNORMAL_EXP):  # probability 2**-1022: the subnormals, rounded down
            units = ((1 << 52) + int(m[i])) >> int(e[i] - _SUBNORMAL_EXP)
            zero[i] = units == 0
            u[i] = math.ldexp(float(units), -1074)
        out[todo[~zero]] = u[~zero]
        todo = todo[zero]
    return out.reshape(shape)


# --------------------------------------------------------------------------- a correctly rounded logarithm

_LOG_BITS = 200  # bits of the mpmath logarithm that decides a draw near a rounding midpoint
# the extended logarithm's error assumed, relative: 2**-61 is 4 units of the x87 format's 64-bit
# significand (glibc's logl is within 1; numpy's log of a longdouble array calls it)
_LOGL_REL = 2.0**-61


def correctly_rounded_log(u: np.ndarray) -> np.ndarray:
    """``ln(u)`` rounded to the nearest double, for positive doubles ``u`` (float64 array; the LN of
    Mironov 2012, §5.2, which his snapping theorem takes to be correctly rounded: numpy's float64 ``log``
    is within an ulp but not always the nearest double). Each value is the extended-precision logarithm
    (``np.log`` of a ``longdouble`` array) rounded to a double, where it lies more than its error bound
    (:data:`_LOGL_REL`, relative) from the midpoints between that double and its neighbours: then the
    nearest double to it is the nearest to ``ln(u)``. The others (about 1% of draws), and every draw where
    ``longdouble`` has fewer than 64 significand bits, are computed at 200 bits in mpmath and rounded once
    (exactly, through a Fraction): the doubles' hardest cases for the logarithm lie about 2**-120 from a
    midpoint (Lefèvre & Muller 2001), far beyond 2**-190."""
    x = np.asarray(u, dtype=np.float64)
    flat = x.reshape(-1)
    if flat.size and not (np.all(flat > 0) and np.all(np.isfinite(flat))):
        raise ParameterError("u must hold positive finite doubles; the logarithm of 0 or a negative is not a double.")
    out = np.empty(flat.shape)
    if np.finfo(np.longdouble).nmant >= 63:
        z = np.log(flat.astype(np.longdouble))
        y = z.astype(np.float64)
        up = np.nextafter(y, np.inf).astype(np.longdouble)
        down = np.nextafter(y, -np.inf).astype(np.longdouble)
        yl = y.astype(np.longdouble)
        # the midpoints between y and its neighbours: sums of two doubles, halved, exact in 64 bits
        gap = np.minimum(np.abs(z - (yl + up) / 2), np.abs(z - (yl + down) / 2))
        near = gap <= np.abs(z) * _LOGL_REL * 2 + np.longdouble(2.0**-1070)
        out[:] = y
        hard = np.flatnonzero(near)
    else:
        hard = np.arange(flat.size)
    if len(hard):
        import mpmath

        with mpmath.workprec(_LOG_BITS):
            for i in hard.tolist():
                sign, man, exp, _ = mpmath.log(mpmath.mpf(float(flat[i])))._mpf_  # (−1)^sign · man · 2^exp
                value = Fraction(int(man)) * Fraction(2) ** int(exp)
                out[i] = float(-value if sign else value)  # int / int: correctly rounded
    return out.reshape(x.shape)


# --------------------------------------------------------------------------- randomized response


def randomized_response(x: int, k: int, log_odds: Any, size, rng: np.random.Generator) -> np.ndarray:
    """k-ary randomized response on the category ``x``: report x with probability exactly
    ``e^L/(e^L + k - 1)``, otherwise one of the other ``k - 1`` categories uniformly (int64 array of
    shape ``size``). ``L`` is an exact rational >= 0 (a float is read as its binary value); for
    any L the lie probability ``(k-1)/(e^L + k - 1)`` is exact, never rounded to 0."""
    if isinstance(k, bool) or int(k) != k or k < 2:
        raise ParameterError(f"k={k!r} must be an integer >= 2.")
    k = int(k)
    shape, n = _count(size)
    lie = bernoulli(ExactProbability.odds(k - 1, log_odds), n, rng)
    out = np.full(n, int(x), dtype=np.int64)
    idx = np.flatnonzero(lie)
    if len(idx):
        other = rng.integers(0, k - 1, len(idx), dtype=np.int64) if k > 2 else np.zeros(len(idx), dtype=np.int64)
        out[idx] = (int(x) + 1 + other) % k
    return out.reshape(shape)


def categorical_exp(log_weights: list, size, rng: np.random.Generator) -> np.ndarray:
    """Indices i with probability exactly ``e^{a_i} / Σ_j e^{a_j}`` for exact rationals ``a_i`` (floats
    read as their binary values), int64 array of shape ``size``: the exponential mechanism's sampler.
    :func:`categorical_counts` with every count 1 and exponents ``max a − a_i`` (inversion of one uniform
    against certified float cumulative weights, resolved exactly near a boundary): O(k) work per call
    for k candidates."""
    a = [exact_rational("log_weights", x) for x in log_weights]
    if not a:
        raise ParameterError("log_weights=[] is empty; pass at least one log-weight.")
    top = max(a)
    return categorical_counts(np.ones(len(a), dtype=np.int64), [top - x for x in a], size, rng)


def categorical_counts(counts: Any, exponents: Any, size, rng: np.random.Generator, *, unit: Any = None) -> np.ndarray:
    """Indices g with probability exactly ``T_g e^{-x_g} / Σ_h T_h e^{-x_h}`` for integer counts
    ``1 <= T_g < 2**53`` and exact rationals ``x_g >= 0`` (floats read as their binary values), int64
    array of shape ``size``: an exponential mechanism whose candidates come in groups of ``T_g``
    equal-score outputs (the median's runs of the grid), with any number of groups and any exponents.
    With ``unit`` (an exact rational >= 0), ``exponents`` are integers ``d_g`` in [0, 2**53) and
    ``x_g = unit * d_g`` (no rational is built per group unless a draw needs the resolver).

    Inversion of one uniform U against the cumulative weights ``c_g``, vectorised: the weights are
    computed in float (``T_g exp(-x_g)``, relative error <= 2**-41 by the module's assumptions, plus
    ``T_g 2**-1000`` where exp underflows; ``x_g`` is within ``2**-52 x_g`` of the exact value, two
    roundings), turned into exact int64 cumulative sums at a scale ``2**K`` that puts the total in
    [2**59, 2**60] (each floor loses at most 1), so every normalised boundary is known within
    ``E = k 2**-56 + 2**-38`` (k groups; this covers the floors, the float weights, the conversions and
    the division, each with a margin of nearly 2 or more). A draw whose interval ``[h, h + 1) 2**-53``
    is at least E from every boundary is decided by the float pass; the others (a fraction of about
    2 k E) are decided by :func:`_resolve_categorical` with mpmath intervals."""
    t = np.asarray(counts, dtype=np.int64).ravel()
    if unit is None:
        xq = [exact_rational("exponents", v) for v in exponents]
        if not xq or len(xq) != t.size:
            raise ParameterError(
                f"counts (length {t.size}) and exponents (length {len(xq)}) must be non-empty and of equal length."
            )
        if min(xq) < 0:
            raise ParameterError("exponents must be >= 0.")
        x_min = min(xq)
        x: Any = [v - x_min for v in xq]  # the same law; the largest weight is now at least 1
        xf = np.array([float(min(v, 2000)) for v in x])  # e^{-2000} underflows to 0 either way
    else:
        u = exact_rational("unit", unit)
        d = np.asarray(exponents)
        if d.dtype.kind not in "iu" or d.ndim != 1 or d.size != t.size or not d.size:
            raise ParameterError("with unit=, exponents must be a non-empty 1-d integer array as long as counts.")
        if u < 0 or d.min() < 0 or d.max() >= 2**53:
            raise ParameterError("unit must be >= 0 and the integer exponents in [0, 2**53).")
        d = d.astype(np.int64) - int(d.min())
        x = _ScaledIntegers(u, d)
        # a unit above 2000 puts every d >= 1 past the cap either way (and float() of a huge one overflows)
        xf = np.minimum(float(min(u, Fraction(2000))) * d.astype(np.float64), 2000.0)
    if t.min() < 1 or t.max() >= 2**53:
        raise ParameterError("counts must be integers in [1, 2**53).")
    shape, n = _count(size)
    k = t.size
    if k == 1:
        return np.zeros(shape, dtype=np.int64)
    f = t.astype(np.float64) * np.exp(-xf)
    scale = 59 - math.frexp(math.fsum(f))[1] + 1  # total * 2**scale in [2**59, 2**60)
    cum = np.cumsum(np.floor(np.ldexp(f, scale)).astype(np.int64))
    bounds = cum[:-1].astype(np.float64) / float(cum[-1])  # boundaries c_0 .. c_{k-2}; c_{k-1} = 1
    err = k * 2.0**-56 + 2.0**-38
    out = np.empty(n, dtype=np.int64)
    cache: dict[int, list] = {}
    for start in range(0, n, _CHUNK):
        h = _words(rng, min(_CHUNK, n - start)) >> np.uint64(11)
        u_lo = _small_uint_to_float(h) * _INV53
        lower = np.searchsorted(bounds, u_lo - err, side="right")  # boundaries surely <= U
        upper = np.searchsorted(bounds, (u_lo + _INV53) + err, side="left")  # the rest are surely > U
        res = lower
        for i in np.flatnonzero(lower != upper):
            res[i] = _resolve_categorical(int(h[i]), 53, int(lower[i]), int(upper[i]), t, x, cache, rng)
        out[start : start + len(h)] = res
    return out.reshape(shape)


@dataclass(frozen=True)
class _ScaledIntegers:
    """The exponents ``unit * d_g`` of :func:`categorical_counts`, as exact rationals on demand."""

    unit: Fraction
    d: np.ndarray

    def __iter__(self):
        return (self.unit * v for v in self.d.tolist())


def _resolve_categorical(prefix: int, bits: int, lower: int, upper: int, t, x: list, cache: dict, rng) -> int:
    """The index ``#{g < k - 1 : c_g <= U}`` for U uniform in ``[prefix, prefix + 1) 2**-bits``, given
    that it lies in ``[lower, upper]``: the boundaries ``c_lower .. c_{upper-1}`` are enclosed with
    mpmath intervals (cumulative sums of ``T_g e^{-x_g}`` at ``bits + 64`` bits, cached per precision)
    and 64 more bits of U are drawn until none of them lies in U's interval."""
    while True:
        prec = bits + 64
        if prec not in cache:
            with _IVPrec(prec) as iv:
                run = iv.mpf(0)
                sums = []
                for tg, xg in zip(t.tolist(), x):
                    run = run + iv.mpf(tg) * iv.exp(-_iv_rat(iv, xg))
                    sums.append(run)
                cache[prec] = [_iv_ends(s / run) for s in sums]
        ends = cache[prec]
        u_lo, u_hi = Fraction(prefix, 1 << bits), Fraction(prefix + 1, 1 << bits)
        below = above = 0
        for lo, hi in ends[lower:upper]:
            if hi is not None and hi <= u_lo:
                below += 1  # c_g <= U
            elif lo is not None and lo >= u_hi:
                above += 1  # c_g > U
        if below + above == upper - lower:
            return lower + below
        prefix = (prefix << 64) | _word(rng)
        bits += 64


def _gap_of(gaps: list[Fraction], cand: np.ndarray, i: int) -> Fraction:
    return gaps[int(cand[i])]


def permute_and_flip(scores: list, scale: Any, size, rng: np.random.Generator) -> np.ndarray:
    """Indices r of ``scores`` by permute-and-flip (McKenna & Sheldon 2020, "Permute-and-Flip: A new
    mechanism for differentially private selection", Algorithm 1), exactly, int64 array of shape
    ``size``: the candidates in a uniformly random order (numpy's ``permuted``, a Fisher-Yates shuffle
    with unbiased bounded integers), each accepted with probability exactly ``exp((q_r - max q)/scale)``
    (``q`` and ``scale`` read as exact rationals; a float filter with the resolver of
    :func:`bernoulli_exp`); the first accepted is output (the top score always accepts). Its law is
    that of ``argmax_r (q_r + η_r)`` with ``η_r ~ Exp(mean scale)`` i.i.d. (Ding, Kifer et al. 2021,
    "The permute-and-flip mechanism is identical to report-noisy-max with exponential noise")."""
    q = [exact_rational("scores", v) for v in scores]
    b = exact_rational("scale", scale)
    if not q or b <= 0:
        raise ParameterError(f"scores (length {len(q)}) must be non-empty and scale={scale!r} > 0.")
    top = max(q)
    gaps: list[Fraction] = [(top - v) / b for v in q]
    # e^{-1000} < 2**-1000: a capped gap's float probability 0 is within the filter's 2**-1000 term
    gf = np.array([float(g) if g < 1000 else 1000.0 for g in gaps])
    shape, n = _count(size)
    k = len(q)
    out = np.empty(n, dtype=np.int64)
    rows = max(1, min(_CHUNK, _PERMUTED_ELEMENTS // k))  # an order per row: rows x k int64 at a time
    for start in range(0, n, rows):
        m = min(rows, n - start)
        order = rng.permuted(np.tile(np.arange(k, dtype=np.int64), (m, 1)), axis=1)
        res = np.empty(m, dtype=np.int64)
        alive = np.arange(m)
        for j in range(k):
            if not alive.size:
                break
            cand = order[alive, j]
            g = gf[cand]
            acc = _below_exp_approx(g, g * 2.0**-50, functools.partial(_gap_of, gaps, cand), rng)
            res[alive[acc]] = cand[acc]
            alive = alive[~acc]
        out[start : start + m] = res
    return out.reshape(shape)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
