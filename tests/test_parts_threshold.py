"""Threshold parts (dp.above_threshold, dp.query): the sampler runs the structure the prover walks.

* unit tests: answers, cutoff and padding; bad parameters are errors naming the argument; a subclass is refused;
* proofs: above threshold over 50 counting queries (records at least k years old, 50 cut points) PROVED at its
  exact ε (monotone: D/t_ρ + cD/t_ν), not PROVED 1% below nor with 10% less noise; general queries
  (substitution, a vector of answers) at D/t_ρ + 2cD/t_ν; composed with a count; user queries' stated
  sensitivity and direction;
* exact truth: the worst-case privacy loss over every neighbouring pair of small data sets, from pattern
  probabilities computed independently of the library (mpmath, the discrete Laplace pmf summed term by term),
  is at most the proven ε; and on growing data the loss approaches the proven ε (it is the supremum);
* statistical: the sampler against its law (chi-square), audits with a fixed seed pass at the proven ε.
"""

from __future__ import annotations

import itertools
import re
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

import dpharness
from dpharness import AddRemove, BoundedChange, IntegerRange, PureDP, RealInterval, Substitute
from dpharness import parts as dp
from dpharness.errors import ParameterError
from dpharness.mechanisms.parts.threshold import ThresholdLeaf
from dpharness.proofs import prove
from dpharness.proofs._model import Verdict

CUTS = range(20, 120, 2)  # 50 cut points


def _older_than(claim=0.75, scale=2, query_scale=None, relation=AddRemove(), threshold=40, c=1):
    """50 queries: how many (clamped) ages are at least k, k = 20, 22, ..., 118."""
    return dp.mechanism(
        name="older_than",
        records=RealInterval(0, 120),
        relation=relation,
        steps=dp.clamp(0, 120)
        >> dp.above_threshold(
            threshold, queries=[dp.histogram(edges=[k, 120]) for k in CUTS], scale=scale, query_scale=query_scale, c=c
        ),
        claim=PureDP(claim),
    )


# --------------------------------------------------------------------------- unit


def test_answers_stop_after_c_and_pad():
    m = dp.mechanism(
        name="t",
        records=RealInterval(0, 10),
        relation=AddRemove(),
        steps=dp.above_threshold(
            2, queries=[dp.histogram(edges=[k, 10]) for k in range(10)], scale=Fraction(1, 64), c=2
        ),
        claim=PureDP(1000),
    )
    x = np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5])  # counts >= k: 6, 5, 4, 3, 2, 1, 0, ...
    out = m.sample(x, 200, np.random.default_rng(0))
    assert out.shape == (200, 10)
    # noise of scale 1/64 almost never moves an answer by a whole step: 1 1 then stop
    want = np.array([1, 1] + [-1] * 8, float)
    assert np.mean(np.all(out == want, axis=1)) > 0.9
    assert set(np.unique(out)) <= {-1.0, 0.0, 1.0}
    tops = out == 1
    before = np.cumsum(tops, axis=1) - tops
    assert np.all((before >= 2) == (out == -1))


def test_user_query_answers_are_read_exactly():
    q = dp.query(lambda x: float(np.sum(x > 3)), sensitivity=1, increasing=True)
    assert q.answer(np.array([1.0, 4.0, 5.0])) == 2
    with pytest.raises(ParameterError, match="finite"):
        dp.query(lambda x: math.nan, sensitivity=1).answer(np.zeros(2))


