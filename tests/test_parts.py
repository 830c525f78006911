"""Mechanisms built from parts: the sampler runs the structure the prover walks.

* property tests (hypothesis) draw random compositions of parts with random parameters over small
  integer domains and check the proven bound against the exact true ε computed by brute force from
  the exact law (every neighbouring pair of small data sets); a noise cut or claim tightening whose
  true ε exceeds the claim is never PROVED;
* the README's example is PROVED and passes its audit; with one branch's noise cut 10% it is not PROVED;
* bad declarations are errors naming the argument;
* local randomizers on one record (randomized response, Warner, RAPPOR): PROVED at the calibrated ε
  and REFUTED 10% below it with an exact witness, the sampler against the exact law (chi-square), the
  proven bound against the exact true ε by brute force over every pair of records and every output.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

import dpharness
from dpharness import AddRemove, ApproxDP, BoundedChange, IntegerRange, PureDP, RealInterval, RenyiDP, Substitute
from dpharness import Finite
from dpharness import parts as dp
from dpharness.mechanisms.parts._law import leaves
from dpharness.proofs import prove
from dpharness.proofs._model import Verdict


def _mean(sum_scale=200, count_scale=2, claim=PureDP(1), relation=AddRemove(), post=True):
    steps = dp.clamp(0, 100) >> dp.compose(
        dp.sum() >> dp.laplace(scale=sum_scale), dp.count() >> dp.laplace(scale=count_scale)
    )
    if post:
        steps = steps >> dp.post(lambda s, c: s / max(c, 1))
    return dp.mechanism(
        name="team_noisy_mean", records=RealInterval(0, 100), relation=relation, steps=steps, claim=claim
    )


# --------------------------------------------------------------------------- exact truth by brute force


def _datasets(lo: int, hi: int, relation) -> list[tuple[np.ndarray, np.ndarray]]:
    values = range(lo, hi + 1)
    pairs = []
    if isinstance(relation, AddRemove):
        for n in range(0, 3):
            for small in itertools.combinations_with_replacement(values, n):
                for extra in values:
                    pairs.append((np.array(small, dtype=float), np.array(sorted(small + (extra,)), dtype=float)))
    else:
        for base in itertools.combinations_with_replacement(values, 2):
            for new in values:
                if new != base[0]:
                    pairs.append((np.array(base, dtype=float), np.array((new,) + base[1:], dtype=float)))
    return pairs


def _true_epsilon(m) -> Fraction:
    """max over neighbouring small data sets of sup_y ln P_D(y)/P_D'(y) = Σ_j |c_j − c'_j| / t_j (exact
    for a product of discrete Laplace laws: attained at y = c)."""
    lo, hi = int(m.records.lo), int(m.records.hi)
    best = Fraction(0)
    for d, d2 in _datasets(lo, hi, m.relation):
        loss = Fraction(0)
        for a, b in zip(leaves(m, d), leaves(m, d2)):
            loss += Fraction(sum(abs(x - y) for x, y in zip(a.centres, b.centres))) / a.measurement.t
        best = max(best, loss)
    return best


_SCALES = [Fraction(1, 2), 1, 2, Fraction(37, 10), 0.75]
_GRIDS = [1, 0.5, 0.25]


@st.composite
def _branch(draw, lo: int, hi: int):
    kind = draw(st.sampled_from(["count", "sum", "clamped_sum", "squares", "histogram"]))
    noise = dp.laplace(scale=draw(st.sampled_from(_SCALES)), granularity=draw(st.sampled_from(_GRIDS)))
    if kind == "count":
        return dp.count() >> noise
    if kind == "sum":
        return dp.sum() >> noise
    if kind == "clamped_sum":
        a = draw(st.integers(lo, hi - 1))
        return dp.clamp(a, draw(st.integers(a + 1, hi))) >> dp.sum() >> noise
    if kind == "squares":
        return dp.sum_squares() >> noise
    cats = draw(st.lists(st.integers(lo, hi), min_size=1, max_size=3, unique=True))
    return dp.histogram(categories=cats) >> noise


@st.composite
def _mechanisms(draw):
    lo = draw(st.integers(-3, 0))
    hi = draw(st.integers(1, 3))
    relation = draw(st.sampled_from([AddRemove(), Substitute()]))
    branches = draw(st.lists(_branch(lo, hi), min_size=1, max_size=3))
    steps = branches[0] if len(branches) == 1 else dp.compose(*branches)
    return dp.mechanism(name="drawn", records=IntegerRange(lo, hi), relation=relation, steps=steps, claim=PureDP(1000))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(_mechanisms())
def test_proven_bound_is_at_least_the_exact_truth(m):
    truth = _true_epsilon(m)
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED
    assert Fraction(proof.bound) >= truth * (1 - Fraction(1, 10**12)), (m.describe(), proof.bound, float(truth))


def _cut(step, factor):
    """The same structure with every Laplace scale multiplied by ``factor`` in the first noise leaf."""
    done = [False]

    def walk(s):
        if isinstance(s, dp.GridLaplace) and not done[0]:
            done[0] = True
            return dp.laplace(scale=Fraction(s.scale) * factor, granularity=s.granularity)
        if isinstance(s, dp.Chain):
            return dp.Chain(walk(s.first), walk(s.second))
        if isinstance(s, dp.Compose):
            return dp.Compose(tuple(walk(p) for p in s.parts))
        return s

    return walk(step)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(_mechanisms(), st.sampled_from(["cut", "tighten"]))
def test_noise_cut_or_tightened_claim_above_the_truth_is_never_proved(m, how):
    truth = _true_epsilon(m)
    if truth == 0:
        return
    if how == "cut":
        cut = dataclass_replace(m, steps=_cut(m.steps, Fraction(9, 10)), claim=PureDP(float(truth)))
        new_truth = _true_epsilon(cut)
        claim = cut
    else:
        claim = dataclass_replace(m, claim=PureDP(float(truth * Fraction(9, 10))))
        new_truth = truth
    if new_truth > Fraction(claim.claim.epsilon):
        assert prove(claim).verdict is not Verdict.PROVED, claim.describe()


def dataclass_replace(m, **changes):
    import dataclasses

    return dataclasses.replace(m, **changes)


# --------------------------------------------------------------------------- the README example


def test_readme_example_is_proved_and_a_ten_percent_cut_is_not():
    assert prove(_mean()).verdict is Verdict.PROVED
    assert prove(_mean()).bound == pytest.approx(1.0)
    assert prove(_mean(sum_scale=180)).verdict is not Verdict.PROVED
    assert prove(_mean(count_scale=1.8)).verdict is not Verdict.PROVED


def test_without_post_processing_a_cut_is_refuted_with_an_exact_witness():
    proof = prove(_mean(sum_scale=180, post=False))
    assert proof.verdict is Verdict.REFUTED
    w = proof.witness
    assert w is not None
    m = _mean(sum_scale=180, post=False)
    m.input_spec.validate_pair(w.data, w.neighbor)
    law_d, law_n = m.law(w.data), m.law(w.neighbor)
    y = np.asarray(w.output, dtype=float).reshape(1, -1)
    assert float(law_d.log_prob(y)[0] - law_n.log_prob(y)[0]) == pytest.approx(1 + 1 / 18 * 1, rel=1e-9)


def test_substitution_uses_the_substitution_stability():
    proof = prove(_mean(relation=Substitute(), claim=PureDP(0.5)))
    assert proof.verdict is Verdict.PROVED  # sum: 100/200, count: 0


def test_renyi_and_approximate_claims():
    assert prove(_mean(claim=RenyiDP(2, 1))).verdict is Verdict.PROVED
    assert prove(_mean(claim=ApproxDP(1, 1e-6))).verdict is Verdict.PROVED
    g = dp.mechanism(
        name="g",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.sum() >> dp.gaussian(sigma=5),
        claim=ApproxDP(1, 1e-5),
    )
    assert prove(g).verdict is Verdict.PROVED
    tight = dataclass_replace(g, claim=ApproxDP(0.1, 1e-9))
    assert prove(tight).verdict is not Verdict.PROVED
    assert prove(dataclass_replace(g, claim=PureDP(10))).verdict is not Verdict.PROVED


def test_vector_input_histogram_and_parallel():
    v = dp.mechanism(
        name="v",
        records=RealInterval(),
        relation=BoundedChange(1, "l1"),
        steps=dp.laplace(scale=1, granularity=1),
        claim=PureDP(3),
        input="vector",
        dim=3,
    )
    assert prove(v).verdict is Verdict.PROVED  # rounding 3 real coordinates to the grid: ceil(1) + 3 - 1 = 3 steps
    assert prove(dataclass_replace(v, claim=PureDP(2.9))).verdict is not Verdict.PROVED
    on_grid = dp.mechanism(
        name="w",
        records=IntegerRange(-5, 5),
        relation=BoundedChange(1, "l1"),
        steps=dp.laplace(scale=1, granularity=1),
        claim=PureDP(3),
        input="vector",
        dim=3,
    )
    assert prove(on_grid).verdict is Verdict.PROVED
    h = dp.mechanism(
        name="h",
        records=RealInterval(0, 10),
        relation=Substitute(),
        steps=dp.histogram(edges=[0, 5, 10]) >> dp.laplace(scale=2),
        claim=PureDP(1),
    )
    assert prove(h).verdict is Verdict.PROVED
    assert prove(dataclass_replace(h, claim=PureDP(0.9))).verdict is Verdict.REFUTED
    par = dp.mechanism(
        name="p",
        records=IntegerRange(0, 3),
        relation=AddRemove(),
        steps=dp.parallel(dp.count() >> dp.laplace(scale=1, granularity=1), by=0, keys=[0, 1, 2, 3]),
        claim=PureDP(1),
    )
    assert prove(par).verdict is Verdict.PROVED
    par_sub = dataclass_replace(par, relation=Substitute())
    assert prove(par_sub).verdict is not Verdict.PROVED  # a moved record touches two partitions: ε = 2
    assert prove(dataclass_replace(par_sub, claim=PureDP(2))).verdict is Verdict.PROVED


@pytest.mark.statistical
def test_sampler_matches_the_law():
    """Chi-square goodness of fit of the sampler against the exact law; false-failure rate 1e-4 (fixed seed)."""
    m = dp.mechanism(
        name="c",
        records=IntegerRange(0, 5),
        relation=AddRemove(),
        steps=dp.compose(dp.count() >> dp.discrete_laplace(1.5), dp.sum() >> dp.laplace(2, granularity=0.5)),
        claim=PureDP(10),
    )
    data = [1, 2, 5]
    out = m.sample(data, 200_000, np.random.default_rng(7))
    law = m.law(data)
    keys, counts = np.unique(out, axis=0, return_counts=True)
    p = np.exp(law.log_prob(keys))
    keep = p * len(out) >= 5
    expected = p[keep] * len(out)
    observed = counts[keep]
    rest_o, rest_e = len(out) - observed.sum(), len(out) - expected.sum()
    chi2 = ((observed - expected) ** 2 / expected).sum() + (rest_o - rest_e) ** 2 / max(rest_e, 1e-12)
    pval = stats.chi2.sf(chi2, keep.sum())
    assert pval > 1e-4, f"sampler departs from the law (p = {pval:.3g}; false-failure rate 1e-4)"


@pytest.mark.statistical
def test_audit_passes_the_example_and_catches_a_cut():
    """Audits at 2e5 samples a side, seed 1: the correct mechanism passes (false-failure rate ≤ 0.05);
    with the sum's noise cut 10% and no post-processing (true ε = 1.0556), ε_lb > 1 is certified."""
    assert dpharness.audit(_mean(), epsilon=1, samples=200_000, seed=1).passed
    cut = dpharness.audit(_mean(sum_scale=180, post=False), epsilon=1, samples=200_000, seed=1)
    assert not cut.passed and cut.epsilon_lower_bound <= 1 + 1 / 18 + 1e-9


