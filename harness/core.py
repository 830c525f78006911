"""The core model: claims, record domains, neighbour relations, output laws, events, witnesses
and the ``Mechanism`` base class every catalog entry derives from.

Dependency direction: core <- mechanisms <- {proofs, auditors} <- reports/CLI/plugin.
Proofs and auditors never import each other; what one tells the other (a witness pair and
event) travels as the core's :class:`Witness` and :class:`Event` values.

Conventions
-----------
* Parameters keep the value the user gave (int, float, Fraction); :func:`exact` turns one into
  an exact sympy number: a float is read as the exact binary value the code computes with
  (``Fraction(0.1) = 3602879701896397/36028797018963968``, not ``1/10``). Reports may print a short
  decimal for humans; every checked value is the binary one.
* Data shapes, named by :attr:`InputSpec.shape`:

  - ``"record"``  : the input is ONE record (local DP, e.g. randomized response); two inputs are
    neighbours when they are any two records of the domain (``Substitute`` of a one-record data set).
  - ``"dataset"`` : the input is a numpy array of records, shape ``(n,)`` or ``(n, columns)``;
    neighbours per ``AddRemove`` or ``Substitute``.
  - ``"vector"``  : the input is a vector of query answers, shape ``(dim,)``; neighbours per
    ``BoundedChange(sensitivity, norm)``.
* A sampler returns ``size`` outputs with the first axis indexing samples: shape ``(size,)`` for
  scalar outputs, ``(size, k)`` for vector outputs.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import inspect
import math
import weakref
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from . import _validate as _v
from .errors import ParameterError

if TYPE_CHECKING:  # annotations only; sympy is imported where an exact value is needed
    import sympy as sp

__all__ = [
    "exact",
    "Claim",
    "PureDP",
    "ApproxDP",
    "RenyiDP",
    "Domain",
    "Finite",
    "IntegerRange",
    "RealInterval",
    "RealBox",
    "Relation",
    "AddRemove",
    "Substitute",
    "BoundedChange",
    "InputSpec",
    "OutputLaw",
    "DiscreteLaw",
    "FunctionLaw",
    "Event",
    "Witness",
    "Mechanism",
]


# --------------------------------------------------------------------------- exact numbers


def exact(value: Any) -> sp.Expr:
    """An exact sympy number for a parameter: ints and Fractions as they are, floats as their exact
    binary value (``Fraction(float)``: the number the sampler computes with), sympy expressions
    unchanged unless they hold a Float.

    >>> exact(0.1)
    3602879701896397/36028797018963968
    >>> exact(0.5)
    1/2
    """
    import sympy as sp  # deferred: `import dpharness` (the CLI, the pytest plugin) stays free of sympy

    if isinstance(value, sp.Basic):
        if value.has(sp.Float):
            raise ParameterError(f"value={value!r} holds a sympy Float; pass an exact number (Rational, Integer).")
        return value
    if isinstance(value, bool):
        raise ParameterError(f"value={value!r} is a bool; pass a number.")
    if isinstance(value, (int, np.integer)):
        return sp.Integer(int(value))
    if isinstance(value, Fraction):
        return sp.Rational(value.numerator, value.denominator)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isinf(value):
            return sp.oo if value > 0 else -sp.oo
        if math.isnan(value):
            raise ParameterError("value=nan is not a number; pass a finite number.")
        q = Fraction(value)
        return sp.Rational(q.numerator, q.denominator)
    raise ParameterError(f"value={value!r} is not a number; pass an int, float or Fraction.")


# --------------------------------------------------------------------------- claims


class Claim:
    """A claimed privacy guarantee. ``epsilon``/``delta`` are what an audit holds the mechanism to."""

    epsilon: Any
    delta: Any = 0

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True)
class PureDP(Claim):
    """ε-DP: Pr[M(D)∈S] ≤ e^ε Pr[M(D')∈S] for all neighbours D, D' and all events S."""

    epsilon: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _v.positive("epsilon", self.epsilon))

    @property
    def delta(self) -> int:
        return 0

    def describe(self) -> str:
        return f"ε = {self.epsilon} (pure DP)"


@dataclass(frozen=True)
class ApproxDP(Claim):
    """(ε, δ)-DP: Pr[M(D)∈S] ≤ e^ε Pr[M(D')∈S] + δ."""

    epsilon: Any
    delta: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _v.nonnegative("epsilon", self.epsilon))
        object.__setattr__(self, "delta", _v.probability("delta", self.delta, open_right=True))

    def describe(self) -> str:
        return f"(ε, δ) = ({self.epsilon}, {self.delta})"


@dataclass(frozen=True)
class RenyiDP(Claim):
    """(α, ε)-Rényi DP: D_α(M(D) || M(D')) ≤ ε. Converts to (ε + ln(1/δ)/(α−1), δ)-DP (Mironov 2017, Prop. 3)."""

    alpha: Any
    epsilon: Any

    def __post_init__(self) -> None:
        alpha = _v.real("alpha", self.alpha)
        if alpha <= 1:  # real() refuses NaN: the same as `not alpha > 1`
            raise ParameterError(f"alpha={alpha!r} must be > 1; pass a Rényi order above 1.")
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "epsilon", _v.positive("epsilon", self.epsilon))

    @property
    def delta(self) -> int:
        return 0

    def to_approx(self, delta: float) -> ApproxDP:
        d = _v.probability("delta", delta, open_left=True, open_right=True)
        return ApproxDP(float(self.epsilon) + math.log(1 / float(d)) / (float(self.alpha) - 1), d)

    def describe(self) -> str:
        return f"Rényi DP of order α = {self.alpha} with ε = {self.epsilon}"


# --------------------------------------------------------------------------- record domains


class Domain(abc.ABC):
    """The set records (or data vectors' coordinates) are drawn from."""

    @abc.abstractmethod
    def contains(self, values: np.ndarray) -> np.ndarray:
        """Element-wise membership (for RealBox: row-wise)."""

    @abc.abstractmethod
    def extremes(self) -> list:
        """A few boundary records, the usual places where privacy loss peaks (neighbour search)."""

    @abc.abstractmethod
    def describe(self) -> str: ...

    def validate(self, name: str, values: Any) -> np.ndarray:
        _v.not_masked(name, values)
        arr = self.check_dtype(name, np.asarray(values))
        if arr.dtype.kind in "iu" and arr.size and not isinstance(self, IntegerRange):
            if int(arr.max()) > 2**53 or int(arr.min()) < -(2**53):  # outside the domain (bounds within ±2**53)
                raise ParameterError(
                    f"{name} (dtype {arr.dtype}) holds integers beyond 2**53, which the mechanism's real-valued "
                    "records (doubles) cannot hold exactly; recode them (e.g. as ranks), or pass user ids "
                    "through dpharness.release, which reads the user column as an identity."
                )
        if self._inside_by_extremes(arr):  # every entry finite and in the domain: the checks below pass
            return arr
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            raise ParameterError(f"{name} has NaN or infinite entries; pass finite values in {self.describe()}.")
        inside = self.contains(arr)
        if not np.all(inside):
            # the count and the first position, never the values: an error message is an output too
            bad = np.flatnonzero(~np.asarray(inside).ravel())
            raise ParameterError(
                f"{name} has {bad.size} value(s) outside the domain {self.describe()} (the first at index {int(bad[0])}); "
                "clamp or filter the data before calling, or widen the mechanism's bounds."
            )
        return arr

    def _inside_by_extremes(self, arr: np.ndarray) -> bool:
        """Whether every entry of ``arr`` is known to be finite and in the domain from its least and greatest
        entry alone (two reductions, no temporary per entry); False when not known (:meth:`validate` then
        checks entry by entry). Only a box whose :meth:`contains` is RealBox's own answers here."""
        return False

    def check_dtype(self, name: str, arr: np.ndarray) -> np.ndarray:
        """The checks of :meth:`validate` that read the array's dtype only (made on an empty data set too, so
        a refusal by dtype never depends on whether the data holds a record)."""
        if arr.dtype.kind not in "biuf":  # complex, timedelta, datetime, strings, objects: refused by dtype
            raise ParameterError(
                f"{name} has dtype {arr.dtype}, which records cannot hold; pass numbers (bool, int, uint or "
                f"float) in {self.describe()}."
            )
        return arr

    def refuse_wide_integers(self, name: str, arr: np.ndarray) -> None:
        """Refuse a 64-bit integer array where the domain holds integers beyond 2**53 (no double holds them
        all), whatever its values: for a mechanism run on any data set of the domain, refusing only the arrays
        that hold such an integer would make a release raise on the data set with one such record (inside the
        domain) and not on its neighbour."""
        wide = _v.beyond_doubles(getattr(self, "lo", 0), getattr(self, "hi", 0))
        if arr.dtype.kind in "iu" and arr.dtype.itemsize >= 8 and not isinstance(self, IntegerRange) and wide:
            raise ParameterError(
                f"{name} has dtype {arr.dtype} and the domain {self.describe()} holds integers beyond 2**53, which "
                "the mechanism's real-valued records (doubles) cannot hold exactly; pass floats "
                "(np.asarray(data, dtype=float) rounds them: only if that is what you mean) or declare bounds "
                "within ±2**53."
            )


@dataclass(frozen=True)
class Finite(Domain):
    """A finite set of values, e.g. the categories ``0..k-1`` of randomized response."""

    values: tuple

    def __post_init__(self) -> None:
        if len(self.values) < 2:
            raise ParameterError(f"values={self.values!r} needs at least 2 elements; pass 2 or more values.")
        object.__setattr__(self, "values", tuple(self.values))

    def contains(self, values: np.ndarray) -> np.ndarray:
        return np.isin(np.asarray(values), np.asarray(self.values))

    def extremes(self) -> list:
        return list(self.values)

    def describe(self) -> str:
        if len(self.values) > 6:
            return f"{{{self.values[0]}, {self.values[1]}, ..., {self.values[-1]}}}"
        return "{" + ", ".join(map(str, self.values)) + "}"


@dataclass(frozen=True)
class IntegerRange(Domain):
    """Integers ``lo..hi`` inclusive."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        _v.integer("lo", self.lo)
        _v.integer("hi", self.hi)
        _v.ordered("lo", self.lo, "hi", self.hi)

    def contains(self, values: np.ndarray) -> np.ndarray:
        arr = np.asarray(values)
        integral = np.equal(np.mod(arr, 1), 0) if np.issubdtype(arr.dtype, np.floating) else np.ones(arr.shape, bool)
        return integral & (arr >= self.lo) & (arr <= self.hi)

    def extremes(self) -> list:
        return [self.lo, self.hi]

    def describe(self) -> str:
        return f"integers {self.lo}..{self.hi}"


@dataclass(frozen=True)
class RealInterval(Domain):
    """Reals in ``[lo, hi]``; either end may be infinite (then records are only required finite)."""

    lo: float = -math.inf
    hi: float = math.inf

    def __post_init__(self) -> None:
        for nm in ("lo", "hi"):
            val = getattr(self, nm)
            if (
                isinstance(val, bool)
                or not isinstance(val, (int, float, Fraction, np.integer, np.floating))
                or math.isnan(float(val))
            ):
                raise ParameterError(f"{nm}={val!r} is not a number; pass a real bound (or ±inf).")
        _v.ordered("lo", self.lo, "hi", self.hi)

    def contains(self, values: np.ndarray) -> np.ndarray:
        arr = np.asarray(values, dtype=float)
        return np.isfinite(arr) & (arr >= self.lo) & (arr <= self.hi)

    def extremes(self) -> list:
        return [v for v in (self.lo, self.hi) if math.isfinite(v)] or [0.0, 1.0]

    def describe(self) -> str:
        return f"reals in [{self.lo}, {self.hi}]"


@dataclass(frozen=True)
class RealBox(Domain):
    """Records that are real vectors of ``dim`` columns, each in ``[lo, hi]`` (e.g. (x, y) pairs)."""

    lo: float
    hi: float
    dim: int

    def __post_init__(self) -> None:
        _v.real("lo", self.lo)
        _v.real("hi", self.hi)
        _v.ordered("lo", self.lo, "hi", self.hi)
        _v.integer("dim", self.dim, minimum=1)

    def contains(self, values: np.ndarray) -> np.ndarray:
        arr = np.asarray(values, dtype=float)
        if arr.ndim == 0 or arr.shape[-1] != self.dim:
            return np.zeros(arr.shape[:-1] if arr.ndim else (), bool)
        return np.all(np.isfinite(arr) & (arr >= self.lo) & (arr <= self.hi), axis=-1)

    def _inside_by_extremes(self, arr: np.ndarray) -> bool:
        # finite bounds: a NaN makes the extremes NaN and an infinity passes neither bound, so both comparisons
        # hold exactly when contains holds for every row
        if type(self).contains is not RealBox.contains or arr.dtype.kind != "f" or not arr.size:
            return False
        if not (abs(self.lo) < math.inf and abs(self.hi) < math.inf):  # exact for ints and Fractions of any size
            return False
        return float(arr.min()) >= self.lo and float(arr.max()) <= self.hi  # Python's exact mixed comparisons

    def extremes(self) -> list:
        return [np.full(self.dim, self.lo), np.full(self.dim, self.hi)]

    def describe(self) -> str:
        return f"real {self.dim}-vectors in [{self.lo}, {self.hi}]^{self.dim}"


# --------------------------------------------------------------------------- neighbour relations


class Relation(abc.ABC):
    """Which inputs count as neighbours. Always an explicit choice: sensitivities differ between them."""

    @abc.abstractmethod
    def is_neighbour(self, a: np.ndarray, b: np.ndarray) -> bool: ...

    @abc.abstractmethod
    def describe(self) -> str: ...


@dataclass(frozen=True)
class AddRemove(Relation):
    """Data sets that differ by adding or removing one record (unbounded DP)."""

    def is_neighbour(self, a: ArrayLike, b: ArrayLike) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        if abs(len(a) - len(b)) != 1:
            return False
        small, big = (a, b) if len(a) < len(b) else (b, a)
        # multiset inclusion: sort rows and walk once
        small_rows = sorted(map(_row_key, small))
        big_rows = sorted(map(_row_key, big))
        i = 0
        skipped = 0
        for row in big_rows:
            if i < len(small_rows) and small_rows[i] == row:
                i += 1
            else:
                skipped += 1
        return skipped == 1 and i == len(small_rows)

    def describe(self) -> str:
        return "add/remove one record"


@dataclass(frozen=True)
class Substitute(Relation):
    """Data sets of equal size that differ in one record (bounded DP). For a ``record`` input: any two records."""

    def is_neighbour(self, a: ArrayLike, b: ArrayLike) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if a.ndim == 0:
            return bool(a != b)
        diff = a != b
        rows = diff.reshape(len(a), -1).any(axis=1)
        return int(rows.sum()) == 1

    def describe(self) -> str:
        return "substitute one record"


@dataclass(frozen=True)
class BoundedChange(Relation):
    """Vectors of query answers whose difference has ``norm`` (``"l1"``, ``"l2"``, ``"linf"``) at most ``sensitivity``."""

    sensitivity: Any = 1
    norm: str = "l1"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", _v.positive("sensitivity", self.sensitivity))
        _v.choice("norm", self.norm, ("l1", "l2", "linf"))

    def distance(self, a: ArrayLike, b: ArrayLike) -> float:
        """The distance as a float, for reports (:meth:`is_neighbour` decides exactly)."""
        d = np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)).ravel()
        return float({"l1": d.sum(), "l2": math.sqrt(float((d * d).sum())), "linf": d.max(initial=0.0)}[self.norm])

    def is_neighbour(self, a: ArrayLike, b: ArrayLike) -> bool:
        """Exactly ``||a - b|| <= sensitivity``, with every entry and the sensitivity read as the exact
        value the code uses (floats as their binary value, via Fractions); no tolerance. For L2 the
        squared distance is compared with the squared sensitivity."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or np.array_equal(a, b):
            return False
        diffs = [abs(_exact_fraction(x) - _exact_fraction(y)) for x, y in zip(a.ravel().tolist(), b.ravel().tolist())]
        bound = _exact_fraction(self.sensitivity)
        if self.norm == "l1":
            return sum(diffs, Fraction(0)) <= bound
        if self.norm == "l2":
            return sum((d * d for d in diffs), Fraction(0)) <= bound * bound
        return max(diffs, default=Fraction(0)) <= bound

    def describe(self) -> str:
        return f"{self.norm.upper()} distance at most {self.sensitivity}"


def _exact_fraction(value: Any) -> Fraction:
    """A finite real number (int, float, Fraction, numpy scalar) as an exact Fraction (floats: binary value)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ParameterError(f"value={value!r} is not a real number; pass ints, floats or Fractions.")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParameterError(f"value={value!r} is not finite; pass finite numbers.")
    return Fraction(value)


def _row_key(row: ArrayLike) -> tuple:
    return tuple(np.atleast_1d(np.asarray(row)).tolist())


@dataclass(frozen=True)
class InputSpec:
    """What a mechanism takes: the record domain, the neighbour relation and the shape of an input.

    ``shape`` is ``"record"``, ``"dataset"`` or ``"vector"`` (see the module docstring); ``dim`` is the
    vector length for ``"vector"`` inputs (None: any length); ``size`` the fixed number of records of a
    ``"dataset"`` input when the mechanism needs it (e.g. a mean under substitution), else None."""

    domain: Domain
    relation: Relation
    shape: str
    dim: int | None = None
    size: int | None = None
    # run on any data set of the domain (a declared mechanism, or a catalog mechanism, as opposed to a registered
    # callable audited on the pair its user fixes): 64-bit integer inputs are then refused by dtype where the domain
    # reaches beyond 2**53, never by value (see Domain.refuse_wide_integers)
    any_data: bool = False

    def __post_init__(self) -> None:
        _v.choice("shape", self.shape, ("record", "dataset", "vector"))
        if self.shape == "vector" and not isinstance(self.relation, BoundedChange):
            raise ParameterError(
                f"relation={self.relation!r} does not fit vector inputs; pass BoundedChange(sensitivity, norm)."
            )
        if self.shape != "vector" and isinstance(self.relation, BoundedChange):
            raise ParameterError(f"relation={self.relation!r} is for vector inputs; pass AddRemove() or Substitute().")
        if self.shape == "record" and not isinstance(self.relation, Substitute):
            raise ParameterError(f"relation={self.relation!r} does not fit a single-record input; pass Substitute().")

    def validate(self, name: str, data: Any) -> Any:
        """Check one input against this spec; return it as the mechanism will see it."""
        _v.not_masked(name, data)
        _v.not_extended(name, data)
        if self.any_data and self.shape != "record":
            self.domain.refuse_wide_integers(name, np.asarray(data))
        if self.shape == "record":
            arr = np.asarray(data)
            if isinstance(self.domain, RealBox):
                if arr.shape != (self.domain.dim,):
                    raise ParameterError(
                        f"{name} has shape {arr.shape}; pass one record of shape ({self.domain.dim},)."
                    )
            elif arr.ndim != 0:
                raise ParameterError(
                    f"{name} has shape {arr.shape}; pass a single record (a scalar in {self.domain.describe()})."
                )
            self.domain.validate(name, arr)
            return data
        arr = np.asarray(data)
        if self.shape == "vector":
            if arr.ndim != 1 or (self.dim is not None and arr.shape[0] != self.dim):
                want = f"({self.dim},)" if self.dim is not None else "(dim,)"
                raise ParameterError(
                    f"{name} has shape {arr.shape}; pass a 1-D vector of query answers of shape {want}."
                )
            self.domain.validate(name, arr)
            return self._canonical(arr)
        want_ndim = 2 if isinstance(self.domain, RealBox) else 1
        if isinstance(self.domain, RealBox) and arr.ndim == 1 and arr.size == 0:  # [] is the empty data set
            arr = arr.reshape(0, self.domain.dim)
        if arr.ndim != want_ndim:
            want = f"(n, {self.domain.dim})" if isinstance(self.domain, RealBox) else "(n,)"  # want_ndim == 2
            raise ParameterError(f"{name} has shape {arr.shape}; pass a data set of shape {want}.")
        if self.size is not None and arr.shape[0] != self.size:
            raise ParameterError(
                f"{name} has {arr.shape[0]} records; this mechanism is fixed to size={self.size} records."
            )
        if arr.shape[0] > 0:
            self.domain.validate(name, arr)
        else:
            self.domain.check_dtype(name, arr)
        return self._canonical(arr)

    def _canonical(self, arr: np.ndarray) -> np.ndarray:
        """Records of an ``IntegerRange`` as int64, whatever array type they came in (ints, whole floats,
        an empty list): a sampler sees one dtype on every input, so its outputs keep one type."""
        if (
            isinstance(self.domain, IntegerRange)
            and arr.dtype != np.int64
            and -(2**63) <= int(self.domain.lo)
            and int(self.domain.hi) < 2**63
        ):
            return arr.astype(np.int64)
        return arr

    def validate_pair(self, data: Any, neighbor: Any) -> tuple[Any, Any]:
        """Validate both inputs and check they are neighbours under the relation."""
        a = self.validate("data", data)
        b = self.validate("neighbor", neighbor)
        if self.shape == "record":
            if np.array_equal(np.asarray(a), np.asarray(b)):
                raise ParameterError("data and neighbor are the same record; pass two different records.")
            return a, b
        if np.asarray(a).shape == np.asarray(b).shape and np.array_equal(a, b):
            raise ParameterError("data and neighbor are identical; pass two inputs that differ as the relation allows.")
        if not self.relation.is_neighbour(a, b):
            raise ParameterError(
                f"data and neighbor are not neighbours under '{self.relation.describe()}'; "
                "change exactly what the relation allows."
            )
        return a, b

    def describe(self) -> str:
        what = {"record": "one record", "dataset": "a data set of records", "vector": "a vector of query answers"}[
            self.shape
        ]
        return f"{what} in {self.domain.describe()}; neighbours: {self.relation.describe()}"


# --------------------------------------------------------------------------- output laws


class OutputLaw(abc.ABC):
    """The exact law of a mechanism's output on one input.

    ``kind`` is ``"discrete"`` (a pmf) or ``"continuous"`` (a density w.r.t. Lebesgue measure);
    ``symbols`` are the sympy symbols of the output coordinates and ``expr`` the pmf/pdf in them, or a
    :class:`Deferred` building it: read it with :meth:`symbolic`."""

    kind: str
    symbols: tuple
    expr: sp.Expr

    @abc.abstractmethod
    def log_prob(self, outputs: np.ndarray) -> np.ndarray:
        """log pmf / log pdf at each output (first axis indexes outputs); -inf off the support."""

    def symbolic(self) -> "sp.Expr":
        """The pmf/pdf as a sympy expression in ``symbols``; ``expr`` may hold a :class:`Deferred` that
        builds it on first use (the auditor's neighbour screening builds many laws and needs only
        ``log_prob``)."""
        return self.expr.value() if isinstance(self.expr, Deferred) else self.expr

    def prob(self, outputs: np.ndarray) -> np.ndarray:
        return np.exp(self.log_prob(outputs))

    def support(self) -> list | None:
        """All outputs with positive probability for a finite discrete law, else None."""
        return None


class Deferred:
    """A value built by ``build()`` on first use and kept (a law's sympy expression)."""

    __slots__ = ("_build", "_value")

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build: Callable[[], Any] | None = build
        self._value: Any = None

    def value(self) -> Any:
        if self._build is not None:
            self._value, self._build = self._build(), None
        return self._value

    def __repr__(self) -> str:
        return "Deferred(built)" if self._build is None else "Deferred(not built yet)"


@dataclass(frozen=True)
class DiscreteLaw(OutputLaw):
    """A finite discrete law: ``outcomes[i]`` has probability ``probs[i]`` (exact sympy numbers allowed)."""

    outcomes: tuple
    probs: tuple
    symbols: tuple = ()
    expr: Any = None
    kind: str = "discrete"

    def __post_init__(self) -> None:
        if len(self.outcomes) != len(self.probs):
            raise ParameterError("outcomes and probs differ in length; pass one probability per outcome.")
        total = float(sum(float(p) for p in self.probs))
        if abs(total - 1.0) > 1e-9:
            raise ParameterError(f"probs sum to {total}; pass probabilities that sum to 1.")

    def _table(self) -> dict:
        return {
            _row_key(o): math.log(float(p)) if float(p) > 0 else -math.inf for o, p in zip(self.outcomes, self.probs)
        }

    def log_prob(self, outputs: np.ndarray) -> np.ndarray:
        table = self._table()
        arr = np.asarray(outputs)
        rows = arr if arr.ndim > 1 else arr.reshape(-1, 1) if arr.ndim == 1 else arr.reshape(1, 1)
        return np.array([table.get(_row_key(r), -math.inf) for r in rows])

    def support(self) -> list:
        return [o for o, p in zip(self.outcomes, self.probs) if float(p) > 0]


@dataclass(frozen=True)
class FunctionLaw(OutputLaw):
    """A law given by a vectorised numeric log-density and its sympy expression."""

    kind: str
    log_prob_fn: Callable[[np.ndarray], np.ndarray]
    symbols: tuple
    expr: Any
    outcomes: tuple | None = None  # the finite support, when discrete and finite

    def __post_init__(self) -> None:
        _v.choice("kind", self.kind, ("discrete", "continuous"))

    def log_prob(self, outputs: np.ndarray) -> np.ndarray:
        return np.asarray(self.log_prob_fn(np.asarray(outputs)), dtype=float)

    def support(self) -> list | None:
        return list(self.outcomes) if self.outcomes is not None else None


# --------------------------------------------------------------------------- events and witnesses


@dataclass(frozen=True)
class Event:
    """A set S of outputs, as a vectorised membership test plus words for reports.

    ``contains(outputs) -> bool array`` over the first axis of ``outputs``."""

    contains: Callable[[np.ndarray], np.ndarray] = field(compare=False)
    description: str

    @staticmethod
    def point(value: Any) -> "Event":
        target = np.asarray(value)

        def contains(out: np.ndarray) -> np.ndarray:
            out = np.asarray(out)
            return np.all((out == target).reshape(len(out), -1), axis=1) if out.ndim > 1 else out == target

        return Event(contains, f"output = {value!r}")

    @staticmethod
    def interval(lo: float, hi: float) -> "Event":
        return Event(lambda out: (np.asarray(out) >= lo) & (np.asarray(out) <= hi), f"output in [{lo}, {hi}]")

    @staticmethod
    def threshold(t: float, above: bool = True) -> "Event":
        return Event(HalfLine(t, above), f"output {'>=' if above else '<='} {t}")


class HalfLine:
    """``output >= t`` (``above``) or ``output <= t``, elementwise: an event's membership that the
    auditor may also count on sorted outputs by a binary search (its bound and side are kept)."""

    __slots__ = ("t", "above")

    def __init__(self, t: Any, above: bool) -> None:
        self.t, self.above = t, above

    def __call__(self, out: Any) -> np.ndarray:
        return np.asarray(out) >= self.t if self.above else np.asarray(out) <= self.t


@dataclass(frozen=True)
class Witness:
    """A neighbouring pair and an output or event where the privacy loss attains (or nears) a bound.

    Produced by proofs (REFUTED verdicts, tightness) and audits; consumed by the auditor's pair search."""

    data: Any
    neighbor: Any
    event: Event | None = None
    output: Any = None
    loss: float | None = None  # ln(P_D(S)/P_D'(S)) or the pointwise privacy loss, when known
    description: str = ""


# --------------------------------------------------------------------------- class definitions, as written

# Each Mechanism and parts Step class's own namespace as its class statement left it (name -> object),
# taken when the class is created; dpharness.proof_registry compares it with the class now, so a
# method replaced later (a class-level monkeypatch) is noticed however the proofs were imported.
_DEFINITIONS: "weakref.WeakKeyDictionary[type, dict]" = weakref.WeakKeyDictionary()


def record_definition(cls: type) -> None:
    """Remember ``cls``'s own namespace as defined (called from ``__init_subclass__``)."""
    _DEFINITIONS[cls] = dict(vars(cls))


_MODULES: dict[str, dict] = {}


def record_module(name: str) -> None:
    """Remember the functions and classes of module ``name`` as its import left them (called at the end
    of every module whose code a proof is about: the samplers and laws)."""
    import sys

    _MODULES[name] = {k: v for k, v in vars(sys.modules[name]).items() if inspect.isfunction(v) or isinstance(v, type)}


def patched_module() -> str | None:
    """The first ``module.name`` of a recorded module whose function or class was replaced or deleted
    after the module was imported (a monkeypatch), or None."""
    import sys

    for name, defined in _MODULES.items():
        now = vars(sys.modules[name])
        for key, value in defined.items():
            if now.get(key) is not value:
                return f"{name}.{key}"
    return None


def definition(cls: type) -> dict | None:
    """The namespace ``cls`` had when it was created, or None if it was not recorded."""
    return _DEFINITIONS.get(cls)


# --------------------------------------------------------------------------- mechanisms


_MechanismT = TypeVar("_MechanismT", bound="Mechanism")


@dataclass(frozen=True, kw_only=True)
class Mechanism(abc.ABC):
    """A DP mechanism as a frozen value: noise parameters (dataclass fields) plus a separate ``claim``.

    Subclasses are dataclasses ``@dataclass(frozen=True, kw_only=True)`` that

    * set the class attributes ``name`` (registry key, lower_snake), ``source`` (seed or paper),
      and for gallery entries ``buggy = True``, ``bug`` (what is wrong) and ``true_epsilon``;
    * declare their noise parameters as fields with calibrated defaults and a ``claim`` field;
    * validate parameters in ``_check()`` (called by ``__post_init__``) with ``dpharness._validate``;
    * implement ``input_spec`` (property), ``_sample(data, size, rng)``, ``_law(data)`` and
      ``example_pair()``;
    * document the pmf/density, the neighbour relation and the claim in the class docstring.

    The public ``sample``/``law`` validate once and call the private implementations."""

    name: ClassVar[str] = ""
    source: ClassVar[str] = ""
    buggy: ClassVar[bool] = False
    bug: ClassVar[str] = ""
    true_epsilon: ClassVar[float | None] = None  # gallery: the true ε of the implementation as written

    claim: Claim = PureDP(1)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        record_definition(cls)

    def __post_init__(self) -> None:
        # a numpy scalar field is the plain number it holds (np.float32(0.1) is 0.100000001490116...),
        # read once here: every reader (validation, Fraction() in the proof, float() in the sampler) then
        # reads the same plain value; Fraction() refused np.float32 with a TypeError
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (np.integer, np.floating)) and type(value).__module__ == "numpy":
                object.__setattr__(self, f.name, value.item())
        self.validate()

    def validate(self) -> None:
        """Check every parameter (run at construction, and again by ``prove``: a field replaced after
        construction is checked before it is proved). A number field must be a plain ``int``, ``float``
        or ``Fraction`` (or a numpy scalar): a subclass may read as different numbers to the sampler and
        the prover."""
        if not isinstance(self.claim, Claim):
            raise ParameterError(
                f"claim={self.claim!r} is not a Claim; pass PureDP(eps), ApproxDP(eps, delta) or RenyiDP(alpha, eps)."
            )
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if (
                isinstance(value, (int, float, Fraction))
                and type(value) not in (int, float, Fraction, bool)
                and type(value).__module__ != "numpy"
            ):
                raise ParameterError(
                    f"{f.name}={value!r} is a {type(value).__qualname__}, a subclass of a number type; "
                    "pass a plain int, float or Fraction (a subclass may read as different numbers "
                    "to the sampler and the prover)."
                )
        self._check()

    # --- to implement ---------------------------------------------------
    def _check(self) -> None:
        """Validate the noise parameters (raise ParameterError naming the argument)."""

    @property
    @abc.abstractmethod
    def input_spec(self) -> InputSpec: ...

    @abc.abstractmethod
    def _sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray: ...

    @abc.abstractmethod
    def _law(self, data: Any) -> OutputLaw: ...

    @abc.abstractmethod
    def example_pair(self) -> tuple[Any, Any]:
        """A default neighbouring pair (data, neighbor) for audits and reports."""

    def audit_encoding(self, inputs: Sequence[Any]) -> Callable[[np.ndarray], np.ndarray] | None:
        """A fixed post-processing of this mechanism's outputs into numbers, for an audit that will run it on
        ``inputs`` only (every input of every pair, validated), or None (the default: audit the outputs as
        they are). It must be a deterministic function of one output alone, the same whatever the input it
        is applied to (so the audit certifies the ε of the encoded outputs, at most the mechanism's). A
        mechanism whose outputs are structured values (a mapping of the keys it found) returns the numbers
        in them laid out over what the inputs can release, so every event family sees them."""
        return None

    def aimed_pairs(self) -> tuple[Witness, ...]:
        """Neighbouring pairs where a term of the privacy bound is attained, or nearly (one or two per
        term: a key at its selection threshold, a record at the clipping norm, the extreme pair of a noise
        leaf), each a :class:`Witness` whose ``description`` names the term; () when the mechanism names
        none. Read by the auditor, which runs them beside its search and validates each with
        ``input_spec.validate_pair`` (a pair that is not a neighbour pair of the declared domain and
        relation is dropped), so a subclass may redefine this without touching what it computes."""
        return ()

    # --- public, validated --------------------------------------------------
    def sample(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` independent outputs on ``data`` (first axis indexes samples)."""
        data = self.input_spec.validate("data", data)
        size = _v.integer("size", size, minimum=1)
        rng = _v.rng("rng", rng)
        return self._sample(data, size, rng)

    def __call__(self, data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        return self.sample(data, size, rng)

    def law(self, data: Any) -> OutputLaw:
        """The exact output law on ``data``."""
        return self._law(self.input_spec.validate("data", data))

    def noise_parameters(self) -> dict[str, Any]:
        """Every field except the claim, by name (what ``--set KEY=VALUE`` may override)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "claim"}

    def replace(self: _MechanismT, **changes: Any) -> _MechanismT:
        """A copy with some fields changed (re-validated)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ParameterError(
                f"{sorted(unknown)[0]}={changes[sorted(unknown)[0]]!r} is not a parameter of {self.name}; "
                f"pass one of {sorted(f.name for f in dataclasses.fields(self))}."
            )
        return dataclasses.replace(self, **changes)

    def source_hash(self) -> str:
        """SHA-256 of the source of the module defining this mechanism (a stale report is detectable)."""
        try:
            module = inspect.getmodule(type(self))
            if module is None:  # getsource(None) is a TypeError
                raise TypeError(f"{type(self)!r} has no module")
            text = inspect.getsource(module)
        except (OSError, TypeError):
            text = repr(type(self))
        return hashlib.sha256(text.encode()).hexdigest()

    def describe(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.noise_parameters().items())
        return f"{self.name}({params}) claiming {self.claim.describe()}"


record_definition(Mechanism)
record_module(__name__)
