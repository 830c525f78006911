"""One-run auditing (Steinke, Nasr & Jagielski 2023; dpharness.one_run_audit): the bound against exact
binomial values, refusals of bad input, a correct DP-SGD declared from parts passes and one with 10×
too little noise is flagged in one run, and Opacus training (when opacus is installed; required
where DPHARNESS_REQUIRE_LIBS names it, as in test_library_targets.py)."""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import dpharness
from dpharness import AddRemove, ApproxDP, RealBox, parts as dp
from dpharness.auditors import OneRunTarget, one_run_audit, one_run_epsilon_lower_bound, one_run_p_value
from dpharness.errors import ParameterError


# --------------------------------------------------------------------------- the statistic, exact


def _binom_tail(r: int, q: Fraction, v: int) -> Fraction:
    return sum((math.comb(r, k) * q**k * (1 - q) ** (r - k) for k in range(max(v, 0), r + 1)), Fraction(0))


def _theorem_bound(m: int, r: int, v: int, q: Fraction, delta: Fraction) -> Fraction:
    """min over v' <= v of f(v') + 2mδ max_i (f(v'−i) − f(v'))/i, in exact rationals."""
    best = Fraction(1)
    for w in range(1, v + 1):
        f = _binom_tail(r, q, w)
        alpha = max((_binom_tail(r, q, w - i) - f) / i for i in range(1, w + 1))
        best = min(best, f + 2 * m * delta * alpha)
    return best


def _close_above(p: float, exact: Fraction) -> None:
    """The computed p-value is the exact one inflated by at most a relative 1e-9 + 1e-12 (never below it)."""
    assert float(exact) * (1 - 1e-13) <= p <= float(exact) * (1 + 2e-9) + 2e-12, (p, float(exact))


def test_pure_p_value_is_the_exact_binomial_tail():
    """ε = ln 3 makes e^ε/(1+e^ε) = 3/4: P[Bin(2, 3/4) >= 2] = 9/16 by hand, and larger cases exactly."""
    eps = math.log(3)
    _close_above(one_run_p_value(5, 2, 2, eps), Fraction(9, 16))
    _close_above(one_run_p_value(5, 2, 1, eps), Fraction(15, 16))
    for r, v in [(10, 9), (20, 20), (40, 31), (7, 0)]:
        _close_above(one_run_p_value(100, r, v, eps), _binom_tail(r, Fraction(3, 4), v) if v else Fraction(1))


def test_approximate_dp_p_value_matches_the_theorem_in_rationals():
    """With δ > 0 the p-value is the theorem's f(v) + 2mδ·max_i (f(v−i) − f(v))/i (minimised over v' <= v),
    checked against exact rationals; by hand for r = v = 1: 3/4 + 2·10·0.01·(1/4)/1 = 0.8."""
    eps = math.log(3)
    _close_above(one_run_p_value(10, 1, 1, eps, 0.01), Fraction(4, 5))
    for m, r, v, delta in [
        (10, 4, 4, Fraction(1, 100)),
        (50, 12, 11, Fraction(1, 1000)),
        (200, 30, 25, Fraction(1, 10**4)),
    ]:
        _close_above(one_run_p_value(m, r, v, eps, float(delta)), _theorem_bound(m, r, v, Fraction(3, 4), delta))


def test_the_bound_is_the_binomial_quantile():
    """10 of 10 correct at 95%, pure DP: q^10 = 0.05, ε = ln(q/(1 − q)) = 1.05187... (bisection from below)."""
    q = 0.05**0.1
    b = one_run_epsilon_lower_bound(100, 10, 10, confidence=0.95)
    assert math.log(q / (1 - q)) - 2e-6 <= b.epsilon <= math.log(q / (1 - q))
    assert b.p_value < 0.05 and (b.m, b.guesses, b.correct, b.delta) == (100, 10, 10, 0.0)
    assert one_run_epsilon_lower_bound(100, 10, 5).epsilon == 0.0  # half right: nothing certified
    assert one_run_p_value(100, 10, 10, b.epsilon + 1e-3) >= 0.05  # just above the bound: not rejected
    with_delta = one_run_epsilon_lower_bound(1000, 200, 200, delta=1e-5).epsilon
    assert with_delta < one_run_epsilon_lower_bound(1000, 200, 200).epsilon  # the δ term only weakens it


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: one_run_epsilon_lower_bound(0, 0, 0), "m=0"),
        (lambda: one_run_epsilon_lower_bound(10, 5, 5, confidence=1.0), "confidence=1.0"),
        (lambda: one_run_epsilon_lower_bound(10, 5, 5, confidence=0), "confidence=0"),
        (lambda: one_run_epsilon_lower_bound(10, 11, 5), "guesses=11"),
        (lambda: one_run_epsilon_lower_bound(10, 5, 6), "correct=6"),
        (lambda: one_run_epsilon_lower_bound(10, 5, 5, delta=0.1), "delta=0.1"),
        (lambda: one_run_p_value(10, 5, 5, -1.0), "epsilon=-1.0"),
    ],
)
def test_bad_counts_are_refused_by_name(call, match):
    with pytest.raises(ParameterError, match=match):
        call()