def test_register_a_value_and_audit_only_policy():
    from dpharness import registry

    m = dp.mechanism(
        name="team_value_test",
        records=IntegerRange(0, 1),
        relation=AddRemove(),
        steps=dp.count() >> dp.discrete_laplace(1),
        claim=PureDP(1),
    )
    try:
        assert dpharness.register(m) is m
        assert registry.get("team_value_test")() is m
        assert not registry.audit_only("team_value_test")
        dpharness.register(m, proof="audit-only")
        assert registry.audit_only("team_value_test")
        with pytest.raises(dpharness.ParameterError, match="proof="):
            dpharness.register(m, proof="trust-me")
    finally:
        registry._REGISTRY.pop("team_value_test", None)
        registry._AUDIT_ONLY.discard("team_value_test")


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: dp.laplace(scale=0), "scale="),
        (lambda: dp.laplace(scale=1, granularity=0.3), "granularity="),
        (lambda: dp.clamp(3, 1), "lo="),
        (lambda: dp.clamp(Fraction(1, 3), 1), "lo="),
        (lambda: dp.parallel(dp.count() >> dp.laplace(1), by=0, keys=[Fraction(1, 3), 1 / 3]), "keys="),
        (lambda: dp.histogram(), "histogram needs"),
        (lambda: dp.Post(lambda s: s.mean(), True), "vectorized=True is reserved"),
        (lambda: dp.count() >> 3, "right side of >>"),
        (
            lambda: dp.mechanism(
                name="x", records=RealInterval(), relation=AddRemove(), steps=dp.sum() >> dp.laplace(1), claim=PureDP(1)
            ),
            "bounded records",
        ),
        (
            lambda: dp.mechanism(
                name="x",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.laplace(1) >> dp.count(),
                claim=PureDP(1),
            ),
            "laplace adds noise to numbers",
        ),
        (
            lambda: dp.mechanism(
                name="x", records=RealInterval(0, 1), relation=AddRemove(), steps=dp.count(), claim=PureDP(1)
            ),
            "release nothing random",
        ),
        (
            lambda: dp.mechanism(
                name="Bad Name",
                records=RealInterval(0, 1),
                relation=AddRemove(),
                steps=dp.count() >> dp.laplace(1),
                claim=PureDP(1),
            ),
            "name=",
        ),
        (
            lambda: dp.mechanism(
                name="x", records=RealInterval(0, 1), relation=AddRemove(), steps=dp.count() >> dp.laplace(1), claim=1
            ),
            "claim=",
        ),
    ],
)
def test_bad_declarations_name_the_argument(build, match):
    with pytest.raises(dpharness.ParameterError, match=match):
        build()


