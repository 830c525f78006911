"""A mechanism that raises on some calls: raising is an output the audit certifies, not an abort.

Deterministic tests use mechanisms whose raising is a function of the input (the certified bound
then does not depend on the seed); statistical tests use fixed seeds and state their false-failure
probability (for a correct auditor, over the seed) in the docstring and the failure message."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest
from scipy.stats import binomtest

import dpharness
from dpharness.auditors import _audit, _runner, audit
from dpharness.auditors import events as _events
from dpharness.core import AddRemove, Claim, Event, InputSpec, Mechanism, PureDP, RealInterval
from dpharness.errors import MechanismError

THRESHOLD = 10.0
SECRET = "sum too large"  # the start of the exception's message: must never reach the result


def capped_sum(data, size, rng):
    """Laplace noise around sum(data); raises when the sum exceeds THRESHOLD (the message holds the sum)."""
    total = float(np.sum(data))
    if total > THRESHOLD:
        raise ValueError(f"{SECRET}: {total}")
    return total + rng.laplace(0.0, 1.0, size)


BELOW, ABOVE = [5.0, 4.5], [5.0, 4.5, 1.0]  # sums 9.5 and 10.5: AddRemove neighbours


@dataclass(frozen=True, kw_only=True)
class CappedSum(Mechanism):
    """Sum of records in [0, 10] plus Laplace(scale) noise; ``_sample`` raises ValueError when the sum
    exceeds ``cap``. Neighbours: add or remove one record. Claim: PureDP(1) (false: raising on one
    side only is an output of infinite privacy loss)."""

    name: ClassVar[str] = "capped_sum_raises_test"
    source: ClassVar[str] = "tests"

    scale: Any = 10.0
    cap: Any = THRESHOLD
    claim: Claim = PureDP(1)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(RealInterval(0.0, 10.0), AddRemove(), "dataset")

    def _sample(self, data, size, rng):
        total = float(np.sum(data))
        if total > float(self.cap):
            raise ValueError(f"{SECRET}: {total}")
        return total + rng.laplace(0.0, float(self.scale), size)

    def _law(self, data):
        raise NotImplementedError("no exact law: audited on samples")

    def example_pair(self):
        return np.array(BELOW), np.array(ABOVE)


@dataclass(frozen=True, kw_only=True)
class RefusingSum(CappedSum):
    """``_sample`` never raises (cap = inf); the public ``sample`` (what users call) refuses data sets
    of three records. An audit through ``_sample`` would see two close Laplace sums."""

    name: ClassVar[str] = "refusing_sum_raises_test"
    cap: Any = math.inf

    def sample(self, data, size, rng):
        if len(np.asarray(data)) == 3:
            raise PermissionError("three records refused")
        return super().sample(data, size, rng)


def _exact_raise_bound(r_num: int, n_num: int, r_den: int, n_den: int, candidates: int, confidence=0.95) -> float:
    """ln(p_num_lo / p_den_hi) with one-sided exact bounds at α/(2m): scipy's two-sided interval at 1 − α/m."""
    level = 1 - (1 - confidence) / candidates
    lo = binomtest(r_num, n_num).proportion_ci(level, method="exact").low
    hi = binomtest(r_den, n_den).proportion_ci(level, method="exact").high
    return math.log(lo / hi)


def _text(result) -> str:
    return repr(result.to_dict()) + result.method + result.witness_description


# --------------------------------------------------------------------------- the runner


def test_a_raising_call_is_an_outcome_with_its_type_and_never_its_message():
    vec = _runner.Sampler(capped_sum, "capped", True)
    out, tally = vec.outcome(ABOVE, 50, np.random.default_rng(0), where="here", start=100)
    assert out is None and tally == _runner.Raises(1, 1, ("ValueError",), "here (samples 100..149)")
    out, tally = vec.outcome(BELOW, 50, np.random.default_rng(0), where="here")
    assert out.shape == (50,) and tally == _runner.Raises(1, 0)
    calls = iter(range(10))

    def per_call(d):
        if next(calls) % 3 == 0:
            raise KeyError(f"{SECRET}: {d}")
        return d

    out, tally = _runner.Sampler(per_call, "per call", False).outcome(7, 10, None, where="there", start=20)
    assert out.tolist() == [7] * 6
    assert (tally.calls, tally.raised, tally.types, tally.first) == (10, 4, ("KeyError",), "sample index 20 of there")
    assert SECRET not in repr(tally)
    probed = vec.probe(ABOVE, 30, np.random.default_rng(0), where="p")
    assert (probed.calls, probed.raised, probed.always) == (30, 30, True)
    assert (_runner.Raises(2, 1, ("A",), "x") + _runner.Raises(3, 3, ("B",), "y")) == _runner.Raises(
        5, 4, ("A", "B"), "x"
    )


