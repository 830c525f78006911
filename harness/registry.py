"""The mechanism registry: the built-in catalog, the gallery of known-buggy variants, and a
project's own mechanisms (entry-point group ``dpharness.mechanisms`` or an imported module)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
from collections.abc import Callable, Iterable
from importlib import metadata
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

from ._fingerprint import function_text
from .core import BoundedChange, Claim, Domain, InputSpec, Mechanism, RealInterval, Relation
from .errors import ParameterError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["register", "catalog", "get", "load_module", "audit_only", "ENTRY_POINT_GROUP", "AUDIT_ONLY"]

ENTRY_POINT_GROUP = "dpharness.mechanisms"
AUDIT_ONLY = "audit-only"
_REGISTRY: dict[str, Any] = {}
_AUDIT_ONLY: set[str] = set()
_LOADED = False

M = TypeVar("M")


class _Value:
    """A registered mechanism *value* (e.g. one declared from ``dpharness.parts``), presented like a
    registered class: calling it gives the value; class-level attributes are read from the value."""

    def __init__(self, mechanism: Mechanism) -> None:
        self._mechanism = mechanism

    def __call__(self) -> Mechanism:
        return self._mechanism

    def __getattr__(self, item: str) -> Any:
        return getattr(self._mechanism, item)

    @property
    def origin(self) -> tuple[str, str]:
        return ("value", self._mechanism.source_hash())


def _origin(entry: Any) -> tuple[str, str]:
    return entry.origin if isinstance(entry, _Value) else (entry.__module__, entry.__qualname__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _AuditedFunction(Mechanism):
    """A plain function ``fn(data, size, rng) -> size outputs`` registered for audit only
    (``register(fn, name=..., data=..., neighbor=..., relation=..., claim=...)``). Law: whatever ``fn``
    draws from ``rng`` (opaque: no proof covers it, so it is never PROVED); neighbour relation and
    claim: as given. Without ``records`` the audit is of the given pair only; with ``records`` (the
    record domain) the auditor's neighbour search starts from that pair."""

    label: str
    fn: Callable
    inputs: InputSpec
    pair: tuple
    searched: bool = False
    source = "a function registered for audit only"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    @property
    def input_spec(self) -> InputSpec:
        return self.inputs

    @property
    def fixed_pair(self) -> tuple | None:
        """The pair the audit takes as given (None: the neighbour search runs)."""
        return None if self.searched else self.pair

    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> Any:
        return self.fn(data, size, rng)

    def _law(self, data: Any) -> NoReturn:
        raise NotImplementedError(f"{self.label} is a function audited only: its law is not known.")

    def example_pair(self) -> tuple[Any, Any]:
        return self.pair

    def noise_parameters(self) -> dict[str, Any]:
        return {}  # nothing to --set: the function's parameters are in its code

    def source_hash(self) -> str:
        """SHA-256 of the function's module source (else its code), what it reads beyond its source (closure
        cells, defaults, globals, a partial's arguments), the pair, relation and claim."""
        try:
            text = inspect.getsource(inspect.getmodule(self.fn) or self.fn)
        except (OSError, TypeError):
            code = getattr(self.fn, "__code__", None)
            text = repr(code.co_code if code is not None else self.fn)
        h = hashlib.sha256(text.encode())
        h.update(function_text(self.fn).encode())  # its closure, defaults and the globals it reads
        h.update(repr((self.inputs, self.pair, self.claim)).encode())
        return h.hexdigest()

    def describe(self) -> str:
        return f"{self.label} (function {getattr(self.fn, '__qualname__', self.fn)!r}) claiming {self.claim.describe()}"


