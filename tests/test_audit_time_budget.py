"""``audit(..., time_budget=seconds)`` (issue 36, item 3): the samples a side are sized from the sampler's
measured pace so that the audit fits its budget, ``samples=`` stays a cap, and the result states the
samples used; a bad budget is a ParameterError naming the argument."""

from __future__ import annotations

import dataclasses
import math
import pickle
import time

import numpy as np
import pytest

from _audit_settings import audit_settings
import dpharness
from dpharness.auditors import _audit, audit
from dpharness.errors import ParameterError


def _slow_laplace(per_sample: float):
    """x + Laplace(1), ε = 1 on inputs 0 and 1, taking ``per_sample`` seconds a sample (a slow model)."""

    def mech(d, size, rng):
        time.sleep(per_sample * size)
        return float(d) + rng.laplace(0.0, 1.0, size)

    return mech


def _settings(fn, **given):
    """The auditor's settings of a one-worker audit of ``fn`` (tests/_audit_settings.py), with ``given``
    (epsilon, samples, time_budget) on top."""
    return audit_settings(fn, **given)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "10s", True])
def test_a_bad_time_budget_is_refused_naming_it(bad):
    with pytest.raises(ParameterError, match="time_budget"):
        audit(_slow_laplace(0), 0, 1, epsilon=1, time_budget=bad, samples=1_000)


def test_a_slow_sampler_gets_the_samples_that_fit_its_budget():
    """20 µs a sample, a 2 s budget, a cap of 10^6 a side: about 2.5·10^4 a side fit (half the budget for
    the draws, both sides); the audit states them and ends within a few times its budget (the machine
    may be loaded: only a gross overrun fails)."""
    t0 = time.perf_counter()
    r = audit(_slow_laplace(20e-6), 0, 1, epsilon=1, time_budget=2.0, samples=1_000_000, seed=0, workers=1)
    elapsed = time.perf_counter() - t0
    assert 2_000 <= r.samples < 200_000, r.method
    assert r.extra["time_budget"] == {"seconds": 2.0, "samples": r.samples, "cut_by_time_limit": False}
    assert f"{r.samples} samples a side" in r.method and "time budget 2 s" in r.method
    assert elapsed < 8.0, elapsed


def test_samples_stay_a_cap_under_a_large_budget():
    r = audit(_slow_laplace(0), 0, 1, epsilon=1, time_budget=600, samples=30_000, seed=0, workers=1)
    assert r.samples == 30_000 and r.extra["time_budget"]["samples"] == 30_000


def test_draws_count_every_pair_screened_and_two_certified():
    s = _settings(_slow_laplace(0), epsilon=1, samples=10_000_000)
    # one pair: its training and certification, both sides
    assert _audit._draws(10_000_000, 1, s) == 2 * 10_000_000
    # four pairs: 10^5 a side each to rank them, the rest of training and certification for two
    assert _audit._draws(10_000_000, 4, s) == 2 * (4 * 100_000 + 2 * (1_000_000 - 100_000 + 9_000_000))
    # below 20 000 training samples a side every pair is trained and certified in full
    assert _audit._draws(100_000, 4, s) == 2 * 4 * 100_000
    assert np.isfinite(_audit._draws(20, 3, s))


def test_cli_audit_time_budget_states_the_samples_it_used(capsys):
    import json

    from dpharness.cli import main

    code = main(
        ["audit", "randomized_response", "--time-budget", "3", "--samples", "40000", "--workers", "1", "--json"]
    )
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["samples"] <= 40_000
    assert f"time budget 3 s: {payload['samples']} samples a side" in payload["method"]