@pytest.mark.parametrize("exc", [MemoryError(), MechanismError("harness"), KeyboardInterrupt()])
def test_what_is_not_the_mechanisms_outcome_still_propagates(exc):
    def fn(d, size, rng):
        raise exc

    with pytest.raises(type(exc)):
        _runner.Sampler(fn, "f", True).outcome(0, 5, np.random.default_rng(0), where="w")
    with pytest.raises(type(exc)):
        _runner.Sampler(lambda d: fn(d, 1, None), "f", False).outcome(0, 5, None, where="w")


def test_without_outcomes_the_runner_still_aborts():
    with pytest.raises(MechanismError, match="ValueError"):
        _runner.draw(
            _runner.Sampler(capped_sum, "capped", True),
            ABOVE,
            100,
            seed=0,
            phase=_runner.TRAINING,
            pair=0,
            side=0,
            chunk=50,
        )


def test_a_mechanism_that_never_raises_draws_and_counts_the_same_with_outcomes():
    """outcomes=True changes nothing for a mechanism that does not raise (the audit's bit-identity)."""
    sampler = _runner.Sampler(capped_sum, "capped", True)
    kw = dict(seed=3, phase=_runner.TRAINING, pair=0, side=1, chunk=300, max_elements=1_000)
    plain = _runner.draw(sampler, BELOW, 2_000, **kw)
    drawn = _runner.draw(sampler, BELOW, 2_000, outcomes=True, **kw)
    assert np.array_equal(plain, drawn.outputs) and drawn.requested == len(plain) == 1_200
    assert drawn.raises == _runner.Raises(4, 0)
    a, b = capped_sum(BELOW, 2_000, np.random.default_rng(1)), capped_sum([9.0], 2_000, np.random.default_rng(2))
    evs = [list(_events.propose_thresholds(a, b, max_events=4))]
    ckw = dict(seed=5, total=9_000, chunk=2_000, ref=((), "f"), workers=1)
    counts = _runner.count_events(sampler, [(BELOW, [9.0])], evs, **ckw)
    counted = _runner.count_events(sampler, [(BELOW, [9.0])], evs, outcomes=True, **ckw)
    assert all(np.array_equal(x, y) for px, py in zip(counts, counted.hits) for x, y in zip(px, py))
    assert counted.raises == [[_runner.Raises(5, 0), _runner.Raises(5, 0)]]
    assert counted.probes == [[_runner.Raises(), _runner.Raises()]]


def test_probes_and_raising_chunks_are_the_same_for_any_number_of_workers():
    pytest.importorskip("loky")

    def sometimes(d, size, rng):  # a vectorised call raises on the neighbour side with probability 0.4
        if d == 1 and rng.random() < 0.4:
            raise RuntimeError(f"{SECRET}: {d}")
        return d + rng.random(size)

    sampler = _runner.Sampler(sometimes, "sometimes", True)
    evs = [[Event(lambda x: np.asarray(x) >= 1.0, "output >= 1")]]
    kw = dict(seed=11, total=20_000, chunk=1_000, ref=((), "f"), outcomes=True, probes=[2_500])
    one = _runner.count_events(sampler, [(0, 1)], evs, workers=1, **kw)
    two = _runner.count_events(sampler, [(0, 1)], evs, workers=2, **kw)
    assert (one.raises, one.probes) == (two.raises, two.probes)
    assert all(np.array_equal(x, y) for px, py in zip(one.hits, two.hits) for x, y in zip(px, py))
    assert one.probes[0][0] == _runner.Raises(2_500, 0)
    assert one.probes[0][1].calls == 2_500 and 800 < one.probes[0][1].raised < 1_200
    assert 0 < one.raises[0][1].raised < 20 and one.raises[0][0] == _runner.Raises(20, 0)
    # a look counts the probe chunks in the same proportion as the certification chunks
    half = _runner.count_events(sampler, [(0, 1)], evs, workers=1, chunk_range=(0, 10), **kw)
    assert half.probes[0][1].calls == 1_000