def test_a_query_writing_into_the_records_changes_no_other_answer():
    """Each user query gets its own copy of the records: a query normalising them in place (``x /= 10``)
    leaves the next query's answer, whose stated sensitivity is about the records, and the records as they
    were (before: the second query counted the scaled records, 0 instead of 2)."""

    def scaled_in_place(x):
        x /= 10
        return 0.0

    above = dp.above_threshold(
        1,
        queries=[
            dp.query(scaled_in_place, sensitivity=1),
            dp.query(lambda x: float(np.sum(x > 3)), sensitivity=1, increasing=True),
        ],
        scale=1,
    )
    records = np.array([1.0, 4.0, 5.0])
    assert above.answers(records, None) == [0, 2]
    np.testing.assert_array_equal(records, [1.0, 4.0, 5.0])


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: dp.above_threshold(1, queries=[dp.count()], scale=0), "scale="),
        (lambda: dp.above_threshold(1, queries=[dp.count()], scale=1, query_scale=-1), "query_scale="),
        (lambda: dp.above_threshold(1, queries=[dp.count()], scale=1, c=0), "c="),
        (lambda: dp.above_threshold(1, queries=[dp.count()], scale=1, granularity=3), "granularity="),
        (lambda: dp.above_threshold(2.0**60, queries=[dp.count()], scale=1), "threshold="),
        (lambda: dp.above_threshold(1, queries=[dp.count() >> dp.laplace(1)], scale=1), "queries"),
        (lambda: dp.above_threshold(1, queries=[], scale=1), "queries"),
        (lambda: dp.above_threshold(1, queries=5, scale=1), "queries="),
        (lambda: dp.above_threshold(1, queries=[dp.count()], scale=1, granularity=2.0**-50), "scale="),
        (lambda: dp.query(lambda x: 1, sensitivity=-1), "sensitivity="),
        (
            lambda: dp.mechanism(
                name="m",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.above_threshold(1, queries=[dp.histogram(edges=[0, 0.5, 1])], scale=1),
                claim=PureDP(1),
            ),
            "one number",
        ),
        (
            lambda: dp.mechanism(
                name="m",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.above_threshold(1, scale=1),
                claim=PureDP(1),
            ),
            "queries=",
        ),
        (
            lambda: dp.mechanism(
                name="m",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.histogram(edges=[0, 1]) >> dp.above_threshold(1, queries=[dp.count()], scale=1),
                claim=PureDP(1),
            ),
            "records",
        ),
    ],
)
def test_bad_parameters_name_the_argument(call, name):
    with pytest.raises(ParameterError, match=name):
        call()


def test_a_subclassed_part_is_refused():
    from dpharness.mechanisms.parts.threshold import AboveThreshold, UserQuery

    class Tweaked(AboveThreshold):
        pass

    class Sneaky(UserQuery):
        pass

    with pytest.raises(ParameterError, match="not a dpharness.parts step"):
        dp.mechanism(
            name="m",
            records=RealInterval(0, 1),
            relation=AddRemove(),
            steps=Tweaked(1, (dp.count(),), 1, 2),
            claim=PureDP(1),
        )
    with pytest.raises(ParameterError, match="not a dpharness.parts step"):
        dp.mechanism(
            name="m",
            records=RealInterval(0, 1),
            relation=AddRemove(),
            steps=dp.above_threshold(1, queries=[Sneaky(len, 1)], scale=1),
            claim=PureDP(1),
        )


# --------------------------------------------------------------------------- proofs at the exact ε


def test_fifty_counting_queries_are_proved_at_their_exact_epsilon():
    """Monotone counts (add/remove), D = 1, t_ρ = 2, t_ν = 4 (default 2c·scale): ε = 1/2 + 1/4 = 3/4."""
    proof = prove(_older_than(0.75))
    assert proof.verdict is Verdict.PROVED and Fraction(proof.bound) == Fraction(3, 4)
    assert prove(_older_than(0.75 * 0.99)).verdict is not Verdict.PROVED
    assert prove(_older_than(0.75, scale=1.8)).verdict is not Verdict.PROVED  # 10% less noise
    assert prove(_older_than(0.75, scale=2, query_scale=3.6)).verdict is not Verdict.PROVED


