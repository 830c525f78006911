"""User functions run per record by construction (STYLE 20): where a proof treats a user's function as
per-record (``dp.map_records(fn)``; ``dp.iterate``'s ``update``, per run), it is run so that row k's
value cannot depend on any other row, on the batch size or on the partitioning.

Three paths, named by :data:`PYTHON`, :data:`COMPILED` and :data:`ONE_ROW`:

* **compiled per row** (``compiled=True``, or an ``numba.njit`` function, when numba is installed): the
  per-record function is compiled with numba (``numba.njit(boundscheck=True)`` of its Python source, so
  its indexing is checked and a read past its own row raises) and called on every row by a loop in
  compiled code (:func:`_kernels`), one row at a time: the row (and its state) is copied into a buffer of
  its own length before each call, and only that buffer is passed. Row k's value is the compiled
  function's value on row k alone, bit for bit, whatever the batch size or partitioning (numba compiles
  without fast-math, so no operation is reassociated or fused across rows). A call that raises, or
  returns anything but the expected numbers, is the total rule's zero record (a map) or an error (an
  update), as on the other paths. The function is compiled for its rows' types before any row runs, on
  every input (the empty data set too), and refused if numba cannot compile it or if its code leaves
  compiled code (:func:`_refuse_escapes`: ``numba.objmode``, a ctypes or cffi function), where state kept
  between calls would make a row's value depend on the rows before it. Cost: a compilation of the function and its loop per process (about
  a second), then some nanoseconds a row.
* **one record at a time** (the default): the function called from Python on each row (the slow path).
  On this path and the next the row (and its state) is a copy of its own, never a view of the batch: a
  view's ``base`` would let the function read the other rows, or write into the records.
* **one row at a time** (``vectorized=True``, a function written for arrays of rows): called from
  Python on a one-row array ``rows[k:k+1]`` per row, its row 0 taken. A function called on all rows at
  once could mix them (centre them on their mean, winsorise at a percentile, a BLAS product whose last
  bits depend on the batch), so it is never so called. (Until issue 35 it was, with a spot check that
  compared the first and last rows of each call with one-row calls: a test of two rows, not a guarantee
  for the others.)

numba is an optional dependency (the ``numba`` extra, or ``pip install numba``); without it
``compiled=True`` runs one record at a time and the path says so (as it does where numba vectorises math
with Intel SVML, whose vector functions may round a row differently by its position in a loop). numba is
imported only when a compiled function is declared."""

from __future__ import annotations

import functools
import importlib.util
import threading
import weakref
from typing import Any, Callable

import numpy as np

from dpharness.errors import ParameterError

__all__ = [
    "PYTHON",
    "COMPILED",
    "ONE_ROW",
    "NO_NUMBA",
    "SVML",
    "is_njit",
    "numba_installed",
    "choose_path",
    "path_phrase",
    "compiled_map",
    "compiled_update",
]

PYTHON = "python"
COMPILED = "compiled"
ONE_ROW = "one-row"
NO_NUMBA = "one record at a time (compiled=True, but numba is not installed: pip install numba)"
SVML = (
    "one record at a time (compiled=True, but numba uses Intel SVML here, whose vectorised math may round a row "
    "by its position in a loop: set NUMBA_DISABLE_INTEL_SVML=1 before numba is imported)"
)
_MAX_DOUBLE = float(np.finfo(float).max)


def is_njit(fn: Any) -> bool:
    """Whether ``fn`` is a numba-compiled function (a dispatcher of ``numba.njit``), without importing numba."""
    return type(fn).__module__.startswith("numba.") and callable(getattr(fn, "py_func", None))


@functools.lru_cache(maxsize=None)
def numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def _svml() -> bool:
    """Whether numba vectorises math functions with Intel SVML (then a row's last bits could depend on
    its position in a vectorised loop)."""
    import numba

    return bool(getattr(numba.config, "USING_SVML", False))


