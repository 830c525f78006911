"""Certified privacy-loss distributions of shift pairs of integer noise, Poisson-subsampled or not,
discretised by connecting the dots.

The pair. ``Q0`` is the noise centred at 0 and ``PD`` the same noise centred at ``D`` (an integer number
of grid steps, D >= 1): a D-sensitive integer query with the record (PD) and without it (Q0). With a
Poisson sampling rate ``q`` ∈ (0, 1] the record is kept with probability q, and when it is not kept the
output is distributed as without it: with the record the law is the mixture ``M = (1 − q)·Q0 + q·PD``.

* forward (remove direction): the pair (M, Q0), loss ``l(y) = ln(1 − q + q·e^{L(y)})`` with
  ``L(y) = ln PD(y)/Q0(y)``;
* backward (add direction): the pair (Q0, M), loss ``−l(y)``.

For q = 1 these are the shift pair and its reverse. Every other data set pair of a D-sensitive query is
dominated by these (Zhu, Dong & Wang 2022, "Optimal accounting of differential privacy via
characteristic function", AISTATS, Thm 11 and Prop. 30: Poisson subsampling of a mechanism with the
dominating pair (PD, Q0) is dominated by (M, Q0) for removal and (Q0, M) for addition; a shift by
fewer than D grid steps is dominated by the shift by D for log-concave integer noise).

Connect the dots (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022, "Connect the dots: tighter
discrete approximations of privacy loss distributions", PETS, §3): an atom with masses (p, p') under
the two laws and loss ``l = ln p/p'`` in ``[x_i, x_{i+1}]`` (``x_i = i·w``) is split into two atoms at
losses ``x_i`` and ``x_{i+1}`` with first-law masses

    A = (p'·e^{x_i} − p·e^{−w}) / (1 − e^{−w}),    B = (p − p'·e^{x_i}) / (1 − e^{−w})

and second-law masses ``A·e^{−x_i}``, ``B·e^{−x_{i+1}}``: A, B >= 0, A + B = p, and the second-law
masses add up to p'. Merging the two atoms back gives the original atom, so the original pair is a
post-processing of the split pair, which therefore dominates it in every hockey-stick divergence; the
product of dominating pairs dominates the product (Zhu, Dong & Wang 2022, Thm 10). Unlike rounding every
loss up, splitting keeps E[e^{−L}], so composing T leaves does not overstate ε by T·w (the error is
second order in w). A and B are linear in (p, p'), so a group of atoms whose losses all lie in
``[x_i, x_{i+1}]`` is split by its total masses: only range sums of the noise are needed.

Soundness of the numbers: every group's two masses are enclosed ([lo, hi], below), and the split takes
``A_hi = (p'_hi e^{x_i} − p_lo e^{−w})/(1 − e^{−w})`` and ``B_hi = (p_hi − p'_lo e^{x_i})/(1 − e^{−w})``
(each at most p_hi): upper bounds on the exact split. The result is a :class:`~._pld.PLD` whose masses
are pointwise at least the loss law of a pair dominating the true one, which is the invariant
:mod:`._pld` keeps through composition and truncation. Group boundaries are integers found from the
inverse loss in mpmath at 40 digits; an integer within 1e-30 of a boundary could be put in the
neighbouring group, where its split would leave [0, 1] by less than 1e-25 of its mass: every enclosure
is widened by a relative 1e-20, which covers it. Tails beyond the enumerated range (at most ``tail``
in all) are moved up: the highest to +∞, the lowest onto a grid point above their losses.

Range sums of the discrete Gaussian ``f(y) = e^{−y²/(2τ²)}``, normalised by ``Z = Σ_y f(y)``:

* small supports: each f(y) in mpmath, summed exactly enough (40 digits);
* large τ: the midpoint Euler–Maclaurin formula ``Σ_{y=a}^{c} f(y) = ∫_{a−½}^{c+½} f −
  (f'(c+½) − f'(a−½))/24 + R``, ``|R| <= (1/576 + 1/1920)·Σ_cells max_cell |f''''|`` (Taylor on each
  unit cell about its midpoint, with the Lagrange remainder), and on a cell ``|f''''(u)| <= f(u)·(M⁴/τ⁸
  + 6M²/τ⁶ + 3/τ⁴)`` with ``M`` the largest |u|, ``max_cell f <= e^{M/τ²}·∫_cell f``; so ``|R| <=
  κ·∫_{a−½}^{c+½} f`` with ``κ = 0.00226·e^{M/τ²}·(M⁴/τ⁸ + 6M²/τ⁶ + 3/τ⁴)`` (about 25/τ⁴);
  ``Z ∈ [τ√(2π), τ√(2π)(1 + 2e^{−2π²τ²}/(1 − e^{−2π²τ²}))]`` (Poisson summation).

Range sums of the discrete Laplace ``P(y) = e^{−|y|/t}·(1 − r)/(1 + r)``, ``r = e^{−1/t}``: closed-form
geometric sums.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.errors import ParameterError

from ._pld import PLD, PLDPair, _as_fraction, _check_w, _down, _mpf, _up, DEFAULT_TAIL, DEFAULT_W

__all__ = ["shift_pair", "MAX_GROUPS"]

_DPS = 40
_WIDEN = 1e-20  # relative widening of every enclosure (see the module docstring)
_ENUMERATE_MAX = 60_000  # enumerate the Gaussian's values up to this many
_MIN_TAU_ANALYTIC = 1000  # the Euler–Maclaurin enclosure from this τ on (κ <= 3e-11)
MAX_GROUPS = 200_000  # a leaf needing more loss buckets than this is not built (None)


def _widen(v: tuple) -> tuple:
    lo, hi = v
    return max(lo * (1 - _WIDEN), 0), hi * (1 + _WIDEN)


class _Noise:
    """Range sums of the noise centred at 0 as normalised enclosures, its loss segments, its tails."""

    y_lo: int
    y_hi: int

    def mass(self, a: int, c: int) -> tuple:  # pragma: no cover - interface
        """Enclosure (mpmath) of the normalised Q0 mass of the integers [a, c]."""
        raise NotImplementedError

    def masses(self, a: np.ndarray, c: np.ndarray) -> tuple:
        """Float enclosures of Q0([a_k, c_k]) for every k: :meth:`mass`, rounded outward."""
        lo, hi = np.zeros(len(a)), np.zeros(len(a))
        for k in range(len(a)):
            m_lo, m_hi = self.mass(int(a[k]), int(c[k]))
            lo[k], hi[k] = _down(m_lo), _up(m_hi)
        return lo, hi

    def segments(self) -> list[tuple[int, int, Fraction, Fraction]]:  # pragma: no cover - interface
        """Integer ranges [a, c] on which L(y) = α + β·y (β > 0)."""
        raise NotImplementedError

    def points(self) -> list[tuple[Fraction, tuple, tuple]]:
        """Groups of atoms with one base loss L: (L, Q0 mass, PD mass)."""
        return []

    def tails(self) -> tuple[tuple, tuple]:
        """Upper bounds on (Q0, PD) masses below y_lo and above y_hi: ((q0_below, pd_below), (q0_above, pd_above))."""
        raise NotImplementedError


class _Gaussian(_Noise):
    def __init__(self, tau2: Fraction, D: int, tail: float) -> None:
        import mpmath

        self.D = D
        self._memo: dict[int, tuple] = {}
        self.tau2 = tau2
        self.t2 = _mpf(tau2)
        self.tm = mpmath.sqrt(self.t2)
        tau = math.sqrt(float(tau2))
        N = int(math.ceil(tau * math.sqrt(2 * math.log(8 / tail)))) + 2
        self.N = N
        self.y_lo, self.y_hi = -N, N + D
        self.alpha = -Fraction(D * D) / (2 * tau2)
        self.beta = Fraction(D) / tau2
        self.enumerate = (self.y_hi + D) - (self.y_lo - D) + 1 <= _ENUMERATE_MAX
        if not self.enumerate and tau < _MIN_TAU_ANALYTIC:
            raise _TooLarge("discrete Gaussian with τ between the enumerated and the analytic ranges")
        if self.enumerate:
            lo = self.y_lo - D
            fs = [self._f(y) for y in range(lo, self.y_hi + D + 1)]
            self._lo = lo
            self._prefix = [mpmath.mpf(0)]
            for v in fs:
                self._prefix.append(self._prefix[-1] + v)
            z_in = self._prefix[-1]
            g_out = 2 * self._G(mpmath.mpf(min(-lo, self.y_hi + D)))
            self.z = (z_in, z_in + g_out)
            self.abs_err = z_in * mpmath.mpf(10) ** -30
        else:
            c = self.tm * mpmath.sqrt(2 * mpmath.pi)
            qq = mpmath.exp(-2 * mpmath.pi**2 * self.t2)
            self.z = (c, c * (1 + 2 * qq / (1 - qq)))
            # κ at the largest |u| any range sum reaches (ranges lie in [y_lo − D, y_hi]): one bound for all
            M, t2 = mpmath.mpf(max(-(self.y_lo - D), self.y_hi) + 1), self.t2
            self.kappa = (
                (mpmath.mpf(1) / 576 + mpmath.mpf(1) / 1920)
                * mpmath.exp(M / t2)
                * (M**4 / t2**4 + 6 * M**2 / t2**3 + 3 / t2**2)
            )
            self.abs_err = self.z[1] * mpmath.mpf(10) ** -36  # the working precision's error in T(a) − T(c)

    def _f(self, y: Any) -> Any:
        import mpmath

        return mpmath.exp(-(mpmath.mpf(y) ** 2) / (2 * self.t2))

    def _G(self, x: Any) -> Any:
        """∫_x^∞ f for any real x."""
        import mpmath

        return self.tm * mpmath.sqrt(mpmath.pi / 2) * mpmath.erfc(x / (self.tm * mpmath.sqrt(2)))

    def _V(self, u2: int) -> tuple:
        """(T(u), T(u) + f'(u)/24) at u = u2/2 with T(u) = ∫_u^∞ f (memoised: neighbouring groups share ends)."""
        import mpmath

        got = self._memo.get(u2)
        if got is None:
            u = mpmath.mpf(u2) / 2
            T = self._G(u)
            got = self._memo[u2] = (T, T + (-u * self._f(u) / self.t2) / 24)
        return got

    def _sum(self, a: int, c: int) -> tuple:
        """Enclosure of Σ_{y=a}^{c} f(y)."""
        import mpmath

        if a > c:
            return mpmath.mpf(0), mpmath.mpf(0)
        if self.enumerate:
            s = self._prefix[c - self._lo + 1] - self._prefix[a - self._lo]
            return max(s - self.abs_err, 0), s + self.abs_err
        Ta, Va = self._V(2 * a - 1)
        Tc, Vc = self._V(2 * c + 1)
        integral = Ta - Tc
        approx = Va - Vc
        err = self.kappa * integral + self.abs_err
        return max(approx - err, 0), approx + err

    def mass(self, a: int, c: int) -> tuple:
        s_lo, s_hi = self._sum(a, c)
        return _widen((s_lo / self.z[1], s_hi / self.z[0]))

    def masses(self, a: np.ndarray, c: np.ndarray) -> tuple:
        """Float enclosures of Q0([a_k, c_k]) for every k: narrow groups summed atom by atom in float64
        (each f(y) = exp(−y²/(2τ²)) within 3.1u·|y²/(2τ²)| + 2^-50 relative, a sum of n positive terms
        within 1.01·n·u in any order), wide ones by :meth:`mass` in mpmath."""
        lo, hi = np.zeros(len(a)), np.zeros(len(a))
        n = c - a + 1
        narrow = np.flatnonzero(n <= _NARROW)
        wide = np.flatnonzero(n > _NARROW)
        lo[wide], hi[wide] = super().masses(a[wide], c[wide])
        t2f = float(2 * self.tau2)
        z_lo, z_hi = _down(self.z[0]), _up(self.z[1])
        start = 0
        while start < len(narrow):
            # a batch of whole groups with at most _CHUNK atoms (at least one group)
            sizes = n[narrow[start:]]
            stop = start + max(1, int(np.searchsorted(np.cumsum(sizes), _CHUNK, side="right")))
            ks = narrow[start:stop]
            lens = n[ks]
            first = np.concatenate([[0], np.cumsum(lens)[:-1]])
            ys = (np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(first - a[ks], lens)).astype(np.float64)
            f = np.exp(-(ys * ys) / t2f)
            sums = np.add.reduceat(f, first)
            arg = np.maximum(a[ks].astype(np.float64) ** 2, c[ks].astype(np.float64) ** 2) / t2f
            r = 3.1 * 2.0**-53 * arg + _U + 1.01 * lens * 2.0**-53 + 2.0**-52
            lo[ks] = np.maximum(sums * (1 - r), 0.0) / z_hi * (1 - 2.0**-52)
            hi[ks] = sums * (1 + r) / z_lo * (1 + 2.0**-52)
            start = stop
        return lo, hi

    def segments(self) -> list:
        return [(self.y_lo, self.y_hi, self.alpha, self.beta)]

    def _above(self, n: int) -> Any:
        """Upper bound on the normalised mass of y > n (n >= 0): Σ_{y>n} f <= ∫_n^∞ f."""
        import mpmath

        return self._G(mpmath.mpf(n)) / self.z[0] * (1 + _WIDEN)

    def tails(self) -> tuple:
        below = (self._above(-self.y_lo), self._above(-self.y_lo + self.D))  # Q0(y < −N), PD(y < −N)
        above = (self._above(self.y_hi), self._above(self.y_hi - self.D))  # Q0(y > N+D), PD(...)
        return below, above


class _Laplace(_Noise):
    """Discrete Laplace ``P(y) ∝ e^{−|y|/t}``: L(y) = (|y| − |y − D|)/t is −D/t for y <= 0, D/t for
    y >= D and (2y − D)/t between, so the two outer sets are point groups and the middle one segment."""

    def __init__(self, t: Fraction, D: int) -> None:
        import mpmath

        self.D, self.t = D, t
        self.tm = _mpf(t)
        self.r = mpmath.exp(-1 / self.tm)
        self.one_minus_r = -mpmath.expm1(-1 / self.tm)
        self.y_lo, self.y_hi = 1, D - 1

    def _geo(self, a: int, c: int) -> Any:
        """Σ_{y=a}^{c} r^y for 0 <= a <= c, over (1 + r)/(1 − r) (the normaliser)."""
        import mpmath

        n = c - a + 1
        return mpmath.exp(-a / self.tm) * -mpmath.expm1(-n / self.tm) / (1 + self.r)

    def mass(self, a: int, c: int) -> tuple:
        if a > c:
            return 0, 0
        if a >= 0:
            v = self._geo(a, c)
        elif c <= 0:
            v = self._geo(-c, -a)
        else:
            v = self._geo(0, -a) + self._geo(1, c)
        return _widen((v, v))

    def segments(self) -> list:
        if self.D < 2:
            return []
        return [(1, self.D - 1, -Fraction(self.D) / self.t, Fraction(2) / self.t)]

    def points(self) -> list:
        import mpmath

        far = mpmath.exp(-self.D / self.tm) / (1 + self.r)  # P0(y >= D) = PD(y <= 0)
        near = 1 / (1 + self.r)  # P0(y <= 0) = PD(y >= D)
        lo, hi = Fraction(-self.D) / self.t, Fraction(self.D) / self.t
        return [(lo, _widen((near, near)), _widen((far, far))), (hi, _widen((far, far)), _widen((near, near)))]

    def tails(self) -> tuple:
        return (0, 0), (0, 0)


class _TooLarge(Exception):
    """The leaf needs more work than this module does (the caller falls back to other routes)."""


@functools.lru_cache(maxsize=64)  # leaves are pure functions of exact parameters
def shift_pair(
    kind: str,
    scale: Any,
    shift: int,
    rate: Any = 1,
    *,
    w: float = DEFAULT_W,
    tail: float = DEFAULT_TAIL,
    pessimistic: bool = True,
) -> PLDPair | None:
    """The connect-the-dots PLD pair (``pessimistic=True``: an upper bound) of a ``shift``-sensitive
    integer query with discrete Gaussian (``kind="gaussian"``, ``scale`` = τ²) or discrete Laplace
    (``kind="laplace"``, ``scale`` = t) noise, Poisson-subsampled at ``rate`` (1: not subsampled).
    ``pessimistic=False``: a lower bound instead, every group's lower mass at its lower grid loss
    (losses rounded down, the tails dropped). None when the leaf would need more than
    :data:`MAX_GROUPS` loss buckets or a τ in neither of the Gaussian's ranges."""
    import mpmath

    if kind not in ("gaussian", "laplace"):
        raise ParameterError(f"kind={kind!r} must be 'gaussian' or 'laplace'")
    scale = _as_fraction(scale, "scale")
    if int(shift) != shift or shift < 1:
        raise ParameterError(f"shift={shift!r} must be an integer >= 1 (grid steps)")
    D = int(shift)
    q = _as_fraction(rate, "rate")
    if q > 1:
        raise ParameterError(f"rate={rate!r} must be in (0, 1]")
    w = _check_w(w)
    with mpmath.workdps(_DPS):
        try:
            noise = _Gaussian(scale, D, tail) if kind == "gaussian" else _Laplace(scale, D)
            return _build(noise, D, q, w, pessimistic)
        except _TooLarge:
            return None


# relative error allowed per elementary float operation (numpy's exp, log, log1p, expm1 and the four
# arithmetic operations are within a few ulp; 2^-50 = 8 ulp of float64), the ASSUMPTION of the float path
_U = 2.0**-50
_NARROW = 1 << 16  # groups of at most this many atoms are summed atom by atom in float64
_CHUNK = 1 << 22  # atoms per batch of the atom-by-atom sums


def _build(noise: _Noise, D: int, q: Fraction, w: float, pessimistic: bool = True) -> PLDPair | None:
    """Group the atoms of every segment by loss bucket (both directions), split each group (connect the
    dots) and the point groups, move the tails up; see the module docstring."""
    import mpmath

    qm = _mpf(q)
    pm = 1 - qm
    wm = mpmath.mpf(w)

    def loss(L: Fraction) -> Any:
        """l = ln(1 − q + q e^L), in mpmath."""
        Lm = _mpf(L) if L >= 0 else -_mpf(-L)
        if q == 1:
            return Lm
        if Lm > 0:
            return Lm + mpmath.log(qm + pm * mpmath.exp(-Lm))
        return mpmath.log1p(qm * mpmath.expm1(Lm))

    fw, bw = _FloatSplit(w, pessimistic), _FloatSplit(w, pessimistic)
    mixer = _Mixer(q)
    groups = 0
    for ya, yc, alpha, beta in noise.segments():
        l_a, l_c = loss(alpha + beta * ya), loss(alpha + beta * yc)
        i0, i1 = int(mpmath.floor(l_a / wm)), int(mpmath.floor(l_c / wm))
        j0, j1 = int(mpmath.floor(-l_c / wm)), int(mpmath.floor(-l_a / wm))
        groups += (i1 - i0 + 1) + (j1 - j0 + 1)
        if groups > MAX_GROUPS:
            return None
        thr = _Thresholds(ya, yc, alpha, beta, q)
        # forward: loss l(y) increasing in y; bucket i holds the y with l(y) in [x_i, x_{i+1})
        cuts = thr.first_y(np.arange(i0 + 1, i1 + 1, dtype=np.float64) * w)
        idx = np.arange(i0, i1 + 1)
        a = np.concatenate([[ya], cuts]).astype(np.int64)
        c = np.concatenate([cuts - 1, [yc]]).astype(np.int64)
        keep = a <= c
        q0, pd = noise.masses(a[keep], c[keep]), noise.masses(a[keep] - D, c[keep] - D)
        fw.groups(idx[keep], mixer.mix(q0, pd), q0)
        # backward: loss −l(y) decreasing in y; bucket j holds the y with l(y) in (−x_{j+1}, −x_j]
        cuts = thr.first_y(-np.arange(j1, j0, -1, dtype=np.float64) * w)
        idx = np.arange(j1, j0 - 1, -1)
        a = np.concatenate([[ya], cuts]).astype(np.int64)
        c = np.concatenate([cuts - 1, [yc]]).astype(np.int64)
        keep = a <= c
        q0, pd = noise.masses(a[keep], c[keep]), noise.masses(a[keep] - D, c[keep] - D)
        bw.groups(idx[keep], q0, mixer.mix(q0, pd))
    for L, q0, pd in noise.points():
        loss_y = loss(L)
        q0a = (np.array([_down(q0[0])]), np.array([_up(q0[1])]))
        pda = (np.array([_down(pd[0])]), np.array([_up(pd[1])]))
        m = mixer.mix(q0a, pda)
        fw.groups(np.array([int(mpmath.floor(loss_y / wm))]), m, q0a)
        bw.groups(np.array([int(mpmath.floor(-loss_y / wm))]), q0a, m)
    (q0_below, pd_below), (q0_above, pd_above) = noise.tails()
    if q0_below or q0_above:
        seg_lo, seg_hi = noise.segments()[0], noise.segments()[-1]
        l_lo = loss(seg_lo[2] + seg_lo[3] * noise.y_lo)
        l_hi = loss(seg_hi[2] + seg_hi[3] * noise.y_hi)
        # forward: y > y_hi has the highest losses (to +∞), y < y_lo the lowest (up to ceil(l(y_lo)/w))
        fw.infinite(_up(pm * q0_above + qm * pd_above))
        fw.up(int(mpmath.ceil(l_lo / wm)), _up(pm * q0_below + qm * pd_below))
        # backward (loss −l): y < y_lo the highest, y > y_hi the lowest (up to ceil(−l(y_hi)/w))
        bw.infinite(_up(q0_below))
        bw.up(int(mpmath.ceil(-l_hi / wm)), _up(q0_above))
    f = fw.build()
    if q == 1:
        # without subsampling the reverse pair of even noise has the same loss law (y -> D − y maps Q0 to PD
        # and L to −L)
        return PLDPair(f, f)
    return PLDPair(f, bw.build())


class _Mixer:
    """Enclosures of M = (1 − q)·Q0 + q·PD from enclosures of Q0 and PD (float arrays)."""

    def __init__(self, q: Fraction) -> None:
        self.q = (_down(_mpf(q)), _up(_mpf(q)))
        self.p = (_down(_mpf(1 - q)), _up(_mpf(1 - q))) if q < 1 else (0.0, 0.0)

    def mix(self, q0: tuple, pd: tuple) -> tuple:
        lo = (self.p[0] * q0[0] + self.q[0] * pd[0]) * (1 - 4 * _U)
        hi = (self.p[1] * q0[1] + self.q[1] * pd[1]) * (1 + 4 * _U)
        return np.maximum(lo, 0.0), hi


class _Thresholds:
    """The smallest integer y with l(y) >= x for many grid losses x, on a segment where
    L(y) = α + β·y = β·(y − D/2) (α = −β·D/2 for both noises here)."""

    def __init__(self, ya: int, yc: int, alpha: Fraction, beta: Fraction, q: Fraction) -> None:
        self.ya, self.yc, self.alpha, self.beta, self.q = ya, yc, alpha, beta, q
        self.centre = -alpha / beta  # D/2, exact
        self.bf = float(beta)
        self.qf = float(q)
        self.am = _mpf(alpha) if alpha >= 0 else -_mpf(-alpha)
        self.bm = _mpf(beta)
        self.qm = _mpf(q)
        self.cf = float(self.centre)
        # ln(1 − q) of the exact rate, to within a few units of 2^-52 (float(1 − q) is within 2^-53 relative,
        # math.log within an ulp); −inf where 1 − q is below the doubles (then "below" is never trusted)
        rest = float(1 - q)
        self.floor = math.log(rest) if rest > 0 else -math.inf

    def _loss_f(self, y: np.ndarray) -> np.ndarray:
        """l(y) in float64 (error <= 2^-50·(4|L| + 8) + :meth:`_cancel_err`, the float path's assumption)."""
        L = (y - self.cf) * self.bf
        if self.q == 1:
            return L
        with np.errstate(over="ignore"):
            pos = L + np.log(self.qf + (1 - self.qf) * np.exp(-np.maximum(L, 0)))
            neg = np.log1p(self.qf * np.expm1(np.minimum(L, 0)))
        return np.where(L > 0, pos, neg)

    def _cancel_err(self, y: np.ndarray) -> np.ndarray:
        """The further error of :meth:`_loss_f` where L < 0: log1p's argument q·expm1(L) carries an
        absolute error of a few ulp of q, and 1 + q·expm1(L) = 1 − q + q·e^L can be far smaller (rates
        near 1), so the log is off by up to 2^-50/(1 − q + q·e^L): 0.06 at 1 − q = 2^-50. Infinite where
        that float is below 2^-40 (the check then falls back to mpmath)."""
        if self.q == 1:
            return np.zeros(len(y))
        L = np.minimum((y - self.cf) * self.bf, 0.0)
        den = 1 + self.qf * np.expm1(L)
        with np.errstate(divide="ignore"):
            return np.where(den > 2.0**-40, 2.0**-50 / np.maximum(den, 2.0**-40), np.inf)

    def _first_y_exact(self, x: float) -> int:
        import mpmath

        xm = mpmath.mpf(x)
        if self.q == 1:
            lam = xm
        else:
            v = mpmath.expm1(xm) + self.qm
            if v <= 0:
                return self.ya
            lam = mpmath.log(v) - mpmath.log(self.qm)
        return int(mpmath.ceil((lam - self.am) / self.bm))

    def first_y(self, xs: np.ndarray) -> np.ndarray:
        """Float guesses, each checked on both sides with a margin far above the float error; the
        guesses that fail the check are recomputed in mpmath at 40 digits. Clamped to [ya, yc + 1]."""
        if len(xs) == 0:
            return np.zeros(0, dtype=np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.q == 1:
                lam = xs
            else:
                v = np.expm1(xs) + self.qf
                lam = np.where(v > 0, np.log(np.where(v > 0, v, 1.0)) - np.log(self.qf), -np.inf)
            ystar = self.cf + lam / self.bf
        below = ~np.isfinite(ystar)
        guess = np.where(below, self.ya, np.ceil(np.where(below, 0, np.clip(ystar, self.ya - 1, self.yc + 1))))
        guess = guess.astype(np.int64)
        margin = 2.0**-36 * (8 + np.abs(xs))
        # "below" (x <= ln(1 − q): every loss is above x, the first y is ya) is read off the float
        # e^x − 1 + q <= 0, which cancels near x = ln(1 − q) (for q within 2^-43 of 1 a grid point or more
        # above ln(1 − q) read as below, and its bucket's atoms went to a lower loss): trusted only a margin
        # below ln(1 − q), else checked in mpmath. ln(1 − q) of the EXACT rate (:attr:`floor`): the float
        # rate is off by up to 2^-54, which moves ln(1 − float(q)) by up to 2^-54/(1 − q), above the margin
        # for 1 − q < 1e-7 (and float(q) is 1.0 within 2^-54 of 1)
        below_ok = below & (xs <= self.floor - margin)
        l_at = self._loss_f(guess.astype(np.float64))
        l_before = self._loss_f((guess - 1).astype(np.float64))
        m_at = margin + self._cancel_err(guess.astype(np.float64))
        m_before = margin + self._cancel_err((guess - 1).astype(np.float64))
        ok = below_ok | (
            ((l_at >= xs + m_at) | (guess >= self.yc + 1)) & ((l_before <= xs - m_before) | (guess <= self.ya))
        )
        for k in np.flatnonzero(~ok):
            guess[k] = self._first_y_exact(float(xs[k]))
        return np.clip(guess, self.ya, self.yc + 1)


class _FloatSplit:
    """The connect-the-dots split of many groups at once in float64, every rounding bounded upward
    (``pessimistic``); or, for a lower bound, each group's lower mass at its lower grid loss."""

    def __init__(self, w: float, pessimistic: bool = True) -> None:
        self.w = w
        self.pess = pessimistic
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []
        self.inf = 0.0
        self.e_w = math.exp(-w) * (1 + _U)  # >= e^{−w}
        self.den = -math.expm1(-w) * (1 - _U)  # <= 1 − e^{−w}

    def groups(self, i: np.ndarray, p: tuple, p2: tuple) -> None:
        """Groups with losses in [x_i, x_{i+1}]: first-law masses in [p_lo, p_hi], second-law in [p2_lo, p2_hi]."""
        if len(i) == 0:
            return
        if not self.pess:  # every loss of the group is >= x_i: moving it down to x_i is the safe side
            self.parts.append((i.astype(np.int64), p[0]))
            return
        p_lo, p_hi = p
        q_lo, q_hi = p2
        ex = np.exp(i.astype(np.float64) * self.w)
        ex_hi, ex_lo = ex * (1 + _U), ex * (1 - _U)
        a_num = q_hi * ex_hi - p_lo * self.e_w
        a_err = 4 * _U * (q_hi * ex_hi + p_lo * self.e_w)
        b_num = p_hi - q_lo * ex_lo
        b_err = 4 * _U * (p_hi + q_lo * ex_lo)
        A = np.clip((a_num + a_err) / self.den * (1 + 2 * _U), 0.0, p_hi)
        B = np.clip((b_num + b_err) / self.den * (1 + 2 * _U), 0.0, p_hi)
        self.parts.append((i.astype(np.int64), A))
        self.parts.append((i.astype(np.int64) + 1, B))

    def up(self, j: int, mass: float) -> None:
        if self.pess:  # a lower bound drops it
            self.parts.append((np.array([j], dtype=np.int64), np.array([mass])))

    def infinite(self, mass: float) -> None:
        if self.pess:
            self.inf = math.nextafter(self.inf + mass, math.inf)

    def build(self) -> PLD:
        if not self.parts:
            return PLD(self.w, 0, np.zeros(1), self.inf, self.pess)
        idx = np.concatenate([p[0] for p in self.parts])
        val = np.concatenate([p[1] for p in self.parts])
        lo = int(idx.min())
        masses = np.zeros(int(idx.max()) - lo + 1)
        counts = np.zeros_like(masses)
        np.add.at(masses, idx - lo, val)
        np.add.at(counts, idx - lo, 1.0)
        # each bucket is a sum of `counts` non-negative floats: relative error <= counts·u
        if self.pess:
            return PLD(self.w, lo, masses * (1 + (counts + 1) * 2.0**-53), self.inf, True)
        return PLD(self.w, lo, masses * (1 - (counts + 1) * 2.0**-53), 0.0, False)
