"""The mechanism value declared from parts (:func:`mechanism`, :class:`PartsMechanism`) and the catalog
classes declared from parts (:class:`Composite`): the sampler executes the structure
(:func:`~._base.execute`), the law reads it (:mod:`._law`), and ``dpharness.prove`` walks it
(:mod:`dpharness.proofs.parts`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpharness import _validate as _v
from dpharness._fingerprint import function_text
from dpharness.core import (
    AddRemove,
    BoundedChange,
    Claim,
    Domain,
    InputSpec,
    IntegerRange,
    Mechanism,
    OutputLaw,
    PureDP,
    Relation,
    Substitute,
    Witness,
)
from dpharness.errors import ParameterError

from . import _law
from ._base import Space, Step, _frac, check_structure, execute, flatten, record_value, walk_nodes
from ._structure import _check_types, _post_functions, _query_functions, input_space
from .grouping import (
    AddRemoveUser,
    BoundContributions,
    GroupBy,
    check_user_level,
    discovered_head,
    discovered_release,
    present_keys,
    release_encoding,
    with_found_keys,
)

__all__ = ["PartsMechanism", "mechanism", "Composite", "COMPOSITE_SEALED"]


@dataclass(frozen=True, kw_only=True)
class PartsMechanism(Mechanism):
    """A mechanism declared from parts (:func:`mechanism`). Its sampler executes ``steps``; its law is
    the product of its noise measurements' exact laws (when no post-processing follows); its proof is
    derived from the same structure by ``dpharness.proofs.parts``.

    Fields: ``label`` (registry name), ``records`` (record domain), ``relation``, ``steps``,
    ``shape`` (``"dataset"``, ``"vector"`` or ``"record"``: one record, local DP), ``dim`` (vector length), ``size`` (fixed data-set size,
    or None), ``claim``."""

    label: str
    records: Domain
    relation: Relation
    steps: Step
    shape: str = "dataset"
    dim: int | None = None
    size: int | None = None
    description: str = ""
    claim: Claim = PureDP(1)

    source = "declared from dpharness.parts"

    def _check(self) -> None:
        if not isinstance(self.label, str) or not self.label.isidentifier() or self.label != self.label.lower():
            raise ParameterError(
                f"name={self.label!r} must be a lower_snake identifier; pass e.g. name='team_noisy_mean'."
            )
        if not isinstance(self.records, Domain):
            raise ParameterError(f"records={self.records!r} is not a Domain; pass e.g. RealInterval(0, 100).")
        if not isinstance(self.relation, Relation):
            raise ParameterError(f"relation={self.relation!r} is not a Relation; pass AddRemove() or Substitute().")
        if not isinstance(self.steps, Step):
            raise ParameterError(
                f"steps={self.steps!r} is not a dpharness.parts step; build it with dp.count() >> dp.laplace(...)."
            )
        _v.choice("input", self.shape, ("dataset", "vector", "record"))
        if self.shape == "vector":
            if not isinstance(self.relation, BoundedChange):
                raise ParameterError(
                    f"relation={self.relation!r} does not fit vector input; pass BoundedChange(sensitivity, norm)."
                )
            _v.integer("dim", self.dim, minimum=1)
            if isinstance(self.records, IntegerRange) and _frac("sensitivity", self.relation.sensitivity) < 1:
                # distinct integer vectors are at least 1 apart in every norm: no two inputs would be neighbours
                raise ParameterError(
                    f"relation={self.relation!r} on integer vectors ({self.records.describe()}): no two "
                    "distinct integer vectors are within a sensitivity below 1; pass a sensitivity >= 1 "
                    "or a RealInterval domain."
                )
        elif self.shape == "record":
            if not isinstance(self.relation, Substitute):
                raise ParameterError(
                    f"relation={self.relation!r} does not fit a one-record input; pass Substitute() "
                    "(any two records are neighbours: local DP)."
                )
            if self.dim is not None or self.size is not None:
                raise ParameterError(
                    f"dim={self.dim!r}, size={self.size!r}: a one-record input has neither; drop them."
                )
        elif isinstance(self.relation, AddRemoveUser):
            check_user_level(self.relation, self.steps, self.space)
        elif not isinstance(self.relation, (AddRemove, Substitute)):
            raise ParameterError(
                f"relation={self.relation!r} does not fit data-set input; pass AddRemove() or Substitute()."
            )
        if not isinstance(self.relation, AddRemoveUser) and any(
            type(n) is BoundContributions for n in walk_nodes(self.steps)
        ):
            raise ParameterError(
                "dp.bound_contributions(...) bounds each user's records for the add/remove-one-user "
                "relation; declare relation=dp.AddRemoveUser(user=...)."
            )
        if self.size is not None:
            _v.integer("size", self.size, minimum=1)
            if isinstance(self.relation, AddRemove):
                raise ParameterError(
                    "size= fixes the number of records, which add/remove changes; use Substitute() or drop size."
                )
        _check_types(self.steps)
        if discovered_head(self.steps) is None and any(
            type(n) is GroupBy and n.from_data for n in walk_nodes(self.steps)
        ):
            raise ParameterError(
                "dp.group_by(keys=None) releases a mapping of the keys found in the data, so it is the whole "
                "structure (after dp.bound_contributions under AddRemoveUser); declare the keys "
                "(keys=[...]) to compose it or chain it."
            )
        _, width = check_structure(self.steps, self.space)
        if width == 0:
            raise ParameterError(
                "steps release nothing random; end them with a noise measurement (e.g. >> dp.laplace(scale))."
            )

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    @property
    def space(self) -> Space:
        return input_space(self.records, self.shape, self.dim)

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(self.records, self.relation, self.shape, dim=self.dim, size=self.size, any_data=True)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        value = record_value(data) if self.shape == "record" else np.asarray(data, dtype=float)
        if self.shape == "dataset" and value.ndim == 1 and self.space.dim > 1:
            value = value.reshape(-1, self.space.dim)
        g = discovered_head(self.steps)
        if g is not None:  # keys from the data: the group-by over the keys present, released as a mapping
            found = present_keys(value, g.by).tolist()
            steps = with_found_keys(self.steps, found)
            out = flatten(execute(steps, value, self.space, size, rng)) if found else np.zeros((size, 0))
            return discovered_release(out.reshape(size, -1), g.with_keys(found))
        out = flatten(execute(self.steps, value, self.space, size, rng))
        return out[:, 0] if out.ndim == 2 and out.shape[1] == 1 else out

    def _law(self, data: Any) -> OutputLaw:
        return _law.law(self, data)

    def example_pair(self) -> tuple[Any, Any]:
        return _law.extreme_pairs(self)[0]

    def audit_encoding(self, inputs: Any) -> Any:
        """A group-by with keys from the data and a per-key part: its mapping releases laid out over the keys
        the audited ``inputs`` hold (:func:`.grouping.release_encoding`), so an audit's event families see
        the parts' values; None for any other structure."""
        if self.shape != "dataset":
            return None
        rows = []
        for x in inputs:
            value = np.asarray(x, dtype=float)
            rows.append(value.reshape(-1, self.space.dim) if value.ndim == 1 and self.space.dim > 1 else value)
        return release_encoding(self.steps, rows)

    def aimed_pairs(self) -> tuple[Witness, ...]:
        """Pairs where each term of the bound is attained or nearly (:mod:`._aim`)."""
        from ._aim import aimed_pairs

        return aimed_pairs(self)

    def noise_parameters(self) -> dict[str, Any]:
        return {
            "steps": self.steps.describe(),
            "records": self.records.describe(),
            "relation": self.relation.describe(),
        }

    def source_hash(self) -> str:
        """SHA-256 of the structure (every field of every node, in full: a description may abbreviate,
        e.g. a long candidate list) and, for every user function, its source and the values it reads that
        its source does not hold (closure cells, defaults, globals, a partial's bound arguments)."""
        h = hashlib.sha256(
            repr(
                (
                    self.label,
                    _canonical(self.steps),
                    self.records,
                    self.relation,
                    self.shape,
                    self.dim,
                    self.size,
                    self.claim,
                )
            ).encode()
        )
        for fn in _post_functions(self.steps) + _query_functions(self.steps):
            h.update(function_text(fn).encode())  # its source, closure cells, defaults and the globals it reads
        return h.hexdigest()

    def describe(self) -> str:
        return f"{self.label}: {self.steps.describe()} claiming {self.claim.describe()}"


