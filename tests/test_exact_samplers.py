"""The exact samplers of :mod:`dpharness.mechanisms._exact`: deterministic checks of the float filter
and of the exact resolver on crafted uniforms (a scripted bit generator), and statistical
goodness-of-fit tests against the exact laws at small and huge parameters."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpharness.errors import ParameterError
from dpharness.mechanisms import _exact as E
from dpharness.mechanisms._noise import discrete_laplace as noise_discrete_laplace
from dpharness.mechanisms.randomized_response import RandomizedResponse

ALPHA = 1e-4
RATE_NOTE = "false-failure rate 1e-4 for an exact sampler (fixed seed: re-running gives the same result)"


class _ScriptedBits:
    """A bit generator stand-in: batch calls ``random_raw(n)`` return ``batch(n)``; scalar calls
    ``random_raw()`` (the resolver's refinements) pop ``script`` and then fall back to a real stream."""

    def __init__(self, batch, script=(), seed=0):
        self.batch, self.script = batch, list(script)
        self.real = np.random.default_rng(seed).bit_generator

    def random_raw(self, size=None):
        if size is None:
            return np.uint64(self.script.pop(0)) if self.script else self.real.random_raw()
        return np.asarray(self.batch(size), dtype=np.uint64)


class _ScriptedRng:
    def __init__(self, bits):
        self.bit_generator = bits

    def integers(self, lo, hi, size, dtype=np.int64):
        return np.random.default_rng(1).integers(lo, hi, size, dtype=dtype)


def _chi2(samples, pmf, support):
    """Chi-square p-value of integer ``samples`` against ``pmf`` on ``support`` (+ one tail cell)."""
    support = np.asarray(support)
    probs = np.array([pmf(int(k)) for k in support], dtype=float)
    counts = np.array([(samples == k).sum() for k in support], dtype=float)
    probs = np.append(probs, max(0.0, 1.0 - probs.sum()))
    counts = np.append(counts, len(samples) - counts.sum())
    exp_ = probs * len(samples)
    keep = exp_ > 5
    rest_obs, rest_exp = counts[~keep].sum(), exp_[~keep].sum()
    obs, ex = np.append(counts[keep], rest_obs), np.append(exp_[keep], rest_exp)
    if rest_exp == 0:
        obs, ex = obs[:-1], ex[:-1]
    return float(stats.chisquare(obs, ex * obs.sum() / ex.sum()).pvalue)


def _laplace_pmf(t: Fraction):
    with mpmath.workdps(30):
        q = mpmath.exp(-1 / mpmath.mpf(t.numerator) * t.denominator)
        return lambda k: float((1 - q) / (1 + q) * q ** abs(k))


# --------------------------------------------------------------------------- deterministic


def test_float_library_error_assumption():
    """The module relies on numpy log/exp/expm1 being within 2**-42 relative (2**10 ulp): checked
    against mpmath on 20 000 points spanning the ranges used."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.random(5000), rng.random(5000) * 2.0**-10, np.exp(-rng.random(5000) * 40)])
    g = np.concatenate([rng.random(5000) * 50, rng.random(5000) * 2.0**-10])
    with mpmath.workdps(40):
        for arr, f, ref in (
            (x, np.log, mpmath.log),
            (g, lambda v: np.exp(-v), lambda v: mpmath.exp(-v)),
            (g, lambda v: np.expm1(-v), lambda v: mpmath.expm1(-v)),
        ):
            got = f(arr)
            for v, r in zip(arr[::7], got[::7]):
                exact = ref(mpmath.mpf(float(v)))
                if exact != 0:
                    assert abs((mpmath.mpf(float(r)) - exact) / exact) < 2.0**-42


def test_exact_rational_reads_floats_as_binary_and_refuses_non_numbers():
    assert E.exact_rational("t", 0.1) == Fraction(0.1) != Fraction(1, 10)
    assert E.exact_rational("t", Fraction(1, 3)) == Fraction(1, 3)
    for bad in (True, "1", math.inf):
        with pytest.raises(ParameterError, match="t="):
            E.exact_rational("t", bad)


@pytest.mark.parametrize("t", [0, -1, Fraction(1, 2**1001), 2.0**1001])
def test_discrete_laplace_refuses_scales_out_of_range(t):
    with pytest.raises(ParameterError, match="t="):
        E.discrete_laplace(t, 3, np.random.default_rng(0))


@pytest.mark.parametrize("s2", [0, Fraction(1, 2**201), 2**201])
def test_discrete_gaussian_refuses_variances_out_of_range(s2):
    with pytest.raises(ParameterError, match="sigma2="):
        E.discrete_gaussian(s2, 3, np.random.default_rng(0))


@pytest.mark.parametrize("s", [Fraction(1), Fraction(7, 3), Fraction(2047, 2), Fraction(1, 1000)])
def test_geometric_filter_agrees_with_exact_floor_on_every_certified_word(s):
    """Every value the float pass certifies equals floor(-s ln U) at both ends of U's interval
    (mpmath at 80 digits); words crafted next to the boundaries U = e^{-j/s} go to the resolver
    and come back right for the refined U."""
    words = np.random.default_rng(5).bit_generator.random_raw(3000)
    crafted = []
    with mpmath.workdps(80):
        sm = mpmath.mpf(s.numerator) / s.denominator
        for j in range(1, 40):
            c = int(mpmath.floor(mpmath.exp(-j / sm) * 2**53))
            if c >= 2**34:
                crafted.append(c << 11)
        words = np.concatenate([words, np.array(crafted, dtype=np.uint64)])
        bits = _ScriptedBits(lambda n: np.zeros(n), seed=9)
        out = E._geometric_quotient(words, s, _ScriptedRng(bits))
        for w, v in zip(words[::5].tolist() + crafted, out[::5].tolist() + out[len(out) - len(crafted) :].tolist()):
            h = w >> 11
            lo = -sm * mpmath.log(mpmath.mpf(h + 1) / 2**53)
            hi = -sm * mpmath.log(mpmath.mpf(h) / 2**53) if h else mpmath.inf
            if int(mpmath.floor(lo)) == int(mpmath.floor(hi)):
                assert v == int(mpmath.floor(lo))
            else:  # straddling: resolved with refined bits; the result is one of the two cells
                assert v in (int(mpmath.floor(lo)), int(mpmath.floor(lo)) + 1)


def test_resolver_refines_a_uniform_that_straddles_exp_minus_one():
    """U's 53-bit interval contains e^{-1}: the decision U < e^{-1} depends on the next word, and
    equals the truth for the refined U (checked at 60 digits) for words on either side."""
    with mpmath.workdps(60):
        p = mpmath.exp(-1)
        h = int(mpmath.floor(p * 2**53))
        nxt = int(mpmath.floor((p * 2**53 - h) * 2**64))
        for w in (nxt - 1, nxt + 1, 0, 2**64 - 1):
            rng = _ScriptedRng(_ScriptedBits(lambda n: np.zeros(n), script=[w]))
            got = E._resolve_below(h, 53, E.ExactProbability.exp_neg(1).enclose, rng)
            assert got == (mpmath.mpf(h * 2**64 + w) / 2**117 < p)


def test_bernoulli_rational_is_decided_exactly_at_the_threshold_word():
    """p = 1/3: h = floor(2**53/3) straddles p; the next word decides exactly like the rational
    comparison of the refined U with 1/3."""
    p = Fraction(1, 3)
    c = math.floor(p * 2**53)
    for w in (0, 2**63, 2**64 - 1, math.floor((p * 2**53 - c) * 2**64)):
        rng = _ScriptedRng(_ScriptedBits(lambda n: np.full(n, c << 11), script=[w] * 4))
        got = E.bernoulli(p, 1, rng)[0]
        assert got == (Fraction(c * 2**64 + w, 2**117) < p)


def test_bernoulli_indices_decide_exactly_at_the_threshold_chunk():
    """p = 1/3 with every 16-bit chunk at c = floor(2**16/3), the chunk that straddles p: each draw's
    next word decides it exactly like the rational comparison of the refined U with 1/3; a chunk below c
    is kept and one above is not, without further bits."""
    p = Fraction(1, 3)
    c = math.floor(p * 2**16)
    word = c | (c << 16) | ((c - 1) << 32) | ((c + 1) << 48)  # draws 0, 1 at c; 2 below; 3 above
    script = [0, 2**64 - 1]  # draw 0 refined to the bottom of its chunk, draw 1 to the top
    rng = _ScriptedRng(_ScriptedBits(lambda n: np.full(n, word), script=list(script)))
    got = E.bernoulli_indices(p, 4, rng).tolist()
    want = [i for i, w in enumerate(script) if Fraction(c * 2**64 + w, 2**80) < p] + [2]
    assert got == sorted(want) and got == [0, 2]


@pytest.mark.parametrize("p", [1, Fraction(0), 2.0**-30, Fraction(1, 2)])
def test_bernoulli_indices_edges(p):
    """p = 1 keeps all; p = 0 keeps none, also when a chunk is 0 (the ambiguous chunk of p < 2**-16,
    resolved by further bits); p = 1/2 is exactly the chunks below 2**15 (no ambiguity)."""
    chunks = np.array([0, 1, 2**15 - 1, 2**15, 2**16 - 1, 0, 5, 40000], dtype=np.uint16)
    words = chunks.view(np.uint64)
    rng = _ScriptedRng(_ScriptedBits(lambda n: words[:n]))
    got = E.bernoulli_indices(p, 8, rng).tolist()
    if p == 1:
        assert got == list(range(8))
    elif p == 0:
        assert got == []
    elif p == Fraction(1, 2):
        assert got == [0, 1, 2, 5, 6]
    else:  # 2**-30: only a zero chunk can be kept, and then only if its further bits fall below p
        assert set(got) <= {0, 5}
    assert E.bernoulli_indices(Fraction(1, 3), 0, np.random.default_rng(0)).tolist() == []


@pytest.mark.statistical
@pytest.mark.parametrize("p", [Fraction(1, 100), 0.5, Fraction(1, 3), 2.0**-14])
def test_bernoulli_indices_law(p):
    """The number kept among 10**6 draws is Binomial(10**6, p) and the kept positions are uniform (a
    chi-square over 10 equal blocks); seed 61, level 1e-4 each (false-failure rate 8e-4 over the 8
    checks)."""
    rng = np.random.default_rng(61)
    idx = E.bernoulli_indices(p, 10**6, rng)
    assert np.all(np.diff(idx) > 0) and (len(idx) == 0 or (idx[0] >= 0 and idx[-1] < 10**6))
    assert stats.binomtest(len(idx), 10**6, float(p)).pvalue > ALPHA, RATE_NOTE
    blocks = np.bincount(idx // 10**5, minlength=10)
    assert stats.chisquare(blocks).pvalue > ALPHA, RATE_NOTE


@pytest.mark.parametrize("L", [37, 200, 1000])
def test_randomized_response_lies_when_u_is_below_the_exact_lie_probability(L):
    """With the 53-bit prefix of U forced to 0, lying must happen exactly for the refined U below
    (k-1)/(e^L + k - 1) — the old float sampler never lied at L >= 37 (p_truth rounded to 1)."""
    with mpmath.workdps(600):
        p = 1 / (mpmath.exp(L) + 1)
        # the words of p after the zero prefix: scripted just below and just above p
        depth = (int(-mpmath.log(p, 2)) - 53) // 64 + 1
        target = int(mpmath.floor(p * mpmath.mpf(2) ** (53 + 64 * depth)))
    below = [0] * (depth - 1) + [target - 1]
    above = [0] * (depth - 1) + [target + 1]
    for script, lie in ((below, True), (above, False)):
        rng = _ScriptedRng(_ScriptedBits(lambda n: np.zeros(n), script=script))
        out = E.randomized_response(0, 2, L, 1, rng)
        assert bool(out[0] == 1) is lie


def test_exact_probability_enclosures_contain_the_value():
    with mpmath.workdps(100):
        for prob, value in (
            (E.ExactProbability.odds(9, Fraction(5, 2)), 9 / (mpmath.exp(mpmath.mpf(5) / 2) + 9)),
            (E.ExactProbability.exp_neg(Fraction(1, 7)), mpmath.exp(-mpmath.mpf(1) / 7)),
        ):
            lo, hi = prob.enclose(200)
            assert mpmath.mpf(lo.numerator) / lo.denominator <= value <= mpmath.mpf(hi.numerator) / hi.denominator
            assert hi - lo < Fraction(1, 2**190)


def test_noise_discrete_laplace_keeps_shape_and_per_coordinate_scales():
    out = noise_discrete_laplace(np.array([1.0, 2.0**30]), (1000, 2), np.random.default_rng(0))
    assert out.shape == (1000, 2) and out.dtype == np.int64
    assert np.abs(out[:, 0]).mean() < 10 < np.abs(out[:, 1]).mean()


def test_same_seed_same_samples():
    a = E.discrete_laplace(Fraction(2**40), 1000, np.random.default_rng(3))
    b = E.discrete_laplace(Fraction(2**40), 1000, np.random.default_rng(3))
    assert np.array_equal(a, b)


# --------------------------------------------------------------------------- statistical


@pytest.mark.statistical
@pytest.mark.parametrize("t", [Fraction(1), Fraction(3, 2), 0.3, Fraction(40), Fraction(1, 5)], ids=str)
def test_discrete_laplace_matches_exact_pmf(t):
    """200 000 draws, chi-square against the exact pmf at level 1e-4 (false-failure rate 1e-4)."""
    tq = Fraction(t)
    s = E.discrete_laplace(t, 200_000, np.random.default_rng(11))
    support = np.arange(-int(12 * tq) - 3, int(12 * tq) + 4)
    p = _chi2(s, _laplace_pmf(tq), support)
    assert p > ALPHA, f"t={t}: chi-square p = {p:.3g}; {RATE_NOTE}"


@pytest.mark.statistical
@pytest.mark.parametrize("t", [Fraction(2**20), Fraction(2**60), Fraction(2**60) / 3], ids=str)
def test_discrete_laplace_at_huge_scales_matches_exact_bins(t):
    """200 000 draws binned by ``floor(K / (t/4))`` (exact cell probabilities from the geometric
    law), chi-square at level 1e-4 (false-failure rate 1e-4)."""
    s = E.discrete_laplace(t, 200_000, np.random.default_rng(12))
    w = t / 4
    cells = np.array([math.floor(Fraction(int(v)) / w) for v in s.tolist()])
    with mpmath.workdps(40):
        q = mpmath.exp(-mpmath.mpf(t.denominator) / t.numerator)
        norm = (1 - q) / (1 + q)

        def cdf(x):  # P(K <= x) for integer x
            return float(1 - q ** (x + 1) / (1 + q)) if x >= 0 else float(q ** (-x) / (1 + q))

        def pmf(c):  # P(c w <= K < (c+1) w)
            lo, hi = math.ceil(c * w), math.ceil((c + 1) * w)
            return cdf(hi - 1) - cdf(lo - 1)

        assert norm > 0
    p = _chi2(cells, pmf, np.arange(-40, 40))
    assert p > ALPHA, f"t={t}: chi-square p = {p:.3g}; {RATE_NOTE}"


@pytest.mark.statistical
@pytest.mark.parametrize("t", [2.0**53 + 2.0, Fraction(2**53 + 1), 2.0**60, 1e10 * 2.0**20], ids=str)
def test_low_bits_of_huge_scale_discrete_laplace_are_uniform(t):
    """The old float sampler's failure: at t >= 2**53 ``floor(t E)`` loses its low bits (even
    values only, etc.). Under the exact law K mod 16 is uniform up to ~16/t. 160 000 draws,
    chi-square at level 1e-4 (false-failure rate 1e-4); also through ``_noise.discrete_laplace``,
    the grid Laplace path (1e10 * 2**20 is ``Laplace.calibrated(0.01, sensitivity=1e8)``'s scale)."""
    s = noise_discrete_laplace(t, 160_000, np.random.default_rng(13))
    low = np.array([int(v) % 16 for v in s.tolist()])
    counts = np.bincount(low, minlength=16)
    p = float(stats.chisquare(counts).pvalue)
    assert p > ALPHA, f"t={t}: low bits chi-square p = {p:.3g} (counts {counts.tolist()}); {RATE_NOTE}"


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [Fraction(1), Fraction(14), Fraction(1, 3), Fraction(7, 2), Fraction(400)], ids=str)
def test_discrete_gaussian_matches_exact_pmf(sigma2):
    """200 000 draws, chi-square against the exact pmf (normaliser summed at 30 digits) at level
    1e-4 (false-failure rate 1e-4)."""
    s = E.discrete_gaussian(sigma2, 200_000, np.random.default_rng(21))
    sd = math.sqrt(float(sigma2))
    n = int(12 * sd) + 3
    with mpmath.workdps(30):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        w = {k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-n - 40, n + 41)}
        z = mpmath.fsum(w.values())
        p = _chi2(s, lambda k: float(w[k] / z), np.arange(-n, n + 1))
    assert p > ALPHA, f"sigma2={sigma2}: chi-square p = {p:.3g}; {RATE_NOTE}"