def test_cli_audit_budget_too_small_is_a_usage_error_not_a_traceback(capsys):
    """A --time-budget that fits not even the minimum certification is the caller's input: one line on
    stderr naming time_budget, exit 2 (it raised AuditBudgetTooSmall through main: a traceback, exit 1)."""
    from dpharness.cli import main

    code = main(["audit", "randomized_response", "--time-budget", "0.001", "--workers", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "time_budget=0.001" in err and "Traceback" not in err


@pytest.mark.statistical
def test_pairs_are_ranked_on_a_screen_and_one_is_trained_in_full_and_certified():
    """1.2·10^6 samples a side over four searched pairs of x + Laplace(1) (every pair's ε is 1 for the
    ideal mechanism, audited with ideal_numerics: the doubles' structure leaks far more): the pairs
    are ranked on 10^5 training samples a side each, one is trained on all 1.2·10^5 and certified alone
    (about one pair's sampling, not four). The bound is at most the true ε = 1 except with probability
    5% (the false-failure rate of this test, fixed by the seed) and above 0.9 (0.99 at this seed)."""

    def lap(d, size, rng):
        return float(d) + rng.laplace(0.0, 1.0, size)

    from dpharness.auditors.pairsearch import Scalars

    r = audit(
        lap, inputs=Scalars(0, 10, sensitivity=1), epsilon=1, samples=1_200_000, seed=0, workers=1, ideal_numerics=True
    )
    assert len(r.extra["pairs"]) == 4 and len(r.extra["certified_pairs"]) == 1
    assert r.extra["train_samples"] == 120_000 and "pairs ranked on 100000 training samples a side" in r.method
    assert 0.9 < r.epsilon_lower_bound <= 1.0, r.method


def test_a_budget_too_small_for_the_minimum_certification_certifies_nothing_and_names_the_budget():
    """5 ms a sample: 2 000 samples a side (the minimum) take about 20 s of draws, far above a 0.5 s
    budget: nothing is certified, and the error names the argument and the budget that would fit."""
    from dpharness.errors import AuditBudgetTooSmall

    t0 = time.perf_counter()
    with pytest.raises(AuditBudgetTooSmall, match=r"time_budget=0.5: the minimum certification") as exc:
        audit(_slow_laplace(5e-3), 0, 1, epsilon=1, time_budget=0.5, samples=1_000_000, seed=0, workers=1)
    assert time.perf_counter() - t0 < 5.0  # refused after the pace probe, not after drawing
    assert exc.value.samples == 2_000 and exc.value.needed >= 20.0
    assert f"time_budget={exc.value.needed:g} or more" in str(exc.value)
    import pickle

    again = pickle.loads(pickle.dumps(exc.value))  # crosses from a gate worker with its fields
    assert (again.needed, again.samples, str(again)) == (exc.value.needed, exc.value.samples, str(exc.value))


def test_the_minimum_certification_grows_with_a_claim_too_large_to_refute():
    """At 2 000 samples a side the certifier's ceiling is about 5.6 (δ = 0, 20 candidates): a claim of
    ε = 8 needs more samples before any violation of it could be certified."""
    s = _settings(_slow_laplace(0), epsilon=8, samples=10_000_000)
    from dpharness.auditors import stats

    n = _audit._minimum_samples(s)
    level = stats.bonferroni_level(0.95, 20)
    assert n > 2_000 and stats.certifiable_range(_audit._split(n, 0.1)[1], level).ceiling > 8
    assert stats.certifiable_range(_audit._split(n // 2, 0.1)[1], level).ceiling <= 8
    assert _audit._minimum_samples(dataclasses.replace(s, epsilon=1)) == 2_000


def test_a_fixed_cost_per_call_does_not_shrink_the_samples():
    """A vectorised sampler costing 20 ms a call plus nothing a sample: its small calls (the pair search's,
    a pause of a loaded machine) recorded a pace of ms a sample, but the budget is sized from calls large
    enough that the fixed cost no longer dominates, as the audit's chunks pay it: the cap fits."""
    from dpharness.auditors import _runner

    def fixed_cost(d, size, rng):
        time.sleep(0.02)
        return float(d) + rng.laplace(0.0, 1.0, size)

    sampler = _runner.Sampler(fixed_cost, "fixed_cost", True)
    _runner.note_pace(sampler, 0.02, 1)  # a one-sample call of the search: 20 ms a sample
    s = _settings(fixed_cost, epsilon=1, samples=200_000, time_budget=30.0)
    sized, words = _audit._sized(sampler, [(0.0, 1.0)], s, time.perf_counter())
    assert sized.samples == 200_000, words


def test_a_fixed_cost_above_the_probe_time_does_not_shrink_the_samples():
    """The same with 0.3 s a call (above the 0.2 s a timed call must reach: the exact exponential
    mechanism's tables cost that on a loaded machine): calls grow until the samples, not the fixed cost,
    make most of their time, and the cap fits the budget."""
    from dpharness.auditors import _runner

    def fixed_cost(d, size, rng):
        time.sleep(0.3)
        return float(d) + rng.laplace(0.0, 1.0, size)

    s = _settings(fixed_cost, epsilon=1, samples=200_000, time_budget=60.0)
    sized, words = _audit._sized(
        _runner.Sampler(fixed_cost, "fixed_cost_2", True), [(0.0, 1.0)], s, time.perf_counter()
    )
    assert sized.samples == 200_000, words


def _paced(monkeypatch, clock: float, idle: float) -> None:
    """The pace probe's calls take ``clock`` seconds a sample by the clock, of which ``idle`` computing
    (the rest: waiting for a core on a loaded machine)."""
    monkeypatch.setattr(_audit, "_timed", lambda sampler, data, n, rng: (n * clock, n * idle))


def test_a_loaded_machine_runs_the_same_audit_only_longer(monkeypatch):
    """The budget is spent in seconds as on an idle machine: a sampler at 1 µs a sample computing, whose
    calls take 4 µs by the clock because three quarters of the time it waited for a core (7 busy processes
    on 2 cores), gets the samples it gets on an idle machine, and the words say the audit takes longer by
    the clock. A sampler that waits (sleeps, reads) at 4 µs a sample by the clock gets fewer."""
    s = _settings(_slow_laplace(0), epsilon=1, samples=10**9, time_budget=20.0)
    sampler = _audit._runner.Sampler(_slow_laplace(0), "paced", True)
    _paced(monkeypatch, 1e-6, 1e-6)
    idle, _ = _audit._sized(sampler, [(0.0, 1.0)], s, time.perf_counter())
    _paced(monkeypatch, 4e-6, 1e-6)
    loaded, words = _audit._sized(sampler, [(0.0, 1.0)], s, time.perf_counter())
    assert 10**6 < idle.samples < 10**9
    assert abs(loaded.samples - idle.samples) <= idle.samples // 50, (loaded.samples, idle.samples)
    assert "0.25 of a core" in words and "4 times longer by the clock" in words
    _paced(monkeypatch, 4e-6, 4e-6)
    waiting, _ = _audit._sized(sampler, [(0.0, 1.0)], s, time.perf_counter())
    assert waiting.samples < idle.samples // 3


def test_the_enclosing_time_limit_caps_the_samples_by_the_clock(monkeypatch):
    """The gate's --timeout is an alarm on the audit's process: on a loaded machine the draws of a budget
    sized as on an idle one must still end before it, so the clock's pace and the alarm's time left cap
    the samples, the words say so, and a limit too short for the minimum certification refuses it naming
    --timeout."""
    import signal

    from dpharness.errors import AuditBudgetTooSmall

    s = _settings(_slow_laplace(0), epsilon=1, samples=10**9, time_budget=100.0)
    sampler = _audit._runner.Sampler(_slow_laplace(0), "paced_limit", True)
    _paced(monkeypatch, 4e-6, 1e-6)
    free, _ = _audit._sized(sampler, [(0.0, 1.0)], s, time.perf_counter())
    old = signal.signal(signal.SIGALRM, lambda *a: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 25.0)
        capped, words = _audit._sized(sampler, [(0.0, 1.0)], s, time.perf_counter())
        assert capped.samples < free.samples // 3 and "the enclosing time limit" in words, words
        assert capped.cut_by_time_limit and not free.cut_by_time_limit
        signal.setitimer(signal.ITIMER_REAL, 5.5)
        _paced(monkeypatch, 4e-3, 1e-3)
        with pytest.raises(AuditBudgetTooSmall, match="raise --timeout") as caught:
            _audit._sized(sampler, [(0.0, 1.0)], s, time.perf_counter())
        assert caught.value.clock_limited  # the budget would fit it: the gate's line names --timeout, not a budget
        again = pickle.loads(pickle.dumps(caught.value))  # from a worker process: the field travels
        assert again.clock_limited and again.needed == caught.value.needed
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_an_audit_cut_by_the_time_limit_is_partial_in_the_gate():
    """An audit that drew fewer samples than its budget fits, because the clock's limit would have ended it
    first, checked less than asked: the gate's rule makes it PARTIAL (a pass does not count) and says to
    raise --timeout; an uncut one, or one that certified a violation, is not made PARTIAL by it."""
    import types

    from dpharness.pipeline import _cut

    def result(cut: bool, passed: bool = True):
        budget = {"seconds": 120.0, "samples": 5_000, "cut_by_time_limit": cut}
        return types.SimpleNamespace(extra={"time_budget": budget}, passed=passed, samples=5_000)

    why = _cut(result(True), 600.0)
    assert why is not None and "raise --timeout" in why and "600 s" in why and "5000 samples a side" in why
    assert _cut(result(False), 600.0) is None and _cut(result(True, passed=False), 600.0) is None


def test_the_cpu_pace_is_the_one_of_the_largest_calls():
    """The CPU pace that decides the pool is the one measured on the largest calls (the size of the
    certification chunks it predicts), the slowest of those: a sampler slower a sample on training's
    calls of 2^17 than on certification's of 2^20 (the catalog Laplace) is not judged by the former, and
    a slower input at the largest size still counts."""
    from dpharness.auditors import _runner

    sampler = _runner.Sampler(lambda d, size, rng: rng.random(size), "pace", True)
    assert _runner.expected_cpu_seconds(sampler, 10) is None
    _runner.note_pace(sampler, 1.0, 1 << 20, cpu=0.02)  # the probe: one call of 2^20, 19 ns a sample
    _runner.note_pace(sampler, 1.0, 1 << 22, cpu=0.12, per_call=1 << 17)  # training's calls: 29 ns a sample
    assert _runner.expected_cpu_seconds(sampler, 10**8) == pytest.approx(0.02 / (1 << 20) * 10**8)
    _runner.note_pace(sampler, 1.0, 1 << 21, cpu=0.06, per_call=1 << 20)  # the other input: 29 ns a sample
    assert _runner.expected_cpu_seconds(sampler, 10**8) == pytest.approx(0.06 / (1 << 21) * 10**8)
    _runner.note_pace(sampler, 1.0, 1 << 23, cpu=0.08, per_call=1 << 23)  # a larger call: its pace replaces
    assert _runner.expected_cpu_seconds(sampler, 10**8) == pytest.approx(0.08 / (1 << 23) * 10**8)
    assert _runner.expected_seconds(sampler, 1) == pytest.approx(1.0 / (1 << 20))  # the clock keeps the slowest


def test_a_fast_sampler_trains_in_this_process_when_only_certification_is_long(monkeypatch):
    """A vectorised sampler's training of one pair (one task: nothing to spread) goes to the pool by its
    own draws, not the whole audit's: with the pool's thresholds between the two, the pairs stage runs
    here and certification on the pool, and the result is the one of a single worker."""
    kw = dict(epsilon=1.0, samples=400_000, seed=3)

    def lap(d, size, rng):
        return float(d) + rng.laplace(0.0, 1.0, size)

    # training draws 2 x 40 000, certification 2 x 360 000: the threshold between them
    monkeypatch.setattr(_audit, "_POOL_MIN_DRAWS", 100_001)
    monkeypatch.setattr(_audit, "_POOL_MIN_SECONDS", math.inf)
    r2 = audit(lap, 0.0, 1.0, workers=2, **kw)
    r1 = audit(lap, 0.0, 1.0, workers=1, **kw)
    assert not r2.extra["phases"]["pairs"]["on_workers"]
    assert r2.extra["phases"]["certification"]["on_workers"]
    assert (r2.epsilon_lower_bound, r2.counts) == (r1.epsilon_lower_bound, r1.counts)


def test_the_pair_search_of_a_slow_callable_takes_a_share_of_its_budget():
    """50 µs a sample over an input space, a 4 s budget, a cap of 10^6 a side: the pair search's usual
    10^5 samples would take 5 s, more than the budget; it is given the samples that fit a quarter of it
    (about 2·10^4; a loaded machine may make the measured pace slower, never faster: fewer), says so, and
    draws no more than that (a slow model fit once spent 211 s of a 120 s budget choosing pairs)."""
    import re

    from dpharness.auditors.pairsearch import MIN_BUDGET, Scalars

    r = audit(
        _slow_laplace(50e-6),
        inputs=Scalars(0, 1, sensitivity=1),
        epsilon=1,
        time_budget=4,
        samples=1_000_000,
        seed=0,
        workers=1,
    )
    note = next(n for n in r.extra["notes"] if "the pair search was given" in n)
    assert note in r.method
    given = int(re.search(r"was given ([\d,]+) samples", note).group(1).replace(",", ""))
    assert MIN_BUDGET <= given <= 20_000 and "rather than 100,000" in note, note
    drawn = int(re.search(r"on (\d+) samples of the callable", r.method).group(1))
    assert drawn <= given, r.method


def test_a_fast_callable_keeps_its_full_pair_search_under_a_budget():
    from dpharness.auditors.pairsearch import Scalars

    r = audit(
        _slow_laplace(0),
        inputs=Scalars(0, 1, sensitivity=1),
        epsilon=1,
        time_budget=60,
        samples=200_000,
        seed=0,
        workers=1,
    )
    assert not any("the pair search was given" in n for n in r.extra.get("notes", [])), r.extra.get("notes")


def test_a_budget_cut_pair_search_is_stated_and_reproduced():
    """The search a time budget cut is stated (``extra["search_samples"]``) and, differing from the
    default at the samples used, kept in ``extra["reproduce"]``: an audit without the budget, at those
    samples and that search size, chooses the same pairs and certifies the same bound (without it, the
    search at the samples' default size may choose other pairs)."""
    from dpharness.auditors.pairsearch import Scalars

    kw = dict(inputs=Scalars(0, 1, sensitivity=1), epsilon=1, seed=0, workers=1)
    budgeted = audit(_slow_laplace(50e-6), time_budget=4, samples=1_000_000, **kw)
    cut = budgeted.extra["search_samples"]
    assert budgeted.extra["reproduce"] == {"search_samples": cut} and cut < 100_000
    again = audit(_slow_laplace(0), samples=budgeted.samples, search_samples=cut, **kw)
    assert again.extra["pairs"] == budgeted.extra["pairs"]
    assert (again.epsilon_lower_bound, again.counts) == (budgeted.epsilon_lower_bound, budgeted.counts)
    assert again.extra["reproduce"] == {"search_samples": cut}
    default = audit(_slow_laplace(0), samples=budgeted.samples, **kw)
    assert "reproduce" not in default.extra and default.extra["search_samples"] != cut


@pytest.mark.parametrize(
    "given, message",
    [
        (dict(data=0.0, neighbor=1.0, search_samples=5_000), "search_samples=5000: the pair is given"),
        (dict(inputs="space", search_samples=500), "search_samples >= 2000"),
        (dict(data=0.0, neighbor=1.0, search_samples=10), "search_samples=10"),
    ],
)
def test_a_search_size_that_cannot_apply_is_refused_naming_it(given, message):
    from dpharness.auditors.pairsearch import Scalars

    if given.get("inputs") == "space":
        given = {**given, "inputs": Scalars(0, 1, sensitivity=1)}
    with pytest.raises(ParameterError, match=message):
        audit(_slow_laplace(0), epsilon=1, samples=2_000, seed=0, workers=1, **given)


def test_cli_audit_accepts_the_options_its_reproduce_line_prints(capsys):
    """``dpharness audit`` takes ``--search-samples`` and ``--every-round``; its reproduce line prints the
    search size when it was given (it differs from the default)."""
    from dpharness.cli import main

    code = main(["audit", "laplace", "--samples", "4000", "--search-samples", "3000", "--workers", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "--samples 4000 --seed 0 --search-samples 3000" in out, out
    assert main(["audit", "laplace", "--samples", "4000", "--every-round", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "--every-round" not in out and "--search-samples" not in out, out  # laplace has no rounds


def test_a_budget_too_small_for_the_clock_names_the_timeout_not_a_budget(monkeypatch):
    """When the minimum certification fits the time budget as on an idle machine but not the clock time
    the gate's --timeout leaves on a loaded machine, the gate's line says to raise --timeout (it said the
    check "needs a time budget of about 1 s, above the 4 s given"); a budget too small names the budget."""
    from dpharness import pipeline
    from dpharness.errors import AuditBudgetTooSmall

    for clock_limited, says, never in (
        (True, "not the clock time --timeout leaves", "--time-budget"),
        (False, "needs a time budget of about 9 s here, above the 4 s given (--time-budget 9)", "--timeout"),
    ):

        def too_small(*args, clock_limited=clock_limited, **kwargs):
            raise AuditBudgetTooSmall("too small", needed=9.0, samples=2000, clock_limited=clock_limited)

        monkeypatch.setattr(pipeline, "run_audit", too_small)
        c = dpharness.check("laplace", samples=20_000, time_budget=4.0)
        assert says in c.audit_partial and never not in c.audit_partial, c.audit_partial
