"""Tests of the literature mechanisms and their gallery twins (report noisy max, sparse vector,
truncated geometric, noisy histogram, snapping, discrete Gaussian, textbook Laplace).

* fast deterministic unit tests: parameter validation, calibration, registry entries, exact laws
  (normalisation, claimed vs exact privacy loss, the gallery's declared true ε);
* statistical tests (``@pytest.mark.statistical``, fixed seeds): each sampler's empirical
  distribution against its exact law by a chi-square test at level 1e-4, so each such test has a
  false-failure rate of 1e-4 for a correct sampler (1e-3 for the whole file) -- with the fixed
  seeds the outcome is deterministic; the rate says how unlucky a seed would have to be.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, stats

from dpharness import BoundedChange, ParameterError, Substitute, catalog
from dpharness.mechanisms.discrete_gaussian import (
    DiscreteGaussian,
    bernoulli_exp,
    discrete_gaussian_delta,
    sample_discrete_gaussian,
)
from dpharness.mechanisms.histogram import NoisyHistogram, NoisyHistogramScaleBug
from dpharness.mechanisms.report_noisy_max import (
    ReportNoisyMax,
    ReportNoisyMaxExponential,
    ReportNoisyMaxValueExponential,
    ReportNoisyMaxValueLaplace,
)
from dpharness.mechanisms.snapping import Snapping
from dpharness.mechanisms.sparse_vector import (
    BOTTOM,
    STOPPED,
    NumericalSparseVector,
    SparseVector,
    SparseVectorAlg3,
    SparseVectorAlg4,
    SparseVectorAlg5,
    SparseVectorAlg6,
    answer_patterns,
)
from dpharness.mechanisms.textbook_laplace import TextbookLaplace
from dpharness.mechanisms.truncated_geometric import TruncatedGeometric

ALPHA = 1e-4  # chi-square level = false-failure rate of each statistical test
RATE_NOTE = "false-failure rate of this test: 1e-4 per test for a correct sampler"

CORRECT = {
    "report_noisy_max_laplace": ReportNoisyMax,
    "report_noisy_max_exponential": ReportNoisyMaxExponential,
    "sparse_vector": SparseVector,
    "numerical_sparse_vector": NumericalSparseVector,
    "truncated_geometric": TruncatedGeometric,
    "noisy_histogram": NoisyHistogram,
    "snapping": Snapping,
    "discrete_gaussian": DiscreteGaussian,
}
GALLERY = {
    "noisy_histogram_scale_bug": NoisyHistogramScaleBug,
    "report_noisy_max_value_laplace": ReportNoisyMaxValueLaplace,
    "report_noisy_max_value_exponential": ReportNoisyMaxValueExponential,
    "svt3": SparseVectorAlg3,
    "svt4": SparseVectorAlg4,
    "svt5": SparseVectorAlg5,
    "svt6": SparseVectorAlg6,
    "textbook_laplace": TextbookLaplace,
}


# --------------------------------------------------------------------------- registry and calibration


def test_registry_entries():
    correct, gallery = catalog(gallery=False), catalog(gallery=True)
    for name, cls in CORRECT.items():
        assert correct[name] is cls and not cls.buggy
    for name, cls in GALLERY.items():
        assert gallery[name] is cls and cls.buggy and cls.bug and cls.true_epsilon is not None


@pytest.mark.parametrize(
    "cls,kwargs",
    [
        (ReportNoisyMax, {}),
        (ReportNoisyMaxExponential, {}),
        (SparseVector, {}),
        (NumericalSparseVector, {}),
        (TruncatedGeometric, {}),
        (NoisyHistogram, {}),
        (Snapping, {}),
        (DiscreteGaussian, {"delta": 1e-5}),
        (NoisyHistogramScaleBug, {"epsilon": Fraction(1, 2)}),
        (ReportNoisyMaxValueLaplace, {}),
        (ReportNoisyMaxValueExponential, {}),
        (SparseVectorAlg3, {}),
        (SparseVectorAlg4, {}),
        (SparseVectorAlg5, {}),
        (SparseVectorAlg6, {}),
        (TextbookLaplace, {}),
    ],
)
def test_defaults_are_the_calibrated_instances(cls, kwargs):
    kwargs = {"epsilon": 1, **kwargs}
    assert cls.calibrated(**kwargs) == cls()


def test_calibration_formulas():
    assert ReportNoisyMax.calibrated(Fraction(1, 2), sensitivity=2).scale == 8
    svt = SparseVector.calibrated(Fraction(1, 2), c=2)
    assert (svt.rho_scale, svt.nu_scale) == (4, 16)
    assert SparseVectorAlg4.calibrated(1, c=3).nu_scale == Fraction(4, 3)
    assert NoisyHistogram.calibrated(1, relation=Substitute()).scale == 2
    # counts rounded to multiples of 4: the 4-bin vectors are (ceil(1/4) + 4 - 1)·4 = 16 apart (the parts rounding rule)
    assert NoisyHistogram.calibrated(1, granularity=4).scale == 16
    assert NoisyHistogramScaleBug.calibrated(Fraction(1, 4)).scale == Fraction(1, 4)
    assert TruncatedGeometric.calibrated(Fraction(1, 3)).log_odds == Fraction(1, 3)
    assert Snapping.calibrated(1, B=64).scale == 1 + Fraction(64, 2**49)
    assert Snapping().Lam == 2 and Snapping(B=10, scale=1).Lam == 1
    f = ReportNoisyMax.calibrated(0.3).scale  # inexact float quotient: rounded up
    assert f >= 2 / 0.3 and f == math.nextafter(2 / 0.3, math.inf)
    assert ReportNoisyMax.calibrated(0.5).scale == 4.0  # exact float quotient: kept


def test_discrete_gaussian_calibration_is_minimal_on_its_grid():
    m = DiscreteGaussian()
    assert (
        discrete_gaussian_delta(1, m.sigma2) <= 1e-5 < discrete_gaussian_delta(1, Fraction(m.sigma2) - Fraction(1, 64))
    )


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "build,arg",
    [
        (lambda: ReportNoisyMax(n_candidates=1), "n_candidates="),
        (lambda: ReportNoisyMax(scale=0), "scale="),
        (lambda: ReportNoisyMaxExponential(scale=math.nan), "scale="),
        (lambda: ReportNoisyMaxValueLaplace(sensitivity=-1), "sensitivity="),
        (lambda: ReportNoisyMax.calibrated(0), "epsilon="),
        (lambda: SparseVector(c=0), "c="),
        (lambda: SparseVector(n_queries=0), "n_queries="),
        (lambda: SparseVector(rho_scale=-1), "rho_scale="),
        (lambda: SparseVector(nu_scale=math.inf), "nu_scale="),
        (lambda: SparseVector(threshold="1"), "threshold="),
        (lambda: SparseVectorAlg5(nu_scale=1), "nu_scale="),
        (lambda: SparseVectorAlg4.calibrated(-1), "epsilon="),
        (lambda: NumericalSparseVector(granularity=0.3), "granularity="),
        (lambda: NumericalSparseVector(value_scale=0), "value_scale="),
        (lambda: TruncatedGeometric(n=0), "n="),
        (lambda: TruncatedGeometric(log_odds=0), "log_odds="),
        (lambda: NoisyHistogram(bins=1), "bins="),
        (lambda: NoisyHistogram(scale=-2), "scale="),
        (lambda: NoisyHistogram(relation=BoundedChange(1, "l1")), "relation="),
        (lambda: NoisyHistogramScaleBug(granularity=3), "granularity="),
        (lambda: Snapping(B=1, scale=2), "B="),
        (lambda: Snapping(B=2**50, scale=1), "B="),
        (lambda: Snapping(scale=0), "scale="),
        (lambda: DiscreteGaussian(sigma2=0), "sigma2="),
        (lambda: DiscreteGaussian(sigma2=2.5), "sigma2="),
        (lambda: DiscreteGaussian(sensitivity=0), "sensitivity="),
        (lambda: DiscreteGaussian.calibrated(1, 0), "delta="),
        (lambda: TextbookLaplace(dim=0), "dim="),
        (lambda: TextbookLaplace(scale=math.inf), "scale="),
    ],
)
def test_bad_parameters_name_the_argument(build, arg):
    with pytest.raises(ParameterError, match=arg):
        build()


@pytest.mark.parametrize(
    "mech,data",
    [
        (ReportNoisyMax(), np.ones(4)),
        (SparseVector(), np.ones(3)),
        (TruncatedGeometric(), np.array([6])),
        (NoisyHistogram(), np.array([0, 4])),
        (Snapping(), np.array([math.nan])),
        (DiscreteGaussian(), np.array([0.5])),
    ],
)
def test_bad_data_is_refused(mech, data):
    with pytest.raises(ParameterError, match="data"):
        mech.sample(data, 10, np.random.default_rng(0))


def test_example_pairs_are_neighbours():
    for cls in {**CORRECT, **GALLERY}.values():
        m = cls()
        m.input_spec.validate_pair(*m.example_pair())


# --------------------------------------------------------------------------- exact laws


def _finite_probs(law) -> np.ndarray:
    return (
        np.array([float(p) for p in law.probs])
        if hasattr(law, "probs")
        else np.exp(law.log_prob(np.array(law.outcomes)))
    )


@pytest.mark.parametrize(
    "mech",
    [
        ReportNoisyMax(),
        ReportNoisyMaxExponential(),
        SparseVector(),
        SparseVector(c=2, n_queries=5),
        SparseVectorAlg4(),
        SparseVectorAlg5(n_queries=6),
        SparseVectorAlg6(n_queries=6),
        TruncatedGeometric(),
        Snapping(),
        Snapping(B=3, scale=1),
    ],
    ids=lambda m: m.name,
)
def test_finite_laws_sum_to_one(mech):
    for data in mech.example_pair():
        law = mech.law(data)
        assert abs(_finite_probs(law).sum() - 1) < 1e-9


def test_answer_patterns_count():
    assert len(answer_patterns(10, 1)) == 11
    assert len(answer_patterns(4, 2)) == 1 + 4 + 6  # no ⊤, one ⊤ (never stops), stop at the 2nd ⊤
    assert len(answer_patterns(5, None)) == 32


def test_exponential_rnm_closed_form_matches_quadrature():
    m = ReportNoisyMaxExponential()
    q = np.array([0.3, 1.0, -2.0, 1.0, 0.5])
    b = float(m.scale)

    def direct(i):
        others = np.delete(q, i)
        f = lambda x: math.exp(-(x - q[i]) / b) / b * np.prod(1 - np.exp(-(x - others) / b))  # noqa: E731
        return integrate.quad(f, q.max(), np.inf, epsabs=1e-14)[0]

    np.testing.assert_allclose(m.law(q).probs, [direct(i) for i in range(5)], rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("gap", [0.0, 0.25, 1.0, 3.0, 40.0])
@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_laplace_rnm_law_matches_closed_form_for_two_candidates(gap, scale):
    # argmax of q + L over two candidates: candidate 0 wins iff L1 - L0 < q0 - q1 = gap, and the
    # difference of two i.i.d. Lap(b) has P(L1 - L0 <= d) = 1 - e^{-d/b} (1 + d/(2b)) / 2 for d >= 0
    m = ReportNoisyMax(n_candidates=2, scale=scale)
    p0 = 1 - math.exp(-gap / scale) * (1 + gap / (2 * scale)) / 2
    np.testing.assert_allclose(m.law(np.array([gap, 0.0])).probs, [p0, 1 - p0], rtol=1e-9, atol=1e-15)


def test_discrete_gaussian_law_normalised_and_integer():
    law = DiscreteGaussian().law(np.array([2]))
    assert abs(np.exp(law.log_prob(np.arange(-200, 205))).sum() - 1) < 1e-12
    assert law.log_prob(np.array([2.5]))[0] == -np.inf


def test_bernoulli_exp_is_exact_in_distribution():
    """Bernoulli(exp(-γ)) for γ = 3/2 (crossing the γ > 1 branch): 20 000 draws vs e^{-1.5}.
    Two-sided binomial test at level 1e-4 (false-failure rate 1e-4)."""
    rng = np.random.default_rng(7)
    hits = sum(bernoulli_exp(Fraction(3, 2), rng) for _ in range(20_000))
    p = stats.binomtest(hits, 20_000, math.exp(-1.5)).pvalue
    assert p > ALPHA, f"p = {p:.3g}; {RATE_NOTE}"


@pytest.mark.statistical
def test_discrete_gaussian_big_integer_path_matches_law():
    """The per-sample big-integer sampler (the fallback) against the exact pmf: 10 000 draws,
    chi-square at level 1e-4 (false-failure rate 1e-4)."""
    rng = np.random.default_rng(17)
    law = DiscreteGaussian(sigma2=Fraction(7, 2)).law(np.array([0]))
    draws = np.array([sample_discrete_gaussian(Fraction(7, 2), rng) for _ in range(10_000)])
    pilot = np.array([sample_discrete_gaussian(Fraction(7, 2), rng) for _ in range(5_000)])
    p = _chi2_discrete(draws, law, pilot)
    assert p > ALPHA, f"chi-square p = {p:.3g}; {RATE_NOTE}"


def test_discrete_gaussian_falls_back_to_big_integers():
    m = DiscreteGaussian(sigma2=Fraction(10**30 + 1, 3))
    out = m.sample(np.array([5]), 20, np.random.default_rng(0))
    assert out.dtype == np.int64 and len(out) == 20


# --------------------------------------------------------------------------- claims vs exact laws


def _max_log_ratio(pa: np.ndarray, pb: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(np.log(pa) - np.log(pb))
    r = r[~((pa == 0) & (pb == 0))]
    return float(np.max(r))


@pytest.mark.parametrize(
    "mech",
    [
        ReportNoisyMax(),
        ReportNoisyMaxExponential(),
        SparseVector(),
        SparseVector(c=2, n_queries=5),
        TruncatedGeometric(),
        Snapping(B=8, scale=1),
    ],
    ids=lambda m: m.name,
)
def test_correct_mechanisms_respect_their_claim_on_statdp_pairs(mech):
    from dpharness.mechanisms._literature import statdp_patterns

    pairs = [mech.example_pair()]
    if mech.input_spec.dim and mech.input_spec.dim > 1:
        pairs += statdp_patterns(mech.input_spec.dim)
    for a, b in pairs:
        loss = _max_log_ratio(_finite_probs(mech.law(a)), _finite_probs(mech.law(b)))
        assert loss <= float(mech.claim.epsilon) + 1e-9


def test_truncated_geometric_and_histogram_are_tight():
    m = TruncatedGeometric()
    assert _max_log_ratio(_finite_probs(m.law(0)), _finite_probs(m.law(1))) == pytest.approx(1, abs=1e-12)
    h = NoisyHistogram()
    a, b = h.example_pair()
    y = np.zeros((1, 4))  # below every count: the ratio is exactly e^{1/scale}
    assert (h.law(b).log_prob(y) - h.law(a).log_prob(y))[0] == pytest.approx(-1, abs=1e-9)


def test_discrete_gaussian_delta_from_its_law():
    m = DiscreteGaussian()
    ys = np.arange(-150, 152)
    p, q = np.exp(m.law(np.array([0])).log_prob(ys)), np.exp(m.law(np.array([1])).log_prob(ys))
    delta = float(np.sum(np.maximum(p - math.e * q, 0)))
    assert delta == pytest.approx(discrete_gaussian_delta(1, m.sigma2), rel=1e-6)
    assert delta <= m.claim.delta


# --------------------------------------------------------------------------- gallery: declared true ε


def test_noisy_max_value_laplace_true_epsilon():
    """k·Δ/scale = kε/2, attained at every grid point v <= 1 on [1]*k vs [2]*k, never exceeded on
    the StatDP pairs."""
    from dpharness.mechanisms._literature import statdp_patterns

    m = ReportNoisyMaxValueLaplace()
    g = m.granularity
    v = np.round(np.linspace(-25, 25, 5001) / g) * g
    a, b = m.example_pair()
    la, lb = m.law(a).log_prob(v), m.law(b).log_prob(v)
    assert np.max(np.abs(la - lb)) == pytest.approx(m.true_epsilon, abs=1e-6)
    np.testing.assert_allclose((la - lb)[v <= 1], m.true_epsilon, atol=1e-6)
    assert m.true_epsilon == m.n_candidates * 1 / 2
    for a, b in statdp_patterns(m.n_candidates):
        assert np.max(np.abs(m.law(a).log_prob(v) - m.law(b).log_prob(v))) <= m.true_epsilon + 1e-6


def test_noisy_max_value_law_normalised_on_a_coarse_grid():
    for cls in (ReportNoisyMaxValueLaplace, ReportNoisyMaxValueExponential):
        m = cls(granularity=2.0**-4)
        q = np.array([0.3, 1.0, -2.0, 1.0, 0.5])
        v = np.arange(-2000, 3000) * m.granularity
        assert abs(np.exp(m.law(q).log_prob(v)).sum() - 1) < 1e-9


def test_noisy_max_value_exponential_is_infinite():
    m = ReportNoisyMaxValueExponential()
    a, b = m.example_pair()
    v = np.array([1.5])  # in [max a, max b): possible on a, impossible on b
    assert np.isfinite(m.law(a).log_prob(v)[0]) and m.law(b).log_prob(v)[0] == -np.inf
    assert m.true_epsilon == math.inf


def test_histogram_scale_bug_true_epsilon():
    m = NoisyHistogramScaleBug()
    a, b = m.example_pair()
    rng = np.random.default_rng(3)
    ys = np.vstack([m.sample(a, 2000, rng), np.zeros((1, 4))])
    loss = np.abs(m.law(a).log_prob(ys) - m.law(b).log_prob(ys))
    assert np.max(loss) == pytest.approx(m.true_epsilon, abs=1e-9)
    assert m.true_epsilon == 1 / float(m.claim.epsilon)


def test_svt4_true_epsilon_is_approached_and_never_exceeded():
    """(1+6c)/4·ε: the pattern ⊥⊥⊤ on (x, x, T) vs (x+1, x+1, T-1) approaches it as x grows."""
    m = SparseVectorAlg4(n_queries=3)
    T = float(m.threshold)
    losses = []
    for x in (T + 10, T + 40):
        pa = _finite_probs(m.law(np.array([x, x, T])))
        pb = _finite_probs(m.law(np.array([x + 1, x + 1, T - 1])))
        losses.append(_max_log_ratio(pa, pb))
    assert losses[0] < losses[1] <= m.true_epsilon + 1e-9
    assert losses[1] > m.true_epsilon - 1e-6 > float(m.claim.epsilon)
    d = SparseVectorAlg4()
    assert _max_log_ratio(*(_finite_probs(d.law(x)) for x in d.example_pair())) <= d.true_epsilon + 1e-9


def test_svt5_is_infinite_on_two_queries():
    m = SparseVectorAlg5(n_queries=2, threshold=0)
    law_a, law_b = m.law(np.array([0.0, 1.0])), m.law(np.array([1.0, 0.0]))
    pa, pb = _finite_probs(law_a), _finite_probs(law_b)
    assert np.any((pa > 0) & (pb == 0))


def test_svt6_loss_grows_with_the_number_of_queries():
    losses = []
    for n in (2, 4, 6):
        m = SparseVectorAlg6(n_queries=n)
        a, b = np.ones(n), np.array([2.0] * (n // 2) + [0.0] * (n - n // 2))
        losses.append(_max_log_ratio(_finite_probs(m.law(a)), _finite_probs(m.law(b))))
    assert losses[0] < losses[1] < losses[2] and losses[2] > 1


def test_svt3_loss_exceeds_claim():
    """The released ⊤ value pins ν; on the X pair the density ratio at a ⊥…⊥⊤ output exceeds ε."""
    m = SparseVectorAlg3(n_queries=4)
    a, b = np.array([1.0, 1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0, 1.0])
    out = np.array([[BOTTOM, BOTTOM, 1.25, STOPPED]])
    assert abs(m.law(b).log_prob(out)[0] - m.law(a).log_prob(out)[0]) > float(m.claim.epsilon)


# --------------------------------------------------------------------------- statistical: samplers vs laws


def _rows(x: np.ndarray) -> list[tuple]:
    x = np.asarray(x)
    return [tuple(r) for r in x.reshape(len(x), -1).tolist()]


def _chi2_discrete(samples: np.ndarray, law, pilot: np.ndarray, *, min_count: int = 10) -> float:
    """p-value of a chi-square goodness-of-fit test of ``samples`` against the law. The categories
    are the outputs seen at least ``min_count`` times in an independent ``pilot`` sample, plus one
    "everything else" category (its probability is 1 minus theirs): chosen independently of the
    tested sample, so the test keeps its level."""
    keys, counts = np.unique(np.asarray(pilot).reshape(len(pilot), -1), axis=0, return_counts=True)
    cats = keys[counts >= min_count]
    probs = np.exp(law.log_prob(cats if cats.shape[1] > 1 else cats[:, 0]))
    index = {k: i for i, k in enumerate(_rows(cats))}
    obs = np.zeros(len(cats) + 1)
    for r in _rows(samples):
        obs[index.get(r, len(cats))] += 1
    n = len(samples)
    exp_ = np.append(probs, max(0.0, 1.0 - probs.sum())) * n
    keep = exp_ > 0
    assert obs[~keep].sum() == 0, "an output of probability 0 was sampled"
    stat = float(np.sum((obs[keep] - exp_[keep]) ** 2 / exp_[keep]))
    return float(stats.chi2.sf(stat, keep.sum() - 1))


@pytest.mark.statistical
@pytest.mark.parametrize(
    "mech,size",
    [
        (ReportNoisyMax(), 100_000),
        (ReportNoisyMaxExponential(), 100_000),
        (SparseVector(), 100_000),
        (SparseVector(c=2, n_queries=5), 100_000),
        (SparseVectorAlg4(), 100_000),
        (SparseVectorAlg5(), 100_000),
        (SparseVectorAlg6(n_queries=5), 100_000),
        (TruncatedGeometric(), 100_000),
        (Snapping(), 100_000),
        (Snapping(B=3, scale=1), 100_000),
        (NoisyHistogram(granularity=1, scale=2), 50_000),
        (NoisyHistogramScaleBug(granularity=1), 50_000),
        (NumericalSparseVector(n_queries=3, granularity=1), 50_000),
        (NumericalSparseVector(n_queries=3, c=2, granularity=1), 50_000),
        (DiscreteGaussian(), 100_000),
        (DiscreteGaussian(sigma2=Fraction(1, 3)), 100_000),
    ],
    ids=lambda v: v.name if hasattr(v, "name") else str(v),
)
def test_sampler_matches_exact_law(mech, size):
    """Chi-square goodness of fit at level 1e-4: false-failure rate 1e-4 for a correct sampler."""
    for seed, data in enumerate(mech.example_pair()):
        samples = mech.sample(data, size, np.random.default_rng(1000 + seed))
        pilot = mech.sample(data, size // 2, np.random.default_rng(2000 + seed))
        p = _chi2_discrete(np.asarray(samples), mech.law(data), np.asarray(pilot))
        assert p > ALPHA, f"{mech.name} on {data!r}: chi-square p = {p:.3g} < {ALPHA}; {RATE_NOTE}"


def _chi2_cdf_bins(samples: np.ndarray, cdf, bins: int = 40) -> float:
    edges = np.quantile(samples, np.linspace(0, 1, bins + 1)[1:-1])
    probs = np.diff(np.concatenate([[0.0], cdf(edges), [1.0]]))
    counts = np.bincount(np.searchsorted(edges, samples, side="right"), minlength=bins)
    return float(stats.chisquare(counts, probs * len(samples)).pvalue)


@pytest.mark.statistical
@pytest.mark.parametrize("cls", [ReportNoisyMaxValueLaplace, ReportNoisyMaxValueExponential], ids=lambda c: c.name)
def test_noisy_max_value_samplers_match_their_laws(cls):
    """On a coarse grid (g = 1/16) the value outputs are few enough for the generic chi-square
    test at level 1e-4 (false-failure rate 1e-4 per input)."""
    mech = cls(granularity=2.0**-4)
    for seed, q in enumerate(mech.example_pair() + (np.array([0.3, 1.0, -2.0, 1.0, 0.5]),)):
        s = mech.sample(q, 100_000, np.random.default_rng(50 + seed))
        pilot = mech.sample(q, 50_000, np.random.default_rng(80 + seed))
        p = _chi2_discrete(s, mech.law(q), pilot)
        assert p > ALPHA, f"{mech.name}: chi-square p = {p:.3g}; {RATE_NOTE}"


@pytest.mark.statistical
def test_textbook_laplace_sampler_matches_density():
    """Kolmogorov-Smirnov against Lap(x, scale), level 1e-4 (false-failure rate 1e-4)."""
    m = TextbookLaplace()
    s = m.sample(np.array([0.7]), 100_000, np.random.default_rng(11))
    p = stats.kstest(s, stats.laplace(loc=0.7, scale=1).cdf).pvalue
    assert p > ALPHA, f"KS p = {p:.3g}; {RATE_NOTE}"
    assert m.law(np.array([0.7])).log_prob(np.array([0.7]))[0] == pytest.approx(-math.log(2))


@pytest.mark.statistical
def test_svt3_sampler_matches_its_law():
    """Alg. 3 on 3 queries, c = 1, on a coarse grid (g = 1/4) so outputs repeat: chi-square at
    level 1e-4 against the quadrature law (false-failure rate 1e-4 per input)."""
    m = SparseVectorAlg3(n_queries=3, granularity=0.25)
    for seed, q in enumerate((np.array([1.0, 0.0, 2.0]), np.array([0.0, 1.0, 1.0]))):
        law = m.law(q)
        s = m.sample(q, 60_000, np.random.default_rng(21 + seed))
        pilot = m.sample(q, 30_000, np.random.default_rng(41 + seed))
        p = _chi2_discrete(s, law, pilot)
        assert p > ALPHA, f"svt3 on {q}: chi-square p = {p:.3g}; {RATE_NOTE}"


@pytest.mark.statistical
def test_snapping_outputs_are_snapped():
    m = Snapping(B=10, scale=3)  # Λ = 4
    s = m.sample(np.array([9.9]), 50_000, np.random.default_rng(5))
    assert np.all(np.abs(s) <= 10)
    inner = s[np.abs(s) != 10]
    assert np.all(np.mod(inner, 4) == 0)


# --------------------------------------------------------------------------- property tests

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 12), eps=st.fractions(Fraction(1, 10), 4), x=st.integers(0, 12))
def test_truncated_geometric_loss_equals_log_odds(n, eps, x):
    """Property: for every n, ε and neighbouring counts the exact law's worst loss is exactly ε."""
    m = TruncatedGeometric.calibrated(eps, n=n)
    x = min(x, n - 1)
    loss = _max_log_ratio(_finite_probs(m.law(x)), _finite_probs(m.law(x + 1)))
    assert loss == pytest.approx(float(eps), rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(2, 7),
    eps=st.sampled_from([Fraction(1, 2), 1, 2]),
    q=st.lists(st.integers(-3, 3), min_size=7, max_size=7),
    shift=st.lists(st.sampled_from([-1, 0, 1]), min_size=7, max_size=7),
)
def test_exponential_rnm_respects_its_claim(k, eps, q, shift):
    """Property: permute-and-flip probabilities sum to 1 and their loss stays within ε on any
    linf-neighbouring pair of integer score vectors."""
    m = ReportNoisyMaxExponential.calibrated(eps, n_candidates=k)
    a = np.array(q[:k], dtype=float)
    b = a + np.array(shift[:k], dtype=float)
    if np.array_equal(a, b):
        return
    pa, pb = _finite_probs(m.law(a)), _finite_probs(m.law(b))
    assert abs(pa.sum() - 1) < 1e-12
    assert _max_log_ratio(pa, pb) <= float(eps) + 1e-9


def test_svt3_law_is_normalised():
    """One query on the grid g = 1/2: P(⊥) + Σ_w P(⊤, w) = 1 (the ⊤ values above T - 45·rho_scale)."""
    m = SparseVectorAlg3(n_queries=1, granularity=0.5)
    law = m.law(np.array([0.5]))
    w = np.arange(-200, 400) * 0.5
    total = np.exp(law.log_prob(np.append(w, BOTTOM).reshape(-1, 1))).sum()
    assert total == pytest.approx(1, abs=1e-9)
