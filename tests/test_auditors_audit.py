"""Tests of :func:`dpharness.auditors.audit` with the tests' own callables (no dependence on which
catalog mechanisms exist yet; catalog tests fail when the entry is missing).

Statistical tests use fixed seeds; each states its false-failure probability (for a correct
auditor, over the seed) in its docstring and failure message."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import dpharness
from dpharness.auditors import AuditResult, audit
from dpharness.errors import MechanismError, ParameterError


def rr(eps: float):
    """Binary randomized response with true ε = eps."""
    p = math.exp(eps) / (1 + math.exp(eps))

    def mech(d, size, rng):
        return np.where(rng.random(size) < p, d, 1 - d)

    return mech


def textbook_laplace(d, size, rng):
    return d + rng.laplace(0, 1, size)


def grid_laplace(d, size, rng):
    return np.round((d + rng.laplace(0, 1, size)) * 2**20) / 2**20


# --------------------------------------------------------------------------- float structure


@pytest.mark.statistical
def test_textbook_float_laplace_is_flagged():
    """Mironov 2012: x + numpy Laplace with x = 0 vs 1 is not ε-DP for any ε; certified at 10^6 samples.
    False-failure probability: < 1e-6 (the violation is certified at ε_lb ≈ 10 vs claim 1)."""
    r = audit(textbook_laplace, 0.0, 1.0, epsilon=1.0, samples=1_000_000, seed=1)
    assert not r.passed, f"textbook Laplace not flagged: {r.epsilon_lower_bound} (false-failure prob < 1e-6)"
    assert r.epsilon_lower_bound > 5
    assert math.isfinite(r.epsilon_lower_bound)
    assert "float" in r.witness_description
    assert r.witness is not None and r.witness.event is not None
    assert r.extra["family"] == "float structure" and "(event from float structure)" in r.witness_description


@pytest.mark.statistical
def test_grid_rounded_laplace_passes_and_is_tight():
    """The same mechanism rounded to a 2^-20 grid is 1-DP (up to float noise far below sampling error).
    False-failure probability: <= 5% by construction (confidence 0.95), far less in practice."""
    r = audit(grid_laplace, 0.0, 1.0, epsilon=1.0, samples=1_000_000, seed=1)
    assert r.passed, f"grid Laplace flagged with bound {r.epsilon_lower_bound} (false-failure prob <= 0.05)"
    assert r.epsilon_lower_bound >= 0.97 * 0.994, r.witness_description


def test_ideal_numerics_skips_float_structure():
    r = audit(textbook_laplace, 0.0, 1.0, samples=200_000, ideal_numerics=True, seed=3, epsilon=1.0)
    assert r.passed and "float structure" not in r.method


# --------------------------------------------------------------------------- discrete


@pytest.mark.statistical
def test_randomized_response_correct_and_miscalibrated():
    """RR with true ε = 1 passes a claim of 1; RR with true ε = 1.5 fails it at 10^5 samples.
    False-failure probability: <= 5% for the first (confidence), < 1e-6 for the second
    (expected bound ≈ 1.47 against 1, many standard errors away)."""
    ok = audit(rr(1.0), 0, 1, epsilon=1.0, samples=100_000, seed=5)
    assert ok.passed and 0.9 < ok.epsilon_lower_bound <= 1.0, ok.epsilon_lower_bound
    bad = audit(rr(1.5), 0, 1, epsilon=1.0, samples=100_000, seed=5)
    assert not bad.passed and bad.epsilon_lower_bound > 1.3, "mis-calibrated RR not flagged (false-failure prob < 1e-6)"
    assert bad.counts["n_data"] == bad.counts["n_neighbor"] == bad.extra["certification_samples"]
    assert bad.delta_lower_bound is not None and bad.delta_lower_bound > 0


def test_discrete_vector_patterns_and_objects():
    def pattern(d, size, rng):  # two bits, each kept w.p. 0.6: only the joint pattern has ratio (0.6/0.4)^2
        x = np.array([d, d], dtype=np.int8)
        flip = rng.random((size, 2)) < 0.4
        return np.where(flip, 1 - x, x).astype(np.int8)

    r = audit(pattern, 0, 1, epsilon=0.5, samples=100_000, seed=2)
    assert not r.passed and r.epsilon_lower_bound > 0.7  # true ε = 2 ln 1.5 = 0.81

    def words(d, size, rng):
        p = 0.8 if d else 0.2
        return np.array(["yes" if u < p else "no" for u in rng.random(size)], dtype=object)

    r = audit(words, 0, 1, epsilon=1.0, samples=20_000, seed=2)
    assert not r.passed and r.extra["output_kind"] == "object"  # true ε = ln 4


def test_delta_claim_is_respected():
    """A mechanism that leaks its input w.p. 1e-3 and is otherwise 0.5-DP satisfies (0.5, 1e-3)."""

    def leaky(d, size, rng):
        p = math.exp(0.5) / (1 + math.exp(0.5))
        out = np.where(rng.random(size) < p, d, 1 - d)
        return np.where(rng.random(size) < 1e-3, 10 + d, out)

    pure = audit(leaky, 0, 1, epsilon=0.5, samples=200_000, seed=4)
    assert not pure.passed
    approx = audit(leaky, 0, 1, epsilon=0.5, delta=2e-3, samples=200_000, seed=4)
    assert approx.passed, approx.witness_description


# --------------------------------------------------------------------------- vectors


def test_float_vector_combination_of_coordinates():
    """4-bin Laplace histogram under substitution at scale 1: true ε = 2, only visible jointly."""

    def hist(d, size, rng):
        return np.asarray(d, float)[None, :] + rng.laplace(0, 1, (size, 4))

    r = audit(
        hist,
        np.array([1.0, 0, 0, 0]),
        np.array([0.0, 1, 0, 0]),
        epsilon=1.2,
        samples=400_000,
        seed=0,
        ideal_numerics=True,
    )
    assert not r.passed and r.epsilon_lower_bound > 1.3, r.witness_description


# --------------------------------------------------------------------------- determinism and streaming


def test_same_seed_same_result_and_workers_do_not_matter(monkeypatch):
    import dpharness.auditors._audit as am

    monkeypatch.setattr(am, "_CHUNK", 50_000)  # several chunks a side
    monkeypatch.setattr(am, "_POOL_MIN_DRAWS", 0)  # the pool runs even for this small audit
    kw = dict(epsilon=1.0, samples=300_000, seed=11)
    r1 = audit(grid_laplace, 0.0, 1.0, workers=1, **kw)
    r2 = audit(grid_laplace, 0.0, 1.0, workers=2, **kw)
    r3 = audit(grid_laplace, 0.0, 1.0, workers=2, **kw)
    assert r2.extra["workers"] == 2 and r1.extra["workers"] == 1
    for r in (r2, r3):
        assert r.epsilon_lower_bound == r1.epsilon_lower_bound
        assert r.counts == r1.counts
        assert r.witness_description == r1.witness_description
    other = audit(grid_laplace, 0.0, 1.0, workers=1, epsilon=1.0, samples=300_000, seed=12)
    assert other.counts != r1.counts


def test_loop_mode_for_third_party_callables(capsys):
    rnd = random.Random(0)
    p = math.exp(1.0) / (1 + math.exp(1.0))

    def one(d):
        return d if rnd.random() < p else 1 - d

    r = audit(one, 0, 1, epsilon=0.5, samples=20_000, vectorized=False, progress=True)
    assert not r.passed and 0.6 < r.epsilon_lower_bound <= 1.0
    err = capsys.readouterr().err
    assert "%" in err  # progress bar on stderr when asked
    r = audit(one, 0, 1, epsilon=1.0, samples=2_000, vectorized=False, progress=False)
    assert capsys.readouterr().err == ""


def test_result_fields_and_to_dict():
    r = audit(rr(1.0), 0, 1, samples=10_000, seed=1, epsilon=1.0)
    assert isinstance(r, AuditResult)
    d = r.to_dict()
    assert d["epsilon"] == 1.0 and d["samples"] == 10_000 and d["seed"] == 1
    assert d["data"] == 0 and d["neighbor"] == 1
    assert r.events_tested >= 1 and r.pairs_tested == 1 and r.elapsed > 0
    assert "Clopper-Pearson" in r.method and "Bonferroni" in r.method
    assert r.witness.description == r.witness_description
    assert set(r.counts) == {"hits_data", "hits_neighbor", "n_data", "n_neighbor"}


def test_constant_mechanism_gives_zero():
    r = audit(lambda d, size, rng: np.zeros(size), 0, 1, samples=1_000, epsilon=1.0)
    assert r.epsilon_lower_bound == 0.0 and r.passed and r.witness is None


# --------------------------------------------------------------------------- errors


def test_mechanism_that_raises_names_itself_and_the_index():
    def broken(d, size, rng):
        raise KeyError("boom")

    with pytest.raises(MechanismError, match=r"broken.*KeyError.*samples 0\.\."):
        audit(broken, 0, 1, samples=1_000, epsilon=1.0)

    calls = {"n": 0}

    def sometimes(d):
        calls["n"] += 1
        if calls["n"] == 37:
            raise ValueError("bad luck")
        return 0

    # a call that raises is an output the audit sees (never an abort), reported by the exception's type
    # only: its message may hold data
    r = audit(sometimes, 0, 1, samples=1_000, vectorized=False, epsilon=1.0)
    text = repr(r.to_dict()) + r.method
    assert "ValueError" in text and "bad luck" not in text


def test_raising_in_a_worker_is_an_observed_outcome(monkeypatch):
    import dpharness.auditors._audit as am

    monkeypatch.setattr(am, "_CHUNK", 20_000)

    def late(d, size, rng):
        x = rng.random(size)
        if d == 1 and x[0] < 0.3:  # fails on some certification chunk (deterministic per seed)
            raise RuntimeError("late failure")
        return x

    r = audit(late, 0, 1, samples=400_000, workers=2, seed=0, epsilon=1.0)
    text = repr(r.to_dict()) + r.method
    assert "RuntimeError" in text and "late failure" not in text


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_outputs(bad):
    def mech(d, size, rng):
        out = rng.random(size)
        out[size // 2] = bad
        return out

    with pytest.raises(MechanismError, match="non-finite"):
        audit(mech, 0, 1, samples=1_000, epsilon=1.0)


def test_wrong_number_of_rows_and_changing_shapes():
    with pytest.raises(MechanismError, match="size=.*exactly `size` outputs"):
        audit(lambda d, size, rng: rng.random(size + 1), 0, 1, samples=1_000, epsilon=1.0)
    with pytest.raises(MechanismError, match="scalar"):
        audit(lambda d, size, rng: 3.0, 0, 1, samples=1_000, epsilon=1.0)
    with pytest.raises(MechanismError, match="changed its output"):
        audit(lambda d, size, rng: rng.random((size, 2)) if d else rng.random(size), 0, 1, samples=1_000, epsilon=1.0)
    with pytest.raises(MechanismError, match="different shapes|changed its output"):
        shapes = iter([(2,)] * 5 + [(3,)] * 10_000)
        audit(lambda d: np.zeros(next(shapes)), 0, 1, samples=1_000, vectorized=False, epsilon=1.0)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(delta=1.0), "delta"),
        (dict(delta=-0.1), "delta"),
        (dict(confidence=1.0), "confidence"),
        (dict(confidence=0), "confidence"),
        (dict(samples=10), "samples"),
        (dict(samples=1e6), "samples"),
        (dict(seed=-1), "seed"),
        (dict(workers=0), "workers"),
        (dict(vectorized="yes"), "vectorized"),
    ],
)
def test_invalid_parameters(kwargs, name):
    with pytest.raises(ParameterError, match=name):
        audit(rr(1.0), 0, 1, **{"epsilon": 1.0, **kwargs})


def test_identical_or_missing_inputs():
    with pytest.raises(ParameterError, match="identical"):
        audit(rr(1.0), 1, 1, epsilon=1.0)
    with pytest.raises(ParameterError, match="identical"):
        audit(grid_laplace, np.array([1.0, 2.0]), np.array([1.0, 2.0]), epsilon=1.0)
    with pytest.raises(ParameterError, match="both inputs"):
        audit(rr(1.0), 0, epsilon=1.0)
    with pytest.raises(ParameterError, match="not callable"):
        audit(42, 0, 1, epsilon=1.0)


# --------------------------------------------------------------------------- catalog (skips when absent)


def _catalog_entry(name: str):
    cat = dpharness.catalog(gallery=None)
    assert name in cat, f"catalog entry {name!r} is missing from the registry (registered: {sorted(cat)})"
    return cat[name]


def test_catalog_randomized_response_uses_its_claim_and_searches_pairs():
    cls = _catalog_entry("randomized_response")
    m = cls()
    r = audit(m, samples=50_000, seed=0)
    assert r.epsilon == float(m.claim.epsilon) and r.passed
    assert r.pairs_tested >= 1
    a, b = m.example_pair()
    r2 = audit(m, a, b, epsilon=0.5, samples=50_000, seed=0)
    assert not r2.passed  # the claim says 1, we test 0.5: violation certified


def test_catalog_pair_is_validated():
    cls = _catalog_entry("randomized_response")
    m = cls()
    a, _ = m.example_pair()
    with pytest.raises(ParameterError):
        audit(m, a, a)
    with pytest.raises(ParameterError):
        audit(m, a, None)


@pytest.mark.slow
def test_streaming_keeps_memory_bounded(monkeypatch):
    """3·10^7 samples a side (480 MB if held) run in bounded memory: only counts leave a chunk
    (training, held in memory, is capped at 10^6 a side here)."""
    import tracemalloc

    import dpharness.auditors._audit as am

    monkeypatch.setattr(am, "_TRAIN_MAX", 1_000_000)
    tracemalloc.start()
    try:
        r = audit(grid_laplace, 0.0, 1.0, epsilon=1.0, samples=30_000_000, seed=0, workers=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.passed and r.epsilon_lower_bound > 0.99
    assert peak < 200 * 2**20, f"peak traced memory {peak / 2**20:.0f} MiB"


def test_a_callable_needs_an_explicit_epsilon():
    """A plain callable carries no claim: auditing it without ``epsilon`` is an error, never ε = 1."""
    with pytest.raises(ParameterError, match="epsilon=None"):
        audit(rr(1.0), 0, 1, samples=1_000)


@pytest.mark.statistical
def test_float_leak_failure_says_floating_point_is_the_cause():
    """assert_private on the natural float Laplace count: the failure names the floating-point cause and
    the fix. Fixed seed 0, 2·10^5 samples a side; the leak certifies ε ≥ 7 (the test cannot pass by chance
    on a correct mechanism: it audits a broken one)."""
    from dpharness.testing import PrivacyViolation, assert_private

    def natural(data, size, rng):
        return len(data) + rng.laplace(0, 1.0, size)

    with pytest.raises(PrivacyViolation, match="floating-point structure") as info:
        assert_private(natural, [1, 2, 3], [1, 2], epsilon=1.0, seed=0, samples=200_000)
    assert "exact sampler" in str(info.value) and "--ideal-numerics" in str(info.value)


def test_the_float_hint_is_keyed_on_the_certifying_family_and_a_failure():
    """The hint appears only for a violation certified by a floating-point family (not for a pass, not
    for a threshold event), and says "may": those families also catch plain magnitude differences."""
    from dpharness._run import float_hint
    from dpharness.auditors import AuditResult

    def result(family, passed):
        return AuditResult(
            epsilon_lower_bound=2.0,
            passed=passed,
            epsilon=1.0,
            delta=0.0,
            confidence=0.95,
            samples=10,
            seed=0,
            method="m",
            witness=None,
            witness_description="w",
            counts={},
            delta_lower_bound=None,
            events_tested=1,
            pairs_tested=1,
            elapsed=0.0,
            extra={"family": family},
        )

    assert "may be in the float implementation" in float_hint(result("float structure", False))
    assert float_hint(result("rounding", False)) is not None
    assert float_hint(result("float structure", True)) is None
    assert float_hint(result("thresholds", False)) is None
    assert float_hint(None) is None


def test_a_per_call_function_without_vectorized_false_is_told_the_fix():
    def per_call(data):
        return float(len(data))

    with pytest.raises(MechanismError, match="vectorized=False"):
        audit(per_call, [1, 2], [1], epsilon=1.0, samples=1_000)


def test_the_proofs_witness_pair_is_always_audited():
    """A valid witness pair offered by a proof is among the audited pairs even when the neighbour
    search fills every slot, and ``extra["best_pair"]`` indexes ``extra["pairs"]``."""
    from dpharness.core import Witness

    m = _catalog_entry("laplace")()
    a, b = m.example_pair()
    w = Witness(data=b, neighbor=a, description="the proof's pair, reversed")
    r = audit(m, samples=20_000, seed=0, candidate_witnesses=[w], workers=1)
    pairs = r.extra["pairs"]
    assert any(
        np.array_equal(np.asarray(p), np.asarray(b)) and np.array_equal(np.asarray(q), np.asarray(a)) for p, q in pairs
    )
    assert "witness pair included" in r.method
    assert r.extra["best_pair"] is None or 0 <= r.extra["best_pair"] < len(pairs)
