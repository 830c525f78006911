"""Tests of the seed mechanisms (mechanisms/randomized_response.py ... pearson.py) and their
gallery twins.

* fast unit tests: parameter and data validation (ParameterError naming the argument),
  calibrations, grid outputs, the bits = 32 median;
* statistical tests (``@pytest.mark.statistical``): each sampler's empirical distribution against
  its exact law with a chi-square goodness-of-fit test on a-priori bins (fixed seeds; each test's
  false-failure rate is ALPHA = 1e-3, stated in the docstrings and failure messages);
* the gallery twins' declared ``true_epsilon`` against the maximum privacy loss of their exact laws.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpharness import AddRemove, ApproxDP, BoundedChange, ParameterError, PureDP, RenyiDP, Substitute
from dpharness.mechanisms import _noise
from dpharness.mechanisms.clamped import ClampedCount, ClampedMean, ClampedSum, ClampedSumUnclamped
from dpharness.mechanisms.discrete_laplace import DiscreteLaplace
from dpharness.mechanisms.exponential import ExponentialMechanism, ExponentialNoHalf
from dpharness.mechanisms.gaussian import Gaussian, GaussianRDP, analytic_delta, analytic_sigma, classic_sigma
from dpharness.mechanisms.laplace import Laplace
from dpharness.mechanisms.median import ExponentialMedian, MedianSubstituteBug, median_segments
from dpharness.mechanisms.pearson import NoisyPearson
from dpharness.mechanisms.randomized_response import RandomizedResponse
from dpharness.mechanisms.rappor import Rappor, RapporUnhalved
from dpharness.mechanisms.std import NoisyStd
from dpharness.mechanisms.warner import WarnerRR
from dpharness.registry import catalog

ALPHA = 1e-3  # false-failure rate of each statistical test
N = 200_000  # samples per statistical test
G = 2.0**-20

SEEDS = [
    RandomizedResponse,
    WarnerRR,
    Rappor,
    Laplace,
    DiscreteLaplace,
    Gaussian,
    GaussianRDP,
    ExponentialMechanism,
    ExponentialMedian,
    ClampedCount,
    ClampedSum,
    ClampedMean,
    NoisyStd,
    NoisyPearson,
]
TWINS = [RapporUnhalved, ClampedSumUnclamped, ExponentialNoHalf, MedianSubstituteBug]


# --------------------------------------------------------------------------- helpers


def _chi_square(f_obs: np.ndarray, f_exp: np.ndarray, what: str) -> None:
    """Pool bins with expected count < 5 into their neighbours' 'rest' bin and run scipy's chi-square."""
    f_obs = np.asarray(f_obs, dtype=float)
    f_exp = np.asarray(f_exp, dtype=float)
    keep = f_exp >= 5
    rest_obs, rest_exp = f_obs[~keep].sum(), f_exp[~keep].sum()
    f_obs, f_exp = f_obs[keep], f_exp[keep]
    if rest_exp >= 5:
        f_obs, f_exp = np.append(f_obs, rest_obs), np.append(f_exp, rest_exp)
    elif rest_exp > 1e-9 or rest_obs > 0:
        i = int(np.argmin(f_exp))  # too small for a bin of its own: merge into the smallest bin
        f_obs[i] += rest_obs
        f_exp[i] += rest_exp
    assert f_exp.size >= 2, f"{what}: fewer than 2 bins"
    assert f_obs.sum() == pytest.approx(f_exp.sum(), rel=1e-6), f"{what}: law mass {f_exp.sum() / N} != 1"
    p = stats.chisquare(f_obs, f_exp).pvalue
    assert p > ALPHA, (
        f"{what}: chi-square p = {p:.3g} <= alpha = {ALPHA} over {f_exp.size} bins "
        f"(false-failure rate of this test: {ALPHA})"
    )


def assert_matches_law(samples: np.ndarray, law, candidates: np.ndarray, what: str) -> None:
    """Chi-square of ``samples`` against ``law`` on the a-priori outcome list ``candidates``
    (one bin per candidate, plus the remaining mass of the law as one 'rest' bin)."""
    samples = np.asarray(samples)
    cand = np.asarray(candidates)
    logp = law.log_prob(cand)
    probs = np.exp(logp)
    assert probs.sum() <= 1 + 1e-9, f"{what}: law mass over the candidates {probs.sum()} > 1"
    if samples.ndim == 1:
        order = np.argsort(cand)
        sorted_c = cand[order]
        pos = np.clip(np.searchsorted(sorted_c, samples), 0, len(cand) - 1)
        hit = sorted_c[pos] == samples
        counts_sorted = np.bincount(pos[hit], minlength=len(cand))
        counts = np.empty_like(counts_sorted)
        counts[order] = counts_sorted
    else:
        index = {tuple(row): i for i, row in enumerate(cand.tolist())}
        rows, row_counts = np.unique(samples, axis=0, return_counts=True)
        counts = np.zeros(len(cand), dtype=np.int64)
        for row, c in zip(rows.tolist(), row_counts):
            i = index.get(tuple(row))
            if i is not None:
                counts[i] += c
    n = len(samples)
    f_obs = np.append(counts, n - counts.sum())
    f_exp = np.append(n * probs, n * max(1.0 - probs.sum(), 0.0))
    _chi_square(f_obs, f_exp, what)


def grid_window(centre: float, half_width_steps: int, g: float) -> np.ndarray:
    return centre + g * np.arange(-half_width_steps, half_width_steps + 1)


def product_window(centres, half_widths, g: float) -> np.ndarray:
    axes = [grid_window(c, h, g) for c, h in zip(centres, half_widths)]
    return np.array(list(itertools.product(*axes)))


def assert_matches_binned(samples: np.ndarray, law, g: float, edges: np.ndarray, what: str) -> None:
    """Chi-square on bins ``[edges[i], edges[i+1])`` (grid points, in value units); each bin's law
    mass is the sum of the law's pmf over every grid point in it, evaluated in chunks."""
    f_exp = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        pts = np.arange(round(lo / g), round(hi / g)) * g
        f_exp.append(np.exp(law.log_prob(pts)).sum())
    f_exp = np.array(f_exp)
    assert f_exp.sum() <= 1 + 1e-9
    idx = np.searchsorted(edges, samples, side="right") - 1
    inside = (idx >= 0) & (idx < len(edges) - 1)
    counts = np.bincount(idx[inside], minlength=len(edges) - 1)
    n = len(samples)
    _chi_square(np.append(counts, n - counts.sum()), np.append(n * f_exp, n * max(0.0, 1 - f_exp.sum())), what)