@pytest.mark.statistical
def test_discrete_gaussian_at_huge_sigma_has_gaussian_bins_and_uniform_low_bits():
    """σ² = 2**100: 100 000 draws; 20 equiprobable bins of the normal approximation (its error is
    ~2**-100, far below the test's resolution) and K mod 16 (uniform up to ~2**-46): two chi-square
    tests at level 1e-4 each (false-failure rate 2e-4)."""
    s = E.discrete_gaussian(Fraction(2**100), 100_000, np.random.default_rng(22))
    z = np.array([int(v) for v in s.tolist()], dtype=float) / 2.0**50
    edges = stats.norm.ppf(np.linspace(0, 1, 21)[1:-1])
    p1 = float(stats.chisquare(np.bincount(np.searchsorted(edges, z), minlength=20)).pvalue)
    p2 = float(stats.chisquare(np.bincount(np.array([int(v) % 16 for v in s.tolist()]), minlength=16)).pvalue)
    assert min(p1, p2) > ALPHA, f"bins p = {p1:.3g}, low bits p = {p2:.3g}; {RATE_NOTE}"


@pytest.mark.statistical
@pytest.mark.parametrize("k,L", [(2, Fraction(1)), (10, 2.0), (3, Fraction(1, 3))], ids=str)
def test_randomized_response_matches_exact_law(k, L):
    """200 000 reports, chi-square against P(truth) = e^L/(e^L + k - 1) and uniform lies at level
    1e-4 (false-failure rate 1e-4)."""
    s = E.randomized_response(1, k, L, 200_000, np.random.default_rng(31))
    Lq = Fraction(L)
    with mpmath.workdps(30):
        e = mpmath.exp(mpmath.mpf(Lq.numerator) / Lq.denominator)
        probs = [float((e if j == 1 else 1) / (e + k - 1)) for j in range(k)]
    p = float(stats.chisquare(np.bincount(s, minlength=k), np.array(probs) * len(s)).pvalue)
    assert p > ALPHA, f"k={k}, L={L}: chi-square p = {p:.3g}; {RATE_NOTE}"