def test_subclassed_parts_are_refused():
    """A part subclassed outside the library would change code its lemma is about."""
    from dpharness.mechanisms.parts import Sum

    class NoClampSum(Sum):
        def apply(self, value):
            return 0

    with pytest.raises(dpharness.ParameterError, match="not a dpharness.parts step"):
        dp.mechanism(
            name="x",
            records=RealInterval(0, 1),
            relation=AddRemove(),
            steps=NoClampSum() >> dp.laplace(1),
            claim=PureDP(1),
        )


def test_post_processing_assumption_is_stated():
    proof = prove(_mean())
    assert any("pure function" in a for a in proof.assumptions), proof.notes


# --------------------------------------------------------------------------- local randomizers on one record


def _local(steps, claim, records=Finite((2, 5, 7))):
    return dp.mechanism(name="local", records=records, relation=Substitute(), input="record", steps=steps, claim=claim)


def _families():
    """family -> (steps, records, exact ε as a float, a claim just at or above ε)."""
    from dpharness.mechanisms._noise import log_up

    return {
        "randomized_response": (dp.randomized_response(1), Finite((2, 5, 7)), 1.0, 1),
        "warner": (dp.warner(Fraction(3, 4)), Finite((0.25, 1.5)), math.log(3), log_up(3)),
        "rappor": (dp.rappor(Fraction(1, 2)), IntegerRange(0, 3), 2 * math.log(3), log_up(9)),
    }


