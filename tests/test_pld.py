"""The certified PLD accountant (dpharness.proofs._pld) against exact brute-force truths.

Every upper bound must be >= the exact δ(ε) (never below), and close: rounding each leaf's losses up
by < w gives, for a composition of T leaves, ``exact(ε) <= upper(ε) <= exact(ε − T·w) + tiny``; the
optimistic variant mirrors it: ``exact(ε + T·w) − tiny <= lower(ε) <= exact(ε)``.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpharness.proofs import _pld as P

W = P.DEFAULT_W
EPS_GRID = [-0.5, 0.0, 0.1, 0.3, 0.5, 0.77, 1.0, 1.5, 2.0, 3.0]


# --------------------------------------------------------------------------- exact truths


def _atoms_delta(atoms, eps) -> mpmath.mpf:
    """δ(ε) = Σ p·max(0, 1 − e^{ε − l}) over (loss l, P-mass p) atoms, at 50 digits."""
    with mpmath.workdps(50):
        e = mpmath.mpf(eps)
        return mpmath.fsum(p * (1 - mpmath.exp(e - lo)) for lo, p in atoms if lo > e)


def _dl_pmf(t: Fraction, K: int):
    """Discrete Laplace pmf on [−K, K] (tails beyond K are < e^{−K/t}, negligible for K/t >= 70)."""
    with mpmath.workdps(50):
        tm = mpmath.mpf(t.numerator) / t.denominator
        c = mpmath.tanh(1 / (2 * tm))
        return {k: c * mpmath.exp(-abs(k) / tm) for k in range(-K, K + 1)}


def _dg_pmf(tau2: Fraction, K: int):
    with mpmath.workdps(50):
        t2 = mpmath.mpf(tau2.numerator) / tau2.denominator
        f = {y: mpmath.exp(-(mpmath.mpf(y) ** 2) / (2 * t2)) for y in range(-K, K + 1)}
        Z = mpmath.fsum(f.values())
        return {y: v / Z for y, v in f.items()}


def _shift_atoms(pmf, D: int):
    """Loss atoms of (P, Q) with P = pmf, Q = pmf shifted by D (y with Q(y) = 0 are +∞-loss atoms)."""
    out = []
    with mpmath.workdps(50):
        for y, p in pmf.items():
            q = pmf.get(y - D)
            out.append((mpmath.inf if q is None or q == 0 else mpmath.log(p / q), p))
    return out


def _backward_atoms(pmf, D: int):
    """Loss atoms of (Q, P): y ~ Q = pmf(· − D), loss ln Q(y)/P(y)."""
    out = []
    with mpmath.workdps(50):
        for z, q in pmf.items():
            p = pmf.get(z + D)
            out.append((mpmath.inf if p is None else mpmath.log(q / p), q))
    return out


def _rr_atoms(k: int, L):
    with mpmath.workdps(50):
        eL = mpmath.exp(L)
        den = eL + k - 1
        return [(mpmath.mpf(L), eL / den), (-mpmath.mpf(L), 1 / den), (mpmath.mpf(0), (k - 2) / den)]


def _merge(atoms):
    """Merge atoms of equal loss (to 30 digits) to keep brute-force convolutions small."""
    acc: dict = {}
    with mpmath.workdps(50):
        for loss, p in atoms:
            key = mpmath.nstr(loss, 30)
            acc[key] = (loss, acc.get(key, (loss, 0))[1] + p)
    return list(acc.values())


def _convolve_atoms(a, b):
    with mpmath.workdps(50):
        return [(la + lb, pa * pb) for la, pa in a for lb, pb in b]


def _check_bracket(pair_up, pair_lo, atoms, T: int = 1, eps_grid=EPS_GRID, tol=1e-13):
    """exact(ε) <= upper(ε) <= exact(ε − T w)(1 + 1e-9) + tol, and the mirror for the lower bound."""
    with mpmath.workdps(50):
        for e in eps_grid:
            exact = _atoms_delta(atoms, e)
            up = pair_up.delta(e)
            assert up >= exact - 1e-40, (e, up, exact)  # 1e-40: the 50-digit truth's own rounding
            assert up <= _atoms_delta(atoms, e - T * W) * (1 + 1e-9) + tol, (e, up, exact)
            if pair_lo is not None:
                lo = pair_lo.delta(e)
                assert lo <= exact + 1e-40, (e, lo, exact)
                assert lo >= _atoms_delta(atoms, e + T * W) * (1 - 1e-9) - tol, (e, lo, exact)


# --------------------------------------------------------------------------- leaves


@pytest.mark.parametrize("t,D", [(Fraction(1), 1), (Fraction(5, 2), 1), (Fraction(2), 3), (Fraction(1, 3), 2)])
def test_discrete_laplace_brackets_exact(t, D):
    K = int(80 * t) + 10
    atoms = _shift_atoms(_dl_pmf(t, K + D), D)
    atoms = [a for a in atoms if a[0] != mpmath.inf]  # the artificial edge of the enumeration
    up, lo = P.discrete_laplace(t, D), P.discrete_laplace(t, D, pessimistic=False)
    assert up.symmetric and lo.symmetric
    _check_bracket(up, lo, atoms, tol=1e-13)


def test_discrete_laplace_large_shift_grouped():
    # D = 40 steps, t = 20: the 39 middle losses (D − 2k)/t are grouped into buckets in closed form
    t, D = Fraction(20), 40
    atoms = [a for a in _shift_atoms(_dl_pmf(t, 2000 + D), D) if a[0] != mpmath.inf]
    _check_bracket(P.discrete_laplace(t, D), P.discrete_laplace(t, D, pessimistic=False), atoms, tol=1e-13)


@pytest.mark.parametrize("tau2,D", [(Fraction(4), 1), (Fraction(5, 2), 2), (Fraction(100), 3)])
def test_discrete_gaussian_small_tau_brackets_exact(tau2, D):
    K = int(12 * math.sqrt(tau2)) + 20 + D
    pmf = _dg_pmf(tau2, K)
    atoms = [a for a in _shift_atoms(pmf, D) if a[0] != mpmath.inf]
    _check_bracket(P.discrete_gaussian(tau2, D), P.discrete_gaussian(tau2, D, pessimistic=False), atoms, tol=1e-13)


def test_discrete_gaussian_grouped_path_brackets_exact():
    # τ² = 10^9 (τ ≈ 31623 > the enumeration limit): the analytic per-bucket enclosure; truth from the
    # continuous Gaussian profile, which the discrete one matches to ~e^{−2π²τ²} at this τ
    tau2, D = Fraction(10**9), 3000
    mu = D / math.sqrt(float(tau2))
    up, lo = P.discrete_gaussian(tau2, D), P.discrete_gaussian(tau2, D, pessimistic=False)
    for e in [0.0, 0.2, 0.5, 1.0, 1.5]:
        ex = _gauss_delta(mu, e)
        assert lo.delta(e) <= ex * (1 + 1e-9) <= up.delta(e) * (1 + 2e-9)
        assert up.delta(e) <= _gauss_delta(mu, e - W) * (1 + 1e-6) + 1e-13
        assert lo.delta(e) >= _gauss_delta(mu, e + W) * (1 - 1e-6) - 1e-13


def test_both_directions_coincide_for_symmetric_noise():
    """The constructors return ``backward is forward``; check that the (Q, P) loss law really gives
    the same δ(ε) by brute force, for each leaf family."""
    t, D = Fraction(3, 2), 2
    pmf = _dl_pmf(t, 150)
    fw = [a for a in _shift_atoms(pmf, D) if a[0] != mpmath.inf]
    bw = [a for a in _backward_atoms(pmf, D) if a[0] != mpmath.inf]
    g = _dg_pmf(Fraction(3), 60)
    gfw = [a for a in _shift_atoms(g, 1) if a[0] != mpmath.inf]
    gbw = [a for a in _backward_atoms(g, 1) if a[0] != mpmath.inf]
    for e in EPS_GRID:
        assert abs(_atoms_delta(fw, e) - _atoms_delta(bw, e)) < 1e-25
        assert abs(_atoms_delta(gfw, e) - _atoms_delta(gbw, e)) < 1e-25
    assert P.discrete_laplace(t, D).symmetric
    assert P.discrete_laplace(t, -D).forward.masses.tolist() == P.discrete_laplace(t, D).forward.masses.tolist()
    assert P.discrete_gaussian(Fraction(3), 1).symmetric
    assert P.randomized_response(3, 1).symmetric


@pytest.mark.parametrize("k,L", [(2, Fraction(3, 2)), (4, Fraction(1)), (7, Fraction(5, 4))])
def test_randomized_response_on_grid_is_exact(k, L):
    # L on the grid (a multiple of w): no loss rounding, so the bound is exact up to mass rounding
    atoms = _rr_atoms(k, mpmath.mpf(L.numerator) / L.denominator)
    up, lo = P.randomized_response(k, L), P.randomized_response(k, L, pessimistic=False)
    for e in EPS_GRID:
        ex = float(_atoms_delta(atoms, e))
        assert lo.delta(e) <= ex <= up.delta(e)
        assert up.delta(e) - lo.delta(e) <= 1e-11 * max(ex, 1e-300) + 1e-300


def test_randomized_response_irrational_log_odds():
    import sympy as sp

    atoms = _rr_atoms(3, mpmath.log(3))
    up, lo = P.randomized_response(3, sp.log(3)), P.randomized_response(3, sp.log(3), pessimistic=False)
    _check_bracket(up, lo, atoms, tol=1e-14)


# --------------------------------------------------------------------------- composition


def test_composition_of_different_leaves_brackets_brute_force():
    t, tau2 = Fraction(2), Fraction(3)
    a = [x for x in _shift_atoms(_dl_pmf(t, 170), 1) if x[0] != mpmath.inf]
    b = [x for x in _shift_atoms(_dg_pmf(tau2, 50), 1) if x[0] != mpmath.inf]
    c = _rr_atoms(3, mpmath.mpf(1))
    truth = _convolve_atoms(_convolve_atoms(_merge(a), _merge(b)), c)
    up = P.compose([P.discrete_laplace(t, 1), P.discrete_gaussian(tau2, 1), P.randomized_response(3, 1)])
    lo = P.compose(
        [
            P.discrete_laplace(t, 1, pessimistic=False),
            P.discrete_gaussian(tau2, 1, pessimistic=False),
            P.randomized_response(3, 1, pessimistic=False),
        ]
    )
    _check_bracket(up, lo, truth, T=3, eps_grid=[0.0, 0.5, 1.0, 1.7, 2.5], tol=1e-12)


def test_self_compose_by_squaring_matches_chain():
    leaf = P.discrete_laplace(Fraction(2), 1)
    chain = P.compose([leaf] * 5)
    sq = P.self_compose(leaf, 5)
    for e in [0.0, 0.5, 1.0, 2.0]:
        assert sq.delta(e) == pytest.approx(chain.delta(e), rel=1e-9, abs=1e-14)
    # and both bound the exact 5-fold truth
    a = [x for x in _shift_atoms(_dl_pmf(Fraction(2), 170), 1) if x[0] != mpmath.inf]
    a = truth = _merge(a)
    for _ in range(4):
        truth = _merge(_convolve_atoms(truth, a))
    for e in [0.0, 0.5, 1.0, 2.0]:
        assert sq.delta(e) >= _atoms_delta(truth, e)


def test_fft_convolution_slack_covers_the_error(monkeypatch):
    monkeypatch.setattr(P, "_DIRECT_MAX", 4_000_000)  # the FFT path at these sizes
    rng = np.random.default_rng(7)
    for n in (3000, 5000):
        a = rng.random(n) ** 4
        b = np.exp(-(np.linspace(-6, 6, n) ** 2)) * rng.random(n)
        a, b = a / a.sum(), b / b.sum()
        assert len(a) * len(b) > P._DIRECT_MAX
        y, s = P._convolve(a, b, True)
        direct = np.convolve(a, b)  # error <= n u · direct (non-negative terms): far below s
        g = n * 2.0**-53
        assert s > 0 and np.all(y >= 0)
        # the 2-norm bound covers the FFT's error with room for the direct sum's own error
        assert np.linalg.norm(y - direct) <= s + 2 * g * np.linalg.norm(direct)
        assert np.linalg.norm(y - direct) <= s / 100  # the bound is safe by far, not by a hair
        # and it is not vacuous: far below adding s to every entry
        assert s * math.sqrt(len(y)) < 1e-9


def test_coarsen_moves_mass_in_the_safe_direction():
    up = P.discrete_gaussian(Fraction(50), 2).forward
    lo = P.discrete_gaussian(Fraction(50), 2, pessimistic=False).forward
    cu, cl = P._coarsen(up), P._coarsen(lo)
    assert cu.w == 2 * up.w
    for e in [-0.1, 0.0, 0.1, 0.2, 0.4]:
        assert cu.delta(e) >= up.delta(e)
        assert cl.delta(e) <= lo.delta(e)


def test_validation():
    from dpharness.errors import ParameterError

    with pytest.raises(ParameterError):
        P.discrete_laplace(Fraction(1), 1, w=0.001)
    with pytest.raises(ParameterError):
        P.discrete_gaussian(-1, 1)
    with pytest.raises(ParameterError):
        P.randomized_response(1, 1)
    with pytest.raises(ParameterError):
        P.compose([P.discrete_laplace(1, 1).forward, P.discrete_laplace(1, 1, pessimistic=False).forward])


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    t=st.fractions(min_value=Fraction(1, 4), max_value=Fraction(4), max_denominator=8),
    D=st.integers(1, 4),
    eps=st.floats(-1, 4),
)
def test_property_discrete_laplace_upper_never_below_exact(t, D, eps):
    K = int(80 * t) + 10
    atoms = [a for a in _shift_atoms(_dl_pmf(t, K + D), D) if a[0] != mpmath.inf]
    ex = _atoms_delta(atoms, eps)
    assert P.discrete_laplace(t, D).delta(eps) >= ex
    assert P.discrete_laplace(t, D, pessimistic=False).delta(eps) <= ex


# --------------------------------------------------------------------------- the target


def _gauss_delta(mu: float, eps: float) -> float:
    """Exact δ(ε) of the Gaussian pair N(0,1) vs N(mu,1) (Balle & Wang 2018, Thm 8), at 50 digits."""
    with mpmath.workdps(50):
        m, e = mpmath.mpf(mu), mpmath.mpf(eps)
        return float(mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2))


# Google dp_accounting 0.4.x (pip install dp-accounting, scratch venv), from_gaussian_mechanism(1.0,
# sensitivity=1, value_discretization_interval=1e-4).self_compose(10).get_epsilon_for_delta(1e-5):
GOOGLE_PESSIMISTIC = 17.856586848540235
GOOGLE_OPTIMISTIC = 17.856086834689368  # same with pessimistic_estimate=False
EXACT_TARGET = 17.8566  # the analytic Gaussian profile with μ = √10 (below)


def test_target_ten_gaussian_counts():
    """Ten ``count >> gaussian(sigma=1)`` at grid 2^-20: τ² = 2^40, shift D = 2^20 grid steps."""
    P.discrete_gaussian.cache_clear()
    start = time.perf_counter()
    up = P.self_compose(P.discrete_gaussian(2**40, 2**20), 10)
    eps_up = up.epsilon(1e-5)
    elapsed = time.perf_counter() - start
    lo = P.self_compose(P.discrete_gaussian(2**40, 2**20, pessimistic=False), 10)
    eps_lo = lo.epsilon(1e-5)
    print(f"\ntarget: ε(1e-5) ∈ [{eps_lo:.6f}, {eps_up:.6f}] in {elapsed:.2f} s (upper, leaf included)")
    # the analytic continuous truth, to which the discrete Gaussian is within ~1e-10 at this τ
    exact_eps = float(mpmath.findroot(lambda e: _gauss_delta(math.sqrt(10), float(e)) - 1e-5, 17.85))
    assert abs(exact_eps - EXACT_TARGET) < 1e-4
    assert eps_lo <= exact_eps - 1e-6 < exact_eps + 1e-6 <= eps_up
    assert eps_lo <= GOOGLE_OPTIMISTIC and GOOGLE_PESSIMISTIC <= eps_up
    assert 17.85 <= eps_up <= 17.95
    assert up.delta(17.95) <= 1e-5  # the claim (17.95, 1e-5) is certified
    assert up.delta(17.857 * 0.995) > 1e-5  # a claim 0.5% below the truth is not
    assert lo.delta(17.857 * 0.995) > 1e-5  # ... and is refuted by the certified lower bound
    # its time is a benchmark (benchmarks/bench_pld.py), not asserted here


# --------------------------------------------------------------------------- many compositions


def test_many_compositions_stay_above_the_exact_truth_with_chernoff_cuts():
    """Binary randomized response with log-odds L = 1/4 (on the grid: its leaf is exact) composed 4096
    times: the composed loss is L·(2B − T), B ~ Binomial(T, e^L/(1 + e^L)), so δ(ε) is an exact finite sum.
    The truncations cut the support by the carried MGF bounds (Chernoff above, e^{x}·M(−1) below), far
    inside its natural range [−T·L, T·L]; the bound never falls below the truth and stays next to it."""
    T, L = 4096, Fraction(1, 4)
    up = P.self_compose(P.randomized_response(2, L), T).forward
    top = (up.offset + len(up.masses) - 1) * up.w
    bottom = up.offset * up.w
    assert top < 0.5 * T * float(L) and bottom > -0.5 * T * float(L)  # both cuts made
    assert up.infinity_mass < 1e-12
    with mpmath.workdps(50):
        eL = mpmath.exp(mpmath.mpf(1) / 4)
        p = eL / (1 + eL)
        pmf = [mpmath.binomial(T, j) * p**j * (1 - p) ** (T - j) for j in range(T + 1)]
        atoms = [(mpmath.mpf(2 * j - T) / 4, pmf[j]) for j in range(T + 1)]
    for e in (0.0, 10.0, 50.0, 100.0, 150.0, 200.0):
        exact = _atoms_delta(atoms, e)
        got = up.delta(e)
        assert got >= exact, (e, got, exact)
        # the leaf masses rounded up (T times) and the convolutions' 2-norm error bound, added in full
        assert got <= exact * (1 + 1e-5) + P._err_sum(up.err2, len(up.masses)) + 1e-12, (e, got, exact)


def test_mgf_bounds_are_above_the_exact_moments_of_a_leaf():
    """A leaf's MGF bounds (the masses' own, rounded up) are at least the exact E[e^{λL}] of its pair's
    loss, λ = −1 included (there E[e^{−L}] = 1: Q's total mass)."""
    t, D = Fraction(2), 1
    atoms = [x for x in _shift_atoms(_dl_pmf(t, 170), D) if x[0] != mpmath.inf]
    leaf = P.discrete_laplace(t, D).forward
    for lam, bound in zip(P.LAMBDAS, leaf.mgf_bounds()):
        with mpmath.workdps(50):
            exact = mpmath.log(mpmath.fsum(pm * mpmath.exp(lam * lo) for lo, pm in atoms))
        assert bound >= exact, (lam, bound, exact)
        assert bound <= exact + abs(lam) * P.DEFAULT_W + 1e-9  # losses rounded up by less than w


def test_mgf_bounds_count_mass_far_below_an_empty_top():
    """A PLD whose mass sits 2^15 buckets (16 nats) below an empty top bucket: at λ = 64 its term is
    e^{-1024} of the top's scale (an underflow in a sum scaled by the top loss); the bound is still at
    least the exact ln Σ m e^{λx}."""
    w = P.DEFAULT_W
    masses = np.zeros(2**15 + 1)
    masses[0] = 0.75
    p = P.PLD(w, -(2**15), masses, 0.0, True)
    for lam, bound in zip(P.LAMBDAS, p.mgf_bounds()):
        exact = math.log(0.75) + lam * (-(2**15) * w)
        assert exact <= bound <= exact + 1e-9, (lam, bound, exact)


# dp_accounting 0.6.0 (the dev environment), privacy_loss_distribution.from_gaussian_mechanism(1.0,
# sampling_prob=0.001, value_discretization_interval=2e-5, use_connect_dots=True).self_compose(100_000)
# .get_epsilon_for_delta(1e-5); 1.6380 at an interval of 1e-4, so converged to about 1e-3 here:
GOOGLE_SUBSAMPLED_1E5 = 1.6372096444840163


def test_a_hundred_thousand_subsampled_gaussians_are_counted_near_dp_accounting():
    """10^5 rounds of a Poisson(0.001)-subsampled Gaussian (σ = 1; the grid of a count at 2^-20): the
    certified ε(1e-5) is above dp_accounting's converged estimate and within 3% of it. Before the MGF
    cuts the truncations moved the convolutions' error share to +∞ (δ(3) >= 1.3e-4: ε(1e-5) = inf)."""
    from dpharness.proofs import _pld_shift

    pair = _pld_shift.shift_pair("gaussian", Fraction(2**40), 2**20, Fraction(1, 1000))
    up = P.self_compose(pair, 100_000)
    eps = up.epsilon(1e-5)
    assert GOOGLE_SUBSAMPLED_1E5 * (1 - 1e-3) <= eps <= GOOGLE_SUBSAMPLED_1E5 * 1.03, eps
    assert max(up.forward.infinity_mass, up.backward.infinity_mass) < 1e-9