@pytest.mark.statistical
@pytest.mark.parametrize("L", [37, 200])
def test_huge_log_odds_lie_at_the_exact_rate_given_a_zero_prefix(L):
    """Lies at L = 37 (p ≈ 2**-53.4) and L = 200 (p ≈ 2**-288.5) are too rare to count, so the
    rate is scaled exactly: conditioned on the first ``b`` bits of U being 0 (a scripted prefix),
    P(lie) = p 2**b, with b chosen so that this is in (0.3, 1). 20 000 draws (L = 37, through the
    public sampler; L = 200, through the resolver), two-sided binomial test at level 1e-4
    (false-failure rate 1e-4)."""
    with mpmath.workdps(200):
        p = 1 / (mpmath.exp(L) + 1)
        b = int(mpmath.floor(-mpmath.log(p, 2)))
        rate = float(p * mpmath.mpf(2) ** b)
    n = 20_000
    if L == 37:
        assert b == 53
        rng = _ScriptedRng(_ScriptedBits(lambda m: np.zeros(m), seed=41))
        hits = int((E.randomized_response(0, 2, L, n, rng) == 1).sum())
    else:
        rng = np.random.default_rng(42)
        enclose = E.ExactProbability.odds(1, L).enclose
        hits = sum(E._resolve_below(0, b, enclose, rng) for _ in range(n))
    pv = stats.binomtest(hits, n, rate).pvalue
    assert pv > ALPHA, f"L={L}: {hits}/{n} lies vs rate {rate:.4f}, p = {pv:.3g}; {RATE_NOTE}"