@pytest.mark.parametrize("family", ["randomized_response", "warner", "rappor"])
def test_local_randomizer_is_proved_at_its_epsilon_and_refuted_ten_percent_below(family):
    steps, records, eps, claim = _families()[family]
    proof = prove(_local(steps, PureDP(claim), records))
    assert proof.verdict is Verdict.PROVED, [o.statement for o in proof.steps if not o.discharged]
    assert proof.bound == pytest.approx(eps, rel=1e-12)
    assert any(o.statement.startswith("[family:") for o in proof.steps)
    m = _local(steps, PureDP(0.9 * eps), records)
    refuted = prove(m)
    assert refuted.verdict is Verdict.REFUTED
    w = refuted.witness
    m.input_spec.validate_pair(w.data, w.neighbor)
    y = np.asarray(w.output).reshape(1, -1)
    loss = float(m.law(w.data).log_prob(y)[0] - m.law(w.neighbor).log_prob(y)[0])
    assert loss == pytest.approx(eps, rel=1e-9) and loss > 0.9 * eps  # from the code's own exact law


def test_local_randomizers_compose_and_post_process():
    both = dp.compose(dp.randomized_response(1), dp.rappor(Fraction(1, 2)))
    eps = 1 + 2 * math.log(3)  # basic composition: ε adds
    assert prove(_local(both, PureDP(eps * (1 + 1e-9)))).bound == pytest.approx(eps, rel=1e-12)
    assert prove(_local(both, PureDP(eps * (1 + 1e-9)))).verdict is Verdict.PROVED
    assert prove(_local(both, PureDP(0.9 * eps))).verdict is Verdict.REFUTED
    post = both >> dp.post(lambda a, b: a + b.sum())
    assert prove(_local(post, PureDP(eps * (1 + 1e-9)))).verdict is Verdict.PROVED
    assert prove(_local(post, PureDP(0.9 * eps))).verdict is Verdict.UNPROVEN  # never refuted through post-processing
    out = _local(post, PureDP(10)).sample(5, 50, np.random.default_rng(0))
    assert out.shape == (50,) and set(np.unique(out)) <= {2, 3, 4, 5, 6, 7, 8, 9, 10}
    # zCDP: each ε_i-DP leaf is ε_i²/2-zCDP (Bun & Steinke 2016), ρ adds: 8 leaves of ε = 1/4 give ρ = 1/4,
    # Rényi ε = αρ = 1/2 at α = 2 (below the pure ε = 2)
    eight = dp.compose(*[dp.randomized_response(Fraction(1, 4))] * 8)
    assert prove(_local(eight, RenyiDP(2, 0.5))).verdict is Verdict.PROVED
    assert prove(_local(eight, RenyiDP(2, 0.45))).verdict is not Verdict.PROVED


