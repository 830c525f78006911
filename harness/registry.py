"""The mechanism registry: the built-in catalog, the gallery of known-buggy variants, and a
project's own mechanisms (entry-point group ``dpharness.mechanisms`` or an imported module)."""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Callable, TypeVar

from .core import Mechanism
from .errors import ParameterError

__all__ = ["register", "catalog", "get", "load_module", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "dpharness.mechanisms"
_REGISTRY: dict[str, type[Mechanism]] = {}
_LOADED = False

M = TypeVar("M", bound=type)


def register(cls: M) -> M:
    """Class decorator: add a Mechanism subclass to the registry under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Mechanism)):
        raise ParameterError(f"cls={cls!r} is not a Mechanism subclass; decorate a Mechanism dataclass.")
    if not cls.name:
        raise ParameterError(f"cls={cls.__name__} has no name; set the class attribute name = '...'.")
    old = _REGISTRY.get(cls.name)
    if old is not None and old is not cls and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ParameterError(f"name={cls.name!r} is already registered by {old.__module__}.{old.__qualname__}; pick another name.")
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtins() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    importlib.import_module("dpharness.mechanisms")
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        ep.load()


def load_module(module: str) -> None:
    """Import a project's module so its ``@register`` decorators run (``gate --module PKG``)."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ParameterError(f"module={module!r} cannot be imported ({exc}); pass an importable module path.") from exc


def catalog(*, gallery: bool | None = False) -> dict[str, type[Mechanism]]:
    """Registered mechanism classes by name: correct ones (``gallery=False``), the known-buggy
    gallery (``True``), or all (``None``)."""
    _load_builtins()
    return {n: c for n, c in sorted(_REGISTRY.items()) if gallery is None or c.buggy == gallery}


def get(name: str) -> type[Mechanism]:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ParameterError(f"name={name!r} is not a registered mechanism; run `dpharness list` to see the names.") from None
