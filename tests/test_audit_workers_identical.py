"""The same seed gives the same AuditResult whatever the number of workers, in this process, in the
local pool of 2 and 4 workers, and on a dask LocalCluster (issue 20): the chunk plan and the seeds do
not depend on where chunks run, and only integer counts leave a chunk.

Deterministic (fixed seeds, exact equality). The pool is forced (it otherwise starts from 2·10^7
draws) and certification cut into several chunks a side, so the workers really share it; each pair's
training, proposal and ranking is a task on the workers.
The LocalCluster test is ``slow`` (process start-up) and skips without the dask extra."""

from __future__ import annotations

import numpy as np
import pytest

from dpharness import registry
from dpharness.auditors import _audit, audit


def grid_laplace(d, size, rng):
    """A user's vectorised callable: Laplace(1) noise on a 2^-16 grid."""
    return np.round((d + rng.laplace(0.0, 1.0, size)) * 2**16) / 2**16


def _cases():
    rappor = registry.catalog()["rappor"]()
    hist = registry.catalog()["noisy_histogram"]()
    return [
        ("rappor", rappor, *rappor.example_pair(), {}),
        ("noisy_histogram", hist, *hist.example_pair(), {}),
        ("grid_laplace", grid_laplace, 0.0, 1.0, {"epsilon": 1.0}),
    ]


def _fingerprint(r):
    extra = {k: v for k, v in r.extra.items() if k not in ("workers", "phases")}
    return (r.epsilon_lower_bound, r.passed, r.method, r.witness_description, r.counts, r.events_tested, repr(extra))


@pytest.fixture
def pooled(monkeypatch):
    monkeypatch.setattr(_audit, "_POOL_MIN_DRAWS", 0)  # certification in the pool at any size
    monkeypatch.setattr(_audit, "_CHUNK", 25_000)  # several chunks a side


def _run(case, **kw):
    _name, mech, a, b, extra = case
    return audit(mech, a, b, samples=120_000, seed=11, progress=False, **extra, **kw)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_one_two_and_four_workers_give_the_same_result(pooled, case):
    results = [_run(case, workers=w) for w in (1, 2, 4)]
    assert [r.extra["workers"] for r in results] == [1, 2, 4]
    # with workers, each pair's training, proposal and ranking ran as a task there too
    assert [r.extra["phases"]["pairs"]["on_workers"] for r in results] == [False, True, True]
    first = _fingerprint(results[0])
    for w, r in zip((2, 4), results[1:]):
        assert _fingerprint(r) == first, f"workers={w} differs from workers=1"


@pytest.mark.slow
def test_a_local_cluster_gives_the_same_result(pooled):
    pytest.importorskip("distributed")
    case = _cases()[0]
    assert _fingerprint(_run(case, workers=2, cluster="local")) == _fingerprint(_run(case, workers=1))