def test_general_queries_pay_twice_per_answer():
    """Under substitution a record leaves some bins and enters others: not monotone, ε = 1/2 + 2·1/4 = 1;
    c = 3 (query noise 2c·scale = 12): 1/2 + 2·3/12 = 1."""
    p = prove(_older_than(1, relation=Substitute()))
    assert p.verdict is Verdict.PROVED and p.bound == 1.0
    assert prove(_older_than(0.99, relation=Substitute())).verdict is not Verdict.PROVED
    p3 = prove(_older_than(1, relation=Substitute(), c=3))
    assert p3.verdict is Verdict.PROVED and p3.bound == 1.0
    vec = dp.mechanism(
        name="svt_vec",
        records=RealInterval(-1000, 1000),
        relation=BoundedChange(1, "linf"),
        input="vector",
        dim=10,
        steps=dp.above_threshold(0, scale=2, c=1),
        claim=PureDP(1),
    )
    assert prove(vec).verdict is Verdict.PROVED and prove(vec).bound == 1.0
    assert prove(vec.replace(claim=PureDP(0.99))).verdict is not Verdict.PROVED


def test_a_histogram_feeds_its_bins_as_monotone_queries():
    m = dp.mechanism(
        name="bins",
        records=IntegerRange(0, 9),
        relation=AddRemove(),
        steps=dp.histogram(categories=list(range(10))) >> dp.above_threshold(5, scale=1, c=2),
        claim=PureDP(1.5),
    )  # 1/1 + 2·1/4
    assert prove(m).verdict is Verdict.PROVED and prove(m).bound == 1.5


def test_composed_with_a_count_and_rounded_answers():
    """A sum of clamped values in [−1, 1] (not monotone, Δ = 1) on the grid 1/4 with scale 1: D = 4 steps,
    t_ρ = 4, t_ν = 8: ε = 1 + 2·4/8 = 2; composed with a count (1/2): 2.5."""
    m = dp.mechanism(
        name="mixed",
        records=RealInterval(-1, 1),
        relation=AddRemove(),
        steps=dp.compose(
            dp.above_threshold(0, queries=[dp.sum(), dp.count()], scale=1, granularity=0.25),
            dp.count() >> dp.laplace(scale=2),
        ),
        claim=PureDP(2.5),
    )
    p = prove(m)
    assert p.verdict is Verdict.PROVED and p.bound == 2.5
    assert prove(m.replace(claim=PureDP(2.47))).verdict is not Verdict.PROVED
    out = m.sample(np.array([0.5, -0.25]), 4, np.random.default_rng(0))
    assert out.shape == (4, 3)


def test_user_queries_carry_their_stated_sensitivity_and_direction():
    up = [dp.query(lambda x, k=k: int(np.sum(x >= k)), sensitivity=1, increasing=True) for k in range(5)]
    m = dp.mechanism(
        name="user",
        records=RealInterval(0, 10),
        relation=AddRemove(),
        steps=dp.above_threshold(2, queries=up, scale=2),
        claim=PureDP(0.75),
    )
    p = prove(m)
    assert p.verdict is Verdict.PROVED and p.bound == 0.75
    assert any("STATED" in a for a in p.assumptions)
    plain = [dp.query(lambda x, k=k: int(np.sum(x >= k)), sensitivity=1) for k in range(5)]
    assert prove(m.replace(steps=dp.above_threshold(2, queries=plain, scale=2))).verdict is not Verdict.PROVED
    frac = [dp.query(lambda x: float(np.mean(x)) if len(x) else 0.0, sensitivity=0.5)]
    m2 = m.replace(steps=dp.above_threshold(2, queries=frac, scale=2), claim=PureDP(1))  # ceil(0.5) = 1 step
    assert prove(m2).bound == 1.0


