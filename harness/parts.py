"""``from dpharness import parts as dp``: mechanisms built from proven parts.

See :mod:`dpharness.mechanisms.parts` for the algebra (transformations, noise measurements,
combinators), its numeric model and the privacy maps ``dpharness.prove`` derives for it. Noise may
be given the budget it should spend instead of a scale (``dp.laplace(epsilon=...)``,
``dp.gaussian(rho=...)``, ``dp.compose(..., epsilon=..., delta=...)``): :func:`mechanism` derives
each scale (:mod:`dpharness.proofs._calibrate`) before anything is sampled or proved."""

from dpharness.core import Claim, Domain, Relation
from dpharness.mechanisms.parts import *  # noqa: F401,F403 - the curated public surface
from dpharness.mechanisms.parts import __all__  # noqa: F401
from dpharness.mechanisms.parts import PartsMechanism, Step
from dpharness.mechanisms.parts import mechanism as _declare
from dpharness.mechanisms.parts._structure import has_budget as _has_budget


def mechanism(  # type: ignore[no-redef]  # wraps the star-imported one: calibrates budgets first
    *,
    name: str,
    records: Domain,
    relation: Relation,
    steps: Step,
    claim: Claim,
    input: str = "dataset",
    dim: int | None = None,
    size: int | None = None,
    description: str = "",
) -> PartsMechanism:
    if _has_budget(steps):
        from dpharness.proofs._calibrate import calibrate

        steps = calibrate(steps, records=records, relation=relation, shape=input, dim=dim)
    return _declare(
        name=name,
        records=records,
        relation=relation,
        steps=steps,
        claim=claim,
        input=input,
        dim=dim,
        size=size,
        description=description,
    )


mechanism.__doc__ = (
    (_declare.__doc__ or "")
    + """

    Budgets: a noise part given ``epsilon=`` (Laplace), ``rho=`` or ``epsilon=`` with ``delta=``
    (Gaussian), or a share of ``dp.compose(..., epsilon=..., delta=..., rho=..., weights=...)``, is
    replaced here by the noise whose scale that budget gives, from the stability of what precedes it;
    under a group-by, ``dp.partition_select(epsilon=..., delta=...)`` and the per-key parts' Laplace
    budgets are solved from the keys one neighbour touches, grid rounding included. ``describe()`` and
    the proof show the derived scale and where it came from."""
)
