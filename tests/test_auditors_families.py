"""Tests of the event-family protocol, rare one-sided events and the rounding family.

Statistical tests use fixed seeds; each states its false-failure probability in its docstring and
failure message."""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import pytest

from dpharness.auditors import audit, epsilon_lower_bound
from dpharness.auditors import families as fam
from dpharness.auditors import floats as fl
from dpharness.auditors.families import rounding as rd
from dpharness.core import Event
from dpharness.errors import ParameterError

_GEO_P = 1 - math.exp(-1.0)


def even_geometric(p: float):
    """2·(d + G − G'), two-sided geometric of ε = 1 on the even integers; w.p. p on d = 0 only the odd
    integer one above (impossible for d = 1: infinite privacy loss)."""

    def mech(d, size, rng):
        out = 2 * (d + rng.geometric(_GEO_P, size) - rng.geometric(_GEO_P, size))
        if d == 0 and p > 0:
            out = out + (rng.random(size) < p)
        return out.astype(np.int64)

    return mech


def grid_laplace(p: float):
    """Laplace(d, 1) on the grid 2^-20 (1-DP); w.p. p on d = 0 only, 2^-21 added (off the grid)."""

    def mech(d, size, rng):
        out = np.round((d + rng.laplace(0.0, 1.0, size)) * 2**20) / 2**20
        if d == 0 and p > 0:
            out = out + np.where(rng.random(size) < p, 2.0**-21, 0.0)
        return out

    return mech


# --------------------------------------------------------------------------- the protocol


class _Sevens:
    """A toy family: the single event {output = 7}."""

    name = "toy sevens"
    calls: list = []

    def applies(self, kind, ctx):
        return kind == "discrete"

    def propose(self, train_a, train_b, ctx):
        self.calls.append((len(train_a), ctx.kind, ctx.candidates, ctx.certification_samples))
        ev = Event(lambda out: np.asarray(out) == 7, "output = 7 (toy)")
        return [fam.Proposal(ev, self.name)]


class _NeverApplies:
    name = "never"

    def applies(self, kind, ctx):
        return False

    def propose(self, train_a, train_b, ctx):  # pragma: no cover - must not be called
        raise AssertionError("propose called on a family that does not apply")


def test_every_registered_family_follows_the_protocol():
    names = [f.name for f in fam.FAMILIES]
    assert len(set(names)) == len(names)
    for f in fam.FAMILIES:
        assert isinstance(f, fam.EventFamily), f
    assert {"histogram", "float structure", "rounding", "learned likelihood ratio", "tails"} <= set(names)


def test_a_family_registered_in_a_test_is_used(monkeypatch):
    """A new family is one class in FAMILIES: the audit asks it, certifies its event and names it."""

    def sevens(d, size, rng):  # 7 w.p. 0.2 on d = 0, 0.02 on d = 1, else uniform on 0..5
        p = 0.2 if d == 0 else 0.02
        return np.where(rng.random(size) < p, 7, rng.integers(0, 6, size))

    toy = _Sevens()
    _Sevens.calls = []
    monkeypatch.setattr(fam, "FAMILIES", [toy, _NeverApplies()])
    r = audit(sevens, 0, 1, epsilon=1.0, samples=50_000, seed=3, workers=1)
    assert _Sevens.calls and _Sevens.calls[0][1:] == ("discrete", 20, r.extra["certification_samples"])
    assert not r.passed and r.extra["family"] == "toy sevens"
    assert "(event from toy sevens)" in r.witness_description and "toy sevens" in r.method
    assert r.events_tested == 2  # the only event, both directions: Bonferroni over what was kept


def test_families_that_do_not_apply_are_not_asked():
    ctx = fam.ProposalContext(
        kind="object", max_events=4, candidates=2, certification_samples=100, confidence=0.95, epsilon=1.0, delta=0.0
    )
    out = fam.propose(
        np.array(["a"] * 30, dtype=object),
        np.array(["b"] * 30, dtype=object),
        ctx,
        families=[_NeverApplies(), fam.classic.HISTOGRAM],
    )
    assert out and all(p.family == "histogram" for p in out)


def test_tails_family_applies_only_to_approximate_claims():
    tails = next(f for f in fam.FAMILIES if f.name == "tails")
    kw = dict(max_events=4, candidates=2, certification_samples=100, confidence=0.95, epsilon=1.0)
    assert not tails.applies("float", fam.ProposalContext(kind="float", delta=0.0, **kw))
    assert tails.applies("float", fam.ProposalContext(kind="float", delta=1e-5, **kw))
    assert not tails.applies("float-vector", fam.ProposalContext(kind="float-vector", delta=1e-5, **kw))


