"""Selection parts (dp.quantile, dp.exponential, dp.report_noisy_max): the sampler runs the structure the
prover walks.

* unit tests: the quantile score is OpenDP's (integer form, brute force); bad parameters are errors naming
  the argument;
* proofs: PROVED at the exponential mechanism's ε for the derived sensitivity (median composed with a
  count; add/remove and substitution; noisy top-k; each report-noisy-max noise), never PROVED 1% below;
* exact truth: the worst-case privacy loss over every neighbouring pair of small data sets, from laws
  computed independently of the library's (exact softmax, permute-and-flip closed form), is at most the
  proven ε;
* statistical: samplers against their exact laws (chi-square), audits with a fixed seed pass at the proven ε.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from scipy import stats

import dpharness
from dpharness import AddRemove, IntegerRange, PureDP, RealInterval, Substitute
from dpharness import parts as dp
from dpharness.errors import ParameterError
from dpharness.proofs import prove
from dpharness.proofs._model import Verdict


def _median_and_count(claim=1, scale=2, relation=AddRemove(), candidates=range(0, 121)):
    return dp.mechanism(
        name="median_and_count",
        records=RealInterval(0, 120),
        relation=relation,
        steps=dp.compose(
            dp.clamp(0, 120) >> dp.quantile(0.5, candidates=candidates, scale=scale), dp.count() >> dp.laplace(scale=2)
        ),
        claim=PureDP(claim),
    )


def _select(step, claim=1, relation=AddRemove(), cats=(1, 2, 3, 4)):
    return dp.mechanism(
        name="selection",
        records=IntegerRange(min(cats), max(cats)),
        relation=relation,
        steps=dp.histogram(categories=list(cats)) >> step,
        claim=PureDP(claim),
    )


# --------------------------------------------------------------------------- the quantile score


def _opendp_score(x, c, num, den):
    """OpenDP's score_candidates: |(den − num)·#(x < c) − num·#(x > c)| (integers; lower is better)."""
    lt = sum(1 for v in x if v < c)
    gt = sum(1 for v in x if v > c)
    return abs((den - num) * lt - num * gt)


@pytest.mark.parametrize("alpha", [Fraction(1, 2), Fraction(1, 4), Fraction(9, 10), 0, 1])
def test_quantile_score_is_opendps_score(alpha):
    rng = np.random.default_rng(3)
    a = Fraction(alpha)
    score = dp.quantile_score(alpha, candidates=[-1.5, 0, 2, 2.5, 7])
    for n in (0, 1, 5, 12):
        x = rng.choice([-3.0, -1.5, 0.0, 1.0, 2.0, 2.5, 7.0, 9.0], n)
        got = score.apply(x)
        want = [-Fraction(_opendp_score(x, c, a.numerator, a.denominator), a.denominator) for c in score.candidates]
        assert list(got) == want


def test_quantile_stability_per_relation():
    s = dp.quantile_score(0.25, candidates=[0, 1, 2])
    space = dp.input_space(RealInterval(0, 2), "dataset", None)
    assert s.stability(space, dp.Distance(AddRemove())).linf == Fraction(3, 4)
    assert s.stability(space, dp.Distance(Substitute())).linf == 1
    assert s.stability(space, dp.Distance(AddRemove())).l1 == Fraction(9, 4)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: dp.quantile(1.5, candidates=[0, 1], scale=1), "alpha="),
        (lambda: dp.quantile(0.5, candidates=[1, 0], scale=1), "candidates="),
        (lambda: dp.quantile(0.5, candidates=[0, Fraction(1, 3)], scale=1), "candidates="),
        (lambda: dp.quantile(0.5, candidates=5, scale=1), "candidates="),
        (lambda: dp.quantile(0.5, candidates=[0, 1], scale=0), "scale="),
        (lambda: dp.report_noisy_max(1, noise="cauchy"), "noise"),
        (lambda: dp.report_noisy_max(1, noise="laplace", k=2), "k=2"),
        (lambda: dp.report_noisy_max(1, noise="gumbel", granularity=0.5), "granularity="),
        (lambda: _select(dp.report_noisy_max(1, noise="gumbel", k=5)), "k=5"),
        (
            lambda: dp.mechanism(
                name="m",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.count() >> dp.exponential(1),
                claim=PureDP(1),
            ),
            "vector",
        ),
        (
            lambda: dp.mechanism(
                name="m",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.histogram(categories=[0, 1]) >> dp.exponential(1, labels=[1, 2, 3]),
                claim=PureDP(1),
            ),
            "labels",
        ),
    ],
)
def test_bad_parameters_name_the_argument(call, name):
    with pytest.raises(ParameterError, match=name):
        call()


# --------------------------------------------------------------------------- proofs at the exact ε


def test_median_composed_with_a_count_is_proved_at_its_epsilon():
    """quantile: ε = 2Δ/scale with Δ = max(α, 1 − α) = 1/2 (add/remove): 1/2; the count 1/2; total 1."""
    proof = prove(_median_and_count(1))
    assert proof.verdict is Verdict.PROVED and proof.bound == 1.0
    assert prove(_median_and_count(0.99)).verdict is not Verdict.PROVED