def test_local_randomized_response_approximate_claims_use_the_exact_profile():
    """δ(ε') = (e^L − e^{ε'})/(e^L + k − 1): k = 3, L = 1, ε' = 1/2 gives 0.22668; Warner p = 3/4 is
    k = 2, L = ln 3: δ(1/2) = (3 − e^{1/2})/4 = 0.33782."""
    rr = _local(dp.randomized_response(1), ApproxDP(0.5, 0.23))
    proof = prove(rr)
    assert proof.verdict is Verdict.PROVED
    assert proof.delta_bound == pytest.approx((math.e - math.exp(0.5)) / (math.e + 2), rel=1e-12)
    tight = dataclass_replace(rr, claim=ApproxDP(0.5, 0.2))
    refuted = prove(tight)
    assert refuted.verdict is Verdict.REFUTED
    w = refuted.witness
    tight.input_spec.validate_pair(w.data, w.neighbor)
    support = np.array([2, 5, 7])
    p = tight.law(w.data).prob(support)[w.event.contains(support)].sum()
    q = tight.law(w.neighbor).prob(support)[w.event.contains(support)].sum()
    assert p - math.exp(0.5) * q > 0.2
    warner = _local(dp.warner(Fraction(3, 4)), ApproxDP(0.5, 0.34), Finite((0, 1)))
    assert prove(warner).verdict is Verdict.PROVED
    assert prove(dataclass_replace(warner, claim=ApproxDP(0.5, 0.33))).verdict is Verdict.REFUTED
    assert prove(_local(dp.rappor(Fraction(1, 2)), ApproxDP(3, 1e-9))).verdict is Verdict.PROVED  # pure 2 ln 3 <= 3