def choose_path(name: str, fn: Callable, compiled: bool, vectorized: bool) -> str:
    """The path a user function runs on (validated at the public constructor): ``compiled`` or an njit
    function -> :data:`COMPILED` (or :data:`NO_NUMBA`), ``vectorized`` -> :data:`ONE_ROW`, else
    :data:`PYTHON`."""
    if compiled is not True and compiled is not False:
        raise ParameterError(f"compiled={compiled!r} is not a bool; pass True (compile {name} with numba) or False.")
    if vectorized is not True and vectorized is not False:
        raise ParameterError(f"vectorized={vectorized!r} is not a bool; pass True or False.")
    if (compiled or is_njit(fn)) and vectorized:
        raise ParameterError(
            "compiled=True (or an numba.njit function) and vectorized=True: pass one. compiled=True takes the per-record function "
            f"{name}(...) of one row and runs it compiled on every row; vectorized=True takes a function of "
            "arrays of rows and runs it one row at a time."
        )
    if compiled or is_njit(fn):
        if not is_njit(fn) and not hasattr(fn, "__code__"):
            raise ParameterError(
                f"{name}={fn!r} is not a Python function, so numba cannot compile it (compiled=True); pass a "
                "function defined with def or lambda, or drop compiled=True."
            )
        if not numba_installed():
            return NO_NUMBA
        return SVML if _svml() else COMPILED
    return ONE_ROW if vectorized else PYTHON


def path_phrase(path: str, unit: str = "row", short: bool = False) -> str:
    """What the proof (and, ``short``, the gate line) says of a path (``unit``: "row" for a map's records,
    "run" for an iteration's update)."""
    if short:
        return {
            COMPILED: f"compiled per {unit} (numba)",
            ONE_ROW: f"one {unit} at a time (vectorized=True)",
            NO_NUMBA: f"one {unit} at a time (compiled=True, numba not installed)",
            SVML: f"one {unit} at a time (compiled=True, numba uses SVML)",
        }.get(path, f"one {unit} at a time (Python)")
    if path == COMPILED:
        return (
            f"compiled per {unit} (numba njit; a compiled loop calls it on a copy of one {unit} at a time, so "
            f"{unit} k's value depends on {unit} k alone, bit for bit whatever the batch or partitioning)"
        )
    if path == ONE_ROW:
        return (
            f"one {unit} at a time (vectorized=True: called on a one-{unit} array per {unit}, never on a batch, "
            f"which could mix {unit}s; compiled=True with a per-{unit} function is the fast path)"
        )
    if path in (NO_NUMBA, SVML):
        return path.replace("record", unit, 1) + f", called on each {unit} alone"
    return f"one {unit} at a time (called from Python on each {unit} alone; compiled=True is the fast path)"


# --------------------------------------------------------------------------- the compiled path

_COMPILED: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
_CHECKED: "weakref.WeakKeyDictionary[Any, set]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
# What a compiled function's code (its library, with the code of the functions it calls linked in) holds when it
# leaves compiled code: a numba.objmode block calls the Python interpreter (PyObject_Call...), and a ctypes or
# cffi function is called at an address baked into the code (numba.dynamic.globals). Either can keep state
# between calls (a Python global, a C static), so row k's value could depend on the rows before it.
_ESCAPES = ("PyObject_Call", "PyObject_Vectorcall", "PyEval_", "PyImport_", "numba.dynamic.globals")


def _compiled(fn: Callable) -> Any:
    """``numba.njit(boundscheck=True)`` of ``fn``'s Python function (of an njit function: its ``py_func``,
    recompiled with these options), once per function in this process."""
    import numba

    source = getattr(fn, "py_func") if is_njit(fn) else fn  # an njit function: its Python source
    with _LOCK:
        got = _COMPILED.get(source)
        if got is None:
            got = numba.njit(boundscheck=True)(source)  # not inlined by numba: its own bounds checks stay
            _COMPILED[source] = got
    return got


def _refuse_escapes(name: str, fn: Callable, f: Any) -> None:
    """Refuse ``fn`` (compiled as ``f``) when the code of any of its compiled signatures calls out of compiled
    code (:data:`_ESCAPES`): per row by construction holds only for code that keeps no state between calls,
    which numba's own compiled code cannot (global arrays are frozen constants), but Python or foreign code
    reached from it can. Each signature is read once per process."""
    with _LOCK:
        done = _CHECKED.setdefault(f, set())
        for sig, cres in list(f.overloads.items()):
            if sig in done:
                continue
            code = cres.library.get_llvm_str()
            hit = next((marker for marker in _ESCAPES if marker in code), None)
            if hit is not None:
                raise ParameterError(
                    f"{name}={getattr(fn, '__name__', fn)!r} leaves compiled code (compiled=True): it calls the Python "
                    f"interpreter (numba.objmode) or a foreign function (ctypes, cffi) ({hit} in its code), which can "
                    "keep state between rows, so a row's value could depend on the other rows; write it with numpy "
                    "arrays, numbers and math only (what numba.njit compiles)."
                )
            done.add(sig)