def test_quantile_under_substitution_uses_sensitivity_one():
    m = dp.mechanism(
        name="median_sub",
        records=RealInterval(0, 120),
        relation=Substitute(),
        steps=dp.clamp(0, 120) >> dp.quantile(0.5, candidates=range(0, 121, 10), scale=4),
        claim=PureDP(0.5),
    )
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED and proof.bound == 0.5  # 2·1/4
    assert prove(m.replace(claim=PureDP(0.495))).verdict is not Verdict.PROVED


@pytest.mark.parametrize(
    "noise, k, relation, eps",
    [
        ("gumbel", 1, AddRemove(), Fraction(1, 6)),  # monotone histogram: Δ/scale
        ("gumbel", 3, AddRemove(), Fraction(1, 2)),  # top-3: 3Δ/scale
        ("gumbel", 3, Substitute(), Fraction(1)),  # not monotone: 3·2Δ/scale
        ("exponential", 1, AddRemove(), Fraction(1, 3)),  # 2Δ/scale
        ("laplace", 1, AddRemove(), Fraction(1, 3)),  # 2D/t on the integers
        ("laplace", 1, Substitute(), Fraction(1, 3)),
    ],
)
def test_report_noisy_max_is_proved_at_its_epsilon_and_not_below(noise, k, relation, eps):
    m = _select(dp.report_noisy_max(6, noise=noise, k=k), claim=eps, relation=relation)
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED and Fraction(proof.bound) == pytest.approx(eps, rel=1e-12)
    assert prove(m.replace(claim=PureDP(eps * Fraction(99, 100)))).verdict is not Verdict.PROVED


def test_laplace_noisy_max_rounds_fractional_scores_up_to_whole_steps():
    """Scores in quarters on the integer grid: D = ceil(Δ/g) = 1 step; ε = 2/t."""
    m = dp.mechanism(
        name="q",
        records=RealInterval(0, 4),
        relation=AddRemove(),
        steps=dp.quantile_score(0.25, candidates=[0, 1, 2]) >> dp.report_noisy_max(4, noise="laplace"),
        claim=PureDP(0.5),
    )
    assert prove(m).verdict is Verdict.PROVED


def test_a_subclassed_selection_is_refused():
    from dpharness.mechanisms.parts.selection import ExponentialSelection

    class Tweaked(ExponentialSelection):
        pass

    with pytest.raises(ParameterError, match="not a dpharness.parts step"):
        _select(Tweaked(6))


# --------------------------------------------------------------------------- exact truth by brute force


def _pairs(values, relation, max_n=2):
    out = []
    if isinstance(relation, AddRemove):
        for n in range(0, max_n + 1):
            for small in itertools.combinations_with_replacement(values, n):
                for extra in values:
                    out.append((np.array(small, float), np.array(sorted(small + (extra,)), float)))
    else:
        for base in itertools.combinations_with_replacement(values, max_n):
            for new in values:
                if new != base[0]:
                    out.append((np.array(base, float), np.array((new,) + base[1:], float)))
    return out


def _softmax_logs(u, scale):
    """Exact ln of e^{u_i/scale}/Σ e^{u_j/scale} (sympy, then 30 digits)."""
    w = [sp.exp(sp.Rational(x) / sp.Rational(scale)) for x in u]
    z = sp.Add(*w)
    return [float(sp.N(sp.log(wi / z), 30)) for wi in w]


def _worst_loss(pairs, logp):
    best = 0.0
    for d, d2 in pairs:
        a, b = np.asarray(logp(d)), np.asarray(logp(d2))
        best = max(best, float(np.max(np.abs(a - b))))
    return best


@pytest.mark.parametrize("relation", [AddRemove(), Substitute()])
@pytest.mark.parametrize("alpha", [Fraction(1, 2), Fraction(1, 5)])
def test_quantile_worst_loss_is_within_the_proven_bound(relation, alpha):
    scale = Fraction(1, 2)
    cands = [0, 1, 2, 3]
    m = dp.mechanism(
        name="q",
        records=IntegerRange(0, 3),
        relation=relation,
        steps=dp.quantile(alpha, candidates=cands, scale=scale),
        claim=PureDP(100),
    )
    proven = prove(m).bound
    a = alpha

    def logp(x):
        u = [-abs((1 - a) * int(np.sum(x < c)) - a * int(np.sum(x > c))) for c in cands]
        return _softmax_logs(u, scale)

    truth = _worst_loss(_pairs(range(4), relation, 3), logp)
    assert 0 < truth <= float(proven) + 1e-12
    # and the library's law is the same law
    law_logs = [m.law(d).log_prob(np.array(cands, float)) for d, _ in _pairs(range(4), relation, 2)[:20]]
    own = [logp(d) for d, _ in _pairs(range(4), relation, 2)[:20]]
    assert np.allclose(law_logs, own, atol=1e-9)


