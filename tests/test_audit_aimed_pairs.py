"""Audits aimed by the structure (issue 36, item 1): a mechanism declared from parts names, beside the
proof's witness, the neighbouring pairs where each term of its bound is attained
(:meth:`dpharness.core.Mechanism.aimed_pairs`, :mod:`dpharness.mechanisms.parts._aim`), and the auditor
runs them and certifies on the pair its training draws rank best (plus the proof's witness pair).

* fast, deterministic: the pairs a group-by (record-level, add/remove and substitution), a DP-SGD and a
  plain noisy count name; every one a neighbour pair of the declared relation inside the declared
  domain; a catalog class names none; an ``aimed_pairs`` that returns pairs outside the domain or not
  neighbours is not audited on them (soundness never rests on the structure's choice); the choice of
  the certified pairs;
* statistical (fixed seeds): a small group-by whose searched pairs never hold a key near its threshold
  certifies a positive bound, and with its noise cut a violation, by its aimed pairs alone; the bound
  never exceeds the proven ε;
* statistical: an above-threshold and a median, correct (at most their proofs) and with their noise cut
  (a certified violation), aimed at copies whose answer is at the threshold and at records on both
  sides of the quantile's candidates;
* slow: a short DP-SGD with too little noise caught on a record at its clipping norm; the issue's
  README-style 250-key group-by at ``audit``'s defaults (ε_lb >= 0.6; every noise
  scale divided by 3: a certified violation of (1, 1e-6)) and the DP-SGD with σ = 0.3 claiming
  (1.8291, 1e-5) (a certified violation).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dpharness
from dpharness import AddRemove, ApproxDP, IntegerRange, PureDP, RealBox, RealInterval, Substitute
from dpharness import parts as dp
from dpharness.auditors import _audit
from dpharness.core import Witness
from dpharness.mechanisms.parts._mechanism import PartsMechanism


def _group_by(keys: int = 250, threshold: int = 41, scale: float = 3, div: float = 1.0, relation=None, size=None):
    """The README-style group-by of the issue: per key a noisy count and a clamped income sum, the key
    released by partition selection; (selection 1/3 + count 1/6 + sum 200/400) = 1 under add/remove."""
    return dp.mechanism(
        name="team_per_country_income",
        records=RealBox(0, 1000, 2),  # (income, key)
        relation=relation or AddRemove(),
        size=size,
        steps=dp.group_by(
            by=1,
            keys=list(range(keys)),
            select=dp.partition_select(threshold=threshold, scale=scale / div),
            part=dp.compose(
                dp.count() >> dp.laplace(6 / div),
                dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(400 / div),
            ),
        ),
        claim=ApproxDP(1, 1e-6),
    )


def _grad(theta, r):
    x, y = r[..., 0], r[..., 1]
    return (1 / (1 + np.exp(-theta[..., 0] * x)) - y) * x


def _step(theta, noisy_sum):
    return theta - 0.5 * noisy_sum / 100


def _dpsgd(sigma: float = 1.0, times: int = 1000, claim=ApproxDP(1.8291, 1e-5), rate: float = 0.01):
    """The team pipeline's DP-SGD (benchmarks/team_pipeline/teamdp): q = 0.01, clip 1, ``times`` rounds."""
    return dp.mechanism(
        name="dpsgd",
        records=RealBox(-1, 1, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            times,
            dp.poisson_sample(rate)
            >> dp.map_records(_grad, vectorized=True)
            >> dp.clip_norm(1)
            >> dp.sum()
            >> dp.gaussian(sigma=sigma),
            init=[0.0],
            update=_step,
            vectorized=True,
        ),
        claim=claim,
    )


def _grad_per_record(theta, record):
    x, y = record
    return (1 / (1 + np.exp(-theta[0] * x)) - y) * x