@pytest.mark.statistical
@pytest.mark.parametrize(
    "steps, records, x",
    [
        (lambda: dp.randomized_response(Fraction(3, 4)), Finite((2, 5, 7, 11)), 5),
        (lambda: dp.warner(0.7), Finite((0.25, 1.5)), 1.5),
        (lambda: dp.rappor(0.5), IntegerRange(0, 2), 1),
        (lambda: dp.compose(dp.randomized_response(1), dp.rappor(Fraction(1, 3))), Finite((0.1, 0.2, 0.3)), 0.2),
    ],
    ids=["randomized_response", "warner", "rappor", "compose"],
)
def test_local_randomizer_sampler_matches_the_exact_law(steps, records, x):
    """Chi-square of 100 000 samples (seed 11) against the exact law over its whole support (every
    sample must be a support point: category values exactly); level 1e-4, so a false-failure rate
    of 1e-4 per case."""
    m = _local(steps(), PureDP(100), records)
    law = m.law(x)
    out = m.sample(x, 100_000, np.random.default_rng(11))
    rows = out.reshape(len(out), -1).astype(float)
    support = [np.atleast_1d(np.asarray(o, dtype=float)) for o in law.outcomes]
    counts = np.array([np.all(rows == s, axis=1).sum() for s in support])
    assert counts.sum() == len(out), "a sample outside the law's support"
    expected = np.array([float(p) for p in law.probs]) * len(out)
    pval = float(stats.chisquare(counts, expected).pvalue)
    assert pval > 1e-4, f"sampler departs from the exact law (p = {pval:.3g}; false-failure rate 1e-4)"


def _record_values(records) -> list:
    return list(records.values) if isinstance(records, Finite) else list(range(records.lo, records.hi + 1))


def _local_true_epsilon(m) -> float:
    """max over ordered pairs of records x ≠ x' and every output y of ln P(y|x) − ln P(y|x'), by brute
    force over the exact law (its exact probabilities evaluated at 40 digits)."""
    import mpmath
    import sympy as sp

    logs = {}
    for x in _record_values(m.records):
        law = m.law(x)
        logs[x] = {o: mpmath.log(mpmath.mpf(str(sp.N(p, 40)))) for o, p in zip(law.outcomes, law.probs)}
    with mpmath.workdps(40):
        return float(max(logs[x][o] - logs[x2][o] for x in logs for x2 in logs if x != x2 for o in logs[x]))


