"""The gate's cache key reads what a user function computes with, not only its source.

Counterexample (red-team round 4): ``register(make(float(os.environ["SCALE"])), ...)`` with
``make(scale)`` returning ``lambda data, size, rng: len(data) + rng.laplace(0, scale, size).round()``
passed the gate at SCALE=1.0 and was served that PASS from the cache at SCALE=0.01 (``--no-cache``:
FAIL, ε_lb 5.4 against a claim of 1): the key hashed the module source, where ``scale`` is not.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import types

import numpy as np

from dpharness import AddRemove, PureDP, RealInterval
from dpharness import parts as dp
from dpharness.registry import _audited_function


def _make(scale):
    def noisy_count(data, size, rng):
        return len(data) + rng.laplace(0.0, scale, size).round()

    return noisy_count


def _audited(fn):
    return _audited_function(
        fn,
        name="f",
        data=[1, 2, 3],
        neighbor=[1, 2],
        relation=AddRemove(),
        claim=PureDP(1),
        records=None,
        shape=None,
    )


def _with_default(data, size, rng, scale=1.0):
    return len(data) + rng.laplace(0.0, scale, size)


def _scaled(data, size, rng, *, scale):
    return len(data) + rng.laplace(0.0, scale, size)


SCALE = np.array([1.0])


def _reads_global(data, size, rng):
    return len(data) + rng.laplace(0.0, SCALE[0], size)


def test_a_closure_variable_changes_the_key():
    assert _audited(_make(1.0)).source_hash() != _audited(_make(0.01)).source_hash()
    assert _audited(_make(1.0)).source_hash() == _audited(_make(1.0)).source_hash()


def test_a_default_argument_a_partial_and_a_global_change_the_key():
    a = _audited(_with_default).source_hash()
    _with_default.__defaults__ = (0.01,)
    try:
        assert _audited(_with_default).source_hash() != a
    finally:
        _with_default.__defaults__ = (1.0,)
    assert (
        _audited(functools.partial(_scaled, scale=1.0)).source_hash()
        != _audited(functools.partial(_scaled, scale=0.01)).source_hash()
    )
    b = _audited(_reads_global).source_hash()
    SCALE[0] = 0.01
    try:
        assert _audited(_reads_global).source_hash() != b
    finally:
        SCALE[0] = 1.0


def test_a_post_processing_closure_changes_a_parts_key():
    def m(offset):
        return dp.mechanism(
            name="p",
            records=RealInterval(0, 1),
            relation=AddRemove(),
            steps=dp.count() >> dp.laplace(1) >> dp.post(lambda x: x + offset),
            claim=PureDP(1),
        )

    assert m(0).source_hash() != m(5).source_hash()
    assert m(0).source_hash() == m(0).source_hash()


def test_a_partial_hashes_the_same_in_every_process():
    """Bound arguments are written by value, so a partial of a module function is a cache hit in the
    next process (no object address in the key)."""
    code = (
        "import functools\n"
        "from dpharness import AddRemove, PureDP\n"
        "from dpharness.registry import _audited_function\n"
        "from test_cache_fingerprint import _scaled\n"
        "m = _audited_function(functools.partial(_scaled, scale=1.0), name='f', data=[1, 2, 3], neighbor=[1, 2],"
        " relation=AddRemove(), claim=PureDP(1), records=None, shape=None)\n"
        "print(m.source_hash())"
    )
    import os

    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
    runs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
        for _ in range(2)
    }
    assert len(runs) == 1


_LOG = __import__("logging").getLogger("dpharness.test")
_RNG = np.random.default_rng(7)


def _logs(data, size, rng):
    _LOG.debug("sampling %s", size)
    return len(data) + _RNG.laplace(0.0, 1.0, size)


def test_a_logger_and_a_generator_are_keyed_without_addresses():
    """A module's logger or Generator must not make a key that differs in every process (no cache hit
    ever); the Generator is keyed by its state."""
    a = _audited(_logs).source_hash()
    assert _audited(_logs).source_hash() == a
    _RNG.random()
    assert _audited(_logs).source_hash() != a


def test_a_user_mechanism_class_is_keyed_by_the_globals_its_methods_read(monkeypatch):
    """A class-based mechanism whose sampler reads a module global set at import (a scale from the
    environment): its module's source does not change with the value, the cache key does (a stale PASS
    otherwise). The built-ins' keys read nothing more (their code is keyed by dpharness's files)."""
    import dp_fakes

    from dpharness import _cache, registry
    from dpharness._fingerprint import class_text

    def key(m):
        return _cache.key(m, name="fake_coin", audit_only=False, environment="e", samples=1000, seed=0, timeout=None)

    coin = dp_fakes.Coin()
    before = key(coin)
    monkeypatch.setattr(dp_fakes, "math", types.SimpleNamespace(exp=lambda x: 1.0))  # a global _p reads
    assert key(coin) != before
    assert class_text(type(registry.get("laplace"))) == ""