def _team_dpsgd(sigma: float, claim=ApproxDP(1.8291, 1e-5)):
    """The team pipeline's 1 000-round DP-SGD as the team declares it: its gradient and step compiled per
    record (``compiled=True``, numba), the fast path (a ``vectorized=True`` function runs one row at a
    time, some 60 times slower)."""
    return dp.mechanism(
        name="dpsgd",
        records=RealBox(-1, 1, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            1000,
            dp.poisson_sample(0.01)
            >> dp.map_records(_grad_per_record, compiled=True)
            >> dp.clip_norm(1)
            >> dp.sum()
            >> dp.gaussian(sigma=sigma),
            init=[0.0],
            update=_step,
            compiled=True,
        ),
        claim=claim,
    )


# --------------------------------------------------------------------------- the pairs named


def test_group_by_names_a_key_at_its_threshold_with_the_added_record_on_it():
    m = _group_by()
    pairs = m.aimed_pairs()
    assert pairs and all(isinstance(w, Witness) and w.description.startswith("aimed at") for w in pairs)
    first = pairs[0]
    a, b = np.asarray(first.data), np.asarray(first.neighbor)
    assert (len(a), len(b)) == (40, 41)  # T - 1 against T: the release probability crosses 1/2
    assert set(b[:, 1]) == {0.0}  # every record, the added one too, on one key of the universe
    assert b[-1, 0] >= 200  # the added record's income at (beyond) the clamp's upper bound: the sum's term
    sizes = {(len(np.asarray(w.data)), len(np.asarray(w.neighbor))) for w in pairs}
    assert (41, 42) in sizes  # T against T + 1: the ratio of not releasing
    assert "threshold 41" in first.description


def test_every_aimed_pair_is_a_neighbour_pair_inside_the_declared_domain():
    for m in (_group_by(keys=5), _group_by(keys=5, relation=Substitute()), _dpsgd(times=3), _count()):
        spec = m.input_spec
        for w in m.aimed_pairs():
            spec.validate_pair(w.data, w.neighbor)  # raises ParameterError on a pair that is not one
            assert spec.relation.is_neighbour(w.data, w.neighbor)


def test_substitution_group_by_moves_one_record_onto_the_key():
    m = _group_by(keys=5, relation=Substitute())
    w = m.aimed_pairs()[0]
    a, b = np.asarray(w.data), np.asarray(w.neighbor)
    assert len(a) == len(b) == 41
    assert np.count_nonzero(a[:, 1] == 0) == 40 and np.count_nonzero(b[:, 1] == 0) == 41


def test_dpsgd_names_the_canary_at_the_clipping_norm():
    m = _dpsgd(times=3)
    canaries = [w for w in m.aimed_pairs() if "clipping norm" in w.description]
    assert len(canaries) == 1
    a, b = np.asarray(canaries[0].data), np.asarray(canaries[0].neighbor)
    assert a.shape == (0, 2) and b.shape == (1, 2)
    # the canary's gradient at the first state (θ = 0) is at or beyond the clipping norm 1; the all-hi
    # corner (the example pair's record) has gradient 0.5 only
    assert abs(float(_grad(np.zeros((1, 1)), b)[0])) >= 1
    assert abs(float(_grad(np.zeros((1, 1)), np.array([[1.0, 1.0]]))[0])) < 1


def _count():
    return dp.mechanism(
        name="noisy_count",
        records=RealInterval(0, 10),
        relation=AddRemove(),
        steps=dp.count() >> dp.laplace(1),
        claim=PureDP(1),
    )


def test_a_plain_count_names_its_extreme_pair_and_a_catalog_class_names_none():
    pairs = _count().aimed_pairs()
    assert pairs and all("extreme pair" in w.description for w in pairs)
    svt = dpharness.registry.get("sparse_vector")  # a hand-proved class, not declared from parts
    svt = svt() if isinstance(svt, type) else svt
    assert svt.aimed_pairs() == ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Misaimed(PartsMechanism):
    """A subclass whose aimed pairs are a pair outside the domain and a pair that are not neighbours."""

    def aimed_pairs(self):
        out = np.array([5.0, 50.0])  # 50 is outside RealInterval(0, 10)
        return (
            Witness(data=np.array([5.0]), neighbor=out),
            Witness(data=np.array([1.0]), neighbor=np.array([1.0, 2.0, 3.0])),  # two records added
        )


