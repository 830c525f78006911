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

The group-by target (``pipeline-dp:group-count``) is the engine with *private* partitions: a COUNT per
partition key found in the data, each key released only if PipelineDP's partition selection
(``partition_selection_strategy``: truncated geometric by default, Laplace or Gaussian thresholding)
keeps it. Records are partition keys 0..partitions-1, one privacy unit each (one record a unit, one
partition a unit); neighbours add or remove one unit. Its pairs are searched over data sets of
1..max_n records (PipelineDP refuses an empty collection with ValueError, so the empty data set is
left out of the space rather than audited as a release that raises); the search's threshold scan
finds where a key's release probability crosses 0.05..0.95, where the selection's ε terms live.
Output: for each key, whether it was released (0/1), then each key's noisy count (0.0 when not
released).
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


def _aggregate(eps: float, delta: float, params: Any, extract: Any, rows: list, public: list | None = None) -> list:
    """One ``DPEngine.aggregate`` on the local backend under a fresh ``NaiveBudgetAccountant`` of the whole
    budget (the library's own fresh randomness): its released (partition, metrics) pairs."""
    import pipeline_dp

    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    result = engine.aggregate(rows, params, extract, public_partitions=public)
    acc.compute_budgets()
    return list(result)


def _claim(eps: float, delta: float) -> tuple[float, float]:
    """The (ε, δ) the accountant holds for a budget of (``eps``, ``delta``): the claim audited."""
    import pipeline_dp

    probe = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    return float(probe.total_epsilon), float(probe.total_delta)


def _engine(metric: str, v: dict) -> dict:
    import pipeline_dp

    lo, hi, eps, delta = float(v["min_value"]), float(v["max_value"]), v["epsilon"], 0.0
    noise = pipeline_dp.NoiseKind.LAPLACE
    metric_obj = getattr(pipeline_dp.Metrics, metric)

    def release(values: list[float]) -> float:
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
        out = _aggregate(eps, delta, params, extract, [(i, float(x)) for i, x in enumerate(values)], [0])
        if len(out) != 1:
            from dpharness.errors import MechanismError

            raise MechanismError(f"PipelineDP returned {len(out)} partitions for one public partition; expected 1.")
        return float(getattr(out[0][1], metric.lower()))

    claim_eps, claim_delta = _claim(eps, delta)
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


_STRATEGIES = {
    "truncated_geometric": "TRUNCATED_GEOMETRIC",
    "laplace_thresholding": "LAPLACE_THRESHOLDING",
    "gaussian_thresholding": "GAUSSIAN_THRESHOLDING",
}


def _group_count(v: dict) -> dict:
    import pipeline_dp

    from dpharness.auditors.pairsearch import Datasets
    from dpharness.core import Finite
    from dpharness.errors import ParameterError

    eps, delta, k, max_n = v["epsilon"], v["delta"], int(v["partitions"]), int(v["max_n"])
    strategy = v["strategy"]
    if strategy not in _STRATEGIES:
        raise ParameterError(f"strategy={strategy!r}: pass one of {', '.join(map(repr, _STRATEGIES))}.")
    if k < 2:
        raise ParameterError(
            f"partitions={k}: pass at least 2 (the data sets hold one other key so that none is empty)."
        )
    if max_n < 3:
        raise ParameterError(f"max_n={max_n}: pass at least 3 (the search needs data sets of several records).")
    kind = getattr(pipeline_dp.PartitionSelectionStrategy, _STRATEGIES[strategy])
    keys = list(range(k))

    def release(records: list) -> np.ndarray:
        params = pipeline_dp.AggregateParams(
            metrics=[pipeline_dp.Metrics.COUNT],
            noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            max_partitions_contributed=1,
            max_contributions_per_partition=1,
            partition_selection_strategy=kind,
        )
        extract = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1], value_extractor=lambda r: 0
        )
        out = np.zeros(2 * k)
        for key, metrics in _aggregate(eps, delta, params, extract, [(i, int(key)) for i, key in enumerate(records)]):
            out[key] = 1.0
            out[k + key] = float(metrics.count)
        return out

    claim_eps, claim_delta = _claim(eps, delta)
    return dict(
        fn=release,
        vectorized=False,
        data=[int(x) for x in np.atleast_1d(v["data"])],
        neighbor=[int(x) for x in np.atleast_1d(v["neighbor"])],
        epsilon=claim_eps,
        delta=claim_delta,
        inputs=Datasets(Finite(tuple(keys)), AddRemove(), (1, max_n)),
        relation=(
            f"data sets of 1..{max_n} records, each a partition key in 0..{k - 1} held by its own privacy unit "
            "(max_partitions_contributed = max_contributions_per_partition = 1); neighbours add or remove one "
            "unit"
        ),
        claim_source=(
            f"PipelineDP NaiveBudgetAccountant(total_epsilon={eps}, total_delta={delta}): "
            f".total_epsilon = {claim_eps!r}, .total_delta = {claim_delta!r}, the budget of the whole "
            f"DPEngine.aggregate(COUNT, Laplace noise, private partitions selected by {strategy})"
        ),
        neighbor_relation=AddRemove(),
        unseeded=_UNSEEDED,
    )


@register(
    "pipeline-dp:group-count",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="DPEngine.aggregate COUNT per partition found in the data (private partition selection, "
    "LocalBackend) (per call)",
    params=(
        _EPS,
        Param("delta", 1e-6, "probability", "delta (partition selection needs delta > 0)"),
        Param("partitions", 2, "positive_int", "partition keys 0..partitions-1"),
        Param("max_n", 100, "positive_int", "largest data set the pair search builds"),
        Param(
            "strategy",
            "truncated_geometric",
            "name",
            "partition selection: truncated_geometric, laplace_thresholding or gaussian_thresholding",
        ),
        *pair_params([1], [1, 0]),
    ),
)
def _group_count_target(v: dict) -> dict:
    return _group_count(v)
