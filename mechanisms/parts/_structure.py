"""What the sampler, the law and the prover read off a whole structure: the space and distance of the
mechanism's input, the noise measurements in output order, and whether a structure samples, adapts or
post-processes. Imports the families whose node types these questions name; no family imports it."""

from __future__ import annotations

import builtins

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.core import BoundedChange, Domain, Finite, IntegerRange, RealBox, RealInterval, Relation
from dpharness.errors import ParameterError

from ._base import (
    _INF,
    STEP_TYPES,
    Chain,
    Distance,
    Measurement,
    Post,
    Space,
    Step,
    _children,
    _frac,
    _float_exact,
    walk_nodes,
)
from .combinators import Compose, Iterate, Parallel, Repeat
from .local import _MAX_CATEGORIES
from .sampling import FixedSample, PoissonSample
from .transformations import Clamp, ClipNorm, Column, MapRecords


def input_space(records: Domain, shape: str, dim: int | None) -> Space:
    """The space of the mechanism's input."""
    if shape == "record":
        cats = _categories(records)
        return Space("record", 1, (Fraction(min(cats)),), (Fraction(max(cats)),), None, cats)
    if shape == "vector":
        assert dim is not None  # a vector input declares its dim (PartsMechanism checks it)
        lo, hi = _domain_bounds(records)
        return Space(
            "vector",
            int(dim),
            (lo,) * int(dim),
            (hi,) * int(dim),
            Fraction(1) if isinstance(records, IntegerRange) else None,
        )
    if isinstance(records, RealBox):
        lo = Fraction(_float_exact("lo", records.lo, "a record bound"))
        hi = Fraction(_float_exact("hi", records.hi, "a record bound"))
        return Space("records", records.dim, (lo,) * records.dim, (hi,) * records.dim, None)
    lo, hi = _domain_bounds(records)
    quantum = Fraction(1) if isinstance(records, IntegerRange) else None
    return Space("records", 1, (lo,), (hi,), quantum)


def _domain_bounds(records: Domain) -> tuple:
    """The exact bounds of the records as the sampler reads them (floats). Every bound and value must
    be exactly a float: records are read as floats, and rounding could carry a record past a bound
    that is not one (e.g. ``IntegerRange(0, 2**53 + 3)``: the record 2**53 + 3 is read as 2**53 + 4)."""
    if isinstance(records, (RealInterval, IntegerRange)):
        if isinstance(records, IntegerRange) and max(abs(int(records.lo)), abs(int(records.hi))) > 2**53:
            raise ParameterError(
                f"records={records!r}: integer records are read as floats, exact only up to 2**53 in "
                "magnitude; pass an IntegerRange within ±2**53 (or scale the data down)."
            )
        lo = -_INF if _is_inf(records.lo) else Fraction(_float_exact("lo", records.lo, "a record bound"))
        hi = _INF if _is_inf(records.hi) else Fraction(_float_exact("hi", records.hi, "a record bound"))
        return lo, hi
    if isinstance(records, Finite):
        vals = [Fraction(_float_exact("values", v, "a record value")) for v in records.values]
        return min(vals), max(vals)
    raise ParameterError(f"records={records!r} is not supported; pass RealInterval, IntegerRange, Finite or RealBox.")


def _is_inf(value: Any) -> bool:
    return isinstance(value, (float, np.floating)) and math.isinf(float(value))


def _categories(records: Domain) -> tuple:
    """The k categories of a one-record input, in the domain's order, as the values the samplers
    release: integers as ints (|v| < 2**53), other numbers as the float equal to them (refused when
    no float is)."""
    if isinstance(records, IntegerRange):
        k = int(records.hi) - int(records.lo) + 1
        if k > _MAX_CATEGORIES:
            raise ParameterError(
                f"records={records!r} has {k} categories, above {_MAX_CATEGORIES}; pass a smaller domain."
            )
        values = tuple(range(int(records.lo), int(records.hi) + 1))
    elif isinstance(records, Finite):
        values = records.values
    else:
        raise ParameterError(
            f"records={records!r} does not fit input='record'; pass Finite(values) or IntegerRange(lo, hi) "
            "(the categories a local randomizer reports)."
        )
    cats: list[int | float] = []
    for v in values:
        q = _frac("values", v)
        if q.denominator == 1 and abs(q) < 2**53:
            cats.append(int(q))
        elif Fraction(float(q)) == q:
            cats.append(float(q))
        else:
            raise ParameterError(
                f"values={values!r}: {v!r} is not exactly a float; pass categories that are "
                "ints or floats (they are released as such)."
            )
    if len(set(cats)) != len(cats):
        raise ParameterError(f"values={values!r} repeats a category; pass distinct values.")
    if not 2 <= len(cats) <= _MAX_CATEGORIES:
        raise ParameterError(f"records={records!r} has {len(cats)} categories; pass between 2 and {_MAX_CATEGORIES}.")
    return tuple(cats)


def input_distance(relation: Relation, space: Space) -> Distance:
    """The distance of neighbouring inputs as the first step sees it."""
    if isinstance(relation, BoundedChange):
        delta = _frac("sensitivity", relation.sensitivity)
        m = space.dim
        if relation.norm == "l1":
            return Distance(None, delta, delta * delta, delta)
        if relation.norm == "linf":
            return Distance(None, m * delta, m * delta * delta, delta)
        # l2: ||d||_1 <= sqrt(m) ||d||_2; an exact rational upper bound on sqrt(m)
        root = math.isqrt(m)
        return Distance(None, delta * (root if root * root == m else root + 1), delta * delta, delta)
    return Distance(relation)


