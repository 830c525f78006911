"""What every family of parts builds on: the values that flow between steps (:class:`Space`,
:class:`Distance`), the step types (:class:`Step`, :class:`Transformation`, :class:`Measurement`), the
two nodes every structure is glued with (:class:`Chain`, built by ``a >> b``, and :class:`Post`, the only
step that may follow noise), the interpreter of a structure (:func:`check_structure`, :func:`execute`:
each step type carries its own ``check`` and ``execute``), parameter validation, and the registry the
family modules fill at import (:func:`register`).

Nothing here imports a family module; every family module imports this one (and :mod:`._grid`)."""

from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, ClassVar

import numpy as np

from dpharness.core import Relation, record_definition
from dpharness.errors import ParameterError

_INF = math.inf


def _plain(name: str, value: Any) -> int | float | Fraction:
    """The one value of a parameter, as a plain ``int``, ``float`` or ``Fraction`` (numpy scalars
    unwrapped). Every reader (the prover's ``Fraction(x)``, the sampler's ``float(x)``, the report's
    ``str(x)``) then reads the same number. A subclass of a number type is refused: it may answer
    ``float()``, ``Fraction()`` and comparisons differently (a parameter read two ways)."""
    if isinstance(value, (np.integer, np.floating)) and type(value).__module__ == "numpy":
        value = value.item()
    if type(value) not in (int, float, Fraction):
        if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
            raise ParameterError(f"{name}={value!r} is not a number; pass an int, float or Fraction.")
        raise ParameterError(
            f"{name}={value!r} is a {type(value).__qualname__}, a subclass of "
            f"{type(value).__mro__[1].__qualname__}; pass a plain int, float or Fraction (a subclass "
            "may read as different numbers to the sampler and the prover)."
        )
    if type(value) is float and not math.isfinite(value):
        raise ParameterError(f"{name}={value!r} is not finite; pass a finite number.")
    if type(value) is Fraction and (type(value.numerator) is not int or type(value.denominator) is not int):
        value = Fraction(int.__int__(value.numerator), int.__int__(value.denominator))
    return value


def _budget(name: str, value: Any, who: str = "this part") -> Any:
    """A budget parameter (``epsilon=``, ``delta=``, ``rho=``) read as :func:`_plain`; None stays None;
    refused unless > 0.

    A float budget is the smaller of its binary value and the decimal it prints as (``0.1`` is 1/10,
    below its binary value; ``0.3`` is its binary value, below 3/10): a budget is what the solver may
    spend, and the proof is of the scale solved from it, so spending the smaller reading is sound and
    keeps ten ``epsilon=0.1`` parts within a claim of 1, and a part whose budget is the claim's float
    within that claim (claims are read as their binary values)."""
    if value is None:
        return None
    v = _plain(name, value)
    if not Fraction(v) > 0:
        raise ParameterError(f"{name}={value!r} must be > 0; pass the positive budget {who} may spend.")
    if type(v) is float:
        decimal = Fraction(repr(v))
        if decimal < Fraction(v):
            return decimal
    return v


def _frac(name: str, value: Any) -> Fraction:
    """The exact value of a parameter: ints and Fractions as they are, a float as its binary value."""
    return Fraction(_plain(name, value))


def _float_exact(name: str, value: Any, what: str) -> int | float | Fraction:
    """A plain parameter that a float represents exactly (the sampler compares records with it as a
    float); refused otherwise, naming the nearest float."""
    value = _plain(name, value)
    exact_value = Fraction(value)
    try:
        as_float = float(exact_value)
    except OverflowError:
        raise ParameterError(f"{name}={value!r} is beyond the float range; pass a smaller {what}.") from None
    if Fraction(as_float) != exact_value:
        raise ParameterError(
            f"{name}={value!r} is not a float: {what} is compared with records as a float, so pass a "
            f"value a float represents exactly (e.g. {as_float!r})."
        )
    return value


def _rhu(v: Fraction) -> int:
    """floor(v + 1/2) of an exact rational (round half up)."""
    return math.floor(v + Fraction(1, 2))


# --------------------------------------------------------------------------- what flows between steps