def test_randomized_response_mechanism_is_no_longer_truthful_at_log_odds_37():
    """The mechanism itself: with the first 53 bits of U zero, a lie occurs at rate ~0.75."""
    m = RandomizedResponse(k=2, log_odds=37)
    rng = _ScriptedRng(_ScriptedBits(lambda n: np.zeros(n), seed=7))
    out = m._sample(0, 2000, rng)
    assert 0.6 < (out == 1).mean() < 0.9


@pytest.mark.statistical
def test_bernoulli_exp_scalar_and_arrays():
    """Bernoulli(exp(-x)) at x = 3/2 (200 000 draws) and element-wise x = num/den (200 000 draws of
    4 values): binomial tests at level 1e-4 each (false-failure rate 5e-4 over the 5 tests)."""
    rng = np.random.default_rng(51)
    hits = int(E.bernoulli_exp(Fraction(3, 2), rng, size=200_000).sum())
    ps = [stats.binomtest(hits, 200_000, math.exp(-1.5)).pvalue]
    num = np.tile(np.array([0, 1, 7, 30]), 50_000)
    den = np.tile(np.array([1, 3, 2, 7]), 50_000)
    out = E.bernoulli_exp((num, den), rng)
    for j, x in enumerate((0, 1 / 3, 3.5, 30 / 7)):
        h = int(out[j::4].sum())
        ps.append(1.0 if x == 0 and h == 50_000 else stats.binomtest(h, 50_000, math.exp(-x)).pvalue)
    assert min(ps) > ALPHA, f"p-values {ps}; {RATE_NOTE}"