# --------------------------------------------------------------------------- the audit: refusals


def _fn(records, rng):
    return float(len(records)) + rng.normal()


def test_bad_audit_input_is_refused_by_name():
    data, canaries = np.zeros((5, 2)), np.ones((4, 2))
    score = lambda out, c: np.zeros(len(c))  # noqa: E731
    ok = dict(data=data, score=score, epsilon=1.0, rng=np.random.default_rng(0))
    with pytest.raises(ParameterError, match="canaries="):
        one_run_audit(_fn, np.zeros((0, 2)), **ok)
    with pytest.raises(ParameterError, match="confidence=1.5"):
        one_run_audit(_fn, canaries, **ok, confidence=1.5)
    with pytest.raises(ParameterError, match="rng="):
        one_run_audit(_fn, canaries, data=data, score=score, epsilon=1.0, rng=3)
    with pytest.raises(ParameterError, match=r"score returned shape \(3,\).*shape \(4,\)"):
        one_run_audit(_fn, canaries, **{**ok, "score": lambda out, c: np.zeros(3)})
    with pytest.raises(ParameterError, match="NaN"):
        one_run_audit(_fn, canaries, **{**ok, "score": lambda out, c: np.full(4, np.nan)})
    with pytest.raises(ParameterError, match="epsilon="):
        one_run_audit(_fn, canaries, data=data, score=score, rng=np.random.default_rng(0))
    with pytest.raises(ParameterError, match=r"guesses=\(3, 3\)"):
        one_run_audit(_fn, canaries, **ok, guesses=(3, 3))
    target = OneRunTarget(run=_fn, score=score, data=data, canaries=canaries, epsilon=1.0, delta=0.0, name="t")
    with pytest.raises(ParameterError, match="epsilon= is fixed"):
        one_run_audit(target, epsilon=2.0, rng=np.random.default_rng(0))
    res = one_run_audit(target, rng=np.random.default_rng(0), guesses=(2, 2))
    assert res.passed and (res.m, res.guesses, res.k_plus, res.k_minus) == (4, 4, 2, 2)


def test_a_non_dpsgd_iterate_needs_a_score_and_canaries_in_the_domain():
    mech = dp.mechanism(
        name="counter",
        records=RealBox(0, 1, 1),
        relation=AddRemove(),
        steps=dp.iterate(2, dp.count() >> dp.laplace(1), init=[0.0], update=lambda s, r: s),
        claim=ApproxDP(2, 1e-6),
    )
    with pytest.raises(ParameterError, match="no default score"):
        one_run_audit(mech, np.zeros((3, 1)), data=np.zeros((2, 1)), rng=np.random.default_rng(0))
    with pytest.raises(ParameterError, match="canaries has 1 value"):
        one_run_audit(mech, np.array([[0.5], [2.0]]), data=np.zeros((2, 1)), rng=np.random.default_rng(0))


# --------------------------------------------------------------------------- DP-SGD declared from parts