def max_loss(law_a, law_b, outcomes: np.ndarray) -> float:
    """max over outcomes of |log P_a - log P_b| (outcomes where both are zero skipped)."""
    la, lb = law_a.log_prob(outcomes), law_b.log_prob(outcomes)
    both = np.isfinite(la) | np.isfinite(lb)
    return float(np.max(np.abs(la[both] - lb[both])))


# --------------------------------------------------------------------------- registry and conventions


def test_registry_names_and_gallery_flags():
    names = catalog(gallery=None)
    for cls in SEEDS + TWINS:
        assert names[cls.name] is cls
        assert cls.source
        assert cls.__doc__ and "Claim" in cls.__doc__ or cls.buggy
    for cls in TWINS:
        assert cls.buggy and cls.bug and cls.true_epsilon is not None
    for cls in SEEDS:
        assert not cls.buggy


@pytest.mark.parametrize("cls", SEEDS + TWINS, ids=lambda c: c.name)
def test_defaults_sample_and_law_on_example_pair(cls):
    mech = cls()
    a, b = mech.example_pair()
    mech.input_spec.validate_pair(a, b)
    rng = np.random.default_rng(1)
    for data in (a, b):
        out = mech.sample(data, 100, rng)
        assert out.shape[0] == 100
        lp = mech.law(data).log_prob(out)
        assert lp.shape == (100,) and np.all(np.isfinite(lp)), f"{cls.name}: samples outside the law's support"


def test_miscalibrated_mechanism_is_expressible():
    m = Laplace(scale=0.5, sensitivity=1, claim=PureDP(1))
    assert m.scale == 0.5 and m.claim.epsilon == 1
    assert Laplace().scale == 1 and Laplace().sensitivity == 1 and Laplace().claim == PureDP(1)


# --------------------------------------------------------------------------- validation

BAD_PARAMETERS = [
    (RandomizedResponse, {"k": 1}, "k="),
    (RandomizedResponse, {"k": 2.0}, "k="),
    (RandomizedResponse, {"log_odds": -1}, "log_odds="),
    (RandomizedResponse, {"log_odds": math.nan}, "log_odds="),
    (RandomizedResponse, {"log_odds": math.inf}, "log_odds="),
    (WarnerRR, {"p_truth": 1.5}, "p_truth="),
    (WarnerRR, {"p_yes": -0.1}, "p_yes="),
    (Rappor, {"k": 1}, "k="),
    (Rappor, {"log_odds": math.nan}, "log_odds="),
    (Laplace, {"scale": 0}, "scale="),
    (Laplace, {"scale": -1}, "scale="),
    (Laplace, {"scale": math.nan}, "scale="),
    (Laplace, {"scale": math.inf}, "scale="),
    (Laplace, {"sensitivity": -1}, "sensitivity="),
    (Laplace, {"dim": 0}, "dim="),
    (Laplace, {"granularity": 0.3}, "granularity="),
    (Laplace, {"granularity": -(2.0**-10)}, "granularity="),
    (Laplace, {"claim": 1}, "claim="),
    (DiscreteLaplace, {"scale": 0}, "scale="),
    (DiscreteLaplace, {"sensitivity": 0.5}, "sensitivity="),
    (DiscreteLaplace, {"sensitivity": -1}, "sensitivity="),
    (Gaussian, {"sigma": 0}, "sigma="),
    (Gaussian, {"sigma": math.inf}, "sigma="),
    (Gaussian, {"sensitivity": -1}, "sensitivity="),
    (Gaussian, {"calibration": "textbook"}, "calibration="),
    (GaussianRDP, {"sigma": -1}, "sigma="),
    (ExponentialMechanism, {"n_candidates": 1}, "n_candidates="),
    (ExponentialMechanism, {"beta": -0.5}, "beta="),
    (ExponentialMechanism, {"sensitivity": 0}, "sensitivity="),
    (ExponentialMedian, {"bits": 1}, "bits="),
    (ExponentialMedian, {"bits": 64}, "bits="),
    (ExponentialMedian, {"beta": math.nan}, "beta="),
    (ExponentialMedian, {"relation": BoundedChange(1, "l1")}, "relation="),
    (ClampedCount, {"scale": 0}, "scale="),
    (ClampedCount, {"relation": "add/remove"}, "relation="),
    (ClampedSum, {"lo": 1, "hi": 0}, "lo="),
    (ClampedSum, {"lo": math.nan}, "lo="),
    (ClampedSum, {"hi": math.inf}, "hi="),
    (ClampedSum, {"scale": -1}, "scale="),
    (ClampedSumUnclamped, {"lo": 2, "hi": 2}, "lo="),
    (ClampedMean, {"relation": Substitute()}, "n="),
    (ClampedMean, {"n": 5}, "n="),
    (ClampedMean, {"relation": Substitute(), "n": 0}, "n="),
    (NoisyStd, {"lo": 2, "hi": 1}, "lo="),
    (NoisyStd, {"scale": 0}, "scale="),
    (NoisyPearson, {"scale": -6}, "scale="),
    (NoisyPearson, {"hi": "1"}, "hi="),
]


