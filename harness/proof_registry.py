"""Which proof covers which mechanism: proofs are registered by type, never found by a name.

A proof is a function ``mechanism -> Proof`` registered for one or more ``Mechanism`` classes with
:func:`proves` (any module may do so, for its own classes). :func:`find_proof` answers, for a
mechanism value, which registered proof covers it, or why none does:

* The mechanism's class, or the nearest ancestor in its MRO, must have a registered proof.
* A proof written for class ``C`` covers an instance of a subclass ``S`` only when nothing between
  ``S`` and ``C`` changes the code the proof is about: a subclass that defines or overrides any
  method or property (``_sample``, ``_law``, ``_check``, helpers they call, ...) is not covered, and
  the reason names the first such method. Constructors (``calibrated``), ``example_pair`` (which
  only picks an audit pair) and ``describe`` may be redefined; class-level strings such as ``name``,
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

__all__ = ["proves", "find_proof", "Coverage"]

F = TypeVar("F", bound=Callable)

_PROOFS: dict[type, tuple[Callable[[Any], Any], frozenset | None]] = {}

# Redefining these in a subclass does not change what the mechanism computes.
_HARMLESS = frozenset({"calibrated", "example_pair", "describe"})
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
            raise ParameterError(f"class={cls!r} is not a Mechanism subclass; pass the mechanism classes this proof covers.")

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise ParameterError(f"fn={fn!r} is not callable; decorate a function mechanism -> Proof.")
        for cls in classes:
            if cls.__module__.split(".")[0] == "dpharness" and fn.__module__.split(".")[0] != "dpharness":
                raise ParameterError(
                    f"class={cls.__qualname__} is a dpharness class, whose proofs are the library's; subclass it and "
                    "register the proof for the subclass.")
            old = _PROOFS.get(cls)
            if old is not None and (old[0].__module__, old[0].__qualname__) != (fn.__module__, fn.__qualname__):
                raise ParameterError(
                    f"class={cls.__qualname__} already has a proof registered by {old[0].__module__}.{old[0].__qualname__}; "
                    f"a proof may not be replaced — subclass {cls.__qualname__} and register the proof for the subclass.")
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
_GENERATED = frozenset({
    "__init__", "__repr__", "__eq__", "__ne__", "__hash__", "__setattr__", "__delattr__", "__match_args__",
    "__dataclass_fields__", "__dataclass_params__", "__annotations__", "__doc__", "__module__", "__qualname__",
    "__dict__", "__weakref__", "__abstractmethods__", "__slots__", "__firstlineno__", "__static_attributes__",
    "__orig_bases__", "__parameters__", "__replace__", "__lt__", "__le__", "__gt__", "__ge__",
    "__annotate__", "__annotate_func__", "__annotations_cache__", "__classcell__",
})


def _is_dataclass_boilerplate(name: str) -> bool:
    return name in _GENERATED or name == "_abc_impl"


def _overrides(cls: type) -> list[str]:
    """Methods, properties and other callables ``cls`` defines in its own body."""
    found = []
    field_names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    for name, value in vars(cls).items():
        if _is_dataclass_boilerplate(name) or name in _HARMLESS or name in field_names:
            continue
        if isinstance(value, (staticmethod, classmethod, property)) or inspect.isfunction(value) \
                or inspect.isdatadescriptor(value) or inspect.ismethoddescriptor(value) or callable(value) \
                or name not in _WORDS:
            found.append(name)
    return found


def find_proof(mechanism: Any) -> Coverage:
    """The registered proof covering ``mechanism``, or why there is none."""
    cls = type(mechanism)
    for ancestor in cls.__mro__:
        entry = _PROOFS.get(ancestor)
        if entry is None:
            continue
        fn, sealed = entry
        for between in cls.__mro__[: cls.__mro__.index(ancestor)]:
            changed = _overrides(between)
            if sealed is not None:
                changed = [n for n in changed if n in sealed]
            if changed:
                return Coverage(None, ancestor, (
                    f"{between.__qualname__} overrides {changed[0]}() of {ancestor.__qualname__}; the registered proof "
                    f"of {ancestor.__qualname__} is about {ancestor.__qualname__}'s code, so it does not cover "
                    f"{cls.__qualname__} (register a proof for it with @dpharness.proves({cls.__qualname__}))"))
        extra = _instance_extras(mechanism)
        if extra:
            return Coverage(None, ancestor, (
                f"the instance carries attribute {extra[0]!r} beyond its dataclass fields (patched code), so the "
                f"proof of {ancestor.__qualname__} does not cover it"))
        return Coverage(fn, ancestor, f"proof registered for {ancestor.__module__}.{ancestor.__qualname__}")
    return Coverage(None, None, (
        f"no proof is registered for {cls.__module__}.{cls.__qualname__} or its base classes: audited only "
        "(build it from dpharness.parts, or register a proof with @dpharness.proves)"))


def _instance_extras(mechanism: Any) -> list[str]:
    state = getattr(mechanism, "__dict__", {})
    fields = {f.name for f in dataclasses.fields(mechanism)} if dataclasses.is_dataclass(mechanism) else set()
    return sorted(k for k in state if k not in fields and not k.startswith("_cache"))