# --------------------------------------------------------------------------- the audit


def test_the_reproducer_certifies_a_violation_from_the_raise_alone():
    """A callable answering on one input and raising on its neighbour: the audit returns, certifies
    ε > 1 from the event "one release raises" (10^4 size-1 calls a side, one candidate, exact
    Clopper-Pearson bounds) and never repeats the exception's message."""
    r = dpharness.audit(capped_sum, BELOW, ABOVE, epsilon=1, samples=200_000, seed=0)
    assert not r.passed and r.epsilon_lower_bound > 1
    assert r.extra["family"] == "raises" and r.extra["direction"] == "neighbor over data"
    assert r.counts == {"hits_data": 0, "hits_neighbor": 10_000, "n_data": 10_000, "n_neighbor": 10_000}
    assert r.events_tested == 1 and r.witness is not None and r.witness.event is None
    assert r.epsilon_lower_bound == pytest.approx(_exact_raise_bound(10_000, 10_000, 0, 10_000, 1), rel=1e-9)
    assert SECRET not in _text(r) and "10.5" not in r.method
    (note,) = r.extra["notes"]
    assert "raised (ValueError) on one input of pair 0" in note and "10000 of 10000 size-1 calls" in note
    assert "ValueError" in r.method and "one input" in r.method


def test_the_raise_event_takes_a_slot_and_competes_with_the_output_events():
    """A per-call mechanism whose neighbour side raises on half of its calls, and whose outputs also
    differ: the raise event takes one of the max_events slots (the Bonferroni count stays max_events)
    and the reported bound is the best over all of them."""
    gen = np.random.default_rng(4)

    def half_raising(d):
        if d == 1 and gen.random() < 0.5:
            raise ValueError(f"{SECRET}: {d}")
        return d + gen.laplace()

    r = audit(half_raising, 0, 1, epsilon=1.0, samples=20_000, seed=0, vectorized=False, workers=1, max_events=6)
    assert r.events_tested == 6 and "Bonferroni over 6 candidate(s)" in r.method
    assert r.extra["per_event_level"] == pytest.approx(0.05 / 12)
    assert r.extra["family"] == "raises"  # P(raise) 0.5 vs 0 beats any Laplace event at 18000 calls
    n = r.counts["n_neighbor"]
    assert n == r.counts["n_data"] == 18_000 and r.counts["hits_data"] == 0
    assert r.epsilon_lower_bound == pytest.approx(_exact_raise_bound(r.counts["hits_neighbor"], n, 0, n, 6), rel=1e-9)
    assert SECRET not in _text(r)


def test_a_catalog_mechanism_is_sampled_through_its_public_sample():
    """A subclass whose public ``sample`` refuses one input (``_sample`` never raises): the audit sees
    the refusal, so it audits what users call."""
    r = audit(RefusingSum(), np.array(BELOW), np.array(ABOVE), samples=20_000, seed=0)
    assert not r.passed and r.extra["family"] == "raises" and r.epsilon_lower_bound > 5
    assert "PermissionError" in r.witness_description and "three records" not in _text(r)


def test_a_catalog_mechanism_raising_on_one_side():
    m = CappedSum()
    r = dpharness.audit(m, *m.example_pair(), samples=200_000, seed=0)
    assert not r.passed and r.epsilon_lower_bound > 1 and r.extra["family"] == "raises"
    assert r.counts["hits_neighbor"] == r.counts["n_neighbor"] and r.counts["hits_data"] == 0
    assert SECRET not in _text(r)