def _canonical(value: Any) -> Any:
    """A full, deterministic description of a structure for hashing: every dataclass field of every
    node (functions by name only: their source is hashed separately), arrays and sequences in full."""
    import dataclasses

    if callable(value) and not isinstance(value, Step):
        return ("fn", getattr(value, "__qualname__", type(value).__qualname__))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__qualname__,
            tuple((f.name, _canonical(getattr(value, f.name))) for f in dataclasses.fields(value)),
        )
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(_canonical(v)) for v in value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), repr(_canonical(v))) for k, v in value.items())))
    return repr(value)


def mechanism(
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
    """A :class:`~dpharness.core.Mechanism` declared from parts.

    ``records``: the record domain (``RealInterval``, ``IntegerRange``, ``Finite``, ``RealBox``);
    ``relation``: ``AddRemove()`` or ``Substitute()`` (``BoundedChange(Δ, norm)`` with
    ``input="vector"``, ``dim=...``); ``steps``: transformations ``>>`` noise (``>> dp.post(fn)``);
    ``claim``: ``PureDP(ε)``, ``ApproxDP(ε, δ)`` or ``RenyiDP(α, ε)``; ``size``: a fixed number of
    records (substitution only). ``input="record"``: the input is ONE record of ``records``
    (``Finite`` or ``IntegerRange``), ``relation=Substitute()`` (any two records are neighbours,
    local DP), and ``steps`` are local randomizers (``dp.randomized_response``, ``dp.warner``,
    ``dp.rappor``, ``dp.compose`` of them, ``>> dp.post(fn)``)."""
    if not isinstance(claim, Claim):
        raise ParameterError(
            f"claim={claim!r} is not a Claim; pass PureDP(eps), ApproxDP(eps, delta) or RenyiDP(alpha, eps)."
        )
    return PartsMechanism(
        label=name,
        records=records,
        relation=relation,
        steps=steps,
        shape=input,
        dim=dim,
        size=size,
        description=description,
        claim=claim,
    )


COMPOSITE_SEALED = (
    "_sample",
    "_law",
    "sample",
    "law",
    "__call__",
    "validate",
    "input_spec",
    "parts",
    "__post_init__",
    "_build_parts",
    "example_pair",
    "source_hash",
    "__getattribute__",
    "__getattr__",
    "__setattr__",
    "__init__",
    "__new__",
    "__init_subclass__",
    "__class_getitem__",
)


@dataclass(frozen=True, kw_only=True)
class Composite(Mechanism):
    """A mechanism class whose behaviour is a declaration from parts: subclasses keep named, validated
    parameters (``--set scale=...`` works) and implement :meth:`structure`, returning
    ``dp.mechanism(...)`` built from ``self``'s fields. The declaration is built once per value
    (:attr:`parts`); the sampler executes it and ``dpharness.prove`` walks it, so the two cannot differ.
    Redefining the sampler, the law or :attr:`parts` in a subclass voids the proof
    (:data:`COMPOSITE_SEALED`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._build_parts()

    def _build_parts(self) -> None:
        built = self.structure()
        if not isinstance(built, PartsMechanism):
            raise ParameterError(f"{type(self).__name__}.structure() returned {built!r}; return dp.mechanism(...).")
        if built.claim != self.claim:
            raise ParameterError(f"{type(self).__name__}.structure() must declare claim=self.claim.")
        object.__setattr__(self, "_cache_parts", built)

    def structure(self) -> PartsMechanism:
        """The declaration (``dp.mechanism(name=self.name, ..., claim=self.claim)``)."""
        raise NotImplementedError

    @property
    def parts(self) -> PartsMechanism:
        return self.__dict__["_cache_parts"]

    @property
    def input_spec(self) -> InputSpec:
        return self.parts.input_spec

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return self.parts._sample(data, size, rng)

    def _law(self, data: Any) -> OutputLaw:
        return self.parts._law(data)

    def example_pair(self) -> tuple[Any, Any]:
        return self.parts.example_pair()

    def aimed_pairs(self) -> tuple[Witness, ...]:
        return self.parts.aimed_pairs()


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