@dataclass(frozen=True)
class Space:
    """The type of a value between steps.

    ``kind``: ``"records"`` (a data set of records; ``cols`` columns; each column's values in
    ``[lo[j], hi[j]]``), ``"scalar"`` (one exact number in ``[lo[0], hi[0]]``), ``"vector"``
    (``dim`` exact numbers) or ``"record"`` (ONE record, one of the k ``categories``: ints, or floats
    that are not integers, in the domain's order). ``quantum``: every value is an integer multiple
    of it (e.g. 1 for counts), or None. Bounds are exact Fractions or ±inf."""

    kind: str
    dim: int = 1
    lo: tuple = (-_INF,)
    hi: tuple = (_INF,)
    quantum: Fraction | None = None
    categories: tuple | None = None

    def __post_init__(self) -> None:
        # a bound is what every value of the coordinate lies within, so no coordinate's bounds are
        # inverted: a step that computed lo > hi would give a negative stability (hi − lo) downstream
        bad = [j for j, (a, b) in enumerate(zip(self.lo, self.hi)) if a > b]
        if bad:
            raise ParameterError(
                f"the values after this step would lie in [{_show(self.lo[bad[0]])}, {_show(self.hi[bad[0]])}] "
                f"(column {bad[0]}), an empty range; the steps do not meet the record domain."
            )

    @property
    def record_categories(self) -> tuple:
        """``categories`` of a ``"record"`` space (always set on one; None on the other kinds)."""
        assert self.categories is not None, f"a {self.kind} space has no categories"
        return self.categories

    def describe(self) -> str:
        if self.kind == "record":
            cats = self.record_categories
            shown = ", ".join(map(str, cats)) if len(cats) <= 6 else f"{cats[0]}, {cats[1]}, ..., {cats[-1]}"
            return f"one record of {len(cats)} categories {{{shown}}}"
        rng = ", ".join(f"[{_show(a)}, {_show(b)}]" for a, b in zip(self.lo, self.hi))
        what = {
            "records": f"records of {self.dim} column(s)",
            "scalar": "a number",
            "vector": f"a vector of {self.dim}",
        }[self.kind]
        return f"{what} in {rng}" + (f", multiples of {self.quantum}" if self.quantum is not None else "")


def _show(x: Any) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return str(x)


@dataclass(frozen=True)
class Distance:
    """How far apart a value can be on neighbouring inputs.

    For records: ``relation`` (neighbouring data sets under AddRemove / Substitute). For numbers and
    vectors: exact bounds on the L1 distance, the squared L2 distance and the L∞ distance, and
    ``monotone``: on every neighbouring pair the coordinates all move up or all move down (a histogram
    under add/remove), which selections read (the exponential mechanism's factor-2 saving)."""

    relation: Relation | None = None
    l1: Fraction = Fraction(0)
    l2sq: Fraction = Fraction(0)
    linf: Fraction = Fraction(0)
    monotone: bool = False  # every coordinate moves in the same direction (all up or all down)

    def describe(self) -> str:
        if self.relation is not None:
            return f"neighbouring data sets ({self.relation.describe()})"
        if self.l1 == self.linf and self.l2sq == self.l1**2:
            return f"|v − v'| <= {self.l1}"
        return f"||v − v'||₁ <= {self.l1}, ||v − v'||₂² <= {self.l2sq}, ||v − v'||∞ <= {self.linf}"


def _scalar_distance(d: Fraction) -> Distance:
    return Distance(None, d, d * d, d)


# --------------------------------------------------------------------------- steps


