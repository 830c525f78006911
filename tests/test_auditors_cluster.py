"""Where audit chunks run: this process, the local worker pool (loky) and a dask cluster.

Deterministic tests (fixed seeds, exact equality of integer counts); the dask ``LocalCluster`` and
torch tests are ``slow`` (process start-up) and skip when the package is missing."""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import types

import numpy as np
import pytest

from dpharness.auditors import _audit, _cluster, _runner
from dpharness.auditors import events as _events
from dpharness.errors import AuditTimeLimit, MechanismError, ParameterError, UnsupportedError


def grid_laplace(d, size, rng):
    return np.round((d + rng.laplace(0, 1, size)) * 2**20) / 2**20


def _events_for(sampler_fn):
    a = sampler_fn(0.0, 4_000, np.random.default_rng(1))
    b = sampler_fn(1.0, 4_000, np.random.default_rng(2))
    return [list(_events.propose_thresholds(a, b, max_events=4)) + list(_events.propose_intervals(a, b, max_events=2))]


COUNT_KW = dict(seed=7, total=120_000, chunk=20_000, ref=((), "f"))


def _count(workers, cluster=None, fn=grid_laplace, evs=None):
    sampler = _runner.Sampler(lambda d, n, rng, _f=fn: _f(d, n, rng), "grid laplace", True)
    return _runner.count_events(
        sampler, [(0.0, 1.0)], evs or _events_for(fn), workers=workers, cluster=cluster, **COUNT_KW
    )


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for pa, pb in zip(a, b) for x, y in zip(pa, pb))


# --------------------------------------------------------------------------- the local pool


def test_pool_gives_the_serial_counts_and_the_seed_matters():
    pytest.importorskip("loky")
    evs = _events_for(grid_laplace)
    serial = _count(1, evs=evs)
    pooled = _count(2, evs=evs)
    assert _same(serial, pooled), (serial, pooled)
    assert int(serial[0][0].sum()) > 0
    other = _runner.count_events(
        _runner.Sampler(grid_laplace, "g", True), [(0.0, 1.0)], evs, workers=2, **{**COUNT_KW, "seed": 8}
    )
    assert not _same(serial, other)


def _pid_and_draw(d):
    time.sleep(0.001)  # long enough that both workers take chunks
    return (os.getpid(), d + _RND.random())


_RND = random.Random(0)  # a module-level generator with a fixed seed: every worker imports the same state


def test_per_call_chunks_spread_over_workers_with_their_own_reproducible_streams():
    pytest.importorskip("loky")
    rnd = random.Random(0)  # a closure generator: each worker gets a copy of one state
    fixed = np.random.default_rng(0)  # a default-argument generator: likewise

    def one(d, _g=fixed):
        return [d + rnd.random(), _g.random(), np.random.random(), random.random()]

    sampler = _runner.Sampler(one, "one", vectorized=False)
    kw = dict(seed=3, phase=_runner.TRAINING, pair=0, side=0, chunk=50)
    a = _runner.draw(sampler, 0, 400, workers=2, **kw)
    b = _runner.draw(sampler, 0, 400, workers=2, **kw)
    c = _runner.draw(sampler, 0, 400, workers=2, **{**kw, "seed": 4})
    assert a.shape == (400, 4)
    assert np.array_equal(a, b), "same seed, same outputs whatever worker ran which chunk"
    assert not np.array_equal(a, c)
    chunks = a.reshape(8, 50, 4)
    for col in range(4):  # no two chunks repeat a stream, in any of the four sources of randomness
        firsts = chunks[:, 0, col]
        assert len(set(firsts.tolist())) == 8, (col, firsts)

    spread = _runner.Sampler(_pid_and_draw, "pid", vectorized=False)
    out = _runner.draw(spread, 0, 800, workers=2, **kw)
    pids = {o[0] for o in out}
    # chunks run in the pool's workers, never in this process (how many of the two workers get chunks
    # depends on their start-up: under load one may take them all)
    assert os.getpid() not in pids and 1 <= len(pids) <= 2, pids
    values = np.array([o[1] for o in out]).reshape(16, 50)
    assert len(set(values[:, 0].tolist())) == 16  # the fixed-seed module generator is reseeded per chunk too


_HELPERS = types.ModuleType("_helpers")  # another module holding a generator seeded once, as a library may
_HELPERS.RNG = np.random.default_rng(0)


def _draw_through_a_module(d):
    time.sleep(0.001)  # long enough that both workers take chunks
    return d + _HELPERS.RNG.random()


