"""A slow but working per-call function is never cut off by the hang detector (issue 36, item 3): the
per-chunk limit of :mod:`dpharness.auditors._runner` follows the measured cost of a call on the slowest
input (not the fast chunks that finished first), and a per-call sampler's chunks are sized from its sample
count so they stay short. The limits are scaled down here so that the old rule (20 x the slowest chunk
seen, at least 60 s) would have failed within seconds."""

from __future__ import annotations

import pytest

from dpharness.auditors import _audit, _runner, audit


def _fit():
    """fn(data): data + Laplace(1) noise, 10 ms a call on the data set 1 and instant on 0 (a fit that is
    fast on most data sets and slow where its optimiser diverges). Defined in a function so that the worker
    processes receive it by value."""
    import time

    import numpy as np

    def fit(d):
        if d == 1:
            time.sleep(0.01)
        return float(d) + float(np.random.laplace(0.0, 1.0))

    return fit


def test_the_chunk_limit_follows_the_measured_cost_of_the_slow_input(monkeypatch):
    # old rule at this scale: once the fast side's chunk finished, no chunk may take longer than 0.5 s;
    # the slow side's certification (150 calls of 10 ms in one chunk of up to 10 000) took 1.5 s
    monkeypatch.setattr(_runner, "_MIN_TIMEOUT", 0.5)
    monkeypatch.setattr(_runner, "_TIMEOUT_FACTOR", 2.0)
    r = audit(_fit(), 0, 1, epsilon=1, samples=300, seed=0, vectorized=False, workers=2, ideal_numerics=True)
    assert r.extra["workers"] == 2, r.extra  # certification ran on the pool, under the hang detector
    assert r.samples == 300 and r.passed  # x + Laplace(1) on 0 vs 1 is 1-DP (ideal numerics)


def test_the_limit_scales_with_the_slowest_pace_and_the_chunk():
    class Job:
        sampler = _runner.Sampler(lambda d: d, "f", False)
        min_timeout = 0.0

    tasks = _runner._Tasks(Job(), None, "t", b"", 2, "counting")
    assert tasks._limit(10) == _runner._UNKNOWN_TIMEOUT  # nothing measured yet
    _runner.note_pace(Job.sampler, 2.0, 4)  # 0.5 s a call
    tasks.slowest = 0.01  # a fast input's chunk finished first
    assert tasks._limit(100) == pytest.approx(_runner._TIMEOUT_FACTOR * 0.5 * 100)
    assert tasks._limit(1) == _runner._MIN_TIMEOUT


@pytest.mark.parametrize("total, chunk", [(1, 1), (150, 3), (2_700, 43), (64 * 10_000 + 1, 10_000)])
def test_per_call_chunks_depend_on_the_count_alone(total, chunk):
    assert _audit._loop_chunk(total) == chunk