def test_pairs_outside_the_domain_or_not_neighbours_are_never_audited():
    base = _count()
    m = _Misaimed(label="misaimed", records=base.records, relation=base.relation, steps=base.steps, claim=base.claim)
    notes: list[str] = []
    assert _audit._aimed_pairs(m, m.input_spec, notes) == []
    r = dpharness.audit(m, seed=0, samples=20_000, workers=1)
    for a, b in r.extra["pairs"]:
        m.input_spec.validate_pair(a, b)
        assert 50.0 not in np.asarray(b) and not (len(np.asarray(a)) == 1 and len(np.asarray(b)) == 3)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Raising(PartsMechanism):
    """A subclass whose aimed_pairs raises."""

    def aimed_pairs(self):
        raise RuntimeError("aiming failed")


def test_an_aimed_pairs_that_raises_leaves_the_searched_pairs():
    base = _count()
    m = _Raising(label="raising", records=base.records, relation=base.relation, steps=base.steps, claim=base.claim)
    notes: list[str] = []
    assert _audit._aimed_pairs(m, m.input_spec, notes) == [] and "RuntimeError" in notes[0]
    r = dpharness.audit(m, seed=0, samples=20_000, workers=1)
    assert r.extra["pairs"] and r.epsilon_lower_bound <= 1.0


def _cand(pair: int, robust: float, score: float | None = None, one_sided: float = -np.inf) -> _audit._Candidate:
    score = robust if score is None else score
    return _audit._Candidate(pair, None, True, score, "test", 0, one_sided, robust)  # type: ignore[arg-type]


def test_certified_pairs_are_the_best_ranked_and_the_witness():
    ranked = [_cand(0, 0.2), _cand(1, 0.9), _cand(2, 0.5, score=1.2, one_sided=1.5)]
    # the multiplicity-aware projection decides: a lucky rare event's plain score does not
    assert _audit._certified_pairs(ranked, [], None) == {1}
    # the plain score when no robust projection is positive, the one-sided one when neither is
    assert _audit._certified_pairs([_cand(0, -0.1, score=0.3), _cand(1, -0.1, score=0.5)], [], None) == {1}
    assert _audit._certified_pairs([_cand(0, 0.0), _cand(1, -0.1, one_sided=1.5)], [], None) == {1}
    assert _audit._certified_pairs(ranked[:2], [], None) == {1}
    assert _audit._certified_pairs(ranked[:2], [], 0) == {0, 1}  # the proof's witness pair too
    # a witness pair within the tie slack of the best is certified alone (one pair's certification)
    assert _audit._certified_pairs([_cand(0, 0.89), _cand(1, 0.9)], [], 0) == {0}
    assert _audit._certified_pairs([_cand(0, 0.80), _cand(1, 0.9)], [], 0) == {0, 1}
    assert _audit._certified_pairs([_cand(0, 0.3), _cand(1, 0.3)], [], None) == {0}  # ties: the earlier
    assert _audit._certified_pairs([], [_audit._RaiseCandidate(3, True)], None) == {3}
    # few training draws: every pair
    assert _audit._certified_pairs(ranked, [], None, every=True) == {0, 1, 2}


# --------------------------------------------------------------------------- statistical


def _small_group_by(div: float = 1.0):
    """Five keys, threshold 8, selection scale 2, per-key count Laplace(2): ε = 1/2 + 1/2 = 1 under
    add/remove (δ from the selection at 8, about 1.5e-2)."""
    return dp.mechanism(
        name="small_group_by",
        records=IntegerRange(0, 4),
        relation=AddRemove(),
        steps=dp.group_by(
            by=0,
            keys=range(5),
            select=dp.partition_select(threshold=8, scale=2 / div),
            part=dp.count() >> dp.laplace(2 / div),
        ),
        claim=ApproxDP(1, 0.02),
    )


