"""Sampling: Poisson subsampling (:func:`poisson_sample`): each record kept independently with probability
exactly ``rate``; and sampling without replacement of a fixed size (:func:`sample`): ``m`` of the ``n``
records, every m-subset equally likely. A fresh subsample for every release; the steps chained after it
run on the kept records. The nodes govern the chain they head (``check_head``/``execute_head``).
Amplification proved in :mod:`dpharness.proofs.parts.sampling`."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.errors import ParameterError

from ._base import (
    Batch,
    Chain,
    Measurement,
    Space,
    Step,
    Transformation,
    _need,
    _plain,
    check_structure,
    execute,
    execute_batch,
    flatten,
    register,
)

__all__ = ["PoissonSample", "poisson_sample", "FixedSample", "sample"]


class _Subsample(Step):
    """What the two samplings share: each heads a chain (``sample >> rest``) whose rest runs on the kept
    records and must end in noise. Subclasses name themselves (``_word``) and give an example."""

    _word = ""
    _example = ""

    def check(self, space: Space) -> tuple[Space | None, int]:
        raise ParameterError(
            f"{self.describe()} must be followed by >> steps that end in noise (e.g. {self._example})."
        )

    def check_head(self, chain: Chain, space: Space) -> tuple[Space | None, int]:
        _need(space, "records", self._word)
        out, width = check_structure(chain.second, space)
        if out is not None:
            raise ParameterError(
                f"{chain.describe()} releases no noise after the sample; end it with a noise measurement "
                "(e.g. >> dp.gaussian(sigma))."
            )
        return None, width


@dataclass(frozen=True)
class PoissonSample(_Subsample):
    """Poisson subsampling: every record is kept independently with probability exactly ``rate``
    (:func:`dpharness.mechanisms._exact.bernoulli`: the rate read as its exact value), a fresh
    subsample for every release, and what follows (``>>``) runs on the kept records and must end in
    noise. Privacy under add/remove neighbours: amplification by subsampling (ε-DP becomes
    ln(1 + rate·(e^ε − 1))-DP, Balle, Barthe & Gaboardi 2018; the privacy-loss distribution of one
    subsampled scalar noise by its dominating pair, Zhu, Dong & Wang 2022); under substitution it is
    not proved here (UNPROVEN)."""

    rate: Any

    def __post_init__(self) -> None:
        rate = _plain("rate", self.rate)
        if not 0 < Fraction(rate) <= 1:
            raise ParameterError(f"rate={self.rate!r} must be in (0, 1]; pass the probability of keeping each record.")
        object.__setattr__(self, "rate", rate)

    _word = "poisson_sample"
    _example = "dp.poisson_sample(0.01) >> dp.count() >> dp.gaussian(sigma=1)"

    def describe(self) -> str:
        return f"poisson_sample({self.rate})"

    def execute_head(self, chain: Chain, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        return _subsampled(self, chain.second, value, space, size, rng)

    def execute_batch_head(self, chain: Chain, batch: Batch, space: Space, rng: np.random.Generator) -> Any:
        return _subsampled_batch(self, chain.second, batch, space, rng)


register(PoissonSample)


def _subsampled(
    sample: PoissonSample, rest: Step, value: Any, space: Space, size: int, rng: np.random.Generator
) -> np.ndarray:
    """``size`` releases, each on its own Poisson subsample: an exact Bernoulli(rate) per record and
    release (:func:`bernoulli_indices`, release-major); the releases that kept the same records run ``rest`` together (one call per distinct
    subsample, in a fixed order, so the same seed gives the same outputs)."""
    from dpharness.mechanisms._exact import bernoulli_indices

    arr = np.asarray(value)
    n = len(arr)
    if n == 0:
        return flatten(execute(rest, arr, space, size, rng))
    if _batched(rest):  # every release's subsample at once: the batch's rows are release-major, as below
        return execute_batch(rest, _subsampled_rows(sample, Batch.tiled(arr, size, None), rng), space, rng)
    keep = np.zeros(size * n, dtype=bool)
    keep[bernoulli_indices(sample.rate, size * n, rng)] = True
    return _run_on(keep.reshape(size, n), rest, arr, space, size, rng)


def _batched(step: Step) -> bool:
    """Whether ``step`` runs a batch of releases at once without falling back to one release at a time:
    record-wise transformations, then an aggregate with an exact batched form, then a noise with a
    vectorised ``run_each``."""
    while isinstance(step, Chain) and isinstance(step.first, Transformation) and step.first.rowwise:
        step = step.second
    if not (isinstance(step, Chain) and isinstance(step.first, Transformation)):
        return False
    aggregate, noise = step.first, step.second
    grouped = (
        getattr(aggregate, "sum_terms", None) is not None or getattr(aggregate, "apply_by_units", None) is not None
    )
    return grouped and isinstance(noise, Measurement) and type(noise).run_each is not Measurement.run_each


def _subsampled_rows(sample: "PoissonSample", batch: Batch, rng: np.random.Generator) -> Batch:
    """The batch's rows each release keeps: an exact Bernoulli(rate) per row, in the batch's row order."""
    from dpharness.mechanisms._exact import bernoulli_indices

    keep = bernoulli_indices(sample.rate, len(batch.rows), rng)
    return Batch(batch.n, batch.states, batch.rows[keep], batch.codes[keep])


def _subsampled_batch(sample: PoissonSample, rest: Step, batch: Batch, space: Space, rng: np.random.Generator) -> Any:
    """A batch's releases, each on its own Poisson subsample of its own records: an exact Bernoulli(rate)
    per (release, record), as :func:`_subsampled` draws them, then ``rest`` on the kept rows of every
    release at once."""
    if batch.values is not None:
        return NotImplemented
    return execute_batch(rest, _subsampled_rows(sample, batch, rng), space, rng)


def _run_on(
    keep: np.ndarray, rest: Step, arr: np.ndarray, space: Space, size: int, rng: np.random.Generator
) -> np.ndarray:
    """Release i runs ``rest`` on the records ``keep[i]`` selects; releases with the same selection run
    together (one call per distinct subsample, in a fixed order: the same seed gives the same outputs)."""
    patterns, inverse = np.unique(keep, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=len(patterns))
    rows, outs, start = [], [], 0
    for pattern, c in zip(patterns, counts):
        rows.append(order[start : start + c])
        outs.append(flatten(execute(rest, arr[pattern], space, int(c), rng)))
        start += c
    got = np.concatenate(outs)
    out = np.empty_like(got)
    out[np.concatenate(rows)] = got
    return out


@dataclass(frozen=True)
class FixedSample(_Subsample):
    """Sampling without replacement of a fixed size: ``size`` records drawn uniformly among the data set's
    n records (every size-subset equally likely; :meth:`numpy.random.Generator.choice` without
    replacement, integer arithmetic only), a fresh subsample for every release, and what follows (``>>``)
    runs on the kept records and must end in noise. Privacy under substitution neighbours on data sets of
    a declared size n (``dp.mechanism(..., relation=Substitute(), size=n)``): amplification at
    q = size/n (ε-DP becomes ln(1 + q(e^ε − 1))-DP, Balle, Barthe & Gaboardi 2018, Thm 9); under any
    other relation, or without a declared size, not proved here (UNPROVEN)."""

    size: int

    def __post_init__(self) -> None:
        from dpharness import _validate as _v

        object.__setattr__(self, "size", _v.integer("size", self.size, minimum=1))

    _word = "sample"
    _example = "dp.sample(100) >> dp.count() >> dp.gaussian(sigma=1)"

    def describe(self) -> str:
        return f"sample({self.size})"

    def execute_head(self, chain: Chain, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        arr = np.asarray(value)
        n = len(arr)
        if n < self.size:
            raise ParameterError(
                f"{self.describe()} draws {self.size} records but the data set has {n}; declare size=n >= {self.size} "
                "(or sample fewer)."
            )
        keep = np.zeros((size, n), dtype=bool)
        for i in range(size):  # one uniform size-subset per release
            keep[i, rng.choice(n, self.size, replace=False)] = True
        return _run_on(keep, chain.second, arr, space, size, rng)


register(FixedSample)


def sample(size: int) -> FixedSample:
    """Keep ``size`` records drawn without replacement (every subset of that size equally likely), afresh
    for every release; chain the rest after it: ``dp.sample(100) >> dp.count() >> dp.laplace(scale=1)``.
    Proved under ``relation=Substitute()`` with the data-set size declared (``size=n``): amplification at
    q = size/n."""
    return FixedSample(size)


def poisson_sample(rate: Any) -> PoissonSample:
    """Keep each record independently with probability ``rate`` (exactly), afresh for every release;
    chain the rest after it: ``dp.poisson_sample(0.01) >> dp.count() >> dp.gaussian(sigma=1)``."""
    return PoissonSample(rate)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