def _gdp_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of μ-Gaussian DP (Dong, Roth & Su 2022: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2))."""
    return brentq(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta, 0, 50)


def _dirac_dpsgd(m: int, times: int, sigma: float, eps: float, output: str = "releases"):
    """Full-batch DP-SGD for logistic regression on records (x1, x2, slot_1..slot_m, y) in [−1, 1]:
    per-record gradients clipped to L2 norm 1, one noisy sum per column (discrete Gaussian, std σ).
    Canary i: 1 in slot i, label −1, so its clipped gradient is exactly the unit vector of slot i."""
    d = 2 + m

    def grad(theta, r):
        x, y = r[:d], r[d]
        return (1 / (1 + np.exp(-float(theta @ x))) - y) * x

    noisy_sum = dp.compose(*[dp.column(j) >> dp.sum() >> dp.gaussian(sigma=sigma) for j in range(d)])
    mech = dp.mechanism(
        name="dirac_dpsgd",
        records=RealBox(-1, 1, d + 1),
        relation=AddRemove(),
        steps=dp.iterate(
            times,
            dp.map_records(grad, columns=d) >> dp.clip_norm(1) >> noisy_sum,
            init=np.zeros(d),
            update=lambda th, g: th - 0.05 * np.asarray(g),
            output=output,
        ),
        claim=ApproxDP(eps, 1e-5),
    )
    rng = np.random.default_rng(11)
    data = np.zeros((20, d + 1))
    data[:, :2] = rng.uniform(-1, 1, (20, 2))
    data[:, d] = data[:, 0] + data[:, 1] > 0
    canaries = np.zeros((m, d + 1))
    canaries[np.arange(m), 2 + np.arange(m)] = 1.0
    canaries[:, d] = -1.0
    return mech, canaries, data


# 10 full-batch rounds at σ = √10/0.5: the rounds compose to a Gaussian with L2 sensitivity 1 and μ = 0.5,
# whose exact ε(1e-5) is 1.9931; the claim 2.05 leaves 0.057 for the grid rounding of the sums (2^-20)
_T, _SIGMA, _CLAIM, _M = 10, math.sqrt(10) / 0.5, 2.05, 100


def test_the_claim_covers_the_gaussian_rounds():
    eps = _gdp_epsilon(math.sqrt(_T) / _SIGMA, 1e-5)
    assert eps == pytest.approx(1.9931, abs=1e-4) and eps < _CLAIM


@pytest.mark.statistical
def test_a_correct_dpsgd_passes_its_one_run_audit():
    """Correct noise: the one-run bound (95%, default grid under a union bound) is at most the claim;
    the theorem makes the false-failure rate <= 5% (fixed seed: a fixed outcome; 0 of 20 seeds
    flagged in development)."""
    mech, canaries, data = _dirac_dpsgd(_M, _T, _SIGMA, _CLAIM)
    res = dpharness.one_run_audit(mech, canaries, data=data, rng=np.random.default_rng(1))
    assert res.white_box and res.epsilon == _CLAIM and res.delta == 1e-5 and res.m == _M
    assert res.passed, f"correct DP-SGD flagged (false-failure rate <= 5%): ε >= {res.epsilon_lower_bound:.3f}"


@pytest.mark.statistical
@pytest.mark.parametrize("output", ["releases", "state"])
def test_dpsgd_with_ten_times_less_noise_is_flagged_in_one_run(output):
    """σ cut 10× (μ = 5): white-box (every round's release) and black-box (the final state) both certify
    ε > 2.05 at 95% in ONE run with 100 canaries; the included canaries' scores lie about 5 noise
    standard deviations above the others, so the guesses at the extremes are essentially all right.
    Power measured in development: flagged in 20 of 20 seeds for each view (bounds 2.29–2.64; the
    correct σ: flagged in 0 of 20, bounds 0–0.48)."""
    mech, canaries, data = _dirac_dpsgd(_M, _T, _SIGMA / 10, _CLAIM, output)
    res = dpharness.one_run_audit(mech, canaries, data=data, rng=np.random.default_rng(2))
    assert res.white_box == (output == "releases")
    assert not res.passed and res.epsilon_lower_bound > _CLAIM, (
        f"10× too little noise not flagged: ε >= {res.epsilon_lower_bound:.3f} vs claim {_CLAIM}"
    )


# --------------------------------------------------------------------------- Opacus (library)


def _opacus_required() -> bool:
    names = {n.strip() for n in os.environ.get("DPHARNESS_REQUIRE_LIBS", "").split(",") if n.strip()}
    return "opacus" in names


def _need_opacus():
    if not _opacus_required():
        return pytest.importorskip("opacus")
    try:
        return importlib.import_module("opacus")
    except ImportError as exc:
        pytest.fail(f"opacus is required here (DPHARNESS_REQUIRE_LIBS) but does not import: {exc}")


# opacus imports torch (tens of seconds on a loaded machine): slow, except where the library stage requires it
_OPACUS_SLOW = () if _opacus_required() else (pytest.mark.slow,)


@pytest.mark.statistical
@pytest.mark.parametrize("_", [pytest.param(None, marks=_OPACUS_SLOW)])
def test_opacus_training_one_run_passes_and_flags_ten_times_less_noise(_):
    """Opacus PrivacyEngine, 100 canaries, 1000 base records, 50 steps at q = 0.1, σ = 2: the claim is
    its RDP accountant's ε(1e-5) = 1.84. Correct: bound <= claim (false-failure rate <= 5%). σ = 0.2
    (claiming σ = 2's ε): flagged, with 50 of 50 guesses right in development (power ≈ 1)."""
    _need_opacus()
    from opacus.accountants import RDPAccountant

    from dpharness.auditors.libraries.opacus import one_run_training

    good = one_run_training(canaries=100, n=1000, steps=50, noise_multiplier=2.0, rng=np.random.default_rng(0))
    acc = RDPAccountant()
    acc.history = [(2.0, 0.1, 50)]
    assert good.epsilon == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    res = dpharness.one_run_audit(good, rng=np.random.default_rng(3))
    assert res.passed, f"correct Opacus run flagged (false-failure rate <= 5%): ε >= {res.epsilon_lower_bound:.3f}"
    cut = dataclasses.replace(
        one_run_training(canaries=100, n=1000, steps=50, noise_multiplier=0.2, rng=np.random.default_rng(0)),
        epsilon=good.epsilon,
    )
    res = dpharness.one_run_audit(cut, rng=np.random.default_rng(3))
    assert not res.passed, f"σ cut 10× not flagged: ε >= {res.epsilon_lower_bound:.3f} vs claim {good.epsilon:.3f}"
    with pytest.raises(ParameterError, match="n=100"):
        one_run_training(canaries=100, n=100, rng=np.random.default_rng(0))