@pytest.mark.statistical
def test_exponential_mechanism_sampler_is_exact_categorical():
    """The exponential mechanism samples with its exact probabilities e^{βu_r}/Σ e^{βu} (chi-square at
    2·10^5 samples, seed 5; false-failure rate 1e-4)."""
    from scipy import stats

    from dpharness.mechanisms._exact import categorical_exp
    from dpharness.mechanisms.exponential import ExponentialMechanism

    m = ExponentialMechanism(n_candidates=5)
    u = np.array([0.0, 1.0, 2.0, 2.5, 1.0])
    out = m.sample(u, 200_000, np.random.default_rng(5))
    p = np.exp(m.law(u).log_prob(np.arange(5)))
    counts = np.bincount(out, minlength=5)
    chi2 = ((counts - 200_000 * p) ** 2 / (200_000 * p)).sum()
    assert stats.chi2.sf(chi2, 4) > 1e-4
    one = categorical_exp([Fraction(0)], 10, np.random.default_rng(1))
    assert (one == 0).all()


@pytest.mark.statistical
def test_the_truncated_acceptance_step_accepts_with_exactly_e_to_the_minus_x():
    """The discrete Laplace's second geometric accepts B with probability e^{-B/t} through a 10-bit coin
    and, when the coin is 1023, V < p' = 1 + 1024·expm1(−x). At x = 1023/2^20 (just below the step's
    2^-10 bound) p' = 0.001464: 2·10^5 draws with the coin at 1023 accept about 293 times (sd 17);
    accepting with e^{-1.01x} instead would make p' negative and accept none. Bounds 200..400: the
    false-failure rate is below 1e-7 (fixed seed)."""
    from fractions import Fraction

    from dpharness.mechanisms._exact import _truncated_accept

    n = 200_000
    t = Fraction(2**20)
    b = np.full(n, 1023, dtype=np.int64)
    coin = np.full(n, 1023, dtype=np.int64)
    accepted = int(_truncated_accept(b, coin, t, np.random.default_rng(20261126)).sum())
    x = 1023 / 2**20
    expected = n * (1 + 1024 * math.expm1(-x))
    assert abs(expected - 292.8) < 1
    assert 200 <= accepted <= 400, f"{accepted} acceptances, expected about {expected:.0f} (false-failure rate < 1e-7)"
    # a coin below 1023 always accepts (U < 1 − 2^-10 < e^{-x})
    assert _truncated_accept(b[:1000], np.full(1000, 1022, dtype=np.int64), t, np.random.default_rng(1)).all()