@pytest.mark.statistical
def test_small_group_by_is_certified_on_its_aimed_pair_and_never_above_its_proof():
    """Seed 0, 2·10^5 samples a side. The aimed pair (7 records on a key against 8) exercises both
    terms together; the searched pairs hold fewer records on a key (the release probability further from
    1/2, the selection's ratio not at its largest). Soundness half: the bound
    is at most the proven ε = 1 except with probability 1 − confidence = 5% over the audit's randomness
    (the false-failure rate of this test, fixed by the seed); power half: the exact ε of the aimed pair
    is about 1 and the audit certifies over 0.4 with margin (it certifies 0.91 at this seed)."""
    m = _small_group_by()
    assert dpharness.prove(m).verdict.name == "PROVED"
    r = dpharness.audit(m, seed=0, samples=200_000, workers=1)
    pairs = r.extra["pairs"]
    best = pairs[r.extra["best_pair"]]
    assert r.epsilon_lower_bound <= 1.0, f"bound above the proven ε (false-failure rate 5%): {r.epsilon_lower_bound}"
    assert r.epsilon_lower_bound > 0.4, f"aimed pair not certified (false-failure rate < 1%): {r.method}"
    assert len(best[0]) >= 7  # certified on a pair that holds a key near its threshold
    assert r.extra["certified_pairs"] and len(r.extra["certified_pairs"]) <= 2


@pytest.mark.statistical
def test_small_group_by_with_its_noise_cut_is_caught_by_its_audit():
    """Seed 0, 2·10^5 samples a side, every noise scale divided by 3 (true ε of the aimed pair about 3
    against the claim 1): the audit alone certifies the violation. False-failure rate: it certifies 2.9 at this seed, far above 1; below 1% over seeds."""
    r = dpharness.audit(_small_group_by(div=3), seed=0, samples=200_000, workers=1)
    assert not r.passed and r.epsilon_lower_bound > 1, r.method


@pytest.mark.slow
@pytest.mark.statistical
def test_short_dpsgd_with_too_little_noise_is_caught_on_its_canary():
    """A 10-round DP-SGD (q = 0.5, σ = 0.5, clip 1) claiming (1, 1e-5), its true ε far above (one round
    alone is a Gaussian of sensitivity 2 in units of σ). Seed 0, 4·10^4 samples a side: the audit certifies
    the violation on a record whose gradient is at the clipping norm (the canary, or the other such corner;
    the corner the example pair takes has gradient 0.5 at θ = 0, half the clip). False-failure rate: it
    certifies 6.8 at this seed, several times the claim; below 1% over seeds. ~6 s."""
    m = _dpsgd(sigma=0.5, times=10, claim=ApproxDP(1, 1e-5), rate=0.5)
    r = dpharness.audit(m, seed=0, samples=40_000, workers=1)
    assert not r.passed and r.epsilon_lower_bound > 1, r.method
    best = r.extra["pairs"][r.extra["best_pair"]]
    assert np.asarray(best[0]).shape == (0, 2) and np.asarray(best[1]).tolist() in ([[1.0, -1.0]], [[-1.0, -1.0]])


# --------------------------------------------------------------------------- slow: the issue's targets


@pytest.mark.slow
@pytest.mark.statistical
def test_issue_group_by_at_audit_defaults():
    """The issue's group-by at ``audit``'s defaults (10^6 samples, seed 0, two workers): ε_lb >= 0.6
    (0.98 measured; the aimed pair's exact ε is the proven 1), and never above the proven ε = 1
    (false-failure rate 5%, fixed by the seed). ~30 s."""
    r = dpharness.audit(_group_by(), seed=0, workers=2)
    assert 0.6 <= r.epsilon_lower_bound <= 1.0, r.method