def test_a_generator_held_by_another_module_gets_its_own_stream_per_chunk():
    """``helpers.RNG``: the walk follows the modules a function names (it skips modules otherwise), so each
    chunk reseeds that generator too; before, every worker drew the copy of one state it was sent, and
    the chunks repeated each other's draws (not independent samples: an unsound bound)."""
    assert [id(g) for g in _runner._hidden_rngs(_draw_through_a_module)] == [id(_HELPERS.RNG)]
    pytest.importorskip("loky")
    sampler = _runner.Sampler(_draw_through_a_module, "module", vectorized=False)
    kw = dict(seed=3, phase=_runner.TRAINING, pair=0, side=0, chunk=50)
    values = np.asarray(_runner.draw(sampler, 0, 800, workers=2, **kw), dtype=float).reshape(16, 50)
    assert len(set(values[:, 0].tolist())) == 16, values[:, 0]


class _Slotted:
    __slots__ = ("gen",)  # no __dict__: the walk cannot see what it holds (as compiled code would hide it)


_HIDDEN = _Slotted()
_HIDDEN.gen = np.random.default_rng(0)  # seeded once at import: every worker process starts from this state


def _draw_through_slots(d):
    time.sleep(0.001)  # long enough that both workers take chunks
    return d + _HIDDEN.gen.random()


def test_a_generator_the_walk_cannot_reach_is_caught_repeating_across_workers():
    """A generator the reseeding cannot reach (here behind __slots__; in a library, in compiled code) is
    copied into every worker from one state, so the workers' chunks repeat each other's draws: the audit
    refuses, naming two chunks with the same outputs and the fix, rather than count dependent samples as
    independent. In one process (workers=1) the state advances and the draws are used."""
    assert _runner._hidden_rngs(_draw_through_slots) == []
    pytest.importorskip("loky")
    sampler = _runner.Sampler(_draw_through_slots, "slots", vectorized=False)
    kw = dict(seed=3, phase=_runner.TRAINING, pair=0, side=0, chunk=50)
    with pytest.raises(MechanismError, match="repeats across worker processes"):
        _runner.draw(sampler, 0, 800, workers=2, **kw)
    values = np.asarray(_runner.draw(sampler, 0, 200, workers=1, **kw), dtype=float)
    assert len(set(values.tolist())) == 200


def test_outputs_fingerprint_needs_128_bits_of_variety():
    """Skewed or constant chunks are not compared (two independent chunks could agree by chance); a chunk
    of 50 distinct floats (282 bits) is."""
    fp = _runner.outputs_fingerprint
    assert fp(np.zeros(1000)) is None
    assert fp(np.r_[np.zeros(999), 1.0]) is None  # one rare value among 1000: 11.4 bits
    assert fp(np.arange(50.0)) is not None and fp(np.arange(50.0)) == fp(np.arange(50.0).copy())
    assert fp(np.arange(50.0)) != fp(np.arange(1.0, 51.0))
    assert fp(np.array([{"a": i} for i in range(50)], dtype=object)) is not None
    bits = np.random.default_rng(0).integers(0, 2, 300)  # about 300 bits
    assert fp(bits) is not None and fp(bits[:100]) is None


def test_the_walk_through_modules_keeps_the_other_generators_first_and_leaves_global_states():
    """A generator reached through a module (directly, or by a function of that module naming it) comes
    after those reached otherwise, so their streams keep their indices; the global states the reseed sets
    itself (random's, numpy's legacy) are not given a second stream."""
    helpers = types.ModuleType("helpers")
    helpers.RNG = np.random.default_rng(1)
    exec("def draw():\n    return RNG.random()", helpers.__dict__)
    sub = types.ModuleType("helpers.sub")
    sub.OTHER = random.Random(2)
    helpers.sub = sub
    own = np.random.default_rng(3)
    ns = {"helpers": helpers, "np": np, "random": random, "own": own}
    exec(
        "def fn(d):\n"
        "    return helpers.draw() + helpers.sub.OTHER.random() + own.random() + np.random.random() + random.random()",
        ns,
    )
    found = _runner._hidden_rngs(ns["fn"])
    assert [id(g) for g in found] == [id(own), id(helpers.RNG), id(sub.OTHER)]


def test_the_walk_finds_generators_held_as_class_attributes():
    """``self.rng`` read from a class attribute, and ``Noise.gen`` named through its class: both found."""

    class Noise:
        gen = np.random.default_rng(1)

    class Mechanism:
        rng = np.random.default_rng(2)

        def __call__(self, d):
            return d + self.rng.random() + Noise.gen.random()

    m = Mechanism()
    assert [id(g) for g in _runner._hidden_rngs(m)] == [id(Mechanism.rng), id(Noise.gen)]