# --------------------------------------------------------------------------- grouped categorical


def test_categorical_counts_refuses_bad_groups():
    rng = np.random.default_rng(0)
    for counts, xs, match in (
        ([], [], "non-empty"),
        ([1, 2], [0], "equal length"),
        ([0, 1], [0, 1], "counts must"),
        ([2**53, 1], [0, 1], "counts must"),
        ([1, 1], [0, -1], "exponents must be >= 0"),
    ):
        with pytest.raises(ParameterError, match=match):
            E.categorical_counts(counts, xs, 3, rng)
    with pytest.raises(ParameterError, match="exponents="):
        E.categorical_counts([1, 1], [0, "1"], 3, rng)


@pytest.mark.parametrize(
    ("counts", "xs", "h", "script", "want"),
    [
        # boundary exactly 1/2: U in [1/2, 1/2 + 2^-53) is at it (index 1), the word below is under it
        ([1, 1], [0, 0], 2**52, (), 1),
        ([1, 1], [0, 0], 2**52 - 1, (), 0),
        # boundary 1/(1 + e^-1) (irrational): the word that straddles it is refined by the next 64 bits
        ([1, 1], [0, 1], None, (0,), None),
        ([1, 1], [0, 1], None, (2**64 - 1,), None),
        # a group whose weight is far below 2^-1074 of the total is reachable only by U below its boundary
        ([1, 3], [Fraction(745), 0], 0, (), 1),
    ],
)
def test_categorical_counts_decides_draws_at_a_boundary_exactly(counts, xs, h, script, want):
    """Draws whose 53-bit prefix lies within the float error of a boundary go to the exact resolver,
    which compares U with mpmath enclosures of the boundary and refines U by 64 bits at a time."""
    c0, c1 = (
        mpmath.mpf(c) * mpmath.exp(-mpmath.mpf(Fraction(x).numerator) / Fraction(x).denominator)
        for c, x in zip(counts, xs)
    )
    with mpmath.workdps(60):
        boundary = c0 / (c0 + c1)
        if h is None:
            h = int(mpmath.floor(boundary * 2**53))
        if want is None:  # U = (h 2^64 + w) 2^-117, plus later bits: below the boundary or not
            u = (mpmath.mpf(h) * 2**64 + script[0]) / mpmath.mpf(2) ** 117
            want = 0 if u + mpmath.mpf(2) ** -117 <= boundary else 1
    bits = _ScriptedBits(lambda n: np.full(n, h << 11, dtype=np.uint64), script)
    got = E.categorical_counts(counts, xs, 1, _ScriptedRng(bits))
    assert int(got[0]) == want