@pytest.mark.parametrize(
    "cls,kwargs,arg", BAD_PARAMETERS, ids=[f"{c.name}-{a}{i}" for i, (c, _, a) in enumerate(BAD_PARAMETERS)]
)
def test_bad_parameters_raise_at_construction(cls, kwargs, arg):
    with pytest.raises(ParameterError, match=arg):
        cls(**kwargs)


BAD_CALIBRATIONS = [
    (lambda: RandomizedResponse.calibrated(0), "epsilon="),
    (lambda: Rappor.calibrated(-1), "epsilon="),
    (lambda: WarnerRR.calibrated(math.nan), "epsilon="),
    (lambda: Laplace.calibrated(math.inf), "epsilon="),
    (lambda: Laplace.calibrated(1, sensitivity=-1), "sensitivity="),
    (lambda: DiscreteLaplace.calibrated(0), "epsilon="),
    (lambda: Gaussian.calibrated_classic(2, 1e-5), "epsilon="),
    (lambda: Gaussian.calibrated_classic(0.5, 1), "delta="),
    (lambda: Gaussian.calibrated_analytic(1, 0), "delta="),
    (lambda: Gaussian.calibrated_analytic(1, -0.1), "delta="),
    (lambda: Gaussian.calibrated_analytic(0, 1e-5), "epsilon="),
    (lambda: GaussianRDP.calibrated(1, alpha=1), "alpha="),
    (lambda: ExponentialMechanism.calibrated(-1), "epsilon="),
    (lambda: ExponentialMedian.calibrated(0), "epsilon="),
    (lambda: ClampedSum.calibrated(1, lo=3, hi=1), "lo="),
    (lambda: ClampedMean.calibrated(1, relation=Substitute()), "n="),
    (lambda: NoisyStd.calibrated(math.nan), "epsilon="),
    (lambda: NoisyPearson.calibrated(0), "epsilon="),
]


@pytest.mark.parametrize(
    "build,arg", BAD_CALIBRATIONS, ids=[f"cal{i}-{a}" for i, (_, a) in enumerate(BAD_CALIBRATIONS)]
)
def test_bad_calibrations_raise(build, arg):
    with pytest.raises(ParameterError, match=arg):
        build()


BAD_DATA = [
    (RandomizedResponse(), 2, "outside the domain"),
    (RandomizedResponse(k=3), [0, 1], "shape"),
    (WarnerRR(), 0.5, "outside the domain"),
    (Rappor(), -1, "outside the domain"),
    (Laplace(dim=2), np.zeros(3), "shape"),
    (Laplace(), np.array([math.nan]), "NaN"),
    (DiscreteLaplace(), np.array([0.5]), "outside the domain"),
    (Gaussian(), np.array([[0.0]]), "shape"),
    (ExponentialMechanism(), np.zeros(3), "shape"),
    (ExponentialMedian(), np.array([256]), "outside the domain"),
    (ExponentialMedian(), np.array([1.5]), "outside the domain"),
    (ExponentialMedian(), np.zeros((2, 2), dtype=int), "shape"),
    (ClampedSum(), np.array(["a"]), "dtype <U1, which records cannot hold"),  # by dtype, never by value
    (ClampedMean(relation=Substitute(), n=3), np.zeros(2), "size=3"),
    (NoisyStd(), np.array([2.0]), "outside the domain"),
    (NoisyPearson(), np.array([0.1, 0.2]), "shape"),
    (NoisyPearson(), np.array([[0.1, 3.0]]), "outside the domain"),
]


def _unbounded_real_builtins():
    """Every built-in whose records (or query answers) are unbounded reals and whose input is a data set
    or a vector: the ones that must refuse a 64-bit integer input by dtype."""
    from dpharness._validate import beyond_doubles

    out = []
    for name in sorted(catalog()):
        m = catalog()[name]
        m = m() if isinstance(m, type) else m
        spec = m.input_spec
        if spec.shape != "record" and beyond_doubles(getattr(spec.domain, "lo", 0), getattr(spec.domain, "hi", 0)):
            out.append(m)
    return out


