"""Timing as an output channel (dpharness.auditors.timing): exact tests with an injected fake clock,
refusals, one statistical test with the real clock and a slow false-alarm test."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpharness as dp
from dpharness.auditors import stats
from dpharness.auditors.timing import TimingAuditResult, TimingEvent, _schedule, timing_audit
from dpharness.errors import MechanismError, ParameterError


class FakeClock:
    """Integer nanoseconds that only move when the mechanism under test says so."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


def _work(iterations: int) -> int:
    """Real work whose time grows with ``iterations`` (about 0.3 µs each on this machine)."""
    acc = 0
    for _ in range(iterations):
        acc += sum(range(40))
    return acc


# --------------------------------------------------------------------------- exact, with a fake clock


def test_input_dependent_duration_certifies_exact_bound():
    clock = FakeClock()

    def fn(d):
        clock.advance(100 if d == 0 else 5000)
        return 0

    r = timing_audit(fn, 0, 1, epsilon=1.0, samples=400, seed=3, clock=clock, warmup=5)
    # every certification call on data takes 100 ns, every one on neighbor 5000 ns: the two chosen
    # candidates (duration <= 100 on data, duration > 100 on neighbor) each have n of n hits against 0 of n
    n = r.certification_samples
    assert n == 200 and r.train_samples == 200
    expected = stats.epsilon_lower_bound(n, n, 0, n, confidence=0.95, candidates=2).epsilon
    assert r.epsilon_lower_bound == pytest.approx(expected, rel=1e-12)
    assert not r.passed and r.verdict == "VIOLATION"
    assert r.family == "duration" and "duration" in r.event_description
    assert {r.hits_data, r.hits_neighbor} == {0, n}
    assert r.median_ns_data == 100 and r.median_ns_neighbor == 5000
    assert r.timer_resolution_ns is None and "FakeClock" in r.timer
    assert "Clopper-Pearson" in r.method and "interleaved" in r.method


def test_constant_duration_and_equal_values_certify_nothing():
    clock = FakeClock()

    def fn(d):
        clock.advance(700)
        return 1

    r = timing_audit(fn, 0, 1, epsilon=0.0, samples=200, seed=0, clock=clock)
    assert r.epsilon_lower_bound == 0.0 and r.passed


def test_schedule_interleaves_each_batch_in_random_order():
    rng = np.random.default_rng(0)
    order = _schedule(23, 5, rng)
    assert len(order) == 46
    for start in range(0, 40, 10):  # four full batches of 5 + 5
        block = order[start : start + 10]
        assert (block == 0).sum() == 5 and (block == 1).sum() == 5
    assert (order[40:] == 0).sum() == 3 and (order[40:] == 1).sum() == 3  # the short last batch
    # not one side's chunk then the other's: the order changes side many times
    assert np.count_nonzero(np.diff(order)) > 10
    assert np.array_equal(order, _schedule(23, 5, np.random.default_rng(0)))
    assert not np.array_equal(order, _schedule(23, 5, np.random.default_rng(1)))


def test_calls_follow_the_schedule_and_warmup_is_discarded():
    calls: list = []
    clock = FakeClock()

    def fn(d):
        calls.append(d)
        clock.advance(10 if len(calls) <= 8 else 1)  # warm-up calls are slow; they must not be measured
        return 0

    r = timing_audit(fn, "a", "b", epsilon=0.0, samples=40, seed=5, batch=4, warmup=4, clock=clock)
    assert len(calls) == 2 * (4 + 40)
    for start in range(0, len(calls), 8):
        block = calls[start : start + 8]
        assert block.count("a") == 4 and block.count("b") == 4
    assert r.median_ns_data == 1 and r.median_ns_neighbor == 1 and r.passed


def test_drift_over_time_is_no_false_alarm():
    """The machine slows down steadily (duration = 100 + 3 × call index, whatever the input): with the
    calls interleaved, nothing is certified; measured side by side it would be (the control below)."""
    clock = FakeClock()
    count = [0]

    def fn(d):
        count[0] += 1
        clock.advance(100 + 3 * count[0])
        return 0

    for seed in range(5):
        count[0] = 0
        r = timing_audit(fn, 0, 1, epsilon=0.0, samples=400, seed=seed, clock=clock, warmup=0)
        assert r.passed, (seed, r.epsilon_lower_bound, r.event_description)
    # control: the same drift with all data calls before all neighbour calls separates the sides fully
    n = 200
    d_data, d_neighbor = 100 + 3 * np.arange(n), 100 + 3 * np.arange(n, 2 * n)
    t = int(np.median(np.concatenate([d_data, d_neighbor])))
    blocked = stats.epsilon_lower_bound(int((d_neighbor > t).sum()), n, int((d_data > t).sum()), n)
    assert blocked.epsilon > 1.0