class Step:
    """A node of a mechanism's structure. ``a >> b`` chains two steps.

    Each step type carries its own interpretation: ``check(space)`` validates it on the space of its
    input and returns (the space after it when it is a transformation, else None; the number of output
    columns, −1 when post-processing decides it), ``execute(value, space, size, rng)`` runs it. A step
    that governs the steps chained after it (a subsample, contribution bounding) also implements
    ``check_head(chain, space)`` and ``execute_head(chain, ...)`` for the chain it heads.

    ``per_key_role`` (read by the grouping family, on the class itself, not inherited by a subclass):
    what a per-key part of :func:`~dpharness.mechanisms.parts.group_by` may contain, the steps its
    proof covers: ``"record-wise"``, ``"aggregate"``, ``"noise"`` or ``"compose"``."""

    per_key_role: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        record_definition(cls)

    def __rshift__(self, other: Any) -> "Step":
        if not isinstance(other, Step):
            raise ParameterError(
                f"right side of >> is {other!r}; chain a dpharness.parts step (transformation, "
                "noise, dp.compose(...), dp.post(fn))."
            )
        return _chain(self, other)

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def check(self, space: Space) -> tuple[Space | None, int]:
        raise ParameterError(f"step={self!r} is not a dpharness.parts step.")

    def execute(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        raise ParameterError(f"step={self!r} cannot run here; dp.post must follow a randomized step.")

    def check_head(self, chain: "Chain", space: Space) -> Any:
        """``check`` of ``chain`` (``chain.first is self``) when this step governs what follows it;
        NotImplemented otherwise (the chain is checked step by step)."""
        return NotImplemented

    def execute_head(self, chain: "Chain", value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        return NotImplemented

    def execute_batch(self, batch: "Batch", space: Space, rng: np.random.Generator) -> np.ndarray:
        """One release per sample of ``batch``, sample i on its own records with its own state (the rounds
        of :func:`~dpharness.mechanisms.parts.iterate` run side by side). This default runs them one at a
        time through :meth:`execute` (the same code, so the same law); a step that can do them at once
        overrides it with the same law per sample."""
        return batch.one_by_one(self, space, rng)

    def execute_batch_head(self, chain: "Chain", batch: "Batch", space: Space, rng: np.random.Generator) -> Any:
        return NotImplemented


record_definition(Step)


class Transformation(Step):
    """Exact data map with a stability map. Subclasses implement ``out_space``, ``stability`` and ``apply``."""

    def out_space(self, space: Space) -> Space:
        raise NotImplementedError

    def stability(self, space: Space, d: Distance) -> Distance:
        raise NotImplementedError

    def apply(self, value: Any) -> Any:
        raise NotImplementedError

    def add_direction(self, space: Space) -> int | None:
        """Under add/remove: +1 when adding a record never decreases this one-number answer (and removing
        never increases it), −1 for the reverse, None when neither is known (read by above threshold)."""
        return None

    def check(self, space: Space) -> tuple[Space | None, int]:
        return self.out_space(space), 0

    def execute(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        return self.apply(value)

    # ``rowwise``: each output record is a function of one input record alone (a record-wise map), so the
    # records of every sample of a batch can be mapped in one call
    rowwise: ClassVar[bool] = False

    def apply_rows(self, rows: Any, states: np.ndarray | None) -> Any:
        """``apply`` on the rows of a batch (``rowwise`` steps only); ``states[k]``: the iterate state of
        row k's sample (None outside an iteration)."""
        return self.apply(rows)


class Measurement(Step):
    """A randomized step: ``run(value, size, rng)`` returns ``size`` outputs (first axis indexes
    samples); its privacy is derived by ``dpharness.proofs.parts``."""

    def out_width(self, space: Space) -> int:
        """Number of output coordinates (1 for a scalar)."""
        raise NotImplementedError

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def check(self, space: Space) -> tuple[Space | None, int]:
        return None, self.out_width(space)

    def execute(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        out = self.run(value, space, size, rng)
        return out[:, 0] if out.shape[1] == 1 and space.kind in ("scalar", "record") else out

    def execute_batch(self, batch: "Batch", space: Space, rng: np.random.Generator) -> np.ndarray:
        if batch.values is not None:  # one aggregate per sample: the noise of every sample at once
            return self.run_each(batch.values, space, rng)
        return batch.one_by_one(self, space, rng)

    def run_each(self, values: list, space: Space, rng: np.random.Generator) -> np.ndarray:
        """One output per value of ``values`` (sample i on ``values[i]``), rows in order; this default
        calls :meth:`run` once per value (a noise family with a vectorised form overrides it, same law)."""
        outs = [np.asarray(self.run(v, space, 1, rng)).reshape(1, -1) for v in values]
        return np.concatenate(outs) if outs else np.zeros((0, self.out_width(space)))


class ExactValues:
    """One exact number per sample, ``units[i] · 2**exponent`` (``units`` Python ints): an aggregate's
    values without a Fraction each. Indexing and iterating give the Fractions.

    ``sums=(codes, x)``: the values are the exact sums of the doubles ``x`` per sample (``codes[k]`` the
    sample of ``x[k]``); the integers are then computed only when read (the noise families find most grid
    centres from float sums with a certified error bound instead: ``_grid.centres_of_sums``)."""

    def __init__(
        self,
        units: np.ndarray | None,
        exponent: int = 0,
        *,
        sums: tuple[np.ndarray, np.ndarray] | None = None,
        n: int = 0,
    ) -> None:
        self._units, self.exponent, self._sums = units, exponent, sums
        self._n = n if units is None else len(units)

    @property
    def units(self) -> np.ndarray:
        if self._units is None:
            from dpharness.mechanisms._exactsum import sums_by_units

            assert self._sums is not None  # one of the two is always given
            self._units, self.exponent = sums_by_units(*self._sums, self._n)
        return self._units

    @property
    def sums(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(codes, x)`` while the integers are not computed (values: exact sums of ``x`` per sample)."""
        return self._sums if self._units is None else None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> Fraction:
        u = int(self.units[i])
        return Fraction(u * 2**self.exponent) if self.exponent >= 0 else Fraction(u, 2**-self.exponent)

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))


class Batch:
    """Many releases at once, each on its own records and with its own iterate state: the records as one
    array ``rows`` whose row k belongs to sample ``codes[k]`` (in ``[0, n)``), or, after an aggregate, one
    exact value per sample (``values``). ``states[i]``: sample i's state (None outside an iteration)."""

    def __init__(self, n: int, states: np.ndarray | None, rows: Any = None, codes: Any = None, values: Any = None):
        self.n, self.states, self.rows, self.codes, self.values = n, states, rows, codes, values

    @classmethod
    def tiled(cls, value: Any, n: int, states: np.ndarray | None) -> "Batch":
        """Every sample on the whole of ``value``."""
        arr = np.asarray(value)
        return cls(n, states, np.concatenate([arr] * n) if n else arr[:0], np.repeat(np.arange(n), len(arr)))

    def per_sample(self) -> list:
        """Each sample's records (rows in their order in the batch), or each sample's value."""
        if self.values is not None:
            return list(self.values)
        order = np.argsort(self.codes, kind="stable")
        bounds = np.searchsorted(self.codes[order], np.arange(1, self.n))
        return np.split(self.rows[order], bounds)

    def row_states(self) -> np.ndarray | None:
        return None if self.states is None else self.states[self.codes]

    def one_by_one(self, step: Step, space: Space, rng: np.random.Generator) -> np.ndarray:
        """``step`` run once per sample on that sample's records (or value) with its state set."""
        outs = []
        for i, mine in enumerate(self.per_sample()):
            token = None if self.states is None else _ITERATE_STATE.set(self.states[i])
            try:
                out = flatten(execute(step, mine, space, 1, rng))
            finally:
                if token is not None:
                    _ITERATE_STATE.reset(token)
            outs.append(np.asarray(out, dtype=float).reshape(1, -1))
        return np.concatenate(outs) if outs else np.zeros((0, 0))


def execute_batch(step: Step, batch: Batch, space: Space, rng: np.random.Generator) -> np.ndarray:
    """``batch.n`` releases of ``step``, shape (n, width): see :meth:`Step.execute_batch`."""
    return np.asarray(step.execute_batch(batch, space, rng), dtype=float).reshape(batch.n, -1)


def _need(space: Space, kind: str, what: str) -> None:
    if space.kind != kind:
        raise ParameterError(
            f"{what} takes {kind}, but the previous step gives {space.describe()}; "
            f"reorder the steps (e.g. transformations on records come before the noise)."
        )


# the state of the running dp.iterate round on this thread, passed to dp.map_records functions
_ITERATE_STATE: contextvars.ContextVar = contextvars.ContextVar("dpharness_iterate_state")


# --------------------------------------------------------------------------- the glue: >> and post-processing


@dataclass(frozen=True)
class Chain(Step):
    """``first >> second``: a transformation followed by a step. Stability maps compose; a
    measurement's privacy map is applied to the transformation's output distance."""

    first: Step
    second: Step

    def describe(self) -> str:
        return f"{self.first.describe()} >> {self.second.describe()}"

    def check(self, space: Space) -> tuple[Space | None, int]:
        headed = self.first.check_head(self, space)
        if headed is not NotImplemented:
            return headed
        mid, width = check_structure(self.first, space)
        if mid is None:
            if isinstance(self.second, Post):
                return None, -1  # post-processing: width decided by fn
            if isinstance(self.second, Chain) and isinstance(self.second.first, Post):
                return None, -1
            raise ParameterError(
                f"{self.second.describe()} follows a randomized step; only dp.post(fn) may follow noise "
                "(transformations must come before it)."
            )
        return check_structure(self.second, mid)

    def execute(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
        headed = self.first.execute_head(self, value, space, size, rng)
        if headed is not NotImplemented:
            return headed
        if isinstance(self.first, Transformation):
            return execute(self.second, self.first.apply(value), self.first.out_space(space), size, rng)
        first = execute(self.first, value, space, size, rng)
        return _post_chain(self.second, first)

    def execute_batch(self, batch: Batch, space: Space, rng: np.random.Generator) -> np.ndarray:
        headed = self.first.execute_batch_head(self, batch, space, rng)
        if headed is not NotImplemented:
            return headed
        t = self.first
        if isinstance(t, Transformation) and batch.values is None:
            after = t.out_space(space)
            if t.rowwise:  # every sample's records mapped in one call, each row by itself
                mapped = Batch(batch.n, batch.states, t.apply_rows(batch.rows, batch.row_states()), batch.codes)
                return execute_batch(self.second, mapped, after, rng)
            terms = getattr(t, "sum_terms", None)  # a sum: its exact values are read only where needed
            units = getattr(t, "apply_by_units", None)  # an aggregate (it reads no state), as exact integers
            if terms is not None:
                values = ExactValues(None, sums=(batch.codes, terms(batch.rows)), n=batch.n)
                return execute_batch(self.second, Batch(batch.n, batch.states, values=values), after, rng)
            if units is not None:
                values = ExactValues(*units(batch.rows, batch.codes, batch.n))
                return execute_batch(self.second, Batch(batch.n, batch.states, values=values), after, rng)
        return batch.one_by_one(self, space, rng)


@dataclass(frozen=True)
class Post(Step):
    """Post-processing by ``fn``: it receives the previous outputs as positional arguments (one per
    composed part) and may not read the data. Privacy is unchanged (Dwork & Roth 2014, Thm 2.1).
    ``vectorized=True`` (the library's own row-wise maps only): ``fn`` is called once on arrays of all
    runs (one row per run)."""

    fn: Callable = field(compare=False)
    vectorized: bool = False

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ParameterError(f"fn={self.fn!r} is not callable; pass a function of the noisy outputs.")
        if self.vectorized and not getattr(self.fn, "_dpharness_rowwise", False):
            # a function called once on all runs could mix runs (e.g. average them): only the library's own
            # row-wise maps are called vectorised
            raise ParameterError(
                "vectorized=True is reserved for the library's row-wise maps; pass dp.post(fn), "
                "which calls fn once per run."
            )

    def describe(self) -> str:
        return f"post({getattr(self.fn, '__name__', 'fn')})"


def _chain(a: Step, b: Step) -> Step:
    if isinstance(a, Chain):  # keep chains right-nested: t1 >> (t2 >> m)
        return Chain(a.first, _chain(a.second, b))
    return Chain(a, b)


# --------------------------------------------------------------------------- the interpreter (sampler side)


def heads_chain(step: Step) -> bool:
    """Whether ``step`` governs the steps chained after it (its class defines ``check_head``)."""
    return type(step).check_head is not Step.check_head


def check_structure(step: Step, space: Space) -> tuple[Space | None, int]:
    """Validate the structure on ``space``: returns (the space of the value after the last
    transformation when the step is a transformation, else None) and the number of output columns."""
    if not isinstance(step, Step):
        raise ParameterError(f"step={step!r} is not a dpharness.parts step.")
    return step.check(space)


def execute(step: Step, value: Any, space: Space, size: int, rng: np.random.Generator) -> Any:
    """Run the structure: transformations exactly, measurements with their exact samplers. Returns
    the transformed value for a transformation, else an array of ``size`` outputs."""
    if not isinstance(step, Step):
        raise ParameterError(f"step={step!r} cannot run here; dp.post must follow a randomized step.")
    return step.execute(value, space, size, rng)


class _Tuple(list):
    """Outputs of composed parts, before they are flattened into columns or passed to post."""


def _post_chain(step: Step, outputs: Any) -> Any:
    if isinstance(step, Post):
        return _apply_post(step, outputs)
    if isinstance(step, Chain) and isinstance(step.first, Post):
        return _post_chain(step.second, _apply_post(step.first, outputs))
    raise ParameterError(f"{step.describe()} follows a randomized step; only dp.post(fn) may follow noise.")


def _apply_post(step: Post, outputs: Any) -> np.ndarray:
    args = list(outputs) if isinstance(outputs, _Tuple) else [outputs]
    args = [np.asarray(flatten(a)) for a in args]
    n = len(args[0])
    if step.vectorized:
        res = np.asarray(step.fn(*args))
        if res.shape[:1] != (n,):
            raise ParameterError(
                f"post fn with vectorized=True returned shape {res.shape}; return one row per run ({n})."
            )
        return res
    rows = [step.fn(*(a[i] if a.ndim == 1 else a[i] for a in args)) for i in range(n)]
    res = np.asarray(rows)
    if res.dtype == object:
        raise ParameterError(
            "post fn returned values that are not numbers or equal-length number sequences; "
            "return a number or a fixed-length tuple of numbers."
        )
    return res


def flatten(outputs: Any) -> np.ndarray:
    """Concatenate composed outputs into columns: shape (size,) for one column, (size, k) otherwise."""
    if not isinstance(outputs, _Tuple):
        return np.asarray(outputs)
    cols = []
    for o in outputs:
        o = flatten(o)
        cols.append(o.reshape(len(o), -1))
    out = np.concatenate(cols, axis=1)
    return out[:, 0] if out.shape[1] == 1 else out


def record_value(data: Any) -> Any:
    """A one-record input as a Python number (a numpy scalar or 0-d array unwrapped)."""
    return data.item() if isinstance(data, (np.ndarray, np.generic)) else data


# --------------------------------------------------------------------------- the registry the families fill

STEP_TYPES: set[type] = set()
"""Every step class of the algebra (each family registers its own): a structure may hold exactly these
types (a subclass would change code its lemma is about)."""

LEAVES: dict[type, Callable] = {}
"""Step class -> ``leaf(step, value, space, walk)``: the exact law of one node of a family on one input
(read by :mod:`._law`; for a class that heads a chain, the leaf of that chain). ``walk(step, value,
space)`` lists the leaves of a sub-structure."""


def register(*types: type, leaf: Callable | None = None) -> None:
    """Called by a family module at import: its step classes (and the function giving the exact law of
    its measurements, see :data:`LEAVES`)."""
    for t in types:
        STEP_TYPES.add(t)
        if leaf is not None:
            LEAVES[t] = leaf


register(Chain, Post)


def _children(step: Any) -> list:
    """The nodes directly under ``step`` (a threshold part's queries included)."""
    queries = getattr(step, "queries", None) if type(step) in STEP_TYPES else None
    return [
        c
        for c in (
            getattr(step, "first", None),
            getattr(step, "second", None),
            getattr(step, "part", None),
            *getattr(step, "parts", ()),
            *(queries or ()),
        )
        if c is not None
    ]


def walk_nodes(step: Step) -> list:
    """Every node of the structure, parents first."""
    return [step] + [n for c in _children(step) for n in walk_nodes(c)]


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