def _audited_function(
    fn: Callable, *, name: Any, data: Any, neighbor: Any, relation: Any, claim: Any, records: Any, shape: Any
) -> _AuditedFunction:
    """Validate :func:`register`'s arguments for a plain function (each error names the argument)."""
    import numpy as np

    from ._validate import choice

    missing = [
        k
        for k, v in (("name", name), ("data", data), ("neighbor", neighbor), ("relation", relation), ("claim", claim))
        if v is None
    ]
    if missing:
        raise ParameterError(
            f"{missing[0]}= is missing: a plain function is registered with name=, data=, neighbor=, "
            "relation= and claim= (e.g. register(fn, name='my_count', data=[1, 2], neighbor=[1], "
            "relation=AddRemove(), claim=PureDP(1)))."
        )
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise ParameterError(f"name={name!r} must be a lower_snake identifier; pass e.g. name='team_noisy_count'.")
    if not isinstance(relation, Relation):
        raise ParameterError(
            f"relation={relation!r} is not a Relation; pass AddRemove(), Substitute() or "
            "BoundedChange(sensitivity, norm)."
        )
    if not isinstance(claim, Claim):
        raise ParameterError(
            f"claim={claim!r} is not a Claim; pass PureDP(eps), ApproxDP(eps, delta) or RenyiDP(alpha, eps)."
        )
    if records is not None and not isinstance(records, Domain):
        raise ParameterError(f"records={records!r} is not a Domain; pass e.g. RealInterval(0, 100) or leave it out.")
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
    except (TypeError, ValueError):
        params = None
    if params is not None and len(params) < 3 and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise ParameterError(
            f"mechanism={getattr(fn, '__qualname__', fn)!r} takes {len(params)} positional "
            "argument(s); a function is registered as fn(data, size, rng) returning size outputs "
            "drawn from the numpy Generator rng."
        )
    if shape is None:
        shape = "vector" if isinstance(relation, BoundedChange) else ("record" if np.ndim(data) == 0 else "dataset")
    choice("shape", shape, ("record", "dataset", "vector"))
    inputs = InputSpec(records if records is not None else RealInterval(), relation, shape)
    a, b = inputs.validate_pair(data, neighbor)
    return _AuditedFunction(label=name, fn=fn, inputs=inputs, pair=(a, b), searched=records is not None, claim=claim)


def _library_target(obj: Any) -> Any:
    """``obj`` when it is a library target (:class:`dpharness.auditors.libraries.LibraryTarget`), else None.
    Imports the targets' package only for a value that is neither a mechanism nor callable."""
    if obj is None or isinstance(obj, (Mechanism, type)) or callable(obj):
        return None
    from dpharness.auditors.libraries import LibraryTarget

    return obj if isinstance(obj, LibraryTarget) else None


def is_target_name(name: Any) -> bool:
    """Whether ``name`` is spelt as a library target (``"library:mechanism"``, see ``dpharness targets``)."""
    return isinstance(name, str) and ":" in name


