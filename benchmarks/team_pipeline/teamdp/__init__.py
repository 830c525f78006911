"""A team's package, for benchmarks/bench_team_gate.py: a 250-key group-by (counts and clamped income sums per
region, string region names: records given as numbers carry a name's position in the keys), a median and a count under one budget, and a 1 000-round DP-SGD whose
function is compiled per record; the package registers nothing but the mechanisms (the gate's default time
budget audits every round of the DP-SGD). Gate it: ``cd benchmarks/team_pipeline && dpharness gate --module teamdp --own``."""

import os

import numpy as np

from dpharness import AddRemove, ApproxDP, PureDP, RealBox, RealInterval, register
from dpharness import parts as dp

# TEAMDP_HALVE=<mechanism name>: that mechanism's noise halved (its claim kept), a change the gate must catch
_HALVED = os.environ.get("TEAMDP_HALVE", "")


def _noise(name: str) -> float:
    return 0.5 if _HALVED == name else 1.0


REGIONS = [f"region-{i:03d}" for i in range(250)]  # the labels a data frame's region column holds

regions = dp.mechanism(
    name="income_by_region",
    records=RealBox(0, 1000, 2),  # (income in k, region: a name, or its position in REGIONS)
    relation=AddRemove(),
    steps=dp.group_by(
        by=1,
        keys=REGIONS,
        select=dp.partition_select(threshold=40, scale=2 * _noise("income_by_region")),
        part=dp.compose(
            dp.count() >> dp.laplace(4 * _noise("income_by_region")),
            dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(800 * _noise("income_by_region")),
        ),
    ),
    claim=ApproxDP(1.5, 1e-6),
)
register(regions)

median_and_count = dp.mechanism(
    name="median_and_count",
    records=RealInterval(0, 120),
    relation=AddRemove(),
    steps=dp.compose(
        dp.clamp(0, 120) >> dp.quantile(0.5, candidates=range(0, 121), scale=4 * _noise("median_and_count")),
        dp.count() >> dp.laplace(2 * _noise("median_and_count")),
    ),
    claim=PureDP(1),
)
register(median_and_count)


def grad(theta, record):  # per record: compiled with numba (compiled=True) and looped over the rows
    x, y = record
    return (1 / (1 + np.exp(-theta[0] * x)) - y) * x


def step(theta, noisy_sum):
    return theta - 0.5 * noisy_sum / 100


def dpsgd_of(sigma: float, claim: ApproxDP, name: str = "dpsgd"):
    """The 1 000-round DP-SGD with noise multiplier ``sigma``, claiming ``claim``."""
    return dp.mechanism(
        name=name,
        records=RealBox(-1, 1, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            1000,
            dp.poisson_sample(0.01)
            >> dp.map_records(grad, compiled=True)
            >> dp.clip_norm(1)
            >> dp.sum()
            >> dp.gaussian(sigma=sigma),
            init=[0.0],
            update=step,
            compiled=True,
        ),
        claim=claim,
    )


dpsgd = dpsgd_of(1.0 * _noise("dpsgd"), ApproxDP(1.85, 1e-5))
register(dpsgd)
