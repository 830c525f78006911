"""Mechanisms built from proven parts: transformations, noise measurements and combinators.

In the spirit of OpenDP's transformations and measurements (``make_chain``): a **transformation**
maps data exactly and carries a *stability map* (how far apart its outputs can be on neighbouring
inputs), a **measurement** adds noise and carries a *privacy map* (its privacy loss as a function
of the input distance), and **combinators** build larger mechanisms from smaller ones::

    from dpharness import parts as dp, PureDP, AddRemove, RealInterval

    noisy_mean = dp.mechanism(
        name="team_noisy_mean", records=RealInterval(0, 100), relation=AddRemove(),
        steps=dp.clamp(0, 100) >> dp.compose(dp.sum() >> dp.laplace(scale=200), dp.count() >> dp.laplace(scale=2))
              >> dp.post(lambda s, c: s / max(c, 1)),
        claim=PureDP(1),
    )

The value ``dp.mechanism(...)`` returns is a :class:`~dpharness.core.Mechanism`. Its sampler is the
step structure executed, and ``dpharness.prove`` walks the same structure (:mod:`dpharness.proofs.parts`)
adding one lemma per node, so the code that runs and the code that is proved are one thing.

Numeric model (exact at every accepted parameter)
-------------------------------------------------
* Records are read as the exact binary values of their floats; clamping is exact; every aggregate
  (count, sum, sum of squares, sum of products, histogram) is computed exactly in rational arithmetic.
* A noise measurement with granularity ``g`` (a power of two) rounds each exact value to the grid,
  ``c = floor(v/g + 1/2)`` (an exact integer), adds integer noise drawn by an exact sampler
  (discrete Laplace with scale ``t = scale/g``, discrete Gaussian with variance ``(σ/g)²``;
  Canonne, Kamath & Steinke 2020), and releases ``g * (c + noise)`` as a float. The float is the
  round-to-nearest of the exact grid value: a deterministic function of the exact integer output
  (post-processing), identical to it while ``|c + noise| < 2**53``.
* Parameters are read as the exact values the sampler uses (a float as its binary value).

Neighbour relations: ``AddRemove()`` or ``Substitute()`` on data sets of records, or
``BoundedChange(Δ, norm)`` on a vector of query answers (``input="vector"``); stability maps are
derived per relation.

Local randomizers (``input="record"``): the input is ONE record of a finite domain (``Finite`` or
``IntegerRange``: its k categories) and any two distinct records are neighbours (``Substitute()``,
local DP). The noise measurements on a record are k-ary randomized response
(:func:`randomized_response`), Warner's randomized response (:func:`warner`) and basic RAPPOR's
bit flipping on the one-hot encoding (:func:`rappor`); each samples exactly (a lie or flip
probability is never rounded) and releases category values (RAPPOR: 0/1 bits)::

    survey = dp.mechanism(name="survey", records=Finite((1, 2, 3)), relation=Substitute(), input="record",
                          steps=dp.randomized_response(log_odds=1), claim=PureDP(1))


Layout: a family of parts is one module here, its privacy map under the same module name in
:mod:`dpharness.proofs.parts`, and one test file. Families import only the base modules (:mod:`._base`:
spaces, distances, the step types, ``>>`` and post-processing, the interpreter, the registry;
:mod:`._grid`: the rounding grid), never each other:

* :mod:`.transformations` (clamp, column, count, sums, histogram, map_records, clip_norm),
  :mod:`.noise` (grid Laplace and Gaussian, calibration helpers), :mod:`.local` (local randomizers),
  :mod:`.selection` (quantile, exponential mechanism, report noisy max), :mod:`.threshold` (above
  threshold), :mod:`.sampling` (Poisson subsampling), :mod:`.grouping` (group-by, partition selection,
  contribution bounding), :mod:`.combinators` (compose, post, parallel, repeat, iterate);
* interpreters of a whole structure, which may import families: :mod:`._structure` (input space and
  distance, what a structure holds), :mod:`._law` (exact laws, extreme pairs), :mod:`._mechanism`
  (:func:`mechanism`, :class:`PartsMechanism`, :class:`Composite`).

Adding a family ``F``:

1. ``mechanisms/parts/F.py``: its step classes subclass :class:`Transformation` (``out_space``,
   ``stability``, ``apply``) or :class:`Measurement` (``out_width``, ``run``), or :class:`Step` with
   ``check``/``execute`` (a step that governs the steps chained after it, as a subsample does:
   ``check_head``/``execute_head``); at the end of the module ``register(*classes, leaf=leaf)``
   (``leaf(step, value, space, walk)``: the exact law of a measurement on one input, for audits and
   refutations; omit it when there is none) and ``record_module(__name__)``. Import the public
   constructors here and list them in ``__all__``.
2. ``proofs/parts/F.py``: ``@stability(Class)`` for each transformation, ``@account(Class)`` for each
   measurement (its family lemma, proved once, instantiated at the node), ``@node(Class)`` for a
   structural step, ``@head(Class)`` for a step that governs its chain (see
   :mod:`dpharness.proofs.parts._walk`); import it in ``proofs/parts/__init__.py``.
3. ``tests/test_parts_F.py``, and ``"F"`` added to ``FAMILIES`` in ``tests/test_layout.py``, which checks
   that the two modules import no other family and that the packages have no import cycle.
"""

