"""The fingerprint of a user function for the gate's result cache: what decides what it computes.

A function's source is not all of it: the values it closes over (``make(scale)`` returning a function of
``scale``), its default arguments, the module globals it reads (a constant read from a config file or the
environment at import) and, for a :func:`functools.partial`, the bound arguments decide its output too,
and none of them is in its source. :func:`function_text` writes them all, in full (arrays by their bytes,
never ``repr``'s abbreviation), so a change in any of them changes the cache key. A value with no stable
description (an object whose ``repr`` carries its address) makes a key that differs in every process:
a cache miss (checked again), never a stale hit.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import types
from typing import Any

import numpy as np

__all__ = ["function_text", "class_text"]

_MAX_DEPTH = 8  # deeper values are written by repr: an address in it is a miss, never a stale hit


def function_text(fn: Any) -> str:
    """The source of ``fn`` with every value it reads that its source does not hold (closure cells,
    defaults, globals it names, a partial's bound arguments, a callable object's attributes)."""
    out: list[str] = []
    _function(fn, out, set(), 0)
    return "\n".join(out)


def class_text(cls: type) -> str:
    """What the methods of a user's mechanism class read beyond its module's source: :func:`function_text`
    of every function defined on each class of its MRO that is not library code (dpharness's own and
    installed packages' classes are keyed by their files and versions). A method reading a module global
    set at import (a scale from the environment) changes the text when the value does."""
    out: list[str] = []
    for klass in cls.__mro__:
        if klass is object or _is_library(klass):
            continue
        for name, attr in sorted(vars(klass).items()):
            fn = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            if isinstance(attr, property):
                fn = attr.fget
            if isinstance(fn, types.FunctionType):
                out.append(f"{klass.__qualname__}.{name}")
                out.append(function_text(fn))
    return "\n".join(out)


def _function(fn: Any, out: list[str], seen: set[int], depth: int) -> None:
    if id(fn) in seen:
        out.append("<seen>")
        return
    seen.add(id(fn))
    if isinstance(fn, functools.partial):
        out.append("partial")
        _function(fn.func, out, seen, depth + 1)
        out.append(_value(fn.args, seen, depth + 1))
        out.append(_value(fn.keywords, seen, depth + 1))
        return
    if isinstance(fn, types.MethodType):
        out.append("method")
        _function(fn.__func__, out, seen, depth + 1)
        out.append(_value(fn.__self__, seen, depth + 1))
        return
    if not isinstance(fn, types.FunctionType):
        if callable(fn) and not isinstance(fn, (type, types.BuiltinFunctionType)):  # a callable object
            out.append(_value(fn, seen, depth + 1))
            call = getattr(type(fn), "__call__", None)
            if isinstance(call, types.FunctionType):
                _function(call, out, seen, depth + 1)
        else:
            out.append(f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}")
        return
    try:
        out.append(inspect.getsource(fn))
    except (OSError, TypeError):
        out.append(repr(fn.__code__.co_code))
    out.append(f"defaults {_value(fn.__defaults__, seen, depth + 1)} {_value(fn.__kwdefaults__, seen, depth + 1)}")
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell (a name bound later)
            out.append(f"closure {name} <empty>")
            continue
        out.append(f"closure {name} {_value(content, seen, depth + 1)}")
    for name in sorted(_global_names(fn.__code__)):
        if name in fn.__globals__:
            out.append(f"global {name} {_value(fn.__globals__[name], seen, depth + 1)}")


def _is_library(fn: Any) -> bool:
    import sys
    import sysconfig

    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if module is None or path is None:
        return False
    if module.__name__.partition(".")[0] == "dpharness":
        return True
    installed = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(path.startswith(p) for p in installed)


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _value(value: Any, seen: set[int], depth: int) -> str:
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr(value)
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"  # its files and version are keyed by the environment digest
    if isinstance(value, type):
        return f"class {value.__module__}.{value.__qualname__}"
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        digest = (
            hashlib.sha256(data.tobytes()).hexdigest() if data.dtype != object else _value(data.tolist(), seen, depth)
        )
        return f"array {value.dtype.str} {value.shape} {digest}"
    if isinstance(value, np.random.Generator):  # its state, not its repr (which carries its address)
        return f"Generator {_value(value.bit_generator.state, seen, depth + 1)}"
    if isinstance(value, logging.Logger):  # decides no output; its handlers' locks carry addresses
        return f"logger {value.name}"
    if isinstance(value, np.generic):
        return f"{type(value).__name__} {value!r}"
    if depth > _MAX_DEPTH:
        return repr(value)
    if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
        if _is_library(value):  # installed code: keyed by its distribution's version (and dpharness by its files)
            return f"fn {getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
        out: list[str] = []
        _function(value, out, seen, depth + 1)
        return "fn(" + "\n".join(out) + ")"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}(" + ", ".join(_value(v, seen, depth + 1) for v in value) + ")"
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}(" + ", ".join(sorted(_value(v, seen, depth + 1) for v in value)) + ")"
    if isinstance(value, dict):
        items = sorted((_value(k, seen, depth + 1), _value(v, seen, depth + 1)) for k, v in value.items())
        return "dict(" + ", ".join(f"{k}: {v}" for k, v in items) + ")"
    if id(value) in seen:
        return "<seen>"
    seen.add(id(value))
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        return f"{type(value).__module__}.{type(value).__qualname__}{_value(attributes, seen, depth + 1)}"
    return repr(value)