def test_a_query_that_returns_no_number_is_refused_without_its_value():
    """A query's answer is computed on the data released from: when it is not one finite number the error
    names what came back (its type, its shape), never the value, which would carry the data out of the
    release beside its noisy output."""
    secret = np.array([31.25, 47.5, 12.75])
    for fn, said in (
        (lambda x: np.asarray(x).reshape(-1)[:2] * 1.0, "ndarray of shape (2,)"),
        (lambda x: str(float(np.sum(x))), "str"),
        (lambda x: float("inf") if np.sum(x) > 0 else 0.0, "not finite"),
    ):
        m = dp.mechanism(
            name="leaky",
            records=RealInterval(0, 100),
            relation=AddRemove(),
            steps=dp.above_threshold(2, queries=[dp.query(fn, sensitivity=1)], scale=2),
            claim=PureDP(1),
        )
        with pytest.raises(ParameterError, match=re.escape(said)) as caught:
            dpharness.release(m, secret, seed=0)
        assert not any(t in str(caught.value) for t in ("31.25", "47.5", "12.75", "91.5")), str(caught.value)


# --------------------------------------------------------------------------- exact truth by brute force

_SURVIVAL: dict = {}


def _independent_log_probs(answers, threshold, t_rho, t_nu, c, patterns):
    """ln P(pattern) by the algorithm's definition, independently of the library: 40 digits, the discrete
    Laplace pmf tanh(1/(2t)) e^{−|k|/t} summed term by term for every survival probability (a running sum
    from the far upper tail down), ρ summed over 70·max(t_ρ, t_ν) + 2 beyond the answers' range."""
    with mpmath.workdps(40):

        def pmf(k, t):
            return mpmath.tanh(mpmath.mpf(1) / (2 * t)) * mpmath.exp(-abs(k) / mpmath.mpf(t))

        reach = int(70 * max(t_rho, t_nu)) + 2
        gaps = [a - threshold for a in answers]
        rs = range(min(0, *gaps) - reach, max(0, *gaps) + reach + 1)
        zs = [threshold + r - a for r in (rs[0], rs[-1]) for a in answers]
        lo, hi = min(zs), max(zs)
        table = _SURVIVAL.setdefault(t_nu, {})
        if lo not in table or hi not in table:  # P(ν >= z) for z in [lo, hi]: Σ_{k >= z} pmf(k)
            top = max(hi, 0) + reach
            run = mpmath.fsum(pmf(k, t_nu) for k in range(hi + 1, top))
            for z in range(hi, lo - 1, -1):
                run += pmf(z, t_nu)
                table[z] = +run
        p_rho = {r: pmf(r, t_rho) for r in rs}
        out = []
        for pat in patterns:
            total = mpmath.mpf(0)
            for r in rs:
                term = p_rho[r]
                for a, code in zip(answers, pat):
                    if code == 1:
                        term *= table[threshold + r - a]
                    elif code == 0:
                        term *= 1 - table[threshold + r - a]
                total += term
            out.append(float(mpmath.log(total)))
        return np.array(out)


def _pairs(values, relation, max_n):
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


@pytest.mark.parametrize("relation, c", [(AddRemove(), 1), (AddRemove(), 2), (Substitute(), 1)])
def test_worst_loss_is_within_the_proven_bound(relation, c):
    """Records in {0..3}, queries #(x >= 1), #(x >= 2), #(x >= 3), threshold 1, t_ρ = 1, t_ν = 2c."""
    queries = [dp.histogram(edges=[k - 0.5, 3]) for k in (1, 2, 3)]
    m = dp.mechanism(
        name="tiny",
        records=IntegerRange(0, 3),
        relation=relation,
        steps=dp.above_threshold(1, queries=queries, scale=1, c=c),
        claim=PureDP(100),
    )
    proven = prove(m).bound
    law_patterns = np.asarray(m.law(np.zeros(0)).support(), float)
    cache = {}

    def logp(x):
        key = tuple(int(np.sum(x >= k)) for k in (1, 2, 3))
        if key not in cache:
            cache[key] = _independent_log_probs(key, 1, 1, 2 * c, c, law_patterns.astype(int).tolist())
        return cache[key]

    worst = 0.0
    for d, d2 in _pairs(range(4), relation, 3 if isinstance(relation, AddRemove) else 2):
        worst = max(worst, float(np.max(np.abs(logp(d) - logp(d2)))))
    assert 0 < worst <= proven + 1e-9
    # the library's law is the same law
    for d, _ in _pairs(range(4), relation, 2)[:12]:
        assert np.allclose(m.law(d).log_prob(law_patterns), logp(d), atol=1e-9)