@pytest.mark.slow
@pytest.mark.statistical
def test_issue_group_by_with_every_scale_divided_by_three_is_a_certified_violation():
    """Every noise scale divided by 3 (true ε about 3): the audit alone certifies a violation of
    (1, 1e-6) (2.97 measured at seed 0). False-failure rate below 1% over seeds. ~30 s."""
    r = dpharness.audit(_group_by(div=3), seed=0, workers=2)
    assert not r.passed and r.epsilon_lower_bound > 1.0, r.method


@pytest.mark.slow
@pytest.mark.statistical
def test_issue_dpsgd_with_sigma_three_tenths_is_a_certified_violation():
    """The team's 1 000-round DP-SGD (compiled per record, as the team declares it) with σ = 0.3 instead of
    1, claiming (1.8291, 1e-5) (the proven ε of σ = 1): at ``audit``'s defaults (10^6 samples a side) the
    audit alone certifies a violation (3.567 measured at seed 0, on the pair its training ranked best among
    the aimed canary and the searched pairs). False-failure rate below 1% over seeds. About 4 minutes on 2
    idle cores (the proof's UNPROVEN bracket included)."""
    r = dpharness.audit(_team_dpsgd(sigma=0.3), seed=0, workers=2)
    assert not r.passed and r.epsilon_lower_bound > 1.8291, r.method


# --------------------------------------------------------------------------- above threshold and quantile


def _sparse_vector(div: float = 1.0):
    """Above threshold over three nested counts (records above 20, 50, 80) at threshold 10, threshold
    noise 2 and query noise 4 (monotone queries: ε = 1/2 + 1/4 = 0.75 against the claim 1); ``div``
    divides both noise scales."""
    queries = [
        dp.query(lambda d, t=t: float(np.sum(np.asarray(d).reshape(-1) > t)), sensitivity=1, increasing=True)
        for t in (20, 50, 80)
    ]
    return dp.mechanism(
        name="sparse_vector",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.above_threshold(10, queries=queries, scale=2 / div, query_scale=4 / div),
        claim=PureDP(1),
    )


def _median(div: float = 1.0):
    """The median over candidates 0, 5, ..., 100 by the exponential mechanism at scale 2 (ε = 2·(1/2)/2 =
    1/2 under add/remove) against the claim 1; ``div`` divides the scale."""
    return dp.mechanism(
        name="median",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.clamp(0, 100) >> dp.quantile(0.5, candidates=range(0, 101, 5), scale=2 / div),
        claim=PureDP(1),
    )


def test_above_threshold_names_copies_whose_answer_is_at_its_threshold():
    """The scan finds the fewest copies of a record whose first moved answer reaches the threshold (10
    copies of 100 answer 10 to every query) and names n and n + 1 copies against one record more; the
    exact law ranks which record is added. Every pair is a neighbour pair inside the domain."""
    m = _sparse_vector()
    aimed = [w for w in m.aimed_pairs() if "above-threshold" in w.description]
    assert aimed, [w.description for w in m.aimed_pairs()]
    for w in aimed:
        m.input_spec.validate_pair(w.data, w.neighbor)
        assert len(w.neighbor) == len(w.data) + 1 and len(w.data) in (9, 10), w.description
        assert np.all(w.data == 100.0), w.description
        assert "crosses the threshold at 10" in w.description


def test_quantile_names_records_on_both_sides_of_its_candidates_and_one_between():
    """11 records at 0 and 10 at 100 (every candidate between them scores −1/2, the best), one added
    between the first two (or the last two) candidates inside: the scores below it and above it move by
    1/2 in opposite directions."""
    m = _median()
    aimed = [w for w in m.aimed_pairs() if "quantile" in w.description]
    assert len(aimed) == 2, [w.description for w in m.aimed_pairs()]
    for w in aimed:
        m.input_spec.validate_pair(w.data, w.neighbor)
        assert sorted(w.data.tolist()) == [0.0] * 11 + [100.0] * 10
        (x,) = set(w.neighbor.tolist()) - {0.0, 100.0}
        assert x in (7.5, 92.5), w.description