@overload
def register(
    mechanism: None = None,
    *,
    proof: str | None = None,
    name: str | None = None,
    data: Any = None,
    neighbor: Any = None,
    relation: Relation | None = None,
    claim: Claim | None = None,
    records: Domain | None = None,
    shape: str | None = None,
    samples: int | None = None,
    timeout: float | None = None,
) -> Callable[[M], M]: ...
@overload
def register(
    mechanism: M,
    *,
    proof: str | None = None,
    name: str | None = None,
    data: Any = None,
    neighbor: Any = None,
    relation: Relation | None = None,
    claim: Claim | None = None,
    records: Domain | None = None,
    shape: str | None = None,
    samples: int | None = None,
    timeout: float | None = None,
) -> M: ...
def register(
    mechanism: Any = None,
    *,
    proof: str | None = None,
    name: str | None = None,
    data: Any = None,
    neighbor: Any = None,
    relation: Relation | None = None,
    claim: Claim | None = None,
    records: Domain | None = None,
    shape: str | None = None,
    samples: int | None = None,
    timeout: float | None = None,
) -> Any:
    """Add a mechanism to the registry under its ``name``: a ``Mechanism`` subclass (usable as a class
    decorator, registered at its defaults) or a ``Mechanism`` value (e.g. from ``dpharness.parts``).

    ``proof="audit-only"`` opts the mechanism into the gate without a proof: it passes when its audit
    passes and no proof refutes it. Without it, the gate requires PROVED.

    A plain function ``fn(data, size, rng)`` (``size`` outputs drawn from the numpy Generator ``rng``)
    is registered for audit only — never PROVED, whatever ``proof`` says — with its ``name``, the
    neighbouring pair ``data``/``neighbor`` under ``relation`` and the ``claim``; ``records`` (a
    Domain) lets the auditor search for a worse pair from there, ``shape`` (``"record"``,
    ``"dataset"``, ``"vector"``) is inferred from ``data`` and ``relation`` when left out.

    A library target (``dpharness.auditors.libraries.get_target(...)``) is registered for audit only
    under its name (``"diffprivlib:laplace"``, or ``name``), with its library's pair, relation and claim;
    ``dpharness report`` and ``dpharness gate`` also take a target's name without registering it.

    ``samples`` and ``timeout``: this mechanism's own audit settings in the gate and ``check`` (samples a
    side, seconds per phase), in place of the run's ``--samples``/``--timeout``, so one slow pipeline does
    not force them down for all. With ``samples`` set, an iterated or repeated mechanism is audited on
    every one of its rounds at that many samples (without it, the gate audits a shorter version and
    reports it PARTIAL, not a pass).

    >>> register(noisy_mean)                       # doctest: +SKIP
    >>> register(MyMechanism, proof="audit-only")  # doctest: +SKIP
    >>> register(noisy_count, name="noisy_count", data=[1, 2, 3], neighbor=[1, 2],
    ...          relation=AddRemove(), claim=PureDP(1))  # doctest: +SKIP
    >>> register(get_target("diffprivlib:laplace", {"epsilon": 0.5}), name="dpl_laplace_half")  # doctest: +SKIP"""
    if mechanism is None:  # @register(proof="audit-only")
        return lambda m: register(
            m,
            proof=proof,
            name=name,
            data=data,
            neighbor=neighbor,
            relation=relation,
            claim=claim,
            records=records,
            shape=shape,
            samples=samples,
            timeout=timeout,
        )
    if proof not in (None, AUDIT_ONLY):
        raise ParameterError(f"proof={proof!r} is not a proof policy; pass proof='audit-only' or leave it out.")
    function = None
    target = _library_target(mechanism)
    if target is not None:  # a library target: audited only, under its own name (or name=)
        if any(v is not None for v in (data, neighbor, relation, claim, records, shape)):
            raise ParameterError(
                "data=, neighbor=, relation=, claim=, records= and shape= are fixed by a library target; "
                "build it with get_target(name, {...}) to change its pair or parameters."
            )
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ParameterError(f"name={name!r} is not a name; pass e.g. name='team_laplace' or leave it out.")
        function, mechanism, proof = target, target.mechanism(name), AUDIT_ONLY
        name = None
    elif not isinstance(mechanism, (Mechanism, type)) and callable(mechanism):
        function, mechanism = (
            mechanism,
            _audited_function(
                mechanism,
                name=name,
                data=data,
                neighbor=neighbor,
                relation=relation,
                claim=claim,
                records=records,
                shape=shape,
            ),
        )
        proof = AUDIT_ONLY
    elif any(v is not None for v in (name, data, neighbor, relation, claim, records, shape)):
        given = next(
            k
            for k, v in (
                ("name", name),
                ("data", data),
                ("neighbor", neighbor),
                ("relation", relation),
                ("claim", claim),
                ("records", records),
                ("shape", shape),
            )
            if v is not None
        )
        raise ParameterError(
            f"{given}= is for registering a plain function; a Mechanism carries its own name, "
            "inputs and claim: leave it out."
        )
    if isinstance(mechanism, Mechanism):
        entry: Any = _Value(mechanism)
        name = mechanism.name
    elif isinstance(mechanism, type) and issubclass(mechanism, Mechanism):
        entry = mechanism
        name = mechanism.name
        if not isinstance(name, str):
            raise ParameterError(f"mechanism={mechanism.__name__} has no class-level name; register a value instead.")
    else:
        raise ParameterError(
            f"mechanism={mechanism!r} is neither a Mechanism subclass nor a Mechanism value; "
            "decorate a Mechanism dataclass or pass a value from dpharness.parts.mechanism(...)."
        )
    if not name:
        raise ParameterError(f"mechanism={mechanism!r} has no name; set the class attribute name = '...'.")
    old = _REGISTRY.get(name)
    if old is not None and old is not entry and _origin(old) != _origin(entry):
        where = ".".join(_origin(old)) if not isinstance(old, _Value) else "another mechanism value"
        raise ParameterError(f"name={name!r} is already registered by {where}; pick another name.")
    if samples is not None:
        from . import _validate as v

        v.integer("samples", samples, minimum=v.MIN_SAMPLES, maximum=v.MAX_SAMPLES)  # the audit's range, refused here
    if timeout is not None:
        from . import _validate as v

        v.positive("timeout", timeout)
    _REGISTRY[name] = entry
    _SETTINGS[name] = AuditSettings(samples, timeout)
    if proof == AUDIT_ONLY:
        _AUDIT_ONLY.add(name)
    else:
        _AUDIT_ONLY.discard(name)
    return function if function is not None else mechanism


@dataclasses.dataclass(frozen=True)
class AuditSettings:
    """A registered mechanism's own audit settings (None: the run's)."""

    samples: int | None = None
    timeout: float | None = None


_SETTINGS: dict[str, AuditSettings] = {}


def audit_settings(name: str) -> AuditSettings:
    """The audit settings ``register`` gave ``name`` (both None when it gave none)."""
    return _SETTINGS.get(name, AuditSettings())


def audit_only(name: str) -> bool:
    """Whether the project opted ``name`` into the gate without a proof (``register(..., proof="audit-only")``)."""
    return name in _AUDIT_ONLY


def kind(name: str) -> str:
    """Where the registered ``name`` comes from, as the reports' index groups it: ``"library"`` (a
    library target), ``"gallery"`` (a known bug), ``"catalog"`` (a built-in) or ``"team"`` (a project's
    own, from a module or an entry point)."""
    entry = get(name)
    if _library_target(getattr(entry, "target", None)) is not None:
        return "library"
    if entry.buggy:
        return "gallery"
    # the built-ins are the classes dpharness.mechanisms defines and registers (not values, not subclasses
    # defined elsewhere, whatever was imported first)
    builtin = isinstance(entry, type) and entry.__module__.startswith("dpharness.mechanisms.")
    return "catalog" if builtin else "team"