@pytest.mark.parametrize("mech", _unbounded_real_builtins(), ids=lambda m: m.name)
def test_wide_domain_refuses_int64_by_dtype_not_by_value(mech):
    """A built-in on unbounded reals refuses a 64-bit integer input whatever its values: a refusal by value
    (an entry beyond 2**53) released on u = [2**53, 0, ...] and raised on its neighbour u' = [2**53 + 1, 0,
    ...] (exponential, report_noisy_max, snapping): the raise told the two apart with certainty."""
    rng = np.random.default_rng(0)
    spec = mech.input_spec
    n = spec.dim if spec.shape == "vector" and spec.dim is not None else 1
    small = np.zeros(n, dtype=np.int64)
    wide = small.copy()
    wide[0] = 2**53 + 1
    for data in (small, wide):
        with pytest.raises(ParameterError, match="dtype int64"):
            mech.sample(data, 2, rng)
    mech.sample(small.astype(float), 2, rng)  # the same values as doubles are released


@pytest.mark.parametrize("mech,data,match", BAD_DATA, ids=[f"{m.name}-{i}" for i, (m, _, _) in enumerate(BAD_DATA)])
def test_bad_data_raises_in_sample_and_law(mech, data, match):
    rng = np.random.default_rng(0)
    with pytest.raises(ParameterError, match=match):
        mech.sample(data, 10, rng)
    with pytest.raises(ParameterError, match=match):
        mech.law(data)


def test_bad_size_and_rng():
    with pytest.raises(ParameterError, match="size="):
        Laplace().sample(np.zeros(1), 0, np.random.default_rng(0))
    with pytest.raises(ParameterError, match="rng="):
        Laplace().sample(np.zeros(1), 10, 0)


# --------------------------------------------------------------------------- calibrations


def test_calibrations():
    assert RandomizedResponse.calibrated(0.7, k=3).log_odds == 0.7
    assert Rappor.calibrated(1).log_odds == Fraction(1, 2)
    assert RapporUnhalved.calibrated(1).log_odds == 1
    assert Laplace.calibrated(0.5).scale == 2
    assert DiscreteLaplace.calibrated(0.25, sensitivity=2).scale == 8
    assert ExponentialMechanism.calibrated(1, sensitivity=2).beta == Fraction(1, 4)
    assert ExponentialNoHalf.calibrated(1, sensitivity=2).beta == Fraction(1, 2)
    assert ExponentialMedian.calibrated(1, relation=Substitute()).beta == Fraction(1, 4)
    assert MedianSubstituteBug.calibrated(1).beta == Fraction(1, 2)
    assert ClampedSum.calibrated(0.5, lo=-3, hi=1).scale == 6
    assert ClampedSum.calibrated(0.5, lo=-3, hi=1, relation=Substitute()).scale == 8
    assert ClampedMean.calibrated(1).scale == 2
    assert ClampedMean.calibrated(1, relation=Substitute(), n=4).scale == 1
    assert NoisyStd.calibrated(0.5).scale == 6 and NoisyPearson.calibrated(2).scale == 3
    assert ClampedCount.calibrated(4).scale == Fraction(1, 4) or ClampedCount.calibrated(4).scale == 0.25
    # claims carry epsilon (and delta)
    assert Gaussian.calibrated_analytic(2, 1e-6).claim == ApproxDP(2, 1e-6)
    assert GaussianRDP.calibrated(0.5, 4).claim == RenyiDP(4, 0.5)


def test_laplace_grid_sensitivity_is_accounted():
    m = Laplace.calibrated(1, sensitivity=0.3, dim=2)
    assert m.effective_sensitivity == Fraction(math.ceil(Fraction(0.3) / Fraction(G)) + 1) * Fraction(G)
    assert Fraction(m.scale) >= m.effective_sensitivity
    a, b = m.example_pair()
    m.input_spec.validate_pair(a, b)
    ua, ub = _noise.to_units("a", a, G), _noise.to_units("b", b, G)
    # the example pair attains the rounding bound: ceil(Δ/g) + dim - 1 grid steps
    assert int(np.abs(ua - ub).sum()) == math.ceil(Fraction(0.3) / Fraction(G)) + 1


def test_warner_calibration_is_exact_to_rounding():
    m = WarnerRR.calibrated(1.0)
    law1, law0 = m.law(1), m.law(0)
    loss = max_loss(law1, law0, np.array([0, 1]))
    assert loss <= 1.0 + 1e-12 and loss > 1.0 - 1e-9
    assert WarnerRR().claim.epsilon >= math.log(3)


def test_gaussian_calibrations():
    m = Gaussian()
    assert m.claim == ApproxDP(1, 1e-5) and m.calibration == "classic"
    assert m.sigma >= math.sqrt(2 * math.log(1.25e5)) and m.sigma == classic_sigma(1, 1e-5)
    a = Gaussian.calibrated_analytic(1, 1e-5)
    assert a.sigma < m.sigma  # the analytic calibration needs less noise (Balle & Wang 2018, Fig. 1)
    # Balle & Wang's σ for the sensitivity in grid steps, raised by 2**-12 to cover the discrete Gaussian's grid
    tight = analytic_sigma(1, 1e-5, 1)
    assert tight * (1 + 2**-12) <= a.sigma <= math.nextafter(tight * (1 + 2**-12), math.inf) * (1 + 1e-12)
    assert analytic_delta(a.sigma, 1) <= 1e-5
    big = Gaussian.calibrated(8, 1e-6, sensitivity=2)
    assert analytic_delta(big.sigma, 8, 2) <= 1e-6
    r = GaussianRDP.calibrated(0.5, 3)
    assert 3 * 1 / (2 * r.sigma**2) <= 0.5