@pytest.mark.parametrize("vectorized", [True, False])
def test_raising_on_every_call_on_both_inputs_is_still_an_error(vectorized):
    def always(d, size=None, rng=None):
        raise ValueError(f"{SECRET}: {d}")

    with pytest.raises(MechanismError, match="ValueError on every call on both inputs") as info:
        audit(always, 0, 1, epsilon=1.0, samples=1_000, vectorized=vectorized, workers=1)
    assert SECRET not in str(info.value) and "always" in str(info.value)


def test_a_vectorised_pair_whose_certification_calls_raised_certifies_nothing_from_its_outputs(monkeypatch):
    """Training saw no raise, so no raise event was chosen; some certification chunks then raised on
    the neighbour side. The outputs of the other chunks are not a count of releases (a raising call
    loses its chunk), so that pair's output events certify nothing — though without the exclusion
    the disjoint outputs [0, 1) and [1, 2) would certify a large ε — and the result says why."""
    monkeypatch.setattr(_audit, "_CHUNK", 20_000)

    def late(d, size, rng):
        x = rng.random(size)
        if d == 1 and x[0] < 0.3:
            raise RuntimeError(f"{SECRET}: {d}")
        return d + x

    r = audit(late, 0, 1, epsilon=1.0, samples=400_000, seed=0, workers=1)
    assert r.epsilon_lower_bound == 0.0 and r.passed and r.extra["family"] is None
    (note,) = r.extra["notes"]
    assert "raised (RuntimeError) on one input" in note and "0 of 18 certification calls" in note
    assert "certified nothing" in note and SECRET not in _text(r)


def test_a_sequential_audit_stops_at_the_first_look_on_a_raise():
    one, two = (
        audit(capped_sum, BELOW, ABOVE, epsilon=1.0, samples=2_000_000, seed=1, sequential=True, workers=w)
        for w in (1, 2)
    )
    assert not one.passed and one.extra["sequential"]["stopped"] == "a violation was certified"
    assert len(one.extra["sequential"]["looks"]) == 1 and one.counts["n_neighbor"] == 1_000
    assert one.epsilon_lower_bound == two.epsilon_lower_bound and one.counts == two.counts


def test_a_mechanism_that_never_raises_has_no_raise_event():
    r = audit(capped_sum, BELOW, [5.0, 4.0, 1.0], epsilon=1.0, samples=20_000, seed=0, workers=1)
    assert "notes" not in r.extra and "raises" not in r.method and r.extra["family"] != "raises"


@pytest.mark.statistical
def test_a_correct_mechanism_that_raises_passes_at_its_true_epsilon():
    """Per-call mechanism: raise w.p. 0.2 on D and 0.4 on D', else randomized response (ε = 1) on the
    bit D = 0 / D' = 1. Its outcomes (raise, 0, 1) have probabilities (0.2, 0.8p, 0.8(1-p)) and
    (0.4, 0.6(1-p), 0.6p) with p = e/(1+e); the true ε is the largest log ratio over sets of outcomes,
    computed exactly below (≈ 1.29, from the output 0). Audited against that exact ε it must pass.
    False-failure probability: <= 5% by construction (confidence 0.95); the power check (bound > 0.9
    at 18000 calls a side; the expected bound is ≈ 1.2) fails with probability < 1e-6."""
    p = math.e / (1 + math.e)
    law_d, law_n = np.array([0.2, 0.8 * p, 0.8 * (1 - p)]), np.array([0.4, 0.6 * (1 - p), 0.6 * p])
    sets = [np.array([(k >> i) & 1 for i in range(3)], bool) for k in range(1, 7)]
    true_eps = max(abs(math.log(law_d[s].sum() / law_n[s].sum())) for s in sets)
    gen = np.random.default_rng(2024)

    def mech(d):
        if gen.random() < (0.2 if d == 0 else 0.4):
            raise ArithmeticError("overflow")
        return d if gen.random() < p else 1 - d

    r = audit(mech, 0, 1, epsilon=true_eps, samples=20_000, seed=7, vectorized=False, workers=1)
    assert r.passed, (
        f"a correct raising mechanism was flagged: {r.epsilon_lower_bound} > {true_eps} "
        "(false-failure probability <= 5%)"
    )
    assert r.epsilon_lower_bound > 0.9, (
        f"weak bound {r.epsilon_lower_bound} for true ε {true_eps} (false-failure probability < 1e-6)"
    )