@st.composite
def _local_mechanisms(draw):
    if draw(st.booleans()):
        records = Finite(tuple(draw(st.lists(st.integers(-3, 9), min_size=2, max_size=4, unique=True))))
    else:
        lo = draw(st.integers(-2, 2))
        records = IntegerRange(lo, lo + draw(st.integers(1, 3)))
    kinds = ["rr", "rappor"] + (["warner"] if len(_record_values(records)) == 2 else [])
    parts = []
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(kinds))
        if kind == "rr":
            parts.append(dp.randomized_response(draw(st.sampled_from([0, Fraction(1, 2), 1, 0.3, Fraction(5, 2)]))))
        elif kind == "warner":
            parts.append(dp.warner(draw(st.sampled_from([Fraction(1, 2), 0.7, Fraction(9, 10)]))))
        else:
            parts.append(dp.rappor(draw(st.sampled_from([1, Fraction(1, 2), 0.3, Fraction(1, 10)]))))
    steps = parts[0] if len(parts) == 1 else dp.compose(*parts)
    return _local(steps, PureDP(1000), records)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(_local_mechanisms())
def test_local_proven_bound_is_the_exact_truth_and_a_claim_below_it_is_refuted(m):
    truth = _local_true_epsilon(m)
    proof = prove(m)
    assert proof.verdict is Verdict.PROVED
    assert proof.bound >= truth * (1 - 1e-12), (m.describe(), proof.bound, truth)
    assert proof.bound <= truth * (1 + 1e-12) + 1e-15, (m.describe(), proof.bound, truth)  # tight: attained
    if truth > 0:
        assert prove(dataclass_replace(m, claim=PureDP(0.9 * truth))).verdict is Verdict.REFUTED, m.describe()


def test_randomized_response_at_log_odds_37_lies_with_the_exact_probability(monkeypatch):
    """At L = 37 a lie has probability 1/(e^37 + 1) ≈ 2**-53.4: the law keeps it (exactly), and the
    sampler is the exact :func:`_exact.randomized_response` on the category index. Lies are too rare
    to count, so the first 53 bits of the uniform are scripted to 0: given that prefix a lie occurs
    with probability 2**53/(e^37 + 1) ≈ 0.77 (2000 draws; the real stream refines the prefix)."""
    import sympy as sp

    import dpharness.mechanisms._exact as E

    m = _local(dp.randomized_response(37), PureDP(37), Finite((3, 8)))
    law = m.law(3)
    assert sp.simplify(law.probs[list(law.outcomes).index(8)] - 1 / (sp.exp(37) + 1)) == 0
    assert law.log_prob(np.array([8]))[0] == pytest.approx(-37 - math.log1p(math.exp(-37)), rel=1e-14)
    huge = _local(dp.randomized_response(1000), PureDP(1000), Finite((3, 8))).law(3)
    assert huge.log_prob(np.array([8]))[0] == pytest.approx(-1000, rel=1e-14)  # no underflow to -inf
    calls = []
    real = E.randomized_response
    monkeypatch.setattr(E, "randomized_response", lambda *a: calls.append(a) or real(*a))

    class _ZeroPrefix:
        def __init__(self):
            self.real = np.random.default_rng(5).bit_generator

        def random_raw(self, size=None):
            return self.real.random_raw() if size is None else np.zeros(size, dtype=np.uint64)

    class _Rng:
        bit_generator = _ZeroPrefix()

    out = m._sample(3, 2000, _Rng())
    assert calls and calls[0][:3] == (0, 2, Fraction(37))
    assert set(np.unique(out).tolist()) == {3, 8}
    assert 0.6 < (out == 8).mean() < 0.9


