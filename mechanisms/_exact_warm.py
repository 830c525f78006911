"""Loads the compiled loops of the exact samplers (:mod:`._exact_compiled`, numba) by drawing a few
samples of each: the exact discrete Laplace at a small scale and at a scale split into high bits
(``t = 2**k s``, k > 0), and the exact discrete Gaussian, on a generator of its own (nothing is kept).

Imported by the fork server of the audit's worker pool (:class:`dpharness.auditors._runner._LocalPool`)
when the process that starts it has loaded numba, i.e. an exact sampler ran there: the workers forked
from the server then find the loops loaded, instead of loading them again each on its first chunk
(about 0.5 s of CPU a worker, the cost of importing numba and reading its cache). Nothing is done where
numba is not installed (the samplers' numpy path needs no loading)."""

from __future__ import annotations

import numpy as np

from . import _exact, _exact_compiled


def _load() -> None:
    if not _exact_compiled.available():
        return
    rng = np.random.default_rng(0)
    _exact.discrete_laplace(3, 16, rng)
    _exact.discrete_laplace(2**40, 16, rng)
    _exact.discrete_gaussian(4, 16, rng)


_load()
