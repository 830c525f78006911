"""The compiled loops of the exact samplers (:mod:`dpharness.mechanisms._exact_compiled`, issue 35 item 5):
the same outputs, bit for bit, and the same generator state afterwards, as the numpy path, for the
discrete Laplace and the discrete Gaussian over scales from 2**-10 to 2**100 (the int64 loops, and the
scales beyond them that keep the numpy path), sizes across the chunking, and seeds; and the law of the
discrete Gaussian against its exact pmf (chi-square, fixed seed)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpharness.mechanisms import _exact, _exact_compiled

pytest.importorskip("numba", reason="the compiled loops need the numba extra")


def _both(monkeypatch, sampler, param, size, seed):
    """(compiled output, compiled rng state), (numpy output, numpy rng state)."""
    out = []
    for compiled in (True, False):
        monkeypatch.setattr(_exact_compiled, "available", lambda c=compiled: c)
        rng = np.random.default_rng(seed)
        got = sampler(param, size, rng)
        out.append((got, rng.bit_generator.state))
    return out


@pytest.mark.parametrize(
    "t", [Fraction(1, 1024), Fraction(1, 7), 1, Fraction(5, 2), 2047, 2**11 + 1, 2**20 + 1, 10**9, 2**60, 2**80]
)
def test_compiled_discrete_laplace_is_the_numpy_sampler(monkeypatch, t):
    for size in (0, 1, 17, 1000, 70_000):
        for seed in (0, 1, 2):
            (a, sa), (b, sb) = _both(monkeypatch, _exact.discrete_laplace, t, size, seed)
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
            assert sa == sb, (t, size, seed)


@pytest.mark.parametrize(
    "sigma2", [Fraction(1, 2**32), Fraction(1, 3), 1, Fraction(5, 2), 10**6, 2**40, Fraction(2**41, 3), 2**100, 2**150]
)
def test_compiled_discrete_gaussian_is_the_numpy_sampler(monkeypatch, sigma2):
    for size in (0, 1, 17, 1000, 50_000):
        for seed in (0, 3):
            (a, sa), (b, sb) = _both(monkeypatch, _exact.discrete_gaussian, sigma2, size, seed)
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
            assert sa == sb, (sigma2, size, seed)


def test_compiled_samplers_take_the_resolver_paths_the_same_way(monkeypatch):
    """Many draws at a scale whose filters leave undecided elements now and then (the coin == 1023 branch
    of the truncated geometric at every chunk, the certified floor at s near 2**11): still identical."""
    for t in (2**11 - 1, 2**21 - 3):
        (a, sa), (b, sb) = _both(monkeypatch, _exact.discrete_laplace, t, 400_000, 9)
        np.testing.assert_array_equal(a, b)
        assert sa == sb


@pytest.mark.statistical
def test_compiled_discrete_gaussian_law():
    """Chi-square of 400 000 compiled draws at σ² = 5/2 against the exact pmf ∝ exp(−k²/(2σ²)) (cells with
    expectation < 5 pooled); false-failure rate 1e-6 at the fixed seed."""
    assert _exact_compiled.available()
    s2 = 2.5
    n = 400_000
    draws = _exact.discrete_gaussian(Fraction(5, 2), n, np.random.default_rng(2026))
    ks = np.arange(-40, 41)
    pmf = np.exp(-(ks.astype(float) ** 2) / (2 * s2))
    pmf /= pmf.sum()
    expected = pmf * n
    observed = np.array([np.sum(draws == k) for k in ks])
    assert observed.sum() == n
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    p = stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue
    assert p > 1e-6, f"chi-square p = {p} (false-failure rate 1e-6)"


def test_the_fork_servers_warm_up_loads_the_compiled_loops():
    """dpharness.mechanisms._exact_warm, which the audit's fork server imports when numba is loaded in the
    process starting it, leaves the compiled loops built (the forked workers then do not load them again)."""
    import importlib

    from dpharness.auditors import _runner
    from dpharness.mechanisms import _exact_compiled

    importlib.import_module("dpharness.mechanisms._exact_warm")
    assert _exact_compiled.kernels.cache_info().currsize == (1 if _exact_compiled.available() else 0)
    assert "dpharness.mechanisms._exact_warm" in _runner._COMPILED_PRELOAD
