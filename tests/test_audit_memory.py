"""Memory does not depend on ``--samples`` (issue 17: ``audit laplace --samples 1e13`` grew to 17 GB).

The chunk plan is computed on demand (:class:`~dpharness.auditors._runner.ChunkPlan`: the same
(start, size) tuples as the list it replaces), the certification tasks are generated rather than
listed, at most a few per worker are submitted to a pool at a time, and the tallies of raising
calls are folded as chunks finish in any order into what adding them in chunk order gives. Fast,
deterministic unit tests."""

from __future__ import annotations

import pickle
import tracemalloc
from concurrent.futures import Future

import pytest

from dpharness.auditors import _runner
from dpharness.cli import main
from dpharness.core import Event
from dpharness.errors import ParameterError


def _listed(total: int, chunk: int) -> list[tuple[int, int]]:
    """The plan as the list the harness used to build."""
    return [(s, min(chunk, total - s)) for s in range(0, total, chunk)]


@pytest.mark.parametrize(
    "total, chunk",
    [(0, 7), (1, 7), (7, 7), (8, 7), (20, 7), (65_536 * 3 + 1, 65_536), (1_000_000, 1_000_000), (999_999, 1_000)],
)
def test_the_lazy_plan_is_the_listed_plan(total, chunk):
    plan = _runner.chunk_plan(total, chunk)
    expected = _listed(total, chunk)
    assert len(plan) == len(expected)
    assert list(plan) == expected
    assert [plan[c] for c in range(len(plan))] == expected
    assert plan[-1:] == expected[-1:] and plan[:3] == expected[:3]
    assert [plan.samples(k) for k in range(len(plan) + 2)] == [
        sum(s for _, s in expected[:k]) for k in range(len(plan) + 2)
    ]
    with pytest.raises(IndexError):
        plan[len(plan)]


def test_a_plan_of_any_size_is_two_integers():
    plan = _runner.ChunkPlan(10**13, 65_536)  # (the old list would hold 1.5·10^8 tuples, about 17 GB)
    assert _runner.chunk_plan(10**13, 65_536) == plan
    assert len(plan) == 152_587_891
    assert plan[len(plan) - 1] == (152_587_890 * 65_536, 10**13 - 152_587_890 * 65_536)
    assert len(pickle.dumps(plan)) < 200  # shipped to every worker with the job
    with pytest.raises(ParameterError, match="chunk=0"):
        _runner.chunk_plan(10, 0)


def _laplace(data, size, rng):
    return data + rng.laplace(0.0, 1.0, size)


def test_counting_a_few_chunks_of_a_huge_plan_holds_no_list_of_it():
    """A look at two chunks of a 10^5-chunk plan allocates far less than a list of 10^5 tuples (~10 MB)."""
    sampler = _runner.Sampler(_laplace, "laplace")
    events = [[Event.threshold(0.5)]]
    tracemalloc.start()
    try:
        counts = _runner.count_events(
            sampler,
            [(0.0, 1.0)],
            events,
            seed=0,
            total=10**8,
            chunk=1_000,
            ref=((), "f"),
            workers=1,
            chunk_range=(0, 2),
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"peak {peak / 1e6:.1f} MB"
    assert counts[0][0].sum() + counts[0][1].sum() > 0


class _Backend:
    """A pool stand-in: runs a task when submitted, hands results back newest first (the reverse of
    chunk order) and records how many tasks were in flight at most."""

    def __init__(self):
        self.in_flight = self.most = 0

    def submit(self, fn, *args):
        fut = Future()
        fut.set_result(fn(*args))
        fut.number = getattr(self, "count", 0)
        self.count = fut.number + 1
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        return fut

    def wait_first(self, futures, timeout):
        return [max(futures, key=lambda f: f.number)]

    def result(self, fut, where):
        self.in_flight -= 1
        return fut.result()

    def cancel(self, futures):
        pass

    def abort(self):
        pass

    def close(self):
        pass


def _raising(data, size, rng):
    x = rng.random(size)
    if x[0] < 0.3:
        raise ValueError("drawn a low first value")
    return data + x


def test_a_pool_gets_a_few_tasks_per_worker_at_a_time_and_tallies_do_not_depend_on_order(monkeypatch):
    sampler = _runner.Sampler(_raising, "raising")
    events = [[Event.threshold(0.5)]]
    kwargs = dict(seed=3, total=400, chunk=2, ref=((), "f"), outcomes=True)
    serial = _runner.count_events(sampler, [(0.0, 1.0)], events, workers=1, **kwargs)
    backend = _Backend()
    monkeypatch.setattr(_runner, "_LocalPool", lambda workers: backend)
    monkeypatch.setattr(_runner, "_loky_installed", lambda: True)
    pooled = _runner.count_events(sampler, [(0.0, 1.0)], events, workers=2, **kwargs)
    assert backend.count == 400  # every chunk of both sides ran
    assert backend.most <= max(8, _runner._WINDOW_PER_WORKER * 2)
    assert [list(h) for h in pooled.hits[0]] == [list(h) for h in serial.hits[0]]
    assert pooled.raises == serial.raises  # calls, raised, types and where the first raise happened
    assert serial.raises[0][0].raised > 0 and serial.raises[0][0].first


@pytest.mark.parametrize("text, samples", [("1e12", 10**12), ("2.5e6", 2_500_000), ("1000", 1000)])
def test_samples_in_scientific_notation(text, samples, monkeypatch):
    from dpharness import cli

    seen = {}
    monkeypatch.setitem(cli._COMMANDS, "audit", lambda args: seen.setdefault("samples", args.samples) and 0)
    assert main(["audit", "laplace", "--samples", text]) == 0
    assert seen["samples"] == samples and isinstance(seen["samples"], int)


@pytest.mark.parametrize("text", ["1.5", "1e-3", "0", "-1e3", "inf", "nan", "x"])
def test_samples_that_are_not_a_positive_whole_number_are_refused(text, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit", "laplace", "--samples", text])
    assert exc.value.code == 2
    assert "--samples" in capsys.readouterr().err