@pytest.mark.statistical
def test_sparse_vector_with_its_noise_cut_is_caught_by_its_audit_and_the_correct_one_stays_below_its_proof():
    """Seed 0, 2·10^5 samples a side. Noise scales divided by 3 (ε 2.25 against the claim 1): the audit
    alone certifies the violation on the pair at the threshold (the searched pairs, a few records
    anywhere, certified about 0.7 and missed it). False-failure rate: it certifies about 1.37 at this seed;
    below 1% over seeds. The correct one: at most the proven 0.75, except with probability 5% (the
    confidence's; fixed by the seed)."""
    r = dpharness.audit(_sparse_vector(div=3), seed=0, samples=200_000, workers=1)
    assert not r.passed and r.epsilon_lower_bound > 1, r.method
    assert len(r.extra["pairs"][r.extra["best_pair"]][0]) >= 9  # certified at the threshold
    m = _sparse_vector()
    assert dpharness.prove(m).verdict.name == "PROVED"
    r = dpharness.audit(m, seed=0, samples=200_000, workers=1)
    assert 0 < r.epsilon_lower_bound <= 0.75, r.method


@pytest.mark.statistical
def test_median_is_certified_near_its_proof_and_with_its_scale_cut_is_caught():
    """Seed 0, 2·10^5 samples a side. The median (ε = 1/2): the audit certifies above 0.3 and at most the
    proven 1/2 (5%: the confidence's); with its scale divided by 3 (ε 1.5 against the claim 1) it
    certifies the violation. False-failure rate: about 0.43 and 1.35 at this seed; below 1% over seeds."""
    m = _median()
    assert dpharness.prove(m).verdict.name == "PROVED"
    r = dpharness.audit(m, seed=0, samples=200_000, workers=1)
    assert 0.3 < r.epsilon_lower_bound <= 0.5, r.method
    r = dpharness.audit(_median(div=3), seed=0, samples=200_000, workers=1)
    assert not r.passed and r.epsilon_lower_bound > 1, r.method


def test_an_above_threshold_too_large_to_rank_names_its_crossing_unranked():
    """13 queries, c = 2, threshold 500 at scales 40 and 80: the exact law of its answers is too large to
    rank added records by (``_RANK_WORK``), so the scan names the record's own copies at the crossing
    (499 and 500 against one more), without computing the law."""
    queries = [
        dp.query(lambda d, t=t: float(np.sum(np.asarray(d).reshape(-1) > t)), sensitivity=1, increasing=True)
        for t in range(0, 100, 8)
    ]
    m = dp.mechanism(
        name="large_sparse_vector",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.above_threshold(500, queries=queries, scale=40, query_scale=80, c=2),
        claim=PureDP(1),
    )
    aimed = [w for w in m.aimed_pairs() if "above-threshold" in w.description]
    assert [(len(w.data), len(w.neighbor)) for w in aimed] == [(499, 500), (500, 501)], aimed


def test_a_quantile_on_an_unbounded_domain_is_aimed_within_its_clamp():
    """Records on the whole real line, clamped to [0, 10] before the quantile: its pairs place the records
    at the clamp's bounds (the ends of what the quantile reads), one added between two candidates."""
    m = dp.mechanism(
        name="clamped_median",
        records=RealInterval(),
        relation=AddRemove(),
        steps=dp.clamp(0, 10) >> dp.quantile(0.5, candidates=range(11), scale=2),
        claim=PureDP(1),
    )
    aimed = [w for w in m.aimed_pairs() if "quantile" in w.description]
    assert [sorted(set(w.neighbor.tolist()) - {0.0, 10.0}) for w in aimed] == [[1.5], [8.5]]


