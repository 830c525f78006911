"""Sampling: Poisson subsampling (:func:`poisson_sample`): each record kept independently with probability
exactly ``rate``, a fresh subsample for every release, the steps chained after it run on the kept records.
The node governs the chain it heads (``check_head``/``execute_head``). Amplification proved in
:mod:`dpharness.proofs.parts.sampling`."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.errors import ParameterError

from ._base import Chain, Space, Step, _need, _plain, check_structure, execute, flatten, register

__all__ = ["PoissonSample", "poisson_sample"]


@dataclass(frozen=True)
class PoissonSample(Step):
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

    def describe(self) -> str:
        return f"poisson_sample({self.rate})"

    def check(self, space: Space) -> tuple[Space | None, int]:
        raise ParameterError(f"{self.describe()} must be followed by >> steps that end in noise "
                             "(e.g. dp.poisson_sample(0.01) >> dp.count() >> dp.gaussian(sigma=1)).")

    def check_head(self, chain: Chain, space: Space) -> tuple[Space | None, int]:
        _need(space, "records", "poisson_sample")
        out, width = check_structure(chain.second, space)
        if out is not None:
            raise ParameterError(f"{chain.describe()} releases no noise after the sample; end it with a noise measurement "
                                 "(e.g. >> dp.gaussian(sigma)).")
        return None, width

    def execute_head(self, chain: Chain, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        return _subsampled(self, chain.second, value, space, size, rng)


register(PoissonSample)


def _subsampled(sample: PoissonSample, rest: Step, value: Any, space: Space, size: int,
                rng: np.random.Generator) -> np.ndarray:
    """``size`` releases, each on its own Poisson subsample: an exact Bernoulli(rate) per record and
    release; the releases that kept the same records run ``rest`` together (one call per distinct
    subsample, in a fixed order, so the same seed gives the same outputs)."""
    from dpharness.mechanisms._exact import bernoulli

    arr = np.asarray(value)
    n = len(arr)
    if n == 0:
        return flatten(execute(rest, arr, space, size, rng))
    keep = bernoulli(sample.rate, (size, n), rng)
    patterns, inverse = np.unique(keep, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=len(patterns))
    rows, outs, start = [], [], 0
    for pattern, c in zip(patterns, counts):
        rows.append(order[start:start + c])
        outs.append(flatten(execute(rest, arr[pattern], space, int(c), rng)))
        start += c
    got = np.concatenate(outs)
    out = np.empty_like(got)
    out[np.concatenate(rows)] = got
    return out


def poisson_sample(rate: Any) -> PoissonSample:
    """Keep each record independently with probability ``rate`` (exactly), afresh for every release;
    chain the rest after it: ``dp.poisson_sample(0.01) >> dp.count() >> dp.gaussian(sigma=1)``."""
    return PoissonSample(rate)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
