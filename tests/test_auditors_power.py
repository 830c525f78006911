"""Power of the auditor just above the claim, and its false-alarm rate on correct mechanisms.

*Power near the claim.* Mechanisms whose exact ε is 1.1 or 1.25 are audited against a claim of 1 at
a stated sample budget over many seeds; the auditor must certify the violation (``passed`` False)
in every repetition. Both mechanisms have events that reach their ε exactly, so the auditor's
events are efficient and the only gap is statistical:

* binary randomized response (RR), Pr[output = input] = e^ε / (1 + e^ε): the event {output = 0}
  has probability ratio exactly e^ε between inputs 0 and 1;
* the two-sided geometric (discrete Laplace) on the integers, x + G1 − G2 with G ~ Geometric(1 − e^−ε):
  the threshold {output >= 1} has ratio exactly e^ε between inputs 1 and 0.

A verdict that tolerates ε up to claim + 0.25 (or any slack above ~0.05) lets every repetition
pass, so these tests fail on it. A control at true ε = 1 keeps a verdict that always fails from
passing these tests.

*False alarms* (slow): >= 200 audits of correct mechanisms at their exact (ε, δ) — callables of
several output kinds and the catalog's correct mechanisms — and a one-sided binomial test that the
false-alarm rate is <= 1 − confidence.

All audits use fixed seeds. Each test states its false-failure probability (the probability, over
the seeds, that a correct auditor fails it) in its docstring and its failure message.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import binom, norm

from dpharness.auditors import audit


# --------------------------------------------------------------------------- mechanisms with exact ε


def randomized_response(eps: float):
    """Binary RR on {0, 1}: keeps the input w.p. e^eps / (1 + e^eps); exact ε = eps."""
    keep = math.exp(eps) / (1.0 + math.exp(eps))

    def mech(d, size, rng):
        return np.where(rng.random(size) < keep, d, 1 - d)

    mech.__qualname__ = f"randomized_response(eps={eps})"
    return mech


def discrete_laplace(eps: float, *, dim: int = 1):
    """x + G1 − G2 (integers), G ~ Geometric(1 − e^−eps) counted from 1: the two-sided geometric with
    Pr[Z = z] ∝ e^(−eps |z|); exact ε = eps · (L1 distance between the inputs)."""
    p = 1.0 - math.exp(-eps)

    def mech(d, size, rng):
        d = np.asarray(d)
        shape = (size,) + d.shape
        return d + rng.geometric(p, shape) - rng.geometric(p, shape)

    mech.__qualname__ = f"discrete_laplace(eps={eps}, dim={dim})"
    return mech


def k_ary_rr(eps: float, k: int):
    """k-ary RR: the input w.p. e^eps / (e^eps + k − 1), each other value w.p. 1 / (e^eps + k − 1); exact ε = eps."""
    keep = math.exp(eps) / (math.exp(eps) + k - 1)

    def mech(d, size, rng):
        other = (d + rng.integers(1, k, size)) % k
        return np.where(rng.random(size) < keep, d, other)

    return mech


def snapped_gaussian(sigma: float):
    """x + N(0, σ²) rounded to the grid 2^-10 (post-processing of the Gaussian mechanism, the float
    sampler's error far below the grid): (ε, δ)-DP for |x − x'| <= 1 with the exact
    δ(ε) = Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ) (Balle & Wang 2018, Theorem 8)."""

    def mech(d, size, rng):
        return np.round((d + rng.normal(0.0, sigma, size)) * 1024.0) / 1024.0

    return mech


def gaussian_delta(eps: float, sigma: float, sensitivity: float = 1.0) -> float:
    """Exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Theorem 8)."""
    a = sensitivity / (2 * sigma)
    b = eps * sigma / sensitivity
    return float(norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b))


def one_hot_bits(eps: float, k: int):
    """RAPPOR-style one-hot bit vector, each bit flipped to a fair coin w.p. f = 2 / (1 + e^(eps/2)):
    two bits differ between neighbours, each with ratio e^(eps/2); exact ε = eps."""
    f = 2.0 / (1.0 + math.exp(eps / 2))

    def mech(d, size, rng):
        x = np.zeros((size, k), np.int8)
        x[:, d] = 1
        u = rng.random((size, k))
        return np.where(u < f / 2, 1, np.where(u < f, 0, x)).astype(np.int8)

    return mech


# --------------------------------------------------------------------------- power near the claim

# (mechanism, true ε, data, neighbor, samples per side, repetitions)
_POWER_CASES = [
    ("randomized_response", randomized_response(1.1), 1.1, 0, 1, 50_000, 100),
    ("randomized_response", randomized_response(1.25), 1.25, 0, 1, 20_000, 50),
    ("discrete_laplace", discrete_laplace(1.1), 1.1, 1, 0, 50_000, 30),
    ("discrete_laplace", discrete_laplace(1.25), 1.25, 1, 0, 20_000, 30),
]


@pytest.mark.statistical
@pytest.mark.parametrize(
    "label, mech, true_eps, data, neighbor, samples, reps",
    _POWER_CASES,
    ids=[f"{c[0]}-eps{c[2]}-{c[5]}samples" for c in _POWER_CASES],
)
def test_violation_slightly_above_the_claim_is_certified_every_time(
    label, mech, true_eps, data, neighbor, samples, reps
):
    """A mechanism with exact ε = 1.1 (or 1.25) fails a claim of ε = 1 at the stated budget in every
    one of ``reps`` seeded audits (confidence 0.95, seeds 0..reps−1).

    Budget and measured miss rate (this checkout; misses = audits that passed the false claim):

    ======================  ========  ============  ===========  =============================
    mechanism               true ε    samples/side  misses       mean certified bound
    ======================  ========  ============  ===========  =============================
    randomized response     1.1       50,000        0 / 100      1.076 (smallest 1.054)
    randomized response     1.25      20,000        0 / 50       1.209 (smallest 1.174)
    discrete Laplace        1.1       50,000        0 / 30       1.069 (smallest 1.046)
    discrete Laplace        1.25      20,000        0 / 30       1.201 (smallest 1.174)
    ======================  ========  ============  ===========  =============================

    Smaller budgets (200 seeds each, ``_MEASURED_BUDGET_CURVE`` below): ε = 1.1 is missed in most
    audits at 2,000–5,000 samples a side and caught in all 200 from 20,000 on; ε = 1.25 from 5,000 on.

    False-failure probability: < 1e-9. The certified bound is ln(p1_lo / p0_hi) with p1 ≈ 0.75,
    p0 ≈ 0.25 (both mechanisms) and at most 20 Bonferroni candidates; at 45,000 (18,000)
    certification samples its Clopper-Pearson penalty is <= 0.05 (0.07) and its standard deviation
    <= 0.009 (0.014), so a miss needs a deviation of > 6 standard deviations in one audit
    (normal tail < 1e-9, times 210 audits < 1e-6)."""
    misses, bounds = [], []
    for seed in range(reps):
        r = audit(mech, data, neighbor, epsilon=1.0, samples=samples, seed=seed, workers=1)
        bounds.append(r.epsilon_lower_bound)
        if r.passed:
            misses.append((seed, r.epsilon_lower_bound))
        # the verdict is exactly "bound above the claim"
        assert r.passed == (not r.epsilon_lower_bound > 1.0), (seed, r.epsilon_lower_bound, r.passed)
    assert not misses, (
        f"{label} with true ε = {true_eps} passed a claim of 1 in {len(misses)} / {reps} audits at {samples} samples "
        f"(seed, bound): {misses[:5]}; false-failure probability < 1e-9"
    )
    # efficient events: the bound sits close below the true ε (never above it by more than noise)
    mean = float(np.mean(bounds))
    assert 1.0 < mean <= true_eps, f"mean bound {mean:.4f} for true ε = {true_eps} (false-failure probability < 1e-9)"
    assert true_eps - mean < 0.1, (
        f"mean bound {mean:.4f} is far below the true ε = {true_eps}: events are not efficient"
    )


@pytest.mark.statistical
def test_control_at_the_claim_passes():
    """Control for the power test: the same mechanisms at exact ε = 1 pass a claim of 1 (a verdict
    that always fails would pass the power test). 60 audits at confidence 0.95, 20,000 samples.
    Soundness gives Pr[alarm] <= 0.05 per audit; the test fails if alarms exceed the (1 − 1e-4)
    quantile of Binomial(60, 0.05) (= 11). False-failure probability < 1e-4."""
    alarms = []
    for seed in range(30):
        for mech, a, b in ((randomized_response(1.0), 0, 1), (discrete_laplace(1.0), 1, 0)):
            r = audit(mech, a, b, epsilon=1.0, samples=20_000, seed=seed, workers=1)
            if not r.passed:
                alarms.append((seed, r.epsilon_lower_bound))
    limit = int(binom.isf(1e-4, 60, 0.05))
    assert len(alarms) <= limit, (
        f"{len(alarms)} false alarms in 60 audits (limit {limit}): {alarms[:5]}; false-failure probability < 1e-4"
    )


# Miss rates measured on this checkout at smaller budgets (200 seeds each, seeds 1000..1199,
# confidence 0.95, claim ε = 1); documentation of the power curve, not asserted.
_MEASURED_BUDGET_CURVE = {
    # (mechanism, true ε): {samples per side: misses out of 200}
    ("randomized_response", 1.1): {2_000: 174, 5_000: 80, 10_000: 1, 20_000: 0},
    ("randomized_response", 1.25): {2_000: 8, 5_000: 0, 10_000: 0, 20_000: 0},
    ("discrete_laplace", 1.1): {2_000: 197, 5_000: 139, 10_000: 7, 20_000: 0},
    ("discrete_laplace", 1.25): {2_000: 40, 5_000: 0, 10_000: 0, 20_000: 0},
}


# --------------------------------------------------------------------------- false alarms on correct mechanisms

_FALSE_FAILURE = 1e-3
_ALARM_CONFIDENCE = 0.9  # α = 0.1: a per-audit rate large enough that a broken bound shows in ~250 audits
_SIGMA = 1.0
_HIST = np.array([3, 0, 5, 1])


def _false_alarm_callables():
    """(label, fn, data, neighbor, ε, δ, samples): correct mechanisms audited at their exact (ε, δ)."""
    return [
        ("binary RR", randomized_response(1.0), 0, 1, 1.0, 0.0, 3_000),
        ("4-ary RR", k_ary_rr(1.0, 4), 0, 2, 1.0, 0.0, 3_000),
        ("discrete Laplace", discrete_laplace(1.0), 0, 1, 1.0, 0.0, 3_000),
        ("snapped Gaussian (ε, δ)", snapped_gaussian(_SIGMA), 0.0, 1.0, 1.0, gaussian_delta(1.0, _SIGMA), 3_000),
        # histogram of counts, add/remove one record changes one bin by 1: ε = 1 per bin, exact ε = 1
        ("histogram", discrete_laplace(1.0, dim=4), _HIST, _HIST + np.array([0, 0, 1, 0]), 1.0, 0.0, 3_000),
        # 3-vector at ε/3 per coordinate, every coordinate differs by 1: exact ε = 1 (L1 sensitivity 3)
        (
            "discrete Laplace vector",
            discrete_laplace(1.0 / 3, dim=3),
            np.zeros(3, np.int64),
            np.ones(3, np.int64),
            1.0,
            0.0,
            3_000,
        ),
        ("one-hot bits", one_hot_bits(1.0, 4), 0, 1, 1.0, 0.0, 3_000),
    ]


@pytest.mark.slow
@pytest.mark.statistical
def test_false_alarm_rate_on_correct_mechanisms_is_at_most_one_minus_confidence():
    """>= 200 audits of correct mechanisms at their exact (ε, δ), confidence 0.9:

    * 7 callables × 30 seeds = 210 audits: binary and 4-ary randomized response, discrete Laplace,
      a snapped Gaussian at (1, δ(1)) with the exact Gaussian δ, a noisy histogram, a discrete
      Laplace vector and a one-hot bit vector (3,000 samples a side each);
    * the catalog's 22 correct mechanisms (``dpharness.registry.catalog(gallery=False)``) at their
      own claims × 3 seeds = 66 audits: seed 0 with the auditor's neighbour search, seeds 1–2 on
      the example pair (3,000 samples a side);
    * the third-party library targets with exact outputs that are installed (opendp, diffprivlib,
      pydp, pipeline-dp, tmlt.core: up to 10 targets × 5 seeds, 2,000 samples a side).

    Soundness gives Pr[alarm] <= α = 0.1 for each audit independently, so the number of alarms is
    stochastically at most Binomial(N, 0.1). One-sided binomial test: the test fails if the alarms
    exceed the (1 − 1e-3) quantile of Binomial(N, 0.1). False-failure probability < 1e-3.
    Measured on this checkout: 1 alarm in 276 audits (binary RR, seed 15: bound 1.017 against ε = 1;
    well within the α = 0.1 allowance, limit 44); ≈ 25 s on an idle machine, ≈ 3 min when both cores are busy."""
    from dpharness.registry import catalog

    alarms, n = [], 0
    for label, fn, a, b, eps, delta, samples in _false_alarm_callables():
        for seed in range(30):
            r = audit(
                fn,
                a,
                b,
                epsilon=eps,
                delta=delta,
                samples=samples,
                seed=20_000 + seed,
                confidence=_ALARM_CONFIDENCE,
                workers=1,
            )
            n += 1
            if not r.passed:
                alarms.append((label, seed, r.epsilon_lower_bound))
    entries = catalog(gallery=False)
    assert len(entries) >= 20, f"the catalog lists only {sorted(entries)}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # neighbour-search fallbacks are reported in the result
        for name, entry in entries.items():
            mech = entry()
            for seed in range(3):
                pair = () if seed == 0 else tuple(mech.example_pair())
                r = audit(mech, *pair, samples=3_000, seed=30_000 + seed, confidence=_ALARM_CONFIDENCE, workers=1)
                n += 1
                if not r.passed:
                    alarms.append((name, seed, r.epsilon_lower_bound))
    # third-party library targets whose outputs are exact (integers or a fixed grid), when installed
    import importlib.util

    from test_library_targets import _EXACT, LIBRARIES

    from dpharness.auditors.libraries import get_target

    module_of = {prefix: module for module, prefix in LIBRARIES.items()}
    for name in _EXACT:
        module = module_of[name.split(":")[0] + ":"]
        if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
            continue
        target = get_target(name)
        for seed in range(5):
            r = target.audit(samples=2_000, seed=40_000 + seed, confidence=_ALARM_CONFIDENCE, workers=1)
            n += 1
            if not r.passed:
                alarms.append((name, seed, r.epsilon_lower_bound))
    limit = int(binom.isf(_FALSE_FAILURE, n, 1 - _ALARM_CONFIDENCE))
    assert n >= 200
    assert len(alarms) <= limit, (
        f"{len(alarms)} false alarms in {n} audits at α = {1 - _ALARM_CONFIDENCE:g} (limit {limit}): {alarms[:8]}; "
        f"false-failure probability < {_FALSE_FAILURE:g}"
    )