def test_value_only_leak_is_found_by_the_value_families():
    clock = FakeClock()

    def fn(d):
        clock.advance(50)
        return d

    r = timing_audit(fn, 0, 1, epsilon=1.0, samples=200, seed=0, clock=clock)
    assert r.family == "value" and not r.passed
    assert r.epsilon_lower_bound == pytest.approx(
        stats.epsilon_lower_bound(100, 100, 0, 100, candidates=r_candidates(r)).epsilon, rel=1e-12
    )


def r_candidates(r: TimingAuditResult) -> int:
    return int(r.method.split(" (event, direction)")[0].rsplit(" ", 1)[-1])


def test_joint_event_finds_a_leak_neither_part_shows_alone():
    """The value is a fair bit on both inputs and the duration is slow half the time on both, but the
    call is slow exactly when the bit differs from the input: only (value, duration) together leak."""
    clock = FakeClock()
    rng = np.random.default_rng(11)

    def fn(d):
        v = int(rng.integers(2))
        clock.advance(100 if v == d else 5000)
        return v

    r = timing_audit(fn, 0, 1, epsilon=1.0, samples=2000, seed=1, clock=clock)
    assert r.family == "joint" and not r.passed and r.epsilon_lower_bound > 3.0
    assert "duration" in r.event_description and "output" in r.event_description


def test_timing_event_membership():
    vals = np.array([0, 1, 0, 1])
    durs = np.array([10, 10, 99, 99])
    e = TimingEvent(dp.Event.point(0), 50, slower=True)
    assert e.family == "joint" and e.contains(vals, durs).tolist() == [False, False, True, False]
    assert TimingEvent(None, 50, slower=False).contains(vals, durs).tolist() == [True, True, False, False]
    assert TimingEvent(dp.Event.point(1), None).family == "value"
    assert TimingEvent(None, 50).description == "duration > 50 ns"


def test_public_entry_result_and_real_clock_resolution():
    r = dp.timing_audit(lambda d: d * 0, 0, 1, epsilon=5.0, samples=100, seed=0, warmup=2)
    assert isinstance(r, TimingAuditResult)
    assert r.timer == "time.perf_counter_ns" and r.timer_resolution_ns is not None and r.timer_resolution_ns > 0
    d = r.to_dict()
    assert d["timer"] == "time.perf_counter_ns" and d["samples"] == 100
    assert "timing audit" in r._repr_html_()
    r2 = timing_audit(lambda d: 0, 0, 1, epsilon=5.0, samples=100, clock="monotonic", warmup=0)
    assert r2.timer == "time.monotonic_ns" and r2.timer_resolution_ns > 0


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(epsilon=-1.0), "epsilon=-1.0"),
        (dict(epsilon=1.0, delta=1.0), "delta=1.0"),
        (dict(epsilon=1.0, samples=10), "samples=10"),
        (dict(epsilon=1.0, samples=100.0), "samples=100.0"),
        (dict(epsilon=1.0, confidence=1.0), "confidence=1.0"),
        (dict(epsilon=1.0, train_fraction=0.0), "train_fraction=0.0"),
        (dict(epsilon=1.0, samples=50, train_fraction=0.9), "train_fraction=0.9"),
        (dict(epsilon=1.0, batch=0), "batch=0"),
        (dict(epsilon=1.0, warmup=-1), "warmup=-1"),
        (dict(epsilon=1.0, max_events=0), "max_events=0"),
        (dict(epsilon=1.0, seed=-2), "seed=-2"),
        (dict(epsilon=1.0, workers=2), "workers=2"),
        (dict(epsilon=1.0, clock="wallclock"), "clock='wallclock'"),
        (dict(epsilon=1.0, clock=3), "clock=3"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, name):
    with pytest.raises(ParameterError, match=name.replace("(", r"\(").replace(".", r"\.")):
        timing_audit(lambda d: 0, 0, 1, **kwargs)


def test_workers_message_says_why():
    with pytest.raises(ParameterError, match="not comparable"):
        timing_audit(lambda d: 0, 0, 1, epsilon=1.0, workers=4)
    timing_audit(lambda d: 0, 0, 1, epsilon=1.0, workers=1, samples=40, warmup=0)  # one worker is fine


def test_bad_fn_pair_and_clock_are_refused():
    with pytest.raises(ParameterError, match="fn=3"):
        timing_audit(3, 0, 1, epsilon=1.0)
    with pytest.raises(ParameterError, match="data and neighbor are equal"):
        timing_audit(lambda d: 0, [1, 2], [1, 2], epsilon=1.0)
    with pytest.raises(ParameterError, match="integer nanoseconds"):
        timing_audit(lambda d: 0, 0, 1, epsilon=1.0, samples=40, clock=lambda: 1.5)
    ticks = iter(range(10**6, 0, -1))
    with pytest.raises(ParameterError, match="went backwards"):
        timing_audit(lambda d: 0, 0, 1, epsilon=1.0, samples=40, clock=lambda: next(ticks))