def test_per_call_counts_in_the_pool_do_not_depend_on_the_number_of_workers():
    pytest.importorskip("loky")

    def one(d):
        return d + np.random.laplace()

    sampler = _runner.Sampler(one, "one", vectorized=False)
    evs = _events_for(grid_laplace)
    kw = dict(seed=2, total=3_000, chunk=500, ref=((), "f"))
    two = _runner.count_events(sampler, [(0.0, 1.0)], evs, workers=2, **kw)
    three = _runner.count_events(sampler, [(0.0, 1.0)], evs, workers=3, **kw)
    assert _same(two, three)


def test_training_draw_keeps_the_serial_number_of_chunks_under_max_elements():
    pytest.importorskip("loky")

    def wide(d):
        return np.full(3, float(d))

    sampler = _runner.Sampler(wide, "wide", vectorized=False)
    kw = dict(seed=0, phase=_runner.TRAINING, pair=0, side=0, chunk=100, max_elements=450)
    serial = _runner.draw(sampler, 1, 1_000, **kw)
    pooled = _runner.draw(sampler, 1, 1_000, workers=2, **kw)
    assert serial.shape == pooled.shape == (200, 3)
    assert _runner._chunks_kept([(0, 100)] * 10, 3, 450) == 2
    assert _runner._chunks_kept([(0, 100)] * 10, 1, None) == 10


def test_a_blocking_mechanism_gives_a_message_not_a_hang(monkeypatch):
    pytest.importorskip("loky")
    monkeypatch.setattr(_runner, "_MIN_TIMEOUT", 1.0)
    monkeypatch.setattr(_runner, "_UNKNOWN_TIMEOUT", 1.0)

    def stuck(d, size, rng):
        time.sleep(3_600)  # stands for a deadlock in the worker
        return rng.random(size)

    sampler = _runner.Sampler(stuck, "stuck", True)
    t0 = time.perf_counter()
    with pytest.raises(AuditTimeLimit) as err:  # a time limit, not a broken mechanism
        _runner.count_events(
            sampler,
            [(0.0, 1.0)],
            [[_events.propose_thresholds(np.linspace(0, 1, 50), np.linspace(0, 1, 50) ** 2, max_events=1)[0]]],
            workers=2,
            seed=0,
            total=4,
            chunk=1,
            ref=((), "f"),
        )
    msg = str(err.value)
    assert "no chunk finished within 1 s" in msg and "'stuck'" in msg and "workers=1" in msg
    assert "0 samples drawn so far" in msg and "not a finding" in msg
    assert "certification chunk 0 (data side of pair 0)" in msg and "2 local worker processes" in msg
    assert time.perf_counter() - t0 < 60
    monkeypatch.undo()
    evs = _events_for(grid_laplace)
    assert _same(_count(2, evs=evs), _count(1, evs=evs))  # the killed pool is replaced on the next call


def test_unpicklable_mechanism_runs_here_with_a_warning():
    pytest.importorskip("loky")
    lock = threading.Lock()

    def locked(d, size, rng):
        with lock:
            return grid_laplace(d, size, rng)

    evs = _events_for(grid_laplace)
    with pytest.warns(RuntimeWarning, match="cannot be sent to worker processes.*workers=1"):
        got = _count(2, fn=locked, evs=evs)
    assert _same(got, _count(1, evs=evs))
    pytest.importorskip("distributed")
    with pytest.raises(MechanismError, match="cannot be sent.*without a cluster"):  # before any connection
        _count(2, cluster="tcp://127.0.0.1:1", fn=locked, evs=evs)


def test_the_hidden_generator_walk_finds_closures_defaults_globals_and_objects():
    rnd = random.Random(1)
    gen = np.random.default_rng(1)

    class Holder:
        def __init__(self):
            self.state = np.random.RandomState(1)

        def __call__(self, d):
            return d + self.state.random_sample()

    h = Holder()

    def fn(d, _g=gen):
        return rnd.random() + _g.random() + h(d) + _RND.random()

    found = _runner._hidden_rngs(fn)
    assert len(found) == 4 and {id(x) for x in found} == {id(rnd), id(gen), id(h.state), id(_RND)}
    assert [id(x) for x in _runner._hidden_rngs(fn)] == [id(x) for x in found]  # a fixed order


def test_without_loky_the_chunks_run_here_with_a_warning(monkeypatch):
    monkeypatch.setattr(_runner, "_loky_installed", lambda: False)
    evs = _events_for(grid_laplace)
    with pytest.warns(RuntimeWarning, match="needs the loky package.*pip install loky"):
        got = _count(2, evs=evs)
    assert _same(got, _count(1, evs=evs))


# --------------------------------------------------------------------------- cluster arguments