# --------------------------------------------------------------------------- ranking of one-sided events


def _props():
    """Proposals with known ranking-half counts: events on the index of the output."""
    import dpharness.auditors._audit as am

    out = []
    for j in range(30):  # ordinary events: 0.3 vs 0.11 of the samples (ratio e^1)
        out.append(
            fam.Proposal(
                Event(lambda o, j=j: (o[:, 0] == 1) & (o[:, 1] % 30 == j) | (o[:, 0] == 2), f"ordinary {j}"), "ordinary"
            )
        )
    rare = fam.Proposal(Event(lambda o: o[:, 0] == 3, "rare"), "rare family", one_sided=True)
    return am, out + [rare]


def test_one_sided_candidates_keep_a_slot_with_few_training_hits():
    """An event with one ranking hit on one side and none on the other is kept (a reserved slot): shaded
    by one standard error its estimate is 0, yet with no hits on the other side it would certify ε ≈ 2."""
    am, props = _props()
    n = 10_000
    rng = np.random.default_rng(0)
    a = np.stack([rng.choice([1, 2], n, p=[0.5, 0.5]), rng.integers(0, 30, n)], axis=1)
    b = np.stack([rng.choice([1, 2], n, p=[0.8, 0.2]), rng.integers(0, 30, n)], axis=1)
    a[:1, 0] = 3  # one hit of the rare event on the data side, none on the neighbour side
    ranked = am._rank(0, props, a, b, cert_n=900_000, level=0.05 / 40, delta=0.0)
    rare = [c for c in ranked if c.source == "rare family"]
    assert rare[0].forward and rare[0].one_sided_score > 0 and rare[1].one_sided_score == -math.inf
    assert rare[0].one_sided_score > 1.5 and rare[0].score == -math.inf  # shading drops it
    chosen = am._select(ranked, 8)
    assert len(chosen) == 8 and any(c.source == "rare family" and c.forward for c in chosen)
    assert sum(c.source == "rare family" for c in am._select(ranked, 1)) == 0  # one slot: the best ordinary
    # without the hint the same event competes on its shaded score only
    plain = [fam.Proposal(p.event, p.family, False) for p in props]
    chosen = am._select(am._rank(0, plain, a, b, cert_n=900_000, level=0.05 / 40, delta=0.0), 8)
    assert not any(c.source == "rare family" for c in chosen)


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize("mech", [even_geometric(1e-4), grid_laplace(1e-4)], ids=["even-geometric", "grid-laplace"])
def test_rare_one_sided_leak_caught_at_default_settings(mech):
    """A leak of probability 1e-4 impossible on the other input (odd integer on an even grid; a point
    off the 2^-20 float grid) is certified at 10^6 samples a side with default settings.
    False-failure probability: about 2% per case over the seed (the leak must show in both training
    halves, P = (1 − e^-5)^2 ≈ 0.987, and certification then finds ≈ 90 hits where ≈ 34 suffice)."""
    r = audit(mech, 0, 1, epsilon=1.0, samples=1_000_000, seed=7)
    assert not r.passed, (
        f"p = 1e-4 one-sided leak missed: ε_lb = {r.epsilon_lower_bound} (false-failure probability ≈ 2%, seed 7)"
    )
    assert r.epsilon_lower_bound > 1.5 and r.extra["family"] in ("rounding", "float structure")


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize("mech", [even_geometric(0.0), grid_laplace(0.0)], ids=["even-geometric", "grid-laplace"])
def test_correct_grid_mechanisms_are_not_flagged(mech):
    """The same mechanisms without the leak are 1-DP: no violation certified, and the bound stays tight.
    False-failure probability: <= 5% by soundness (confidence 0.95), far less in practice (the events
    of the new families carry only the genuine ratio e^1)."""
    r = audit(mech, 0, 1, epsilon=1.0, samples=1_000_000, seed=7)
    assert r.passed, f"correct mechanism flagged: {r.witness_description} (false-failure probability <= 5%)"
    assert r.epsilon_lower_bound > 0.95


# --------------------------------------------------------------------------- the rounding family