def test_the_proven_epsilon_is_the_supremum_of_the_loss():
    """Monotone: data of N records at 119 and one more at 50; the answers of the 16 cut points <= 50 go up and
    come out ⊥, the 17th comes out ⊤: the loss tends to 3/4 as N grows. General (a vector, linf 1): the ⊥ block
    up by 1 and the ⊤ answer down by 1: the loss tends to 1."""
    at = dp.above_threshold(40, queries=[dp.histogram(edges=[k, 120]) for k in CUTS], scale=2, c=1)
    space = dp.input_space(RealInterval(0, 120), "dataset", None)
    pat = np.array([[0] * 16 + [1] + [-1] * 33])
    d = np.full(200, 119.0)
    loss = (
        ThresholdLeaf(at, d, space).pattern_log_probs(pat)
        - ThresholdLeaf(at, np.append(d, 50.0), space).pattern_log_probs(pat)
    )[0]
    assert 0.75 * 0.9999 < loss <= 0.75
    vec = dp.above_threshold(0, scale=2, c=1)
    vspace = dp.input_space(RealInterval(-1000, 1000), "vector", 10)
    q = np.array([200.0] * 9 + [150.0])
    q2 = np.array([201.0] * 9 + [149.0])
    pat = np.array([[0] * 9 + [1]])
    loss = (
        ThresholdLeaf(vec, q, vspace).pattern_log_probs(pat) - ThresholdLeaf(vec, q2, vspace).pattern_log_probs(pat)
    )[0]
    assert 0.99 < loss <= 1.0
    ind = _independent_log_probs([200] * 9 + [150], 0, 2, 4, 1, pat.tolist()) - _independent_log_probs(
        [201] * 9 + [149], 0, 2, 4, 1, pat.tolist()
    )
    assert abs(ind[0] - loss) < 1e-9


# --------------------------------------------------------------------------- statistical


@pytest.mark.statistical
def test_sampler_follows_its_exact_law():
    """Chi-square of 40 000 draws (10 queries, c = 2) against the law, seed 5; false-failure rate 1e-4."""
    m = dp.mechanism(
        name="t",
        records=RealInterval(0, 10),
        relation=AddRemove(),
        steps=dp.above_threshold(3, queries=[dp.histogram(edges=[k, 10]) for k in range(10)], scale=1, c=2),
        claim=PureDP(100),
    )
    x = np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 5.5])
    out = m.sample(x, 40_000, np.random.default_rng(5))
    law = m.law(x)
    outcomes = np.asarray(law.support(), float)
    assert abs(np.exp(law.log_prob(outcomes)).sum() - 1) < 1e-9
    counts = np.array([np.sum(np.all(out == o[None, :], axis=1)) for o in outcomes])
    assert counts.sum() == len(out)  # every draw is a listed outcome
    expected = np.exp(law.log_prob(outcomes)) * len(out)
    keep = expected > 5
    chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    pval = stats.chi2.sf(chi2, max(1, keep.sum() - 1))
    assert pval > 1e-4, f"sampler departs from the law (p = {pval:.3g}; false-failure rate 1e-4)"


@pytest.mark.statistical
def test_audit_passes_at_the_proven_epsilon():
    """Audit at 2e5 samples a side, seed 1, at the proven ε (a small instance: 6 queries): passes (false-failure
    rate <= 0.05)."""
    m = dp.mechanism(
        name="t6",
        records=RealInterval(0, 12),
        relation=AddRemove(),
        steps=dp.clamp(0, 12)
        >> dp.above_threshold(1, queries=[dp.histogram(edges=[k, 12]) for k in (1, 3, 5, 7, 9, 11)], scale=1, c=1),
        claim=PureDP(1.5),
    )
    assert prove(m).verdict is Verdict.PROVED
    result = dpharness.audit(m, samples=200_000, seed=1)
    assert result.passed, result