@pytest.mark.parametrize(
    "bad, expect",
    [
        (3, r"cluster=3 \(int\) is not a cluster"),
        ("lcoal", r"cluster='lcoal' is not a cluster; pass None, \"local\""),
        ("localhost:8786", r'did you mean "tcp://localhost:8786"'),
        ("http://host:1", r"is not a cluster"),
        (object(), r"\(object\) is not a cluster; pass None"),
        (
            type("FakeCluster", (), {"scheduler_address": "tcp://127.0.0.1:8786"})(),
            r"pass Client\(cluster\) or its address 'tcp://127.0.0.1:8786'",
        ),
    ],
)
def test_bad_cluster_arguments(bad, expect):
    with pytest.raises(ParameterError, match=expect):
        _count(2, cluster=bad)
    with pytest.raises(ParameterError, match=expect):
        _runner.draw(_runner.Sampler(grid_laplace, "g"), 0.0, 10, seed=0, phase=0, pair=0, side=0, chunk=5, cluster=bad)


def test_a_cluster_without_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    for cluster in ("local", "tcp://127.0.0.1:8786"):
        with pytest.raises(UnsupportedError, match=r"pip install -e '\.\[dask\]' in the dpharness checkout"):
            _count(2, cluster=cluster)
    assert _same(_count(1), _count(1, cluster=None))  # the default path needs no dask


def test_unreachable_scheduler_is_one_clear_line(monkeypatch):
    pytest.importorskip("distributed")
    import socket

    monkeypatch.setattr(_cluster, "_CONNECT_TIMEOUT", 1.0)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    t0 = time.perf_counter()
    with pytest.raises(ParameterError) as err:
        _count(2, cluster=address)
    assert address in str(err.value) and "within 1 s" in str(err.value) and "\n" not in str(err.value)
    assert time.perf_counter() - t0 < 30


# --------------------------------------------------------------------------- dask LocalCluster (slow)


@pytest.mark.slow
def test_local_dask_cluster_gives_the_serial_counts_and_draws():
    distributed = pytest.importorskip("distributed")
    evs = _events_for(grid_laplace)
    serial = _count(1, evs=evs)
    assert _same(serial, _count(2, cluster="local", evs=evs))
    with _runner.cluster_session("local", 2) as client:
        assert isinstance(client, distributed.Client)
        assert _same(serial, _count(2, cluster=client, evs=evs))
        sampler = _runner.Sampler(grid_laplace, "g", True)
        kw = dict(seed=1, phase=_runner.TRAINING, pair=0, side=1, chunk=3_000)
        assert np.array_equal(
            _runner.draw(sampler, 1.0, 10_000, cluster=client, **kw), _runner.draw(sampler, 1.0, 10_000, **kw)
        )

        def one(d):
            return (os.getpid(), d + np.random.random())

        per_call = _runner.Sampler(one, "one", vectorized=False)
        out = _runner.draw(per_call, 0, 2_000, cluster=client, **kw)
        again = _runner.draw(per_call, 0, 2_000, cluster=client, **kw)
        assert [o[1] for o in out] == [o[1] for o in again]  # reseeded per chunk: reproducible on the cluster
        pooled = _runner.draw(per_call, 0, 2_000, workers=2, **kw)
        assert [o[1] for o in out] == [o[1] for o in pooled]  # and the same outputs as the local pool
        assert os.getpid() not in {o[0] for o in out}
        assert client.status == "running"  # a Client passed in is left open
    assert client.status == "closed"  # the session closes what it opened


@pytest.mark.slow
def test_audit_survives_a_running_torch_thread_pool(monkeypatch):
    """A fork-based pool hangs here (torch's thread pool does not survive fork); the loky pool must
    finish, and the hang detector turns a regression into an error rather than a hung test run."""
    torch = pytest.importorskip("torch")
    from dpharness.auditors import audit

    monkeypatch.setattr(_runner, "_MIN_TIMEOUT", 120.0)
    monkeypatch.setattr(_runner, "_UNKNOWN_TIMEOUT", 120.0)
    monkeypatch.setattr(_audit, "_POOL_MIN_DRAWS", 0)  # the pool runs even for this small audit
    torch.set_num_threads(2)
    assert float((torch.ones(1000, 1000) @ torch.ones(1000, 1000))[0, 0]) == 1000.0

    def torch_laplace(d, size, rng):
        g = torch.Generator().manual_seed(int(rng.integers(2**62)))
        u = torch.rand(size, generator=g, dtype=torch.float64) - 0.5  # inverse-CDF Laplace(0, 1)
        x = d - torch.sign(u) * torch.log1p(-2 * u.abs())
        return (torch.round(x * 2**20) / 2**20).numpy()  # on a grid: no floating-point structure to find

    r = audit(torch_laplace, 0.0, 1.0, epsilon=1.0, samples=300_000, seed=0, workers=2)
    again = audit(torch_laplace, 0.0, 1.0, epsilon=1.0, samples=300_000, seed=0, workers=1)
    assert r.extra["workers"] == 2 and r.counts == again.counts
    assert 0.5 < r.epsilon_lower_bound <= 1.0