def test_rounding_features():
    x = np.array([1.0, 1.0 + 2**-52, 1.2, 0.55, -3.3])
    k3 = rd.float_subrange_bits(x, 3, 1)
    assert (k3 & 1).tolist() == [0, 1, 1, 0, 0]  # last mantissa bit
    assert ((k3 >> 1) & 7).tolist() == [0, 0, 1, 0, 5]  # eighth of the binade: 1.2 in [1.125, 1.25)
    assert k3[0] != k3[3] and "[0.5, 0.5625)" in rd._describe_float(int(k3[3]), 3, 1)
    ints = np.array([0, 1, 2, 3, 6, 7, -3, 2**40 + 5])
    assert rd.int_residues(ints, 1).tolist() == [0, 1, 0, 1, 0, 1, 1, 1]
    assert rd.int_residues(ints, 2).tolist() == [0, 1, 2, 3, 2, 3, 1, 1]
    keys = rd.int_subrange_bits(ints, 2, 1)
    assert len(set(keys.tolist())) == len(ints)  # all cells differ here
    assert "[6, 7)" in rd._describe_int(int(keys[4]), 2, 1) and "x mod 2 = 1" in rd._describe_int(int(keys[5]), 2, 1)


def test_lowest_bit():
    x = np.array([1.0, 0.75, 3.0, 2.0**-21 + 1.0, 0.0, 5e-324])
    assert fl.lowest_bit(x).tolist() == [0, -2, 0, -21, 2000, -1074]


def _biased(d, size, rng):
    """Doubles with a full random mantissa on both inputs; on d = 0 an output in [0.5, 0.5625) has its
    last mantissa bit cleared w.p. 2/3 (likelihood ratio 3 on that cell, possible on both sides)."""
    out = 0.25 + rng.random(size) * 1.5 + rng.random(size) * 2.0**-30  # fills the low mantissa bits
    if d == 0:
        inside = (out >= 0.5) & (out < 0.5625) & (rng.random(size) < 2 / 3)
        bits = out.view(np.uint64).copy()
        bits[inside] &= ~np.uint64(1)
        out = bits.view(np.float64)
    return out


@pytest.mark.statistical
def test_rounding_family_finds_a_sub_binade_last_bit_bias():
    """The bias is diluted in the whole binade (ratio 1.09 on [0.5, 1) × last bit) but the rounding
    family proposes the cell with ratio 3; its plug-in log ratio on fresh samples exceeds 0.9.
    False-failure probability: < 1e-6 (≈ 2000 vs 700 expected hits a side in training)."""
    rng = np.random.default_rng(11)
    a, b = _biased(0, 100_000, rng), _biased(1, 100_000, rng)
    props = rd.propose_rounding(a, b, max_events=40)
    fa, fb = _biased(0, 200_000, rng), _biased(1, 200_000, rng)
    n = len(fa)

    def bound(e):  # certified ε of the event on the fresh samples (neighbour over data: the bias's direction)
        return epsilon_lower_bound(int(e.contains(fb).sum()), n, int(e.contains(fa).sum()), n).epsilon

    best = max(bound(e) for e, _ in props)
    assert best > 0.9, f"best bound {best:.3f} <= 0.9 (false-failure probability < 1e-6, seed 11)"
    fs = fl.propose_float_structure(a, b, max_events=40)
    cells = max(bound(e) for e in fs)
    assert cells < 0.3, f"float-structure cells see the diluted bias only: {cells:.3f}"


@pytest.mark.statistical
def test_audit_certifies_a_rounding_bias_through_the_rounding_family():
    """End to end at 4·10^5 samples a side: the true ε of the cell is ln 3 = 1.10 against a claim of 0.5
    (the mechanism is otherwise 0-DP). False-failure probability: < 1e-4 (the certified bound is
    expected near 0.95, ten standard errors above 0.5)."""
    r = audit(_biased, 0, 1, epsilon=0.5, samples=400_000, seed=2, workers=1)
    assert not r.passed and r.extra["family"] == "rounding", (r.witness_description, "false-failure probability < 1e-4")
    assert "last 1 mantissa bit" in r.witness_description


def test_rounding_family_skips_ideal_numerics_and_bits():
    f = rd.RoundingFamily()
    kw = dict(max_events=4, candidates=2, certification_samples=100, confidence=0.95, epsilon=1.0, delta=0.0)
    assert not f.applies("float", fam.ProposalContext(kind="float", ideal_numerics=True, **kw))
    assert f.applies("float", fam.ProposalContext(kind="float", **kw))
    assert f.applies("discrete", fam.ProposalContext(kind="discrete", ideal_numerics=True, **kw))
    assert rd.propose_rounding(np.zeros(50, bool), np.ones(50, bool), max_events=4) == []