def test_rr_law_is_normalised_and_ratio_is_log_odds():
    m = RandomizedResponse(k=5, log_odds=1.5)
    law0, law3 = m.law(0), m.law(3)
    assert sum(float(p) for p in law0.probs) == pytest.approx(1)
    assert max_loss(law0, law3, np.arange(5)) == pytest.approx(1.5)


def test_grid_outputs_carry_no_float_structure():
    rng = np.random.default_rng(3)
    for mech, data in [
        (Laplace(), np.array([0.1])),
        (Gaussian(), np.array([math.pi])),
        (ClampedSum(), np.array([0.1, 0.7])),
        (NoisyStd(), np.array([0.3, 0.9])),
    ]:
        out = mech.sample(data, 10_000, rng)
        units = np.asarray(out) / G
        assert np.all(units == np.round(units)), mech.name


def test_median_bits_32_by_intervals():
    m = ExponentialMedian.calibrated(1, bits=32)
    rng = np.random.default_rng(5)
    data = rng.integers(0, 2**32, 2001)
    out = m.sample(data, 100_000, rng)
    assert out.min() >= 0 and out.max() < 2**32
    law = m.law(data)
    assert law.outcomes is None and np.all(np.isfinite(law.log_prob(out)))
    # the law sums to one over the runs of constant score
    starts, lengths, _ = median_segments(data, 32)
    total = math.fsum(lengths * np.exp(law.log_prob(starts)))
    assert total == pytest.approx(1, abs=1e-9)
    assert abs(np.median(out) - np.median(data)) < 0.01 * 2**32


def test_finalizers():
    rng = np.random.default_rng(8)
    data = np.clip(rng.normal(0.4, 0.1, 50_000), 0, 1)
    std = NoisyStd.finalize(NoisyStd().sample(data, 200, rng))
    assert np.median(std) == pytest.approx(data.std(), abs=0.01)
    mean = ClampedMean.finalize(ClampedMean().sample(data, 200, rng))
    assert np.median(mean) == pytest.approx(data.mean(), abs=0.01)
    xy = rng.normal(0, 0.2, (50_000, 2))
    xy[:, 1] = xy[:, 0] * 0.5 + xy[:, 1] * 0.5
    xy = np.clip(xy, -1, 1)
    r = NoisyPearson.finalize(NoisyPearson().sample(xy, 200, rng))
    assert np.nanmedian(r) == pytest.approx(np.corrcoef(xy.T)[0, 1], abs=0.02)


# --------------------------------------------------------------------------- laws vs claims (exact)


@pytest.mark.parametrize(
    "mech,outcomes",
    [
        (RandomizedResponse(), np.array([0, 1])),
        (WarnerRR(), np.array([0, 1])),
        (Rappor(), np.array(list(itertools.product((0, 1), repeat=4)))),
        (Laplace(), grid_window(0.0, 50, G)),
        (DiscreteLaplace(), np.arange(-20, 21)),
        (ExponentialMechanism(), np.arange(4)),
        (ExponentialMedian(), np.arange(256)),
        (ExponentialMedian.calibrated(1, relation=Substitute()), np.arange(256)),
        (ClampedCount(), grid_window(1.0, 50, G)),
        (ClampedSum(), grid_window(1.0, 50, G)),
    ],
    ids=lambda v: getattr(v, "name", "outcomes"),
)
def test_example_pair_loss_within_claim(mech, outcomes):
    a, b = mech.example_pair()
    loss = max_loss(mech.law(a), mech.law(b), outcomes)
    assert loss <= float(mech.claim.epsilon) + 1e-9
    assert loss >= 0.95 * float(mech.claim.epsilon), f"{mech.name}: example pair is not near-worst ({loss})"


def test_product_laws_spend_the_claimed_budget():
    for mech, outcome in [(ClampedMean(), None), (NoisyStd(), None), (NoisyPearson(), None)]:
        a, b = mech.example_pair()
        la, lb = mech.law(a), mech.law(b)
        # far below both centres every coordinate's loss is at its maximum
        far = np.full((1, len(la.symbols)), -64.0)
        assert float((la.log_prob(far) - lb.log_prob(far))[0]) == pytest.approx(float(mech.claim.epsilon), abs=1e-6)


# --------------------------------------------------------------------------- gallery: declared true epsilon


def test_rappor_unhalved_true_epsilon():
    outs = np.array(list(itertools.product((0, 1), repeat=4)))
    for cls in (Rappor, RapporUnhalved):
        m = cls()
        loss = max(max_loss(m.law(i), m.law(j), outs) for i in range(4) for j in range(4) if i != j)
        expected = float(m.claim.epsilon) if not cls.buggy else cls.true_epsilon
        assert loss == pytest.approx(expected, abs=1e-12)
    assert RapporUnhalved.true_epsilon == 2 * RapporUnhalved().claim.epsilon