def _refused(name: str, fn: Callable, exc: Exception) -> ParameterError:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = next((line for line in lines if not line.startswith("Failed in")), type(exc).__name__)
    return ParameterError(
        f"{name}={getattr(fn, '__name__', fn)!r} could not be compiled with numba (compiled=True): {first}; "
        "write it with numpy arrays, numbers and math only (what numba.njit compiles), or drop compiled=True "
        "(it then runs one record at a time)."
    )


def compiled_map(fn: Callable, rows: np.ndarray, states: np.ndarray | None, columns: int) -> np.ndarray:
    """``fn`` (per record: ``fn(row)``, or ``fn(state, row)`` when ``states`` is given) on every row in a
    compiled loop, made total: an array (len(rows), columns) where a call that raises or returns anything
    but ``columns`` numbers gives zeros, NaN gives 0 and ±inf ±(the largest double). One-column records
    (``rows`` one-dimensional) are passed as numbers, wider ones as a copy of the row."""
    import numba

    k = _kernels()
    f = _compiled(fn)
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    out = np.zeros((len(rows), columns))
    if states is not None:
        states = np.ascontiguousarray(states, dtype=np.float64)
        states = states if states.ndim == 2 else states.reshape(len(rows), -1)
    try:
        # compiled for these rows' types on no rows first, whatever the data (an empty data set too: a function
        # numba refuses is refused on every input, never on some), and its code checked before any row runs
        k.map_rows(f, rows[:0], None if states is None else states[:0], out[:0])
        _refuse_escapes("fn", fn, f)
        try:  # the fast loop has no handler; if some call raises, every row is redone with one per row
            k.map_rows(f, rows, states, out)
        except numba.core.errors.NumbaError:
            raise
        except Exception:  # noqa: BLE001 - some row's call raised: the loop with a handler per row
            out[:] = 0.0
            k.map_rows_guarded(f, rows, states, out)
    except numba.core.errors.NumbaError as exc:
        raise _refused("fn", fn, exc) from None
    _refuse_escapes("fn", fn, f)  # a signature compiled after the first check (none expected)
    return out


