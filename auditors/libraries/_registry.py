"""The target value, the registry of library targets, parameter parsing and the missing-extra error.

A target is declared once as a :class:`_Spec` (name, library, extra, parameters with defaults and a
``build`` function); :func:`get_target` validates the name and the parameters at the boundary, imports
the library (or raises :class:`MissingExtra`) and calls ``build`` with parsed values."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib
import inspect
import json
import math
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable, Mapping, NoReturn

import numpy as np

from dpharness.core import (
    AddRemove,
    ApproxDP,
    BoundedChange,
    InputSpec,
    Mechanism,
    PureDP,
    RealInterval,
    Relation,
    Substitute,
)
from dpharness.errors import DPHarnessError, ParameterError, install_extra

__all__ = [
    "LibraryTarget",
    "MissingExtra",
    "Param",
    "TargetInfo",
    "TargetMechanism",
    "get_target",
    "list_targets",
    "register",
]

_REQUIRED = object()


class MissingExtra(DPHarnessError, ImportError):
    """The third-party library a target audits is not installed; the message names the pip extra."""


@dataclass(frozen=True)
class LibraryTarget:
    """A ready audit target: a third-party library's mechanism, a neighbouring pair and the library's own claim.

    ``fn``: the callable to audit (``fn(data, size, rng)`` when ``vectorized``, else ``fn(data)``);
    ``data``/``neighbor``: the default pair, neighbours under ``neighbor_relation`` (the library's
    relation, see ``relation``); ``epsilon``/``delta``: the claim as the library states it
    (``claim_source`` says where it was read); ``library``/``version``: the distribution audited.
    ``unseeded``: why the outputs do not follow the audit's seed (the library draws from a generator of
    its own that takes no seed), empty when they do; an audit's result then says so in
    ``extra["notes"]``: "not reproducible by seed: ..." (the seed still fixes the events and pairs).
    ``inputs``: the declared input space (:class:`dpharness.auditors.pairsearch.Datasets`) when the
    audit searches its pairs there (the model and statistics targets: their records are a box of the
    bounds the target passes to the library), None when it audits ``data``/``neighbor``; a target
    built with an explicit ``data`` or ``neighbor`` parameter audits that pair instead."""

    fn: Callable
    vectorized: bool
    data: Any
    neighbor: Any
    epsilon: float
    delta: float
    relation: str
    library: str
    version: str
    claim_source: str
    name: str = ""
    neighbor_relation: Relation | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    unseeded: str = ""
    inputs: Any = None

    def mechanism(self, name: str | None = None) -> "TargetMechanism":
        """This target as a :class:`~dpharness.core.Mechanism` (:class:`TargetMechanism`), registered under
        ``name`` (default: the target's name), for the registry, the gate and the reports."""
        return TargetMechanism(target=self, label=self.name if name is None else name, claim=self.claim)

    @property
    def claim(self) -> PureDP | ApproxDP:
        """The library's claim as a :class:`~dpharness.core.Claim`: ε-DP, or (ε, δ)-DP when δ > 0."""
        return PureDP(self.epsilon) if self.delta == 0 else ApproxDP(self.epsilon, self.delta)

    def with_pair(self, data: Any, neighbor: Any) -> "LibraryTarget":
        """The same target auditing the pair ``data``/``neighbor`` (no pair search), checked to be
        neighbours under the library's relation."""
        rel = self.neighbor_relation
        if rel is not None and not rel.is_neighbour(np.asarray(data), np.asarray(neighbor)):
            raise ParameterError(
                f"data={data!r:.60}, neighbor={neighbor!r:.60} are not neighbours under {self.name!r}'s "
                f"relation ({self.relation}); pass a neighbouring pair."
            )
        return dataclasses.replace(self, data=data, neighbor=neighbor, inputs=None)

    def audit(self, **kwargs: Any):
        """``dpharness.auditors.audit`` on this target's pair (or its input space ``inputs``, searched for
        pairs) and claim; ``kwargs`` go through (samples, seed, ...). The one audit of a library target:
        ``dpharness audit``, ``dpharness report``, ``dpharness gate`` and a registered target
        (:class:`TargetMechanism`, through :func:`dpharness.pipeline.run_audit`) all run it."""
        from dpharness.auditors import audit  # deferred: the auditor imports this package's parent

        if "inputs" in kwargs:
            raise ParameterError(
                "inputs= is fixed by the target (the records of the bounds it passes to the library); "
                "build the target with get_target(name, {'data': ..., 'neighbor': ...}) to audit one pair."
            )
        for fixed in ("epsilon", "delta", "vectorized", "data", "neighbor"):
            if fixed in kwargs:
                raise ParameterError(
                    f"{fixed}= is fixed by the target; build the target with get_target(name, "
                    f"{{{fixed!r}: ...}}) to change it."
                )
        if self.inputs is not None:
            result = audit(
                self.fn,
                inputs=self.inputs,
                epsilon=self.epsilon,
                delta=self.delta,
                vectorized=self.vectorized,
                **kwargs,
            )
        else:
            result = audit(
                self.fn,
                self.data,
                self.neighbor,
                epsilon=self.epsilon,
                delta=self.delta,
                vectorized=self.vectorized,
                **kwargs,
            )
        if not self.unseeded:
            return result
        notes = [*result.extra.get("notes", ()), f"not reproducible by seed: {self.unseeded}"]
        return dataclasses.replace(result, extra={**result.extra, "notes": notes})


@dataclass(frozen=True, kw_only=True)
class TargetMechanism(Mechanism):
    """A library target (:class:`LibraryTarget`) presented as a mechanism, so the registry, the gate and
    the reports take it wherever they take a mechanism. Law: the library's (opaque: no proof covers it,
    so it is never PROVED; it is registered audit-only); neighbour relation and claim: the library's own
    (``target.neighbor_relation``, ``target.claim``).

    Its audit is the target's (:meth:`LibraryTarget.audit`: the callable, its pair or its input space,
    its claim), whatever the command: :func:`dpharness.pipeline.run_audit` runs it for ``dpharness
    audit``, ``report`` and ``gate`` alike, so the same samples and seed give the same bound.
    ``sample`` calls the library as the audit does (the library validates its own input)."""

    target: LibraryTarget
    label: str
    source = "a third-party library's mechanism, audited only"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    @property
    def input_spec(self) -> InputSpec:
        rel = self.target.neighbor_relation
        space = self.target.inputs
        domain = getattr(space, "records", None) or RealInterval()
        if isinstance(rel, BoundedChange):
            return InputSpec(RealInterval(), rel, "vector")
        if rel is None:
            rel = getattr(space, "relation", None) or Substitute()
        shape = "record" if np.ndim(self.target.data) == 0 and isinstance(rel, Substitute) else "dataset"
        return InputSpec(domain, rel if isinstance(rel, (AddRemove, Substitute)) else Substitute(), shape)

    @property
    def description(self) -> str:
        """The target's one-line description (``dpharness targets``)."""
        spec = _SPECS.get(self.target.name)
        return "" if spec is None else f"{spec.library}: {spec.description}."

    @property
    def fixed_pair(self) -> tuple | None:
        """The pair the audit takes as given (None: the target searches its input space)."""
        return None if self.target.inputs is not None else (self.target.data, self.target.neighbor)

    def sample(self, data: Any, size: int, rng: np.random.Generator) -> Any:
        return self._sample(data, size, rng)

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> Any:
        if self.target.vectorized:
            return self.target.fn(data, size, rng)
        return np.asarray([self.target.fn(data) for _ in range(int(size))])

    def _law(self, data: Any) -> NoReturn:
        raise NotImplementedError(f"{self.label} is a library's mechanism, audited only: its law is not known.")

    def example_pair(self) -> tuple[Any, Any]:
        return self.target.data, self.target.neighbor

    def noise_parameters(self) -> dict[str, Any]:
        return dict(self.target.params)

    def source_hash(self) -> str:
        """SHA-256 of the target's module source, the library and its version, the parameters and the claim."""
        spec = _SPECS.get(self.target.name)
        try:
            source_of = inspect.getmodule(spec.build) if spec is not None else type(self)
            if source_of is None:  # getsource(None) is a TypeError
                raise TypeError("the target's builder has no module")
            text = inspect.getsource(source_of)
        except (OSError, TypeError):
            text = self.target.name
        h = hashlib.sha256(text.encode())
        h.update(repr((self.target.library, self.target.version, sorted(self.target.params.items()))).encode())
        h.update(repr((self.target.epsilon, self.target.delta)).encode())
        return h.hexdigest()

    def describe(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.target.params.items())
        return f"{self.label}: {self.target.library} {self.target.version} ({params}) claiming {self.claim.describe()}"


@dataclass(frozen=True)
class Param:
    """One target parameter: its name, default (``_REQUIRED`` if none), kind and a short help text.

    ``kind``: ``"positive"``, ``"nonnegative"``, ``"probability"`` (open interval (0, 1)),
    ``"int"``, ``"positive_int"``, ``"value"`` (a number or a list of numbers, JSON from strings),
    ``"rows"`` (a list of records, each a list of numbers of one length: a data set of multi-column
    records, JSON from strings), ``"bool"``, ``"name"`` (a string, checked by the target against its
    choices)."""

    name: str
    default: Any
    kind: str
    help: str = ""


@dataclass(frozen=True)
class TargetInfo:
    """One row of :func:`list_targets`."""

    name: str
    library: str
    description: str
    parameters: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class _Spec:
    name: str
    library: str  # distribution name (pip)
    module: str  # import name
    extra: str  # dpharness extra that installs it
    description: str
    params: tuple[Param, ...]
    build: Callable[[dict], dict]


_SPECS: dict[str, _Spec] = {}


def register(
    name: str, *, library: str, module: str, extra: str, description: str, params: tuple[Param, ...]
) -> Callable:
    """Decorator: register ``build(params) -> dict of LibraryTarget fields`` under ``name``."""

    def deco(build: Callable[[dict], dict]) -> Callable[[dict], dict]:
        if name in _SPECS:
            raise RuntimeError(f"target {name!r} registered twice")
        _SPECS[name] = _Spec(name, library, module, extra, description, tuple(params), build)
        return build

    return deco


# --------------------------------------------------------------------------- parsing


def _from_string(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        low = text.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        raise ParameterError(
            f"{name}={text!r} is not a number, a JSON list or true/false; pass e.g. {name}=1.0 or {name}=[0.0, 1.0]."
        ) from None


def _parse(p: Param, value: Any) -> Any:
    name = p.name
    if p.kind == "name":
        if not isinstance(value, str):
            raise ParameterError(f"{name}={value!r:.60} is not a name; pass a string, e.g. {name}={p.default}.")
        return value
    if isinstance(value, str):
        value = _from_string(name, value)
    if p.kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise ParameterError(f"{name}={value!r} is not a bool; pass true or false.")
        return bool(value)
    if p.kind == "rows":
        try:
            arr = np.asarray(value)
        except ValueError:
            arr = np.asarray(value, dtype=object)
        if arr.dtype == object or arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or arr.ndim != 2:
            raise ParameterError(
                f"{name}={value!r:.60} is not a list of records of equal length; pass e.g. "
                f"{name}=[[0.0, 1.0], [1.0, 0.0]]."
            )
        if not np.all(np.isfinite(arr)):
            raise ParameterError(f"{name}={value!r:.60} has NaN or infinite entries; pass finite numbers.")
        return arr.astype(np.float64).tolist()
    if p.kind == "value":
        arr = np.asarray(value)
        if arr.dtype == object or arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or arr.ndim > 1:
            raise ParameterError(
                f"{name}={value!r:.60} is not a number or a flat list of numbers; pass e.g. "
                f"{name}=0.0 or {name}=[0.0, 1.0]."
            )
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            raise ParameterError(f"{name}={value!r:.60} has NaN or infinite entries; pass finite numbers.")
        return arr.tolist() if arr.ndim else arr.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterError(f"{name}={value!r:.60} is not a number; pass a number.")
    if p.kind in ("int", "positive_int"):
        if isinstance(value, (float, np.floating)):
            if not float(value).is_integer():
                raise ParameterError(f"{name}={value!r} is not an integer; pass an int.")
        value = int(value)
        if p.kind == "positive_int" and value < 1:
            raise ParameterError(f"{name}={value} must be >= 1; pass a positive integer.")
        return value
    value = float(value)
    if not math.isfinite(value):
        raise ParameterError(f"{name}={value!r} is not finite; pass a finite number.")
    if p.kind == "positive" and not value > 0:
        raise ParameterError(f"{name}={value!r} must be > 0; pass a positive number.")
    if p.kind == "nonnegative" and not value >= 0:
        raise ParameterError(f"{name}={value!r} must be >= 0; pass a non-negative number.")
    if p.kind == "probability" and not 0 < value < 1:
        raise ParameterError(f"{name}={value!r} must lie in (0, 1); pass a probability strictly between 0 and 1.")
    return value


# --------------------------------------------------------------------------- public functions


def _spec(name: Any) -> _Spec:
    if not isinstance(name, str) or name not in _SPECS:
        close = difflib.get_close_matches(str(name), list(_SPECS), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else "list_targets() names them all."
        raise ParameterError(f"name={name!r} is not a library target; {hint}")
    return _SPECS[name]


def _import(spec: _Spec) -> Any:
    try:
        return importlib.import_module(spec.module)
    except ImportError as exc:
        raise MissingExtra(f"{spec.library} is not installed; {install_extra(spec.extra)}") from exc


def version_of(library: str) -> str:
    """The installed version of a distribution (``"unknown"`` if its metadata is missing)."""
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "unknown"


def get_target(name: str, params: Mapping[str, Any] | None = None) -> LibraryTarget:
    """The ready audit target ``name`` (``"library:mechanism"``, see :func:`list_targets`).

    ``params``: parameter values as Python values or strings (from a command line: numbers, JSON
    lists, true/false); missing ones take their defaults. Raises ParameterError for an unknown name
    (with suggestions), an unknown or invalid parameter, or a pair that is not neighbouring under the
    library's relation; :class:`MissingExtra` when the library is not installed."""
    spec = _spec(name)
    params = {} if params is None else params
    if not isinstance(params, Mapping):
        raise ParameterError(f"params={params!r:.60} is not a mapping; pass a dict such as {{'epsilon': 1.0}}.")
    known = {p.name: p for p in spec.params}
    for key in params:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ParameterError(f"{key}= is not a parameter of {name!r}{hint}; accepted: {', '.join(known)}.")
    _import(spec)
    values: dict[str, Any] = {}
    for p in spec.params:
        if p.name in params:
            values[p.name] = _parse(p, params[p.name])
        elif p.default is _REQUIRED:
            raise ParameterError(f"{p.name}= is required by {name!r}; pass it ({p.help}).")
        else:
            values[p.name] = p.default
    fields = spec.build(values)
    space = fields.get("inputs")
    if space is not None and ("data" in params or "neighbor" in params):
        fields["inputs"] = None  # the caller fixed the pair: audit it rather than search the space
    target = LibraryTarget(
        library=spec.library, version=version_of(spec.library), name=name, params=dict(values), **fields
    )
    rel = target.neighbor_relation
    if rel is not None and not rel.is_neighbour(np.asarray(target.data), np.asarray(target.neighbor)):
        raise ParameterError(
            f"data={target.data!r:.60}, neighbor={target.neighbor!r:.60} are not neighbours under "
            f"{name!r}'s relation ({target.relation}); pass a neighbouring pair."
        )
    if space is not None:  # the pair, given or default, lies in the declared records (the box of the bounds)
        space.validate_pair(target.data, target.neighbor)
    return target


def list_targets() -> list[TargetInfo]:
    """Every registered target, installed or not: (name, library, description, parameters with defaults).

    A required parameter's default is shown as ``"required"``."""
    return [
        TargetInfo(
            s.name,
            s.library,
            s.description,
            tuple((p.name, "required" if p.default is _REQUIRED else p.default) for p in s.params),
        )
        for s in _SPECS.values()
    ]


def pair_params(data: Any, neighbor: Any) -> tuple[Param, Param]:
    """The ``data``/``neighbor`` parameters every target takes, with its default pair."""
    return (
        Param("data", data, "value", "the data side of the pair"),
        Param("neighbor", neighbor, "value", "the neighbour side of the pair"),
    )
