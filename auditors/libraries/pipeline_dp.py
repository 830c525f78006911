"""Audit targets for PipelineDP (``pip install pipeline-dp``; OpenMined and Google's framework).

Written from PipelineDP's public documentation: ``pipeline_dp.dp_computations``
(``LaplaceMechanism.create_from_epsilon(epsilon, l1_sensitivity)``,
``GaussianMechanism.create_from_epsilon_delta(epsilon, delta, l2_sensitivity)``, ``add_noise``) and
the engine (``DPEngine(NaiveBudgetAccountant(total_epsilon, total_delta), LocalBackend())``,
``aggregate(col, AggregateParams(...), DataExtractors(...), public_partitions)``).
Claims: a mechanism's ``describe()`` figures (its ``epsilon``/``delta``), and for the engine the
accountant's ``total_epsilon``/``total_delta``, the budget the library guarantees for everything it
computes.

Randomness: the noise comes from PyDP (Google's C++ generator), which takes no seed, and whose
state a bare ``fork`` would duplicate (a forked child repeats the parent's next draws). Every target
is a per-call function (``vectorized=False``); the auditor's worker processes are started by
fork+exec, each with the generator fresh. Audits are reproducible only up to the library's
randomness (the result says so in ``extra["notes"]``). The mechanisms hold PyDP's C++ objects,
which do not pickle: a sampler holds the mechanism's parameters and each process builds the mechanism
on first use (cached per process), so the worker pool can ship it.

Neighbour relation: mechanisms: a scalar of the given sensitivity (pair 0 vs ``sensitivity``); the
engine: add or remove one privacy unit (privacy id) with one record in one public partition
(``max_partitions_contributed = max_contributions_per_partition = 1``), values clamped to
``[min_value, max_value]`` (pair: three units with 0.0 vs those and a fourth with 1.0). Public
partitions avoid partition selection, so the release is the noisy aggregate alone.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dpharness.core import AddRemove, BoundedChange

from ._registry import Param, pair_params, register

_LIB, _MOD, _EXTRA = "pipeline-dp", "pipeline_dp", "pipeline-dp"
_UNSEEDED = (
    "PipelineDP's noise comes from PyDP's (Google's C++ library's) own secure generator, which takes no "
    "seed; the seed fixes the events and pairs tested, not the outputs"
)


@functools.lru_cache(maxsize=64)
def _noise(kind: str, epsilon: float, delta: float, sensitivity: float) -> Any:
    """PipelineDP's ``LaplaceMechanism`` (``delta`` unused) or ``GaussianMechanism``, built once per process."""
    import pipeline_dp.dp_computations as dc

    if kind == "laplace":
        return dc.LaplaceMechanism.create_from_epsilon(epsilon, sensitivity)
    return dc.GaussianMechanism.create_from_epsilon_delta(epsilon, delta, sensitivity)


def _mechanism(kind: str, v: dict) -> dict:
    sens = v["sensitivity"]
    recipe = (kind, v["epsilon"], v.get("delta", 0.0), sens)
    mech = _noise(*recipe)
    if kind == "laplace":
        eps, delta = float(mech._mechanism.epsilon), 0.0
    else:
        eps, delta = float(mech._mechanism.epsilon), float(mech._mechanism.delta)

    def fn(data: Any) -> float:
        return float(_noise(*recipe).add_noise(float(data)))

    return dict(
        fn=fn,
        vectorized=False,
        data=float(v["data"]),
        neighbor=float(v["neighbor"]),
        epsilon=eps,
        delta=delta,
        relation=f"scalar query answers at distance <= {sens} ({'L1' if kind == 'laplace' else 'L2'} "
        f"sensitivity {sens})",
        claim_source=f"PipelineDP {mech.describe().strip()} (the mechanism's own epsilon/delta)",
        neighbor_relation=BoundedChange(sens, "l1"),
        unseeded=_UNSEEDED,
    )


_EPS = Param("epsilon", 1.0, "positive", "epsilon")
_SENS = Param("sensitivity", 1.0, "positive", "the query's sensitivity")


@register(
    "pipeline-dp:laplace",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="dp_computations.LaplaceMechanism.create_from_epsilon(...).add_noise on a float scalar (per call)",
    params=(_EPS, _SENS, *pair_params(0.0, 1.0)),
)
def _laplace(v: dict) -> dict:
    return _mechanism("laplace", v)


@register(
    "pipeline-dp:gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="dp_computations.GaussianMechanism.create_from_epsilon_delta(...).add_noise on a float scalar (per call)",
    params=(_EPS, Param("delta", 1e-5, "probability", "delta"), _SENS, *pair_params(0.0, 1.0)),
)
def _gaussian(v: dict) -> dict:
    return _mechanism("gaussian", v)


def _engine(metric: str, v: dict) -> dict:
    import pipeline_dp

    lo, hi, eps, delta = float(v["min_value"]), float(v["max_value"]), v["epsilon"], 0.0
    noise = pipeline_dp.NoiseKind.LAPLACE
    metric_obj = getattr(pipeline_dp.Metrics, metric)

    def release(values: list[float]) -> float:
        acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
        engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
        params = pipeline_dp.AggregateParams(
            metrics=[metric_obj],
            noise_kind=noise,
            max_partitions_contributed=1,
            max_contributions_per_partition=1,
            min_value=lo,
            max_value=hi,
        )
        extract = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: 0, value_extractor=lambda r: r[1]
        )
        rows = [(i, float(x)) for i, x in enumerate(values)]
        result = engine.aggregate(rows, params, extract, public_partitions=[0])
        acc.compute_budgets()
        out = list(result)
        if len(out) != 1:
            from dpharness.errors import MechanismError

            raise MechanismError(f"PipelineDP returned {len(out)} partitions for one public partition; expected 1.")
        return float(getattr(out[0][1], metric.lower()))

    probe = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    claim_eps, claim_delta = float(probe.total_epsilon), float(probe.total_delta)
    data = [float(x) for x in np.atleast_1d(v["data"])]
    nb = [float(x) for x in np.atleast_1d(v["neighbor"])]
    return dict(
        fn=release,
        vectorized=False,
        data=data,
        neighbor=nb,
        epsilon=claim_eps,
        delta=claim_delta,
        relation=(
            f"data sets that differ by adding or removing one privacy unit contributing one record to the "
            f"one public partition (max_partitions_contributed = max_contributions_per_partition = 1), "
            f"values clamped to [{lo}, {hi}]"
        ),
        claim_source=(
            f"PipelineDP NaiveBudgetAccountant(total_epsilon={eps}, total_delta={delta}): "
            f".total_epsilon = {claim_eps!r}, .total_delta = {claim_delta!r}, the budget of the whole "
            f"DPEngine.aggregate({metric}, Laplace noise, public partitions)"
        ),
        neighbor_relation=AddRemove(),
        unseeded=_UNSEEDED,
    )


_RANGE = (Param("min_value", 0.0, "value", "min_value"), Param("max_value", 1.0, "value", "max_value"))


@register(
    "pipeline-dp:sum",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="DPEngine.aggregate SUM (Laplace, LocalBackend, one public partition) (per call; slow)",
    params=(_EPS, *_RANGE, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])),
)
def _sum(v: dict) -> dict:
    return _engine("SUM", v)


@register(
    "pipeline-dp:mean",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="DPEngine.aggregate MEAN (Laplace, LocalBackend, one public partition) (per call; slow)",
    params=(_EPS, *_RANGE, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])),
)
def _mean(v: dict) -> dict:
    return _engine("MEAN", v)
