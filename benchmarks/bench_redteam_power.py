"""Buggy mechanisms a team could plausibly write, each with a claim its true privacy loss clearly
violates, to test the audit's power beyond the named examples (benchmarks/results/audit_power.md).

Run: ``python benchmarks/bench_redteam_power.py [NAME ...]``: for each case, ``dpharness.check(m)`` (parts) or
``dpharness.audit(fn, inputs=..., ...)`` (callables) at the defaults with seed 0; prints the proof verdict,
the audit's ε_lb, whether the audit alone certifies the violation, the samples and the seconds.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

import dpharness
from dpharness import AddRemove, ApproxDP, IntegerRange, PureDP, RealBox, RealInterval, Substitute
from dpharness import parts as dp

# --------------------------------------------------------------------------- parts mechanisms


def clamped_sum_wide():
    """Sum clamped to [0, 50] while the noise was calibrated for a clamp of [0, 10] (scale 10 for ε = 1).
    True ε = 50/10 = 5."""
    return dp.mechanism(
        name="clamped_sum_wide",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.clamp(0, 50) >> dp.sum() >> dp.laplace(scale=10),
        claim=PureDP(1),
    ), 5.0


def declared_keys_sum_low_noise():
    """Declared keys, one per region, a per-key clamped income sum with noise for a clamp of 10, clamp 100
    (parallel over declared keys: no selection). True ε = 100/10 = 10."""
    return dp.mechanism(
        name="declared_keys_sum_low_noise",
        records=RealBox(0, 100, 2),
        relation=AddRemove(),
        steps=dp.parallel(dp.column(1) >> dp.clamp(0, 100) >> dp.sum() >> dp.laplace(scale=10), by=0, keys=[0, 1, 2]),
        claim=PureDP(1),
    ), 10.0


def group_by_declared_part_low_noise():
    """A group-by over 20 declared keys with a sound selection but a per-key clamped sum whose noise
    assumes a clamp of 20 where the clamp is 200: true ε ≈ 1/3 + 200/60 ≈ 3.7 against the claim 1."""
    return dp.mechanism(
        name="group_by_declared_part_low_noise",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=list(range(20)),
            select=dp.partition_select(threshold=41, scale=3),
            part=dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(60),
        ),
        claim=ApproxDP(1, 1e-6),
    ), 1 / 3 + 200 / 60


def selection_threshold_too_low():
    """Partition selection (keys from the data) with threshold 3 at scale 1: δ = P(K >= 2) ≈
    e^-2/(1 + e^-1) ≈ 0.099, claimed 1e-6 (a δ violation; ε = 1 as claimed)."""
    return dp.mechanism(
        name="selection_threshold_too_low",
        records=RealBox(0, 100, 2),
        relation=AddRemove(),
        steps=dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=3, scale=1)),
        claim=ApproxDP(1, 1e-6),
    ), None


def bound_contributions_too_many():
    """User level: each user keeps up to 10 records per key, but the per-key count's noise (scale 1)
    assumes one: the count alone moves by 10 per key, over up to 3 keys. True ε ≥ 10 (claim 2)."""
    return dp.mechanism(
        name="bound_contributions_too_many",
        records=RealBox(0, 100, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=10, max_per_partition=10)
        >> dp.group_by(
            by=1,
            keys=list(range(3)),
            select=dp.partition_select(threshold=60, scale=10),
            part=dp.count() >> dp.laplace(scale=1),
        ),
        claim=ApproxDP(2, 1e-6),
    ), 10.0


def histogram_substitute():
    """A histogram under substitution with Laplace noise for add/remove (scale 1: L1 sensitivity 1);
    substitution moves two bins: true ε = 2 against the claim 1."""
    return dp.mechanism(
        name="histogram_substitute",
        records=IntegerRange(1, 5),
        relation=Substitute(),
        steps=dp.histogram(categories=[1, 2, 3, 4, 5]) >> dp.laplace(scale=1),
        claim=PureDP(1),
    ), 2.0


def median_few_candidates():
    """A median over 3 candidates at scale 0.25 (ε = 2Δ/s = 4) claiming 1."""
    return dp.mechanism(
        name="median_few_candidates",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.clamp(0, 100) >> dp.quantile(0.5, candidates=[25, 50, 75], scale=0.25),
        claim=PureDP(1),
    ), 4.0


def subsample_rate_wrong():
    """Poisson rate 0.5 around a count at ε = 2; the claim ln(1 + 0.05(e² − 1)) ≈ 0.28 assumes rate 0.05.
    True ε = ln(1 + 0.5(e² − 1)) ≈ 1.43."""
    return dp.mechanism(
        name="subsample_rate_wrong",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.poisson_sample(0.5) >> dp.count() >> dp.laplace(scale=0.5),
        claim=PureDP(0.3),
    ), math.log(1 + 0.5 * (math.e**2 - 1))


def compose_over_budget():
    """A count, a clamped sum and a sum of squares each given ε = 1, claimed as ε = 1 in all: true ε = 3."""
    return dp.mechanism(
        name="compose_over_budget",
        records=RealInterval(0, 10),
        relation=AddRemove(),
        steps=dp.clamp(0, 10)
        >> dp.compose(
            dp.count() >> dp.laplace(scale=1),
            dp.sum() >> dp.laplace(scale=10),
            dp.sum_squares() >> dp.laplace(scale=100),
        ),
        claim=PureDP(1),
    ), 3.0


def gaussian_count_pure():
    """A count with Gaussian noise (σ = 1) claimed at pure ε = 1: no finite pure ε."""
    return dp.mechanism(
        name="gaussian_count_pure",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.count() >> dp.gaussian(sigma=1),
        claim=PureDP(1),
    ), math.inf


def sparse_vector_too_many():
    """Above threshold with c = 4 answers but the query noise of c = 1 (query_scale 2·scale): ε =
    1/t_ρ + 2c/t_ν = 1/2 + 8/4 = 2.5 for general queries (monotone: 1/2 + 4/4 = 1.5) against the
    claim 1 = 1/2 + 2/4 made for one answer. Ten nested counts at threshold 5."""
    queries = [
        dp.query(lambda d, t=t: float(np.sum(np.asarray(d).reshape(-1) >= t)), sensitivity=1, increasing=True)
        for t in range(0, 100, 10)
    ]
    return dp.mechanism(
        name="sparse_vector_too_many",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.above_threshold(5, queries=queries, scale=2, query_scale=4, c=4),
        claim=PureDP(1),
    ), 1.5


def user_group_by_no_max_partitions():
    """User level, keys from the data: each user may touch up to 8 keys (max_records 8), but the selection
    was calibrated for one key (scale 1, threshold 16): ε = L/t = 8 against the claim 1.5."""
    return dp.mechanism(
        name="user_group_by_many_keys",
        records=RealBox(0, 1000, 2),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=8, max_per_partition=1)
        >> dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=16, scale=1)),
        claim=ApproxDP(1.5, 1e-6),
    ), 8.0


def user_group_by_sum_low_noise():
    """User level, keys from the data: each user keeps up to 3 records, one per key, and each key releases a
    clamped income sum whose noise (scale 10) assumes incomes clamped to [0, 10] where the clamp is
    [0, 100]: ε = 3/t_sel + 3·100/10 = 30.3 against the claim 2."""
    return dp.mechanism(
        name="user_group_by_sum_low_noise",
        records=RealBox(0, 1000, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=3, max_per_partition=1)
        >> dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=60, scale=10),
            part=dp.column(2) >> dp.clamp(0, 100) >> dp.sum() >> dp.laplace(scale=10),
        ),
        claim=ApproxDP(2, 1e-6),
    ), 30.3


def sparse_vector_c8():
    """Above threshold with c = 8 answers over 10 nested counts, with the query noise of c = 1 (query_scale
    2·scale = 4): proven ε = 1/2 + 8/4 = 2.5 (monotone queries) against the claim 1 made for one answer. The
    c-term needs ⊤ answers on queries the added record does not move after ⊥ on many it moves; on n copies
    of a record with one record added (the family the aimed pairs rank by the exact law) no answer pattern
    would certify more than 0.74 on 10^5 samples a side."""
    queries = [
        dp.query(lambda d, t=t: float(np.sum(np.asarray(d).reshape(-1) >= t)), sensitivity=1, increasing=True)
        for t in range(0, 100, 10)
    ]
    return dp.mechanism(
        name="sparse_vector_c8",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.above_threshold(5, queries=queries, scale=2, query_scale=4, c=8),
        claim=PureDP(1),
    ), 2.5


def svt_wrong_sensitivity():
    """Above threshold over sums of values clamped to [0, 10], each declared with sensitivity 1 (the
    team forgot the clamp's width): the stated Δ is a precondition the proof takes as given, so the proof
    passes at ε = 1/2 + 2/4 = 1; the true Δ is 10, ε up to 10 (monotone: 10/2 + 10/4 = 7.5)."""
    queries = [
        dp.query(lambda d, t=t: float(np.clip(np.asarray(d).reshape(-1), 0, 10).sum() - t), sensitivity=1)
        for t in (0, 20, 40)
    ]
    return dp.mechanism(
        name="svt_wrong_sensitivity",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.above_threshold(50, queries=queries, scale=2, query_scale=4, c=1),
        claim=PureDP(1),
    ), 7.5


def gaussian_sigma_small():
    """A count with Gaussian noise σ = 0.5 claimed at (1, 1e-6): the analytic Gaussian needs σ ≈ 4.4 there;
    true ε(δ = 1e-6) ≈ 9.9 at σ = 0.5."""
    return dp.mechanism(
        name="gaussian_sigma_small",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.count() >> dp.gaussian(sigma=0.5),
        claim=ApproxDP(1, 1e-6),
    ), 9.9


def noisy_mean_wide_clamp():
    """A noisy mean (sum / count, post-processed) whose sum noise (scale 20) assumes values clamped to
    [0, 10] where the clamp is [0, 100]: ε of the pair of releases 100/20 + 1/2 = 5.5, claimed 1 (only the
    mean is released)."""
    return dp.mechanism(
        name="noisy_mean_wide_clamp",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.clamp(0, 100)
        >> dp.compose(dp.sum() >> dp.laplace(scale=20), dp.count() >> dp.laplace(scale=2))
        >> dp.post(lambda s, c: s / max(c, 1)),
        claim=PureDP(1),
    ), None


def group_by_substitute():
    """A group-by over 5 declared keys under substitution (data sets of 100 records) with noise calibrated
    for add/remove (selection scale 2, count scale 1: 1/2 + 1 = 1.5): substitution moves a record between
    two keys, ε = 2/2 + 2/1 = 3 against the claim 1.5."""
    return dp.mechanism(
        name="group_by_substitute",
        records=RealBox(0, 4, 1),
        relation=Substitute(),
        size=100,
        steps=dp.group_by(
            by=0,
            keys=list(range(5)),
            select=dp.partition_select(threshold=20, scale=2),
            part=dp.count() >> dp.laplace(scale=1),
        ),
        claim=ApproxDP(1.5, 1e-3),
    ), 3.0


def top3_claimed_as_top1():
    """The noisy top 3 of 5 category counts (Gumbel, scale 2) claimed at the top-1's ε = 1/2 (monotone
    counts: kΔ/scale = 3/2 for k = 3)."""
    return dp.mechanism(
        name="top3_claimed_as_top1",
        records=IntegerRange(1, 5),
        relation=AddRemove(),
        steps=dp.histogram(categories=[1, 2, 3, 4, 5]) >> dp.report_noisy_max(2, noise="gumbel", k=3),
        claim=PureDP(0.5),
    ), 1.5


def p90_low_noise():
    """The 90th percentile of values clamped to [0, 1000] over 101 candidates at scale 0.45 (ε = 2·0.9/0.45
    = 4) claiming 1."""
    return dp.mechanism(
        name="p90_low_noise",
        records=RealInterval(-1e6, 1e6),
        relation=AddRemove(),
        steps=dp.clamp(0, 1000) >> dp.quantile(0.9, candidates=range(0, 1001, 10), scale=0.45),
        claim=PureDP(1),
    ), 4.0


def vector_l2_with_laplace():
    """A vector of 16 query answers whose neighbours move it by at most 1 in L2 norm, with Laplace noise of
    scale 1 on each coordinate (calibrated for L1 sensitivity 1): the L2 ball holds L1 distance √16 = 4,
    so ε = 4 against the claim 1."""
    from dpharness import BoundedChange

    return dp.mechanism(
        name="vector_l2_with_laplace",
        records=RealInterval(-10, 10),
        relation=BoundedChange(1, "l2"),
        input="vector",
        dim=16,
        steps=dp.laplace(scale=1),
        claim=PureDP(1),
    ), 4.0


def repeat_counts():
    """Ten noisy counts (scale 1 each) released together, claimed at the ε = 1 of one."""
    return dp.mechanism(
        name="repeat_counts",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.repeat(10, dp.count() >> dp.laplace(scale=1)),
        claim=PureDP(1),
    ), 10.0


def selection_delta_33x():
    """Partition selection (keys from the data) at threshold 11, scale 1: δ = e^-10/(1 + e^-1) ≈ 3.3e-5, 33
    times the claimed 1e-6 (ε = 1 as claimed). A key held by one record is released with probability δ."""
    return dp.mechanism(
        name="selection_delta_33x",
        records=RealBox(0, 100, 2),
        relation=AddRemove(),
        steps=dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=11, scale=1)),
        claim=ApproxDP(1, 1e-6),
    ), None


def found_keys_sum_low_noise():
    """Record level, keys from the data: each key released by a sound partition selection (threshold 20,
    scale 1) with its income sum clamped to [0, 200] plus Laplace noise of scale 20 (for a clamp of 20):
    ε = 1 + 200/20 = 11 against the claim 2."""
    return dp.mechanism(
        name="found_keys_sum_low_noise",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=20, scale=1),
            part=dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(20),
        ),
        claim=ApproxDP(2, 1e-6),
    ), 11.0


def dpsgd_rounds_miscounted():
    """The team's 1 000-round DP-SGD (q = 0.01, clip 1, σ = 1; PROVED at (1.85, 1e-5)) claiming the
    (0.6, 1e-5) its accountant gave for 100 rounds: true ε(1e-5) ≈ 1.85, about 3 times the claim."""
    import os

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "team_pipeline"))
    import teamdp  # noqa: PLC0415 - the team's package, beside the benchmarks

    return teamdp.dpsgd_of(1.0, ApproxDP(0.6, 1e-5), name="dpsgd_rounds_miscounted"), 1.85


PARTS = {
    f.__name__: f
    for f in (
        clamped_sum_wide,
        declared_keys_sum_low_noise,
        group_by_declared_part_low_noise,
        selection_threshold_too_low,
        bound_contributions_too_many,
        histogram_substitute,
        median_few_candidates,
        subsample_rate_wrong,
        compose_over_budget,
        gaussian_count_pure,
        sparse_vector_too_many,
        user_group_by_no_max_partitions,
        user_group_by_sum_low_noise,
        sparse_vector_c8,
        svt_wrong_sensitivity,
        gaussian_sigma_small,
        noisy_mean_wide_clamp,
        group_by_substitute,
        top3_claimed_as_top1,
        p90_low_noise,
        vector_l2_with_laplace,
        repeat_counts,
        selection_delta_33x,
        found_keys_sum_low_noise,
        dpsgd_rounds_miscounted,
    )
}

# --------------------------------------------------------------------------- plain callables


def _lap_int(rng, scale, size):
    p = 1 - np.exp(-1.0 / scale)
    return rng.geometric(p, size) - rng.geometric(p, size)


def user_count_unbounded(data, size, rng):
    """Count of records (user, value) with noise for one record per user: a user holding up to 10
    records moves it by 10. Claimed ε = 1 at user level (a record is a user here: the auditor sees
    data sets whose neighbours differ by one record (a user's records inlined as a multiplicity column)."""
    arr = np.asarray(data, dtype=float).reshape(-1, 2)
    total = int(np.round(arr[:, 1]).sum()) if len(arr) else 0  # column 1: the user's record count (1..10)
    return total + _lap_int(rng, 1.0, size)


def svt_no_cutoff(data, size, rng):
    """Sparse vector that never stops: 10 nested counts (records >= 0, 10, ..., 90) against one noisy
    threshold (5 + Lap(2)), each with fresh Lap(4) noise, and every answer released (no cutoff after the
    first ⊤). Claimed ε = 1 (the cutoff-1 analysis: 1/2 + 2/4). Nested counts move together under the added
    record, so the threshold's shift absorbs most of the loss: the sup is about min(k/4, 1/2 + (10 − k)/4)
    over the k queries a record moves, about 1.5, reached only in the noise's far tails (a weak case)."""
    arr = np.asarray(data, dtype=float).reshape(-1)
    answers = np.array([np.sum(arr >= t) for t in range(0, 100, 10)], dtype=float)
    rho = 5 + rng.laplace(0.0, 2.0, (size, 1))
    nu = rng.laplace(0.0, 4.0, (size, 10))
    return (answers[None, :] + nu >= rho).astype(np.int8)


def keys_present_only(data, size, rng):
    """A histogram that drops keys with a zero count (no partition selection): a key held by one record
    appears with probability 1, absent with probability 1: an unbounded δ failure. Claimed (1, 1e-6)."""
    arr = np.asarray(data, dtype=float).reshape(-1)
    keys = np.unique(arr)
    out = np.zeros((size, 10))
    for k in keys:
        j = int(k)
        out[:, j] = np.sum(arr == k) + rng.laplace(0, 1.0, size)
    return out


def group_sum_wide_clamp(data, size, rng):
    """A team's group-by as plain numpy on (value, key) rows over the declared keys 0, 50 and 100 (other
    keys dropped): a key is released when its record count plus Lap(1) reaches 30 (selection sound at
    ε = 1, δ ≈ e^-29/2), with its sum of values clamped to [0, 100] plus Lap(1): the sum's noise assumes
    values clamped to [0, 1]. Claimed (2, 1e-6); the sum alone moves by 100 at scale 1 (ε = 100) once the
    key is released, i.e. held by about 30 records."""
    arr = np.asarray(data, dtype=float).reshape(-1, 2)
    out = np.zeros((size, 6))
    for j, k in enumerate((0.0, 50.0, 100.0)):
        on = arr[:, 1] == k
        count = on.sum() + rng.laplace(0.0, 1.0, size)
        total = np.clip(arr[on, 0], 0, 100).sum() + rng.laplace(0.0, 1.0, size)
        keep = count >= 30
        out[:, 2 * j] = np.where(keep, np.round(count), 0)
        out[:, 2 * j + 1] = np.where(keep, np.round(total), 0)
    return out


def thresholded_sum(data, size, rng):
    """Released only when the record count plus Lap(1) reaches 30 (a small-cohort rule), the sum of values
    clamped to [0, 100] plus Lap(1), its noise for values in [0, 1]. Claimed (2, 1e-6); true ε about 100
    on 29 against 30 records at 100."""
    arr = np.clip(np.asarray(data, dtype=float).reshape(-1), 0, 100)
    count = len(arr) + rng.laplace(0.0, 1.0, size)
    total = arr.sum() + rng.laplace(0.0, 1.0, size)
    return np.where(count >= 30, np.floor(total), -1.0)


CALLABLES = {
    "user_count_unbounded": (
        user_count_unbounded,
        lambda: __import__("dpharness.auditors.pairsearch", fromlist=["Datasets"]).Datasets(
            RealBox(0, 10, 2), AddRemove(), size=(0, 5)
        ),
        dict(epsilon=1.0),
        10.0,
    ),
    "svt_no_cutoff": (
        svt_no_cutoff,
        lambda: __import__("dpharness.auditors.pairsearch", fromlist=["Datasets"]).Datasets(
            RealInterval(0, 100), AddRemove(), size=(0, 8)
        ),
        dict(epsilon=1.0),
        1.5,
    ),
    "group_sum_wide_clamp": (
        group_sum_wide_clamp,
        lambda: __import__("dpharness.auditors.pairsearch", fromlist=["Datasets"]).Datasets(
            RealBox(0, 100, 2), AddRemove(), size=(0, 200)
        ),
        dict(epsilon=2.0, delta=1e-6),
        100.0,
    ),
    "thresholded_sum": (
        thresholded_sum,
        lambda: __import__("dpharness.auditors.pairsearch", fromlist=["Datasets"]).Datasets(
            RealInterval(0, 100), AddRemove(), size=(0, 200)
        ),
        dict(epsilon=2.0, delta=1e-6),
        100.0,
    ),
    "keys_present_only": (
        keys_present_only,
        lambda: __import__("dpharness.auditors.pairsearch", fromlist=["Datasets"]).Datasets(
            IntegerRange(0, 9), AddRemove(), size=(0, 5)
        ),
        dict(epsilon=1.0, delta=1e-6),
        math.inf,
    ),
}


def run_parts(name: str) -> str:
    m, true_eps = PARTS[name]()
    t0 = time.perf_counter()
    c = dpharness.check(m, seed=0)
    secs = time.perf_counter() - t0
    proof = c.proof
    r = c.audit
    claim = m.claim
    if r is None:
        return f"| {name} | {claim} | {true_eps} | {proof.verdict if proof else '-'} | no audit: {c.audit_error or c.error} | | | {secs:.0f} |"
    caught = "CAUGHT" if not r.passed else "missed"
    pair = (r.extra or {}).get("certified_pairs")
    fam = (r.extra or {}).get("family")
    return (
        f"| {name} | {claim} | {true_eps} | {proof.verdict if proof else '-'} | {r.epsilon_lower_bound:.4f} "
        f"(δ_lb {getattr(r, 'delta_lower_bound', None)}) | {caught} | {r.samples:,} | {secs:.0f} | {fam} | {str(pair)[:300]}"
    )


def run_callable(name: str) -> str:
    fn, inputs, kw, true_eps = CALLABLES[name]
    t0 = time.perf_counter()
    r = dpharness.audit(fn, inputs=inputs(), seed=0, time_budget=120, **kw)
    secs = time.perf_counter() - t0
    caught = "CAUGHT" if not r.passed else "missed"
    fam = (r.extra or {}).get("family")
    return (
        f"| {name} (callable) | ε={kw} | {true_eps} | — | {r.epsilon_lower_bound:.4f} "
        f"(δ_lb {getattr(r, 'delta_lower_bound', None)}) | {caught} | {r.samples:,} | {secs:.0f} | {fam} | "
        + (f"{str(r.witness.data)[:80]} vs {str(r.witness.neighbor)[:80]}" if r.witness is not None else "no witness")
        + f" | {r.method[:400]}"
    )


def main(argv: list[str]) -> int:
    names = argv or list(PARTS) + list(CALLABLES)
    for n in names:
        line = run_parts(n) if n in PARTS else run_callable(n)
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