def measurement_leaves(step: Step) -> list:
    """Every noise measurement in the structure, in output order."""
    if isinstance(step, Measurement):
        return [step]
    if isinstance(step, Chain):
        return measurement_leaves(step.first) + measurement_leaves(step.second)
    if isinstance(step, Compose):
        return [m for p in step.parts for m in measurement_leaves(p)]
    if isinstance(step, Parallel):
        return measurement_leaves(step.part)
    if isinstance(step, (Repeat, Iterate)):
        return measurement_leaves(step.part) * step.times
    return []


def leaf_count(step: Step) -> int:
    """The number of noise measurements :func:`measurement_leaves` lists, counted without listing them (a
    repeat of 10^9 rounds is one multiplication)."""
    if isinstance(step, Measurement):
        return 1
    if isinstance(step, Chain):
        return leaf_count(step.first) + leaf_count(step.second)
    if isinstance(step, Compose):
        return builtins.sum(leaf_count(p) for p in step.parts)
    if isinstance(step, Parallel):
        return leaf_count(step.part)
    if isinstance(step, (Repeat, Iterate)):
        return leaf_count(step.part) * step.times
    return 0


def has_sampling(step: Step) -> bool:
    """Whether a random subsample feeds some part, or rounds adapt to earlier releases (the output law
    is then a mixture, not a product of fixed leaves)."""
    return any(isinstance(n, (PoissonSample, FixedSample, Iterate)) for n in walk_nodes(step))


def has_post(step: Step) -> bool:
    if isinstance(step, Post):
        return True
    if isinstance(step, Chain):
        return has_post(step.first) or has_post(step.second)
    if isinstance(step, Compose):
        return any(has_post(p) for p in step.parts)
    if isinstance(step, (Parallel, Repeat)):
        return has_post(step.part)
    if isinstance(step, Iterate):
        return True  # the state update post-processes the releases
    return False


def user_code(step: Any, short: bool = False) -> tuple[str, ...]:
    """How each user function the proof treats as per-record (or per-run) runs: one phrase per
    :class:`MapRecords` and :class:`Iterate` in the structure, in walk order (empty when there is none;
    ``short``: the gate line's words)."""
    return tuple(phrase for n in walk_nodes(step) if type(n) in (MapRecords, Iterate) for phrase in n.user_code(short))


def has_compose(step: Step) -> bool:
    """Whether some node composes parts (:func:`~.combinators.compose`)."""
    return any(isinstance(n, Compose) for n in walk_nodes(step))


def _post_functions(step: Step) -> list:
    if isinstance(step, Post):
        return [step.fn]
    if isinstance(step, Chain):
        return _post_functions(step.first) + _post_functions(step.second)
    if isinstance(step, Compose):
        return [f for p in step.parts for f in _post_functions(p)]
    if isinstance(step, (Parallel, Repeat)):
        return _post_functions(step.part)
    if isinstance(step, Iterate):
        return [step.update] + _post_functions(step.part)
    if isinstance(step, MapRecords):
        return [step.fn]
    return []


def _query_functions(step: Step) -> list:
    """The user functions of family nodes (a threshold part's ``dp.query(fn, ...)``): every registered node
    with a callable ``fn`` other than those :func:`_post_functions` lists."""
    return [
        n.fn
        for n in walk_nodes(step)
        if type(n) in STEP_TYPES and type(n) not in (Post, MapRecords) and callable(getattr(n, "fn", None))
    ]


def samples_see_whole_data_set(step: Any, whole: bool = True) -> bool:
    """Whether every ``sample(m)`` node in the structure runs on the whole input data set: reached from the
    root only through record-wise transformations (which keep every record) and the parts of compose,
    repeat and iterate (which all receive the input). Under a partition, a subsample or a group-by a
    sample sees fewer than n records, and q = m/n would understate its rate. Checked for every node,
    not the one being walked: the same (equal, or even identical) node may stand in several places."""
    if type(step) is FixedSample:
        return whole
    if isinstance(step, Chain):
        keeps = type(step.first) in (Clamp, Column, MapRecords, ClipNorm)
        return samples_see_whole_data_set(step.first, whole) and samples_see_whole_data_set(
            step.second, whole and keeps
        )
    inner = whole and type(step) in (Compose, Repeat, Iterate)
    return all(samples_see_whole_data_set(c, inner) for c in _children(step))


def has_budget(step: Any) -> bool:
    """Whether a budget placeholder (:class:`~.noise.NoiseBudget`, :class:`~.combinators.SplitBudget`, a
    group-by's :class:`~.grouping.PartitionSelectBudget`) is anywhere in the structure:
    ``dpharness.parts.mechanism`` then calibrates it first."""
    return any(_is_budget(n) or _is_budget(getattr(n, "select", None)) for n in walk_nodes(step))


def _is_budget(node: Any) -> bool:
    return bool(getattr(type(node), "is_budget", False))


def _check_types(step: Any) -> None:
    """Every node must be exactly one of the registered step classes (not a subclass, wherever it is
    defined): the prover's lemmas are about these classes' code. Checked at construction and again by
    the prover (a structure swapped in after construction is caught there)."""
    for node in (step, getattr(step, "select", None)):
        if node is not None and _is_budget(node):
            raise ParameterError(
                f"{node.describe()} is a budget, not yet a scale; declare the mechanism with "
                "dpharness.parts.mechanism(...), which derives the scale (or pass scale=/sigma=)."
            )
    if type(step) not in STEP_TYPES:
        raise ParameterError(
            f"steps contain {type(step).__qualname__} from {type(step).__module__}, which is not a "
            "dpharness.parts step; build steps with the dp.* constructors (a subclass of a part would "
            "change code its lemma is about)."
        )
    for child in _children(step):
        _check_types(child)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
