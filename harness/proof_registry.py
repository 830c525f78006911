"""Which proof covers which mechanism: proofs are registered by type, never found by a name.

A proof is a function ``mechanism -> Proof`` registered for one or more ``Mechanism`` classes with
:func:`proves` (any module may do so, for its own classes). :func:`find_proof` answers, for a
mechanism value, which registered proof covers it, or why none does:

* The mechanism's class, or the nearest ancestor in its MRO, must have a registered proof.
* A proof written for class ``C`` covers an instance of class ``S`` only when every attribute
  resolves in ``S`` to the same object as in ``C``, over the whole hierarchy: a subclass before ``C``
  or a mixin after it in the MRO that defines or overrides any method or property (``sample``,
  ``__call__``, ``_sample``, ``_law``, ``_check``, helpers they call, ...) is not covered, and the
  reason names the first such attribute.
* Every class is recorded as its class statement defined it (``dpharness.core.record_definition``);
  an attribute of ``C`` or of its bases replaced later (a class-level monkeypatch) voids the proof. Constructors (``calibrated``), ``example_pair`` and ``aimed_pairs`` (which
  only pick audit pairs, each validated by the auditor) and ``describe`` may be redefined; class-level strings such as ``name``,
  ``source`` and dataclass field defaults may change (the proof reads the field values).
* An instance carrying attributes that are not dataclass fields (e.g. a patched ``_sample``) is not
  covered.

This module imports no sympy; the proofs themselves are imported lazily by ``dpharness.prove``.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Iterable, TypeVar

from .errors import ParameterError

__all__ = ["proves", "find_proof", "Coverage", "patched_code"]

F = TypeVar("F", bound=Callable)

_PROOFS: dict[type, tuple[Callable[[Any], Any], frozenset | None]] = {}

# Redefining these in a subclass does not change what the mechanism computes.
_HARMLESS = frozenset({"calibrated", "example_pair", "aimed_pairs", "describe"})
# Class-level words a subclass may change (other class constants, e.g. ``buggy`` or ``cutoff``, may steer
# the code or the proof, so changing them is an override).
_WORDS = frozenset({"name", "source", "bug", "true_epsilon"})


def proves(*classes: type, sealed: Iterable[str] | None = None) -> Callable[[F], F]:
    """Decorator: register ``fn(mechanism) -> Proof`` as the proof for each of ``classes``.

    >>> @proves(MyLaplace)                      # doctest: +SKIP
    ... def prove_my_laplace(m): ...

    The proof covers instances of exactly these classes, and of subclasses that redefine no
    method (see the module docstring). ``sealed``: for a proof that derives everything from what the
    subclass declares (e.g. a structure of parts that the sampler executes), the only names whose
    redefinition breaks coverage."""
    from .core import Mechanism

    if not classes:
        raise ParameterError("proves() needs at least one class; write @proves(MyMechanism).")
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, Mechanism)):
            raise ParameterError(
                f"class={cls!r} is not a Mechanism subclass; pass the mechanism classes this proof covers."
            )

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise ParameterError(f"fn={fn!r} is not callable; decorate a function mechanism -> Proof.")
        for cls in classes:
            if cls.__module__.split(".")[0] == "dpharness" and fn.__module__.split(".")[0] != "dpharness":
                raise ParameterError(
                    f"class={cls.__qualname__} is a dpharness class, whose proofs are the library's; subclass it and "
                    "register the proof for the subclass."
                )
            old = _PROOFS.get(cls)
            if old is not None and (old[0].__module__, old[0].__qualname__) != (fn.__module__, fn.__qualname__):
                raise ParameterError(
                    f"class={cls.__qualname__} already has a proof registered by {old[0].__module__}.{old[0].__qualname__}; "
                    f"a proof may not be replaced — subclass {cls.__qualname__} and register the proof for the subclass."
                )
            _PROOFS[cls] = (fn, None if sealed is None else frozenset(sealed))
        return fn

    return decorate


@dataclasses.dataclass(frozen=True)
class Coverage:
    """The answer of :func:`find_proof`: the covering proof function and the class it was written
    for, or ``None`` and the reason no proof covers the mechanism."""

    proof: Callable[[Any], Any] | None
    written_for: type | None
    reason: str


# What the class statement and @dataclass generate from fields: not code a proof is about. Any other
# dunder (``__getattribute__``, ``__post_init__``, ``__call__``, ...) is an override.
_GENERATED = frozenset(
    {
        "__init__",
        "__repr__",
        "__eq__",
        "__ne__",
        "__hash__",
        "__setattr__",
        "__delattr__",
        "__match_args__",
        "__dataclass_fields__",
        "__dataclass_params__",
        "__annotations__",
        "__doc__",
        "__module__",
        "__qualname__",
        "__dict__",
        "__weakref__",
        "__abstractmethods__",
        "__slots__",
        "__firstlineno__",
        "__static_attributes__",
        "__orig_bases__",
        "__parameters__",
        "__replace__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__annotate__",
        "__annotate_func__",
        "__annotations_cache__",
        "__classcell__",
    }
)


# What the runtime caches on a class after its statement ran (copyreg's slot names when an instance is
# copied or pickled): not code.
_RUNTIME_CACHES = frozenset({"__slotnames__"})


def _is_dataclass_boilerplate(name: str) -> bool:
    return name in _GENERATED or name == "_abc_impl"


_MISSING = object()


def _skipped(name: str, value: Any, field_names: set) -> bool:
    """Names whose value is not code a proof is about: dataclass boilerplate, harmless redefinitions,
    field defaults (the proof reads the field values), and class-level words given as plain values."""
    if _is_dataclass_boilerplate(name) or name in _HARMLESS or name in field_names:
        return True
    return name in _WORDS and not (
        callable(value)
        or inspect.isdatadescriptor(value)
        or inspect.ismethoddescriptor(value)
        or isinstance(value, (staticmethod, classmethod, property))
    )


def _resolve(cls: type, name: str) -> Any:
    """What ``cls.name`` resolves to, without running descriptors (the function, property, ... object)."""
    try:
        return inspect.getattr_static(cls, name)
    except AttributeError:
        return _MISSING


def _owner(cls: type, name: str) -> type:
    """The class in ``cls``'s MRO whose namespace supplies ``name`` (``name`` is one of their names)."""
    return next(k for k in cls.__mro__ if name in vars(k))