@pytest.mark.statistical
def test_categorical_counts_matches_exact_law_over_many_groups():
    """300 groups with counts up to 2^40 and exponents spread over [0, 60] (weights over 26 orders of
    magnitude): chi-square at 2·10^5 draws against the exact probabilities (seed 6; false-failure
    rate 1e-4)."""
    rng = np.random.default_rng(20261207)
    counts = rng.integers(1, 2**40, 300)
    xs = [Fraction(int(v), 7) for v in rng.integers(0, 420, 300)]
    w = np.array([float(c) * math.exp(-float(x)) for c, x in zip(counts, xs)])
    p = w / w.sum()
    out = E.categorical_counts(counts, xs, 200_000, np.random.default_rng(6))
    seen = np.bincount(out, minlength=300)
    keep = p * 200_000 > 5
    obs = np.append(seen[keep], seen[~keep].sum())
    ex = np.append(p[keep], p[~keep].sum()) * 200_000
    assert stats.chisquare(obs, ex * obs.sum() / ex.sum()).pvalue > ALPHA, RATE_NOTE


def test_median_never_gives_its_far_tail_the_probability_of_a_zero_uniform():
    """The median's float cdf (before the exact sampler) output a point of 0..4 whenever U = 0 (2^-53)
    on 1493 copies of 5, where the run's weight e^{-744.9} is a subnormal, but never on 1494 copies,
    where it underflows: no finite ε at that add/remove pair. Exactly, the run has probability about
    2^-1075 on both sides, so a zero 53-bit prefix followed by real bits lands on 5 (failure
    probability below 2^-1000)."""
    from dpharness.mechanisms.median import ExponentialMedian

    m = ExponentialMedian(bits=8)
    for n in (1493, 1494):
        bits = _ScriptedBits(lambda k: np.zeros(k, dtype=np.uint64))
        out = m._sample(np.full(n, 5), 4, _ScriptedRng(bits))  # the sampler itself (sample() wants a Generator)
        assert (out == 5).all(), (n, out)


@pytest.mark.statistical
@pytest.mark.parametrize(
    "q",
    [[1.0, 1.0, 1.0, 1.0, 1.0], [2.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.5, 3.0, 0.25, 2.75]],
    ids=["equal", "one", "mix"],
)
def test_permute_and_flip_has_the_law_of_the_exponential_noisy_argmax(q):
    """Permute-and-flip at scale 2 against the closed-form law of argmax(q + Exp(mean 2)) (the mechanism's
    law()): chi-square at 2·10^5 draws, seed 7; false-failure rate 1e-4 per case."""
    from dpharness.mechanisms.report_noisy_max import ReportNoisyMaxExponential

    m = ReportNoisyMaxExponential()
    q = np.array(q)
    out = m.sample(q, 200_000, np.random.default_rng(7))
    p = np.exp(m.law(q).log_prob(np.arange(5)))
    assert stats.chisquare(np.bincount(out, minlength=5), p / p.sum() * 200_000).pvalue > ALPHA, RATE_NOTE