def test_exponential_no_half_true_epsilon():
    m = ExponentialNoHalf()
    far_a, far_b = np.array([0.0, 60, 60, 60]), np.array([-1.0, 61, 61, 61])
    loss = max_loss(m.law(far_a), m.law(far_b), np.arange(4))
    assert loss == pytest.approx(m.true_epsilon, abs=1e-9)
    rng = np.random.default_rng(11)
    for _ in range(20):  # random neighbours never exceed the declared value
        u = rng.normal(0, 10, 4)
        v = u + rng.uniform(-1, 1, 4)
        assert max_loss(m.law(u), m.law(v), np.arange(4)) <= m.true_epsilon + 1e-9
    correct = ExponentialMechanism()
    assert max_loss(correct.law(far_a), correct.law(far_b), np.arange(4)) == pytest.approx(1, abs=1e-9)


def _median_extremal_pair(top: int, substitute: bool, a: int = 20):
    """Near-supremum pairs: the run (2, top) holds almost all of Z and its score improves by Δ,
    while at v = 1 the score drops by Δ (see MedianSubstituteBug's docstring)."""
    if substitute:
        d = np.array([0] + [2] * a + [top] * (a - 1))
        return d, np.where(np.arange(len(d)) == 0, top, d)
    d = np.array([2] * a + [top] * (a - 1))
    return d, np.append(d, top)


def test_median_substitute_bug_true_epsilon():
    for bits in (8, 16):
        m = MedianSubstituteBug(bits=bits)
        d, e = _median_extremal_pair(m.top, True)
        m.input_spec.validate_pair(d, e)
        outs = np.arange(m.top + 1)
        loss = max_loss(m.law(d), m.law(e), outs)
        assert loss <= m.true_epsilon + 1e-9
        assert loss == pytest.approx(m.true_epsilon, abs=5e-2 if bits == 8 else 1e-4)
    correct = ExponentialMedian.calibrated(1, relation=Substitute())
    d, e = _median_extremal_pair(correct.top, True)
    assert max_loss(correct.law(d), correct.law(e), np.arange(256)) <= 1 + 1e-9
    addrm = ExponentialMedian()
    d, e = _median_extremal_pair(addrm.top, False)
    addrm.input_spec.validate_pair(d, e)
    assert max_loss(addrm.law(d), addrm.law(e), np.arange(256)) == pytest.approx(1, abs=5e-2)


def test_clamped_sum_unclamped_true_epsilon_is_unbounded():
    buggy, correct = ClampedSumUnclamped(), ClampedSum()
    assert buggy.true_epsilon == math.inf
    losses = []
    for t in (10.0, 100.0, 1000.0):
        d, e = np.array([1.0]), np.array([1.0, t])
        far = np.array([-5000.0])  # below both centres: the loss is |c - c'| / scale
        losses.append(float((buggy.law(d).log_prob(far) - buggy.law(e).log_prob(far))[0]))
        assert float((correct.law(d).log_prob(far) - correct.law(e).log_prob(far))[0]) == pytest.approx(1.0)
    assert losses == pytest.approx([10.0, 100.0, 1000.0])


# --------------------------------------------------------------------------- statistical: samplers vs laws


def _check(mech, data, candidates, seed, what=None, size=N):
    rng = np.random.default_rng(seed)
    samples = mech.sample(data, size, rng)
    assert_matches_law(samples, mech.law(data), candidates, what or mech.name)


@pytest.mark.statistical
@pytest.mark.parametrize(
    "mech,data",
    [
        (RandomizedResponse(), 1),
        (RandomizedResponse(k=5, log_odds=1.5), 2),
        (RandomizedResponse(k=7, log_odds=0.3), 6),
        (WarnerRR(), 1),
        (WarnerRR(p_truth=Fraction(3, 10), p_yes=0.8), 0),
        (ExponentialMechanism(), np.array([0.0, 4, 4, 4])),
        (ExponentialNoHalf(n_candidates=6), np.array([1.0, -2, 0.5, 3, 3, -7])),
    ],
    ids=lambda v: getattr(v, "name", "data"),
)
def test_finite_samplers_match_law(mech, data):
    """Chi-square over the full finite support; false-failure rate ALPHA = 1e-3."""
    law = mech.law(data)
    _check(mech, data, np.array(law.support()), seed=101)


@pytest.mark.statistical
@pytest.mark.parametrize("cls", [Rappor, RapporUnhalved])
def test_rappor_matches_law(cls):
    """Chi-square over all 2^k bit vectors; false-failure rate ALPHA = 1e-3."""
    m = cls()
    _check(m, 2, np.array(list(itertools.product((0, 1), repeat=m.k))), seed=102)


@pytest.mark.statistical
def test_laplace_coarse_grid_matches_law():
    """Grid Laplace at g = 1/8 (snapped centre 0.25) and g = 1/4 (dim 2): chi-square per grid
    point; false-failure rate ALPHA = 1e-3 each."""
    g = 2.0**-3
    m = Laplace(scale=1, granularity=g)
    _check(m, np.array([0.3]), grid_window(0.25, 100, g), seed=103)
    g = 2.0**-2
    m2 = Laplace(scale=0.75, dim=2, granularity=g)
    _check(m2, np.array([0.3, -1.1]), product_window([0.25, -1.0], [30, 30], g), seed=104)