from __future__ import annotations

from ._base import Chain, Distance, Measurement, Post, Space, Step, Transformation
from ._grid import grid_steps
from ._mechanism import COMPOSITE_SEALED, Composite, PartsMechanism, mechanism
from ._structure import input_distance, input_space
from .combinators import Compose, Iterate, Parallel, Repeat, compose, iterate, parallel, post, repeat
from .grouping import AddRemoveUser, bound_contributions, group_by, partition_select
from .local import (
    LocalRandomizedResponse,
    LocalRandomizer,
    LocalRappor,
    LocalWarner,
    randomized_response,
    rappor,
    warner,
)
from .noise import (
    GridGaussian,
    GridLaplace,
    discrete_gaussian,
    discrete_laplace,
    gaussian,
    geometric,
    laplace,
    truncated_geometric,
)
from .sampling import FixedSample, PoissonSample, poisson_sample, sample
from .selection import exponential, quantile, quantile_score, report_noisy_max
from .threshold import above_threshold, query
from .transformations import (
    ClipNorm,
    MapRecords,
    clamp,
    clip_norm,
    column,
    count,
    histogram,
    map_records,
    sum,
    sum_products,
    sum_squares,
)
from .transformations import Clamp, Column, Count, Histogram, Sum, SumProducts, SumSquares  # noqa: F401 - step classes

__all__ = [
    "Step",
    "Transformation",
    "Measurement",
    "Space",
    "Distance",
    "Chain",
    "Compose",
    "Post",
    "Parallel",
    "GridLaplace",
    "GridGaussian",
    "clamp",
    "column",
    "count",
    "sum",
    "sum_squares",
    "sum_products",
    "histogram",
    "laplace",
    "discrete_laplace",
    "gaussian",
    "discrete_gaussian",
    "geometric",
    "truncated_geometric",
    "LocalRandomizer",
    "LocalRandomizedResponse",
    "LocalWarner",
    "LocalRappor",
    "randomized_response",
    "warner",
    "rappor",
    "quantile",
    "quantile_score",
    "exponential",
    "report_noisy_max",
    "above_threshold",
    "query",
    "bound_contributions",
    "group_by",
    "partition_select",
    "AddRemoveUser",
    "compose",
    "post",
    "parallel",
    "repeat",
    "poisson_sample",
    "PoissonSample",
    "FixedSample",
    "sample",
    "Repeat",
    "map_records",
    "clip_norm",
    "iterate",
    "MapRecords",
    "ClipNorm",
    "Iterate",
    "mechanism",
    "PartsMechanism",
    "Composite",
    "COMPOSITE_SEALED",
    "grid_steps",
    "input_space",
    "input_distance",
]

from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