def compiled_update(fn: Callable, states: np.ndarray, releases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fn(state, release)`` for every run in a compiled loop (a one-column release passed as a number):
    the next states, and a mask of the runs whose value is not ``states.shape[1]`` finite numbers."""
    import numba

    k = _kernels()
    f = _compiled(fn)
    states = np.ascontiguousarray(states, dtype=np.float64)
    releases = np.ascontiguousarray(releases, dtype=np.float64).reshape(len(states), -1)
    out = np.zeros(states.shape)
    bad = np.zeros(len(states), dtype=np.bool_)
    loop = k.update_numbers if releases.shape[1] == 1 else k.update_vectors
    try:
        loop(f, states[:0], releases[:0], out[:0], bad[:0])  # compiled on no runs first, its code checked
        _refuse_escapes("update", fn, f)
        loop(f, states, releases, out, bad)
    except numba.core.errors.NumbaError as exc:
        raise _refused("update", fn, exc) from None
    _refuse_escapes("update", fn, f)
    return out, bad


@functools.lru_cache(maxsize=None)
def _kernels() -> Any:
    """The compiled loops (built on first use: importing numba costs about half a second)."""
    import types as _pytypes

    import numba
    from numba import types
    from numba.extending import overload

    real = (types.Integer, types.Float, types.Boolean)

    def put(out, k, v):  # pragma: no cover - a stub numba replaces by the overload below
        raise NotImplementedError

    @overload(put, inline="always")
    def _put(out, k, v):
        """Row k of ``out`` from the value ``v`` (a number, an array or a tuple of numbers): True when it
        holds exactly ``out.shape[1]`` numbers, else False (nothing written)."""
        if isinstance(v, real):

            def number(out, k, v):
                if out.shape[1] != 1:
                    return False
                out[k, 0] = float(v)
                return True

            return number
        if isinstance(v, types.Array) and isinstance(v.dtype, real):
            if v.ndim == 1:

                def vector(out, k, v):
                    if v.shape[0] != out.shape[1]:
                        return False
                    for j in range(v.shape[0]):
                        out[k, j] = float(v[j])
                    return True

                return vector

            def array(out, k, v):
                if v.size != out.shape[1]:
                    return False
                flat = np.ravel(v)
                for j in range(flat.size):
                    out[k, j] = float(flat[j])
                return True

            return array
        if isinstance(v, types.BaseTuple) and all(isinstance(t, real) for t in v.types):
            n = len(v.types)  # a heterogeneous tuple is indexed by constants: one line per entry
            src = f"def tup(out, k, v):\n    if out.shape[1] != {n}:\n        return False\n"
            src += "".join(f"    out[k, {j}] = float(v[{j}])\n" for j in range(n)) + "    return True\n"
            scope: dict = {}
            exec(src, scope)  # noqa: S102 - generated from the tuple's length only
            return scope["tup"]

        def other(out, k, v):
            return False

        return other

    def call(f, states, row, buf, sbuf, k):  # pragma: no cover - replaced by the overload below
        raise NotImplementedError

    @overload(call, inline="always")
    def _call(f, states, rows, buf, sbuf, k):
        """``f`` on row k alone: a number (one-column rows) or a copy of the row in ``buf``, after a copy
        of its state in ``sbuf`` (when ``states`` is not None)."""
        one = rows.ndim == 1
        if isinstance(states, (types.NoneType, types.Omitted)):
            if one:
                return lambda f, states, rows, buf, sbuf, k: f(rows[k])

            def plain(f, states, rows, buf, sbuf, k):
                for j in range(buf.shape[0]):
                    buf[j] = rows[k, j]
                return f(buf)

            return plain
        if one:

            def stated_number(f, states, rows, buf, sbuf, k):
                for j in range(sbuf.shape[0]):
                    sbuf[j] = states[k, j]
                return f(sbuf, rows[k])

            return stated_number

        def stated(f, states, rows, buf, sbuf, k):
            for j in range(sbuf.shape[0]):
                sbuf[j] = states[k, j]
            for j in range(buf.shape[0]):
                buf[j] = rows[k, j]
            return f(sbuf, buf)

        return stated

    @numba.njit(inline="always")
    def total(out, k):
        for j in range(out.shape[1]):
            x = out[k, j]
            if x != x:
                out[k, j] = 0.0
            elif x > _MAX_DOUBLE:
                out[k, j] = _MAX_DOUBLE
            elif x < -_MAX_DOUBLE:
                out[k, j] = -_MAX_DOUBLE

    @numba.njit(inline="always")
    def finish(out, k, ok):
        if ok:
            total(out, k)
        else:
            for j in range(out.shape[1]):
                out[k, j] = 0.0

    @numba.njit
    def map_rows(f, rows, states, out):
        buf = np.empty(1 if rows.ndim == 1 else rows.shape[1])
        sbuf = np.empty(1 if states is None else states.shape[1])
        for k in range(rows.shape[0]):
            finish(out, k, put(out, k, call(f, states, rows, buf, sbuf, k)))

    @numba.njit
    def map_rows_guarded(f, rows, states, out):
        buf = np.empty(1 if rows.ndim == 1 else rows.shape[1])
        sbuf = np.empty(1 if states is None else states.shape[1])
        for k in range(rows.shape[0]):
            ok = False
            try:
                ok = put(out, k, call(f, states, rows, buf, sbuf, k))
            except Exception:  # noqa: BLE001 - the total rule: a failing call is the zero record
                ok = False
            finish(out, k, ok)

    @numba.njit(inline="always")
    def settle(out, i, ok, bad):
        if ok:
            for j in range(out.shape[1]):
                if not np.isfinite(out[i, j]):
                    ok = False
        bad[i] = not ok

    @numba.njit
    def update_numbers(f, states, releases, out, bad):
        sbuf = np.empty(states.shape[1])
        for i in range(states.shape[0]):
            for j in range(sbuf.shape[0]):
                sbuf[j] = states[i, j]
            settle(out, i, put(out, i, f(sbuf, releases[i, 0])), bad)

    @numba.njit
    def update_vectors(f, states, releases, out, bad):
        sbuf = np.empty(states.shape[1])
        rbuf = np.empty(releases.shape[1])
        for i in range(states.shape[0]):
            for j in range(sbuf.shape[0]):
                sbuf[j] = states[i, j]
            for j in range(rbuf.shape[0]):
                rbuf[j] = releases[i, j]
            settle(out, i, put(out, i, f(sbuf, rbuf)), bad)

    return _pytypes.SimpleNamespace(
        map_rows=map_rows,
        map_rows_guarded=map_rows_guarded,
        update_numbers=update_numbers,
        update_vectors=update_vectors,
    )