def _load_builtins() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    importlib.import_module("dpharness.mechanisms")
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        ep.load()


_BY_MODULE: dict[str, list[str]] = {}


def load_module(module: str) -> list[str]:
    """Import a project's module so its ``register`` calls run (``--module PKG``); returns the names
    registered while importing it (remembered, so a second call returns them again)."""
    _load_builtins()
    if module in _BY_MODULE:
        return list(_BY_MODULE[module])
    _check_module_name(module)
    before = dict(_REGISTRY)
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ParameterError(
            f"module={module!r} cannot be imported ({_one_line(exc)}); pass an importable module path."
        ) from exc
    except SyntaxError as exc:  # the module's own error, with its file:line, as one line
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else "?"
        raise ParameterError(
            f"module={module!r} cannot be compiled at {where}: {type(exc).__name__}: {exc.msg}; fix the module."
        ) from exc
    except Exception as exc:  # the module raised while importing: its message and where, as one line
        import traceback

        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise ParameterError(
            f"module={module!r} raised on import{where}: {type(exc).__name__}: {_one_line(exc)}; fix the module."
        ) from exc
    got = [n for n, e in _REGISTRY.items() if before.get(n) is not e]
    if not got:  # imported before this call (e.g. by a test): its names are those whose code lives in it
        got = [
            n
            for n, e in _REGISTRY.items()
            if (getattr(e, "__module__", "") or "").startswith(module)
            or isinstance(e, _Value)
            and _value_module(e).startswith(module)
        ]
    _BY_MODULE[module] = got
    return list(got)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _check_module_name(module: str) -> None:
    """``--module`` takes a dotted module name (``pkg.mod``), never empty, a path or a relative name."""
    if not module.strip():
        raise ParameterError("module='' is empty; pass a dotted module name such as mypkg.mechanisms.")
    if "/" in module or "\\" in module or module.endswith(".py") or module.startswith("."):
        dotted = module.replace("\\", "/")
        dotted = dotted[:-3] if dotted.endswith(".py") else dotted
        dotted = ".".join(p for p in dotted.split("/") if p not in ("", "."))
        hint = f" ({dotted}, run from the directory that holds it)" if dotted and ".." not in dotted else ""
        raise ParameterError(f"module={module!r} is a path or a relative name; pass a dotted module name{hint}.")


def loaded_from(name: str) -> str | None:
    """The ``--module`` whose import registered ``name`` (in this process), or None (a built-in, an
    entry point, or registered by code that is not a loaded module)."""
    for module, names in _BY_MODULE.items():
        if name in names:
            return module
    return None


def rerun_flags(names: Iterable[str]) -> str:
    """`` --module M`` for each module that registered one of ``names`` (to paste into a command that
    must find them again), in first-seen order; empty for built-ins."""
    seen: list[str] = []
    for n in names:
        m = loaded_from(n)
        if m is not None and m not in seen:
            seen.append(m)
    return "".join(f" --module {m}" for m in seen)


def _value_module(entry: "_Value") -> str:
    import inspect

    from dpharness.mechanisms.parts import PartsMechanism
    from dpharness.mechanisms.parts._structure import _post_functions

    m = entry()
    if isinstance(m, PartsMechanism):
        for fn in _post_functions(m.steps):
            return getattr(fn, "__module__", "") or ""
    return getattr(inspect.getmodule(type(m)), "__name__", "")


def catalog(*, gallery: bool | None = False) -> dict[str, Any]:
    """Registered mechanisms by name (classes, or values presented like classes: call one to get the
    mechanism): correct ones (``gallery=False``), the known-buggy
    gallery (``True``), or all (``None``)."""
    _load_builtins()
    return {n: c for n, c in sorted(_REGISTRY.items()) if gallery is None or c.buggy == gallery}


def get(name: str) -> Any:
    """The registered class (or value, presented like a class) called ``name``. A library target's name
    (``"diffprivlib:laplace"``) not registered yet is registered here at the target's defaults (audit
    only); an unknown target is a ParameterError naming it, a missing library a ``MissingExtra``."""
    _load_builtins()
    if is_target_name(name) and name not in _REGISTRY:
        from dpharness.auditors.libraries import get_target

        register(get_target(name))
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name.replace("-", "_"), list(_REGISTRY), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ParameterError(
            f"name={name!r} is not a registered mechanism; {hint}run `dpharness list` to see the names."
        ) from None