@pytest.mark.parametrize("noise", ["gumbel", "exponential", "laplace"])
@pytest.mark.parametrize("relation", [AddRemove(), Substitute()])
def test_noisy_max_worst_loss_is_within_the_proven_bound(noise, relation):
    scale = Fraction(3, 2)
    m = _select(dp.report_noisy_max(scale, noise=noise), claim=100, relation=relation, cats=(0, 1, 2))
    proven = prove(m).bound
    from dpharness.proofs.report_noisy_max import pf_probability

    def logp(x):
        counts = [int(np.sum(x == c)) for c in (0, 1, 2)]
        if noise == "gumbel":
            return _softmax_logs(counts, scale)
        if noise == "exponential":
            return [
                float(sp.N(sp.log(pf_probability([sp.Integer(c) for c in counts], sp.Rational(scale), i)), 30))
                for i in range(3)
            ]
        return m.law(x).log_prob(np.arange(3))

    truth = _worst_loss(_pairs((0, 1, 2), relation, 3), logp)
    assert 0 < truth <= proven + 1e-9
    if noise == "exponential":  # the library's law agrees with the closed form
        x = np.array([0.0, 0.0, 1.0])
        assert np.allclose(m.law(x).log_prob(np.arange(3)), logp(x), atol=1e-9)


def test_top_k_worst_loss_is_within_the_proven_bound():
    scale = Fraction(2)
    m = _select(dp.report_noisy_max(scale, noise="gumbel", k=2), claim=100, cats=(0, 1, 2))
    proven = prove(m).bound
    outs = np.array(list(itertools.permutations(range(3), 2)), float)
    truth = _worst_loss(_pairs((0, 1, 2), AddRemove(), 3), lambda x: m.law(x).log_prob(outs))
    assert 0 < truth <= proven + 1e-9


# --------------------------------------------------------------------------- statistical


def _chi2(samples, law, outcomes):
    counts = np.array(
        [
            np.sum(np.all(samples.reshape(len(samples), -1) == np.asarray(o, float).reshape(1, -1), axis=1))
            for o in outcomes
        ]
    )
    expected = np.exp(law.log_prob(np.asarray(outcomes, float))) * len(samples)
    keep = expected > 5
    chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    return stats.chi2.sf(chi2, max(1, keep.sum() - 1))


@pytest.mark.statistical
@pytest.mark.parametrize(
    "step",
    [
        dp.report_noisy_max(2, noise="gumbel"),
        dp.report_noisy_max(2, noise="exponential"),
        dp.report_noisy_max(2, noise="laplace"),
        dp.report_noisy_max(2, noise="gumbel", k=2),
    ],
    ids=["gumbel", "exponential", "laplace", "top2"],
)
def test_samplers_follow_their_exact_laws(step):
    """Chi-square of 40 000 draws against the law, seed 5; false-failure rate 1e-4 per case."""
    m = _select(step, claim=100)
    x = np.array([1, 1, 2, 3, 3, 3, 4])
    out = np.asarray(m.sample(x, 40_000, np.random.default_rng(5)))
    law = m.law(x)
    pval = _chi2(out, law, law.support())
    assert pval > 1e-4, f"sampler departs from the law (p = {pval:.3g}; false-failure rate 1e-4)"


@pytest.mark.statistical
def test_quantile_sampler_follows_its_law():
    """Chi-square of 40 000 draws of the median over 13 candidates, seed 6; false-failure rate 1e-4."""
    m = _median_and_count(100, scale=1, candidates=range(0, 121, 10))
    q = dp.mechanism(
        name="q",
        records=RealInterval(0, 120),
        relation=AddRemove(),
        steps=dp.quantile(0.5, candidates=range(0, 121, 10), scale=1),
        claim=PureDP(100),
    )
    x = np.array([3.5, 20.0, 31.0, 40.0, 44.0, 90.0])
    out = q.sample(x, 40_000, np.random.default_rng(6))
    pval = _chi2(out, q.law(x), [float(c) for c in range(0, 121, 10)])
    assert pval > 1e-4, f"sampler departs from the law (p = {pval:.3g}; false-failure rate 1e-4)"
    assert m.sample(x, 3, np.random.default_rng(0)).shape == (3, 2)


@pytest.mark.statistical
@pytest.mark.parametrize(
    "make",
    [
        lambda: _median_and_count(1, candidates=range(0, 121, 10)),
        lambda: _select(dp.report_noisy_max(6, noise="gumbel", k=3), claim=0.5, cats=(1, 2, 3, 4, 5)),
        lambda: _select(dp.report_noisy_max(2, noise="laplace"), claim=1),
        lambda: _select(dp.report_noisy_max(2, noise="exponential"), claim=1),
    ],
    ids=["median_and_count", "top3", "rnm_laplace", "rnm_exponential"],
)
def test_audit_passes_at_the_proven_epsilon(make):
    """Audit at 2e5 samples a side, seed 1, at the proven ε: passes (false-failure rate <= 0.05)."""
    m = make()
    assert prove(m).verdict is Verdict.PROVED
    result = dpharness.audit(m, samples=200_000, seed=1)
    assert result.passed, result