@pytest.mark.statistical
def test_laplace_default_grid_matches_law():
    """Grid Laplace at g = 2^-20: chi-square on 24 bins of width 0.5, each bin's mass summed from
    the law's pmf over its 2^19 grid points; false-failure rate ALPHA = 1e-3."""
    m = Laplace()
    samples = m.sample(np.array([0.1]), N, np.random.default_rng(105))
    centre = round(0.1 / G) * G
    edges = centre + np.arange(-12, 13) * 0.5
    edges = np.round(edges / G) * G
    assert_matches_binned(samples, m.law(np.array([0.1])), G, edges, "laplace g=2^-20")


@pytest.mark.statistical
def test_discrete_laplace_matches_law():
    """Discrete Laplace, dim 1 (scale 1.7) and dim 2 (scale 1): chi-square per outcome;
    false-failure rate ALPHA = 1e-3 each."""
    _check(DiscreteLaplace(scale=1.7), np.array([3]), np.arange(3 - 40, 3 + 41), seed=106)
    m = DiscreteLaplace(dim=2)
    _check(m, np.array([0, -5]), product_window([0, -5], [12, 12], 1), seed=107)


@pytest.mark.statistical
def test_gaussian_coarse_grid_matches_law():
    """Grid Gaussian at g = 1/4 around the unrounded centre 0.1 (dim 1) and g = 1/2 (dim 2,
    gaussian_rdp): chi-square per grid point; false-failure rate ALPHA = 1e-3 each."""
    g = 2.0**-2
    _check(Gaussian(sigma=1.3, granularity=g), np.array([0.1]), grid_window(0.0, 48, g), seed=108)
    g = 2.0**-1
    _check(
        GaussianRDP(sigma=1.0, dim=2, granularity=g),
        np.array([0.3, 2.2]),
        product_window([0.5, 2.0], [14, 14], g),
        seed=109,
    )


@pytest.mark.statistical
def test_gaussian_default_grid_matches_law():
    """Grid Gaussian at g = 2^-20 (sigma = 1/2, so the bins hold few grid points): chi-square on 24
    bins of width sigma/4 (snapped to the grid) plus the tails, masses summed from the law's pmf;
    false-failure rate ALPHA = 1e-3."""
    m = Gaussian(sigma=0.5)
    x = np.array([0.37])
    samples = m.sample(x, N, np.random.default_rng(110))
    edges = np.round((0.37 + np.arange(-12, 13) * m.sigma / 4) / G) * G
    assert_matches_binned(samples, m.law(x), G, edges, "gaussian g=2^-20")


@pytest.mark.statistical
@pytest.mark.parametrize(
    "mech,data",
    [
        (ExponentialMedian(), np.array([10, 20, 30, 200])),
        (ExponentialMedian(bits=6), np.array([5, 5, 5, 40, 41, 63, 0])),
        (MedianSubstituteBug(), np.array([0, 2])),
    ],
    ids=lambda v: getattr(v, "name", "data"),
)
def test_median_matches_law(mech, data):
    """Chi-square over the whole grid; false-failure rate ALPHA = 1e-3."""
    _check(mech, data, np.arange(mech.top + 1), seed=111)