def test_local_extreme_pairs_are_valid_neighbours():
    from dpharness.mechanisms.parts._law import extreme_pairs

    for records in (Finite((2, 5, 7)), IntegerRange(-1, 1), Finite((0.25, 1.5))):
        m = _local(dp.randomized_response(1), PureDP(1), records)
        pairs = extreme_pairs(m)
        assert pairs and m.example_pair() == pairs[0]
        for a, b in pairs:
            m.input_spec.validate_pair(a, b)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: dp.warner(0.4), "p="),
        (lambda: dp.warner(1), "p="),
        (lambda: dp.rappor(0), "f="),
        (lambda: dp.rappor(1.5), "f="),
        (lambda: dp.randomized_response(-1), "log_odds="),
        (lambda: dp.randomized_response(math.inf), "log_odds="),
        (lambda: _local(dp.warner(0.75), PureDP(2)), "two categories"),
        (lambda: _local(dp.randomized_response(1), PureDP(1), RealInterval(0, 1)), "records="),
        (lambda: _local(dp.randomized_response(1), PureDP(1), Finite((1, 1.0))), "repeats"),
        (lambda: _local(dp.randomized_response(1), PureDP(1), Finite((Fraction(1, 3), 1))), "not exactly a float"),
        (lambda: _local(dp.randomized_response(1), PureDP(1), IntegerRange(2**60, 2**60 + 2)), "not exactly a float"),
        (
            lambda: dp.mechanism(
                name="x",
                records=Finite((0, 1)),
                relation=AddRemove(),
                input="record",
                steps=dp.randomized_response(1),
                claim=PureDP(1),
            ),
            "relation=",
        ),
        (
            lambda: dp.mechanism(
                name="x",
                records=Finite((0, 1)),
                relation=Substitute(),
                steps=dp.randomized_response(1),
                claim=PureDP(1),
            ),
            "randomizes one record",
        ),
        (lambda: _local(dp.laplace(1), PureDP(1)), "laplace adds noise to numbers"),
        (lambda: _local(dp.count() >> dp.randomized_response(1), PureDP(1)), "count takes records"),
    ],
)
def test_bad_local_declarations_name_the_argument(build, match):
    with pytest.raises(dpharness.ParameterError, match=match):
        build()


def test_the_source_hash_reads_every_parameter_in_full():
    """Two candidate lists that a description abbreviates alike must not share a gate-cache key (a stale
    verdict would be reused); the same declaration hashes the same in any process (no object addresses)."""
    import subprocess
    import sys

    def m(c):
        return dp.mechanism(
            name="q",
            records=RealInterval(0, 120),
            relation=AddRemove(),
            steps=dp.clamp(0, 120) >> dp.quantile(0.5, candidates=c, scale=2),
            claim=PureDP(1),
        )

    a, b = m([0, 1, 2, 50, 119, 120]), m([0, 1, 3, 50, 119, 120])
    assert a.steps.describe() == b.steps.describe()
    assert a.source_hash() != b.source_hash()
    code = (
        "from dpharness import AddRemove, PureDP, RealInterval, parts as dp\n"
        "m = dp.mechanism(name='q', records=RealInterval(0, 120), relation=AddRemove(), steps=dp.clamp(0, 120) >> "
        "dp.quantile(0.5, candidates=[0, 1, 2, 50, 119, 120], scale=2) >> dp.post(round), claim=PureDP(1))\n"
        "print(m.source_hash())"
    )
    runs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert len(runs) == 1


def test_integer_vectors_with_a_sensitivity_below_one_are_refused():
    """No two distinct integer vectors are within 1/2 of each other: the relation is refused at
    construction (it crashed the prover's pair search before)."""
    with pytest.raises(dpharness.errors.ParameterError, match="sensitivity >= 1"):
        dp.mechanism(
            name="v",
            records=IntegerRange(0, 10),
            relation=BoundedChange(0.5, "l1"),
            input="vector",
            dim=2,
            steps=dp.laplace(scale=1),
            claim=PureDP(1),
        )
    ok = dp.mechanism(
        name="v",
        records=IntegerRange(0, 10),
        relation=BoundedChange(1.5, "l1"),
        input="vector",
        dim=2,
        steps=dp.laplace(scale=1.5),
        claim=PureDP(1),
    )
    assert prove(ok).verdict is Verdict.PROVED