def test_raising_fn_is_a_mechanism_error_naming_the_side():
    def fn(d):
        if d == 1:
            raise ValueError("boom")
        return 0

    with pytest.raises(MechanismError, match="ValueError on neighbor"):
        timing_audit(fn, 0, 1, epsilon=1.0, samples=40)


# --------------------------------------------------------------------------- real clock


@pytest.mark.statistical
def test_input_dependent_loop_is_flagged_under_load():
    """1 vs 50 iterations of real work (medians 0.5 µs vs 14.5 µs here) with identical outputs: only
    time leaks. 600 calls a side, seed 0, claim ε = 1. With the two duration populations 28× apart a
    threshold between them separates the sides except for calls a busy machine delays past it; the
    certified bound at full separation (300 of 300 against 0 of 300, Bonferroni over 16) is 3.82, and
    it stays above 1 unless more than about half of the fast calls are delayed past the threshold. False-failure rate: the
    Clopper-Pearson bound fails at most with probability 0.05 when the effect is there, and the margin
    (3.8 vs 1) makes it far smaller; not observed in 20 runs at load average 12-16 on 2 cores."""

    def fn(d):
        _work(1 if d == 0 else 50)
        return 0

    r = timing_audit(fn, 0, 1, epsilon=1.0, samples=600, seed=0, warmup=50)
    assert not r.passed and r.epsilon_lower_bound > 1.0, (
        f"timing leak not flagged (false-failure rate far below 0.05): bound {r.epsilon_lower_bound:.3g}, "
        f"event {r.event_description}, medians {r.median_ns_data:.0f} / {r.median_ns_neighbor:.0f} ns"
    )
    assert r.family in ("duration", "joint")


@pytest.mark.statistical
def test_value_dependent_loop_is_flagged_by_joint_events():
    """d + discrete Laplace(ε = 1) drawn by Bernoulli trials, a unit of work per trial: the outputs are
    exactly 1-DP and the two inputs' durations have the same law, but the duration tells |output − d|,
    so only joint events (output in S and duration <= t) leak. 2000 calls a side, seeds 0 / 7, claim
    ε = 1. benchmarks/results/timing.md flagged 20 of 20 such audits at load average 23 (bounds
    3.15–3.80); false-failure rate: well below 0.05 (the margin over the claim is > 2)."""
    p = math.exp(-1.0)
    rng = np.random.default_rng(7)

    def fn(d):
        while True:
            negative = rng.random() < 0.5
            g = 0
            while True:
                _work(5)
                if rng.random() >= p:
                    break
                g += 1
            if not (negative and g == 0):
                return d + (-g if negative else g)

    r = timing_audit(fn, 0, 1, epsilon=1.0, samples=2000, seed=0)
    assert not r.passed and r.family == "joint", (
        f"value-dependent loop not flagged (false-failure rate well below 0.05): bound {r.epsilon_lower_bound:.3g}, "
        f"family {r.family}, event {r.event_description}"
    )


@pytest.mark.slow
@pytest.mark.statistical
def test_constant_time_false_alarms_within_one_minus_confidence():
    """100 audits of constant-time samplers at tight claims, 400 calls a side each: seeds 0..49 a fair
    bit after 20 units of work whatever the input, at the strictest claim ε = 0 (any positive bound is
    a false alarm); seeds 50..99 the discrete Laplace of ε = 1 (count d plus the difference of two
    geometrics, each the leading successes of a fixed 64 Bernoulli(e^-1) trials: fixed work whatever
    the value) at its own ε = 1, so a false alarm is a bound above the value channel's ε (joint events
    in play). Each audit's false-alarm probability is at most 1 − confidence = 0.05 (module docstring);
    the test fails at 11 or more of 100, which a sound procedure reaches with probability
    P[Binomial(100, 0.05) >= 11] ≈ 0.011 (the stated false-failure rate; in fact lower, as
    Clopper-Pearson is conservative)."""
    p = math.exp(-1.0)
    alarms = []
    for seed in range(100):
        rng = np.random.default_rng(10_000 + seed)
        if seed < 50:

            def fn(d, rng=rng):
                _work(20)
                return int(rng.integers(2))

            claim = 0.0
        else:

            def fn(d, rng=rng):
                _work(20)
                g = np.cumprod(rng.random((2, 64)) < p, axis=1).sum(axis=1)
                return d + int(g[0]) - int(g[1])

            claim = 1.0
        r = timing_audit(fn, 0, 1, epsilon=claim, samples=400, seed=seed, warmup=20)
        if not r.passed:
            alarms.append((seed, r.epsilon_lower_bound, r.event_description))
    assert len(alarms) <= 10, f"{len(alarms)} false alarms of 100 (allowed 10; false-failure rate 0.011): {alarms}"