@pytest.mark.statistical
def test_median_bits_32_matches_law():
    """bits = 32: bins are the runs of constant score, long runs split into 4 equal parts (the law
    is constant on a run, so a part's mass is its length times the pmf at its start);
    false-failure rate ALPHA = 1e-3."""
    m = ExponentialMedian(bits=32)
    data = np.array([2**31 + k for k in range(0, 40, 3)] + [2**31 + 5] * 3)
    rng = np.random.default_rng(112)
    samples = m.sample(data, N, rng)
    law = m.law(data)
    starts, lengths, _ = median_segments(data, 32)
    edges, masses = [], []
    for s, ln in zip(starts.tolist(), lengths.tolist()):
        parts = 4 if ln >= 4 else 1
        cuts = [s + (ln * i) // parts for i in range(parts + 1)]
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            edges.append(lo)
            masses.append((hi - lo) * float(np.exp(law.log_prob(np.array([lo]))[0])))
    edges.append(2**32)
    edges = np.array(edges, dtype=np.int64)
    idx = np.searchsorted(edges, samples, side="right") - 1
    counts = np.bincount(idx, minlength=len(masses))
    _chi_square(counts, N * np.array(masses), "median bits=32")


@pytest.mark.statistical
def test_clamped_samplers_match_law():
    """Clamped count/sum (and the unclamped twin) at g = 1/4, clamped mean at g = 1/2 under both
    relations: chi-square per grid point (joint for the mean) of the sampler (the parts structure
    executed) against the exact law read off the same structure; false-failure rate ALPHA = 1e-3 each."""
    g = 2.0**-2
    data = np.array([0.3, 5.0, -7.0, 1.1])
    _check(ClampedCount(scale=1.5, granularity=g), data, grid_window(4.0, 120, g), seed=113)
    # clamp to [-1, 2], sum exactly, round once: 0.3 + 2 - 1 + 1.1 = 2.4 -> 2.5 on the grid
    _check(ClampedSum(lo=-1, hi=2, scale=1, granularity=g), data, grid_window(2.5, 80, g), seed=114)
    # unclamped (the gallery twin snaps each record): 0.25 + 5 - 7 + 1 = -0.75
    _check(ClampedSumUnclamped(lo=-1, hi=2, scale=1, granularity=g), data, grid_window(-0.75, 80, g), seed=115)
    g = 2.0**-1
    d = np.array([0.2, 0.9, 0.6])  # exact sum 1.7 -> 1.5 on the grid, count 3
    _check(ClampedMean(scale=1, granularity=g), d, product_window([1.5, 3.0], [24, 24], g), seed=116)
    # substitution: the same pair is released (the count is public: its noise costs nothing)
    m = ClampedMean(relation=Substitute(), n=3, scale=1, granularity=g)
    _check(m, d, product_window([1.5, 3.0], [24, 24], g), seed=117)


@pytest.mark.statistical
def test_std_and_pearson_match_law():
    """noisy_std (3 sums) and noisy_pearson (6 sums) at g = 1/2: chi-square on the joint grid
    window around the exact sums; false-failure rate ALPHA = 1e-3 each."""
    g = 2.0**-1
    m = NoisyStd(lo=0, hi=2, scale=0.5, granularity=g)
    d = np.array([0.2, 1.4, 2.0])  # exact sums, each rounded once: n 3, sum 3.6 -> 3.5, sum of squares 6.0
    assert m.noise_scales == (0.5, 1, 2)
    _check(m, d, product_window([3.0, 3.5, 6.0], [10, 20, 40], g), seed=118)
    p = NoisyPearson(lo=-1, hi=1, scale=0.25, granularity=g)
    xy = np.array([[0.5, -0.5], [1.0, 1.0], [-1.0, 0.4]])
    # exact sums, each rounded once: n 3, sx .5, sy .9 -> 1, sxx 2.25 -> 2.5, syy 1.41 -> 1.5, sxy -.25+1-.4=.35 -> .5
    _check(p, xy, product_window([3.0, 0.5, 1.0, 2.5, 1.5, 0.5], [3] * 6, g), seed=119, size=N)


@pytest.mark.statistical
def test_the_goodness_of_fit_helpers_reject_a_wrong_law():
    """Power check of the helpers: samples of one mechanism against a slightly different law must
    be rejected (a fixed-seed check; with these sizes the rejection p-values are far below 1e-3)."""
    g = 2.0**-3
    samples = Laplace(scale=1, granularity=g).sample(np.array([0.0]), N, np.random.default_rng(120))
    wrong = Laplace(scale=1.05, granularity=g).law(np.array([0.0]))
    with pytest.raises(AssertionError, match="chi-square"):
        assert_matches_law(samples, wrong, grid_window(0.0, 100, g), "wrong scale")
    shifted = Laplace(scale=1, granularity=g).law(np.array([g]))
    with pytest.raises(AssertionError, match="chi-square"):
        assert_matches_law(samples, shifted, grid_window(0.0, 100, g), "shifted by one grid step")
    rr = RandomizedResponse(k=4, log_odds=1.0).sample(0, N, np.random.default_rng(121))
    with pytest.raises(AssertionError, match="chi-square"):
        assert_matches_law(rr, RandomizedResponse(k=4, log_odds=1.03).law(0), np.arange(4), "rr")


# --------------------------------------------------------------------------- properties (hypothesis)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    bits=st.integers(2, 6),
    data=st.lists(st.integers(0, 63), max_size=8),
    extra=st.integers(0, 63),
    substitute=st.booleans(),
)
def test_median_law_normalised_and_loss_bounded(bits, data, extra, substitute):
    """For random data sets and neighbours the median's law sums to one over the grid, its runs
    tile the grid, and the privacy loss never exceeds 2·beta·Δ (Δ = 1 add/remove, 2 substitution)."""
    top = (1 << bits) - 1
    d = np.array([min(x, top) for x in data], dtype=np.int64)
    extra = min(extra, top)
    relation = Substitute() if substitute else AddRemove()
    m = ExponentialMedian.calibrated(1, bits=bits, relation=relation)
    starts, lengths, _ = median_segments(d, bits)
    assert lengths.sum() == top + 1 and np.all(starts[1:] == starts[:-1] + lengths[:-1])
    if substitute:
        if d.size == 0 or d[0] == extra:
            return
        e = d.copy()
        e[0] = extra
    else:
        e = np.append(d, extra)
    outs = np.arange(top + 1)
    la, lb = m.law(d), m.law(e)
    assert math.fsum(np.exp(la.log_prob(outs))) == pytest.approx(1, abs=1e-12)
    assert max_loss(la, lb, outs) <= 1 + 1e-9


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    x=st.floats(-100, 100),
    shift=st.floats(-1, 1),
    sens=st.sampled_from([1, 0.3, 2.5]),
    eps=st.sampled_from([0.5, 1, 2]),
)
def test_laplace_loss_bounded_by_effective_sensitivity(x, shift, sens, eps):
    """Calibrated grid Laplace: for any neighbours |x - x'| <= Δ the loss over a window of the grid
    is at most ε (the rounding is accounted by effective_sensitivity)."""
    m = Laplace.calibrated(eps, sensitivity=sens, granularity=2.0**-6)
    a, b = np.array([x]), np.array([x + shift * sens])
    if abs(b[0] - a[0]) > sens:
        return
    c = round(x * 64) / 64
    outs = grid_window(c, 64 * 8, 2.0**-6)
    assert max_loss(m.law(a), m.law(b), outs) <= eps + 1e-9