def test_above_threshold_under_substitution_fills_to_the_fixed_size():
    """Substitution, 10 records: every record counts in one of the four bins, so the data sets are filled
    with a record that leaves the crossing query's answer as it is (the one moving the latest query), and
    the neighbour replaces one filler; each pair has the fixed size and is a substitution neighbour."""
    m = dp.mechanism(
        name="histogram_threshold",
        records=IntegerRange(0, 3),
        relation=Substitute(),
        size=10,
        steps=dp.histogram(categories=[0, 1, 2, 3]) >> dp.above_threshold(4, scale=2),
        claim=PureDP(3),
    )
    aimed = [w for w in m.aimed_pairs() if "above-threshold" in w.description]
    assert aimed, [w.description for w in m.aimed_pairs()]
    for w in aimed:
        m.input_spec.validate_pair(w.data, w.neighbor)
        assert len(w.data) == len(w.neighbor) == 10 and "in place of one filler" in w.description
        assert int(np.sum(w.data != w.neighbor)) == 1


# --------------------------------------------------------------------------- user level: every term at once


def _user_counts(per_key_scale: float = 1.0, claim=ApproxDP(2, 1e-6)):
    """User level over 3 declared keys: each user keeps up to 10 records, up to 10 a key, and each key's
    count has noise of scale ``per_key_scale`` (1: calibrated for one record a user, a bug: the count moves
    by up to 10, ε >= 10 against the claim 2)."""
    return dp.mechanism(
        name="bound_contributions_too_many",
        records=RealBox(0, 100, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=10, max_per_partition=10)
        >> dp.group_by(
            by=1,
            keys=list(range(3)),
            select=dp.partition_select(threshold=60, scale=10),
            part=dp.count() >> dp.laplace(scale=per_key_scale),
        ),
        claim=claim,
    )


def test_user_level_aims_at_one_user_at_the_full_contribution_bounding_keeps():
    """The user-level pairs name one user with max_records records, at most max_per_partition a key over
    min(max_records, max_partitions, keys) keys, value columns at the domain's end of larger magnitude,
    against none and against T − 1 other users a key (the pair where the parts' terms and the selection's
    are attained together); each a neighbour pair of the declared relation."""
    m = _user_counts()
    full = [w for w in m.aimed_pairs() if "full contribution" in w.description]
    assert len(full) == 2, [w.description for w in m.aimed_pairs()]
    for w in full:
        m.input_spec.validate_pair(w.data, w.neighbor)
        added = w.neighbor[len(w.data) :]
        assert len(added) == 10 and len(set(added[:, 0])) == 1  # one user, max_records records
        per_key = np.unique(added[:, 1], return_counts=True)[1]
        assert per_key.max() <= 10 and len(per_key) == 3 and np.all(added[:, 2] == 100.0)
    assert len(full[0].data) == 0 and len(full[1].data) == 59 * 3  # T − 1 = 59 other users on each key
    m2 = dp.mechanism(
        name="capped",
        records=RealBox(0, 100, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=7, max_per_partition=2, max_partitions=3)
        >> dp.group_by(
            by=1, keys=None, select=dp.partition_select(threshold=5, scale=1), part=dp.count() >> dp.laplace(1)
        ),
        claim=ApproxDP(20, 0.5),
    )
    w = next(w for w in m2.aimed_pairs() if "full contribution" in w.description)
    assert sorted(np.unique(w.neighbor[:, 1], return_counts=True)[1].tolist()) == [2, 2, 2]  # 3 keys, 2 each


@pytest.mark.slow
@pytest.mark.statistical
def test_user_level_count_with_noise_for_one_record_a_user_is_caught_on_the_full_user():
    """Seed 0, 2·10^5 samples a side: the count's noise assumes one record a user, a user keeps 10 (proven
    bound 10.3, claim 2). Aimed at one user with one record on each key, the audit certified 2.81 at 10^6
    samples (the count moved by 1 a key); on the user at the full contribution (8 records on a key), 7.62
    here. Power: asserts > 5 (false-failure rate below 1% over seeds); soundness: at most the proven 10.3
    except with probability 5% (fixed by the seed). ~15 s."""
    m = _user_counts()
    r = dpharness.audit(m, seed=0, samples=200_000, workers=1)
    assert 5 < r.epsilon_lower_bound <= 10.3, r.method
    best = r.extra["pairs"][r.extra["best_pair"]]
    assert len(best[1]) - len(best[0]) == 10, best  # the user at the full contribution
