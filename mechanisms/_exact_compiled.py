"""Compiled loops (numba) for the exact discrete Laplace and discrete Gaussian samplers of
:mod:`dpharness.mechanisms._exact`: the same samplers, the same law and the same outputs, bit for bit,
for the same generator state (tested in ``tests/test_exact_compiled.py``).

They replace the chains of numpy element-wise operations between the draws by one compiled pass each,
and nothing else: the words are drawn from the generator by the same calls, in the same order and
numbers (``rng.bit_generator.random_raw``); the transcendental functions (``numpy.log``, ``numpy.exp``)
are still computed by numpy on the same arrays, so every float the certified filters read is the same
double; the rare undecided elements go to the same exact resolvers, in the same order. The float
operations done here (+, -, *, floor, comparisons, int64 <-> float64 conversions) are correctly
rounded IEEE operations in numba as in numpy (numba compiles without fast-math: nothing is
reassociated or fused), so each is the same double as numpy's.

Used by :mod:`._exact` when numba is installed (the ``numba`` extra); otherwise the numpy path runs."""

from __future__ import annotations

import functools
import importlib.util
import types
from typing import Any

import numpy as np

_INV53 = 2.0**-53


@functools.lru_cache(maxsize=None)
def available() -> bool:
    return importlib.util.find_spec("numba") is not None


@functools.lru_cache(maxsize=None)
def kernels() -> Any:
    """The compiled loops (built on first use)."""
    import numba

    @numba.njit(cache=True)
    def before_log(w, y):
        """``y = float(h + 1) * 2**-53`` with ``h = w >> 11`` (numpy: ``(h + 1)`` as int64, to float, times 2**-53)."""
        for i in range(w.shape[0]):
            y[i] = float(np.int64((w[i] >> np.uint64(11)) + np.uint64(1))) * _INV53

    @numba.njit(cache=True)
    def quotient(w, y, neg_sf, band, top, h_min, a, bad):
        """After ``log``: ``y *= -s``, ``a = floor(y)`` as int64; ``bad`` where the floor is not certified
        (fractional part within ``band`` of an integer, or h < h_min). Returns the largest ``a``."""
        largest = np.int64(0)
        for i in range(w.shape[0]):
            v = y[i] * neg_sf
            f = np.floor(v)
            frac = v - f
            a[i] = np.int64(f)
            bad[i] = not ((frac >= band) and (frac < top) and ((w[i] >> np.uint64(11)) >= h_min))
            if a[i] > largest:
                largest = a[i]
        return largest

    @numba.njit(cache=True)
    def signs_and_coins(w, bits, k, b, negative, accepted, flagged):
        """``negative = w & 1``; ``b = bits >> (64 - k)``; ``accepted = coin != 1023`` with
        ``coin = (w >> 1) & 1023``, ``flagged`` the others (k > 0; for k = 0 every proposal is accepted)."""
        nflag = 0
        for i in range(w.shape[0]):
            negative[i] = (w[i] & np.uint64(1)) != np.uint64(0)
            if k == 0:
                accepted[i] = True
            else:
                b[i] = np.int64(bits[i] >> np.uint64(64 - k))
                accepted[i] = ((w[i] >> np.uint64(1)) & np.uint64(1023)) != np.uint64(1023)
                if not accepted[i]:
                    flagged[nflag] = i
                    nflag += 1
        return nflag

    @numba.njit(cache=True)
    def signed_accepted(a, b, n, k, negative, accepted, need, out):
        """The first ``need`` accepted signed proposals ``±(a n + b)`` (``-0`` rejected), in index order,
        into ``out``; returns how many."""
        filled = 0
        for i in range(a.shape[0]):
            if filled == need:
                break
            g = a[i] * n + b[i] if k > 0 else a[i]
            if not accepted[i] or (negative[i] and g == 0):
                continue
            out[filled] = -g if negative[i] else g
            filled += 1
        return filled

    @numba.njit(cache=True)
    def gaussian_gamma(y, c, inv, neg_gamma, dgamma):
        """γ = (|y| − c)² · inv and its error bound (the numpy expressions, in their order), and −γ."""
        for i in range(y.shape[0]):
            a = float(abs(y[i]))
            d = a - c
            delta = (a + c) * 2.0**-51
            gamma = d * d * inv
            dgamma[i] = 2.0 * ((2.0 * abs(d) + delta) * delta * inv + gamma * 2.0**-50)
            neg_gamma[i] = -gamma

    @numba.njit(cache=True)
    def below(p, dgamma, w, keep, undecided):
        """``U < p`` certified where it holds for the whole interval of U (``err`` from ``dgamma`` as in
        ``_below_exp_approx``, NaN when dγ > 2**-4); the rest flagged ``undecided`` (returns how many)."""
        nund = 0
        for i in range(p.shape[0]):
            if dgamma[i] <= 2.0**-4:
                err = p[i] * (2.0 * dgamma[i] + 2.0**-40) + 2.0**-1000
            else:
                err = np.nan
            u_lo = float(np.int64(w[i] >> np.uint64(11))) * _INV53
            yes = (u_lo + _INV53) <= (p[i] - err)
            no = u_lo >= (p[i] + err)
            keep[i] = yes
            if not (yes or no):
                undecided[nund] = i
                nund += 1
        return nund

    @numba.njit(cache=True)
    def first_kept(y, keep, need, out):
        filled = 0
        for i in range(y.shape[0]):
            if filled == need:
                break
            if keep[i]:
                out[filled] = y[i]
                filled += 1
        return filled

    return types.SimpleNamespace(
        before_log=before_log,
        quotient=quotient,
        signs_and_coins=signs_and_coins,
        signed_accepted=signed_accepted,
        gaussian_gamma=gaussian_gamma,
        below=below,
        first_kept=first_kept,
    )