def test_permute_and_flip_reaches_a_candidate_beyond_the_float_noise_support():
    """numpy's float exponential noise is at most 53 ln2 b, so on q = (0, 145, ...) at b = 2 index 0 never
    won; permute-and-flip accepts index 0 with probability exactly e^{-72.5} when it comes first. With the
    acceptance draw's 53-bit prefix at 0 (U < 2^-53) and then real bits, the exact resolver accepts iff
    U < e^{-72.5} (about 2^-104.6): a first word of 0 then a second of 0 accepts; a second word of 2^63 does not."""
    words = iter([0, 0])

    class Bits:
        def random_raw(self, size=None):
            if size is None:
                return np.uint64(next(words, 2**63))
            return np.zeros(size, dtype=np.uint64)

    class Rng:
        bit_generator = Bits()

        def permuted(self, a, axis):
            return a  # index 0 first

    assert E.permute_and_flip([0.0, 145.0, 145.0], 2, 1, Rng())[0] == 0
    words = iter([2**63])
    assert E.permute_and_flip([0.0, 145.0, 145.0], 2, 1, Rng())[0] != 0


def test_categorical_counts_with_a_unit_is_the_same_law_and_refuses_bad_integers():
    """``unit=u`` with integer exponents d is the law of the exponents u·d: the same draws for the same
    words (the float weights agree to the last bits here: u is a power of two), and bad arrays are refused."""
    counts = [3, 1, 7, 2]
    d = np.array([4, 0, 9, 1])
    a = E.categorical_counts(counts, [Fraction(1, 2) * int(v) for v in d], 5000, np.random.default_rng(3))
    b = E.categorical_counts(counts, d, 5000, np.random.default_rng(3), unit=Fraction(1, 2))
    assert (a == b).all()
    rng = np.random.default_rng(0)
    for bad in (np.array([0.5, 1.0]), np.array([-1, 0]), np.array([0]), np.array([[0, 1]])):
        with pytest.raises(ParameterError):
            E.categorical_counts([1, 1], bad, 3, rng, unit=1)
    with pytest.raises(ParameterError, match="unit"):
        E.categorical_counts([1, 1], np.array([0, 1]), 3, rng, unit=-1)
    # unit 0: every group weighted by its count alone; a huge unit: only the top group
    assert E.categorical_counts([1, 1], np.array([0, 5]), 4000, rng, unit=0).mean() == pytest.approx(0.5, abs=0.05)
    assert (E.categorical_counts([1, 1], np.array([0, 1]), 100, rng, unit=Fraction(10**400)) == 0).all()


# --------------------------------------------------------------------------- the correctly rounded logarithm


def _ln_nearest(x: float) -> float:
    """ln(x) rounded to the nearest double: mpmath at 300 bits, rounded once through a Fraction."""
    import mpmath

    with mpmath.workprec(300):
        sign, man, exp, _ = mpmath.log(mpmath.mpf(x))._mpf_
    value = Fraction(int(man)) * Fraction(2) ** int(exp)
    return float(-value if sign else value)


def test_correctly_rounded_log_is_the_nearest_double_where_numpy_log_is_not():
    """Mironov's snapping theorem takes LN correctly rounded; numpy's float64 log is within an ulp but not
    always the nearest double. On 20 000 of Mironov's U* (and the extremes: the least subnormal, the least
    normal, values next to 1) the sampler's logarithm equals the nearest double every time, including the
    draws where numpy's is off."""
    from dpharness.mechanisms._exact import correctly_rounded_log, uniform_double

    u = np.concatenate(
        [
            uniform_double(20_000, np.random.default_rng(1)),
            [5e-324, 3e-310, 2.0**-1022, 2.0**-53, 0.1, 0.5, 1 - 2.0**-53, 1.0],
        ]
    )
    got = correctly_rounded_log(u)
    nearest = np.array([_ln_nearest(float(x)) for x in u])
    assert np.array_equal(got, nearest)
    assert (np.log(u) != nearest).sum() >= 10  # numpy's own log misses on some of these draws


def test_correctly_rounded_log_without_extended_precision_takes_the_exact_path(monkeypatch):
    """Where every draw is resolved at 200 bits (as where ``longdouble`` has fewer than 64 bits), the
    result is the same nearest double."""
    from dpharness.mechanisms import _exact
    from dpharness.mechanisms._exact import correctly_rounded_log, uniform_double

    monkeypatch.setattr(_exact, "_LOGL_REL", 1.0)  # every draw "near a midpoint"
    u = uniform_double(300, np.random.default_rng(2))
    assert np.array_equal(correctly_rounded_log(u), np.array([_ln_nearest(float(x)) for x in u]))
    with pytest.raises(ParameterError, match="u must hold positive"):
        correctly_rounded_log(np.array([0.5, 0.0]))