def _changed_attributes(cls: type, proved: type, sealed: frozenset | None) -> list[tuple[str, type]]:
    """Every attribute that resolves differently in ``cls`` than in the class the proof was written for,
    over the whole hierarchy (a mixin after the proved class in the MRO counts as much as a subclass
    before it), as (name, the class that supplies it in ``cls``)."""
    field_names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    names = set().union(*(vars(k) for k in cls.__mro__ if k is not object))
    changed = []
    for name in sorted(names):
        if sealed is not None and name not in sealed:
            continue
        here = _resolve(cls, name)
        if here is _resolve(proved, name) or _skipped(name, here, field_names):
            continue
        changed.append((name, _owner(cls, name)))
    return changed


def patched_code(*classes: type) -> str | None:
    """The first ``Class.attribute`` of these classes or of their bases whose value differs from what
    the class statement defined (replaced, added or deleted after the class was created: a
    monkeypatch), or None. Classes without a recorded definition (``object`` and other bases that are
    neither a Mechanism nor a parts Step) are compared by nothing."""
    from .core import definition

    seen: set = set()
    for klass in (k for c in classes for k in c.__mro__):
        defined = definition(klass)
        if defined is None or klass in seen:
            continue
        seen.add(klass)
        now = vars(klass)
        fields = {f.name for f in dataclasses.fields(klass)} if dataclasses.is_dataclass(klass) else set()
        for name in sorted(set(now) | set(defined)):
            if _is_dataclass_boilerplate(name) or name in fields or name in _RUNTIME_CACHES:
                continue
            if now.get(name, _MISSING) is not defined.get(name, _MISSING):
                return f"{klass.__qualname__}.{name}"
    return None


def find_proof(mechanism: Any) -> Coverage:
    """The registered proof covering ``mechanism``, or why there is none."""
    cls = type(mechanism)
    for ancestor in cls.__mro__:
        entry = _PROOFS.get(ancestor)
        if entry is None:
            continue
        fn, sealed = entry
        changed = _changed_attributes(cls, ancestor, sealed)
        if changed:
            name, where = changed[0]
            supplier = where.__qualname__
            return Coverage(
                None,
                ancestor,
                (
                    f"{supplier} overrides {name}() of {ancestor.__qualname__} (in {cls.__qualname__}, {name} resolves to "
                    f"{supplier}'s, not to what {ancestor.__qualname__} uses); the registered proof of "
                    f"{ancestor.__qualname__} is about {ancestor.__qualname__}'s code, so it does not cover "
                    f"{cls.__qualname__} (register a proof for it with @dpharness.proves({cls.__qualname__}))"
                ),
            )
        from .core import patched_module

        patched = patched_code(cls) or patched_module()
        if patched is not None:
            return Coverage(
                None,
                ancestor,
                (
                    f"{patched} was replaced after it was defined (patched code), so the proof of "
                    f"{ancestor.__qualname__} does not cover {cls.__qualname__}"
                ),
            )
        extra = _instance_extras(mechanism)
        if extra:
            return Coverage(
                None,
                ancestor,
                (
                    f"the instance carries attribute {extra[0]!r} beyond its dataclass fields (patched code), so the "
                    f"proof of {ancestor.__qualname__} does not cover it"
                ),
            )
        return Coverage(fn, ancestor, f"proof registered for {ancestor.__module__}.{ancestor.__qualname__}")
    return Coverage(
        None,
        None,
        (
            f"no proof is registered for {cls.__module__}.{cls.__qualname__} or its base classes: audited only "
            "(build it from dpharness.parts, or register a proof with @dpharness.proves)"
        ),
    )


def _instance_extras(mechanism: Any) -> list[str]:
    state = getattr(mechanism, "__dict__", {})
    fields = {f.name for f in dataclasses.fields(mechanism)} if dataclasses.is_dataclass(mechanism) else set()
    return sorted(k for k in state if k not in fields and not k.startswith("_cache"))