def test_one_sided_float_cells_are_proposed_with_the_hint():
    rng = np.random.default_rng(5)
    a = np.round(rng.laplace(0, 1, 50_000) * 2**20) / 2**20
    b = np.round(rng.laplace(1, 1, 50_000) * 2**20) / 2**20
    a[:5] += 2.0**-21  # five outputs off the grid on the data side only
    props = fl.float_structure_proposals(a, b, max_events=20)
    hinted = [e for e, one in props if one]
    off = np.array([0.5 + 2.0**-21, 3.25 + 2.0**-21, -7.0 + 2.0**-21])  # off-grid outputs never seen in training
    assert any(e.contains(off).all() and not e.contains(np.array([0.5, 3.25, -7.0])).any() for e in hinted)


# --------------------------------------------------------------------------- hooks for pairs and clusters


def test_a_callable_without_a_pair_is_told_about_inputs():
    with pytest.raises(ParameterError, match="both inputs.*inputs="):
        audit(even_geometric(0.0), epsilon=1.0, samples=1_000)


def test_inputs_come_from_pairsearch(monkeypatch):
    seen = {}

    def callable_pairs(sampler, inputs, *, seed, budget, max_pairs):
        seen.update(inputs=inputs, seed=seed, budget=budget, max_pairs=max_pairs, name=sampler.name)
        return [(0, 1), (3, 3), (2, 5)], "a fake search"

    fake = types.ModuleType("dpharness.auditors.pairsearch")
    fake.callable_pairs = callable_pairs
    fake.MIN_BUDGET = 2_000
    import dpharness.auditors as aud

    monkeypatch.setitem(sys.modules, "dpharness.auditors.pairsearch", fake)
    monkeypatch.setattr(aud, "pairsearch", fake, raising=False)
    r = audit(even_geometric(0.0), epsilon=1.0, samples=20_000, seed=4, workers=1, inputs="SPACE")
    assert seen["inputs"] == "SPACE" and seen["seed"] == 4 and seen["max_pairs"] >= 1 and seen["budget"] >= 2_000
    assert r.pairs_tested == 2 and r.extra["pairs"] == [(0, 1), (2, 5)]  # the identical pair is dropped
    assert "a fake search" in r.method
    with pytest.raises(ParameterError, match="inputs="):
        audit(even_geometric(0.0), 0, 1, epsilon=1.0, samples=1_000, inputs="SPACE")


def test_cluster_is_passed_to_every_task_and_count(monkeypatch):
    """With a cluster, a vectorised sampler's pairs go to it as tasks (training, proposal and ranking
    where the samples are drawn) and so do the certification counts."""
    import contextlib

    import dpharness.auditors._runner as runner

    got = []
    draw, count = runner.draw, runner.count_events

    def spy_draw(*args, **kw):
        got.append(("draw", kw.get("cluster")))
        return draw(*args, **kw)

    def spy_count(*args, **kw):
        got.append(("count", kw.get("cluster")))
        return count(*args, **{**kw, "cluster": None})

    @contextlib.contextmanager
    def spy_tasks(job, *, workers, cluster, what):
        got.append(("tasks", cluster))
        yield None  # "cannot be shipped": the pairs' tasks run here, as the fallback does

    @contextlib.contextmanager
    def session(cluster, workers):
        yield ("opened", cluster)

    monkeypatch.setattr(runner, "draw", spy_draw)
    monkeypatch.setattr(runner, "count_events", spy_count)
    monkeypatch.setattr(runner, "run_tasks", spy_tasks)
    monkeypatch.setattr(runner, "cluster_session", session)
    audit(even_geometric(0.0), 0, 1, epsilon=1.0, samples=5_000, workers=1, cluster="CLUSTER")
    assert got == [("tasks", ("opened", "CLUSTER")), ("draw", None), ("draw", None), ("count", ("opened", "CLUSTER"))]


def test_one_sided_events_cover_keys_never_seen_in_the_proposing_half():
    """A rare leak may first show in the ranking half: the complement of the other side's support and
    the half-lines beyond its range still contain it."""
    from dpharness.auditors import events as ev

    a = np.array([-20, -19, -18, -20, -17] * 20, dtype=np.int64)  # the data side: no leak seen yet
    b = np.array([-20, -19, -20, -18, -5] * 20, dtype=np.int64)
    props = ev.one_sided_events(a, b, label="key")
    leak = np.array([-21, -21], dtype=np.int64)
    grid = np.array([-20, -19, -18], dtype=np.int64)
    favours_data = [e for e, fa in props if fa]
    assert any(e.contains(leak).all() and not e.contains(grid).any() for e in favours_data)
    assert any("below -20" in e.description for e in favours_data)
    assert any("outside the 4 value(s)" in e.description for e in favours_data)
