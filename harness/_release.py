"""One release of a declared mechanism on real data: a numpy array, a pandas DataFrame or a Dask
DataFrame (:func:`release`).

The release is the mechanism's own sampler (the structure its proof is about), run once. A Dask frame
is streamed partition by partition, as Dask's ``reduction`` and Spark's partial aggregation do (what
Tumult Analytics and PipelineDP build on): each partition's records go through the record-wise steps
and into each aggregate exactly (counts, exact sums of the doubles, histogram counts: integers and
rationals), the partials are added exactly, and the noise is drawn once on the merged values. Exact
partials make the merged value independent of the partitioning, so for the same seed the release is
the same, bit for bit, whichever the input type and however it is partitioned; and it is what
``m.sample(data, 1, numpy.random.default_rng(seed))`` gives on the whole data set in memory.

Structures streamed from a Dask frame: record-wise steps (clamp, column, clip_norm, map_records) into
an aggregate (count, sum, sum_squares, sum_products, histogram) and then noise and post-processing,
under ``dp.compose``; and a record-level ``dp.group_by`` without a per-key part (its per-key counts add
across partitions). Any other structure is refused for a Dask frame with the reason (it runs on a
numpy array or pandas frame in memory).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import ParameterError, UnsupportedError

__all__ = ["release"]


def release(mechanism: Any, data: Any, *, seed: int | None = None, columns: Sequence[str] | None = None) -> Any:
    """One release of ``mechanism`` (declared from :mod:`dpharness.parts`) on ``data``.

    ``data``: a numpy array of records, a pandas DataFrame or a ``dask.dataframe.DataFrame``; a frame's
    ``columns`` are read in the order given (default: all of them, in the frame's order) and must be
    numeric. ``seed``: an integer for a reproducible release (the same output whatever the input type
    and partitioning), None for fresh randomness. Returns what ``mechanism.sample(data, 1, rng)[0]``
    returns: a number, or an array of the output's coordinates."""
    from .core import Mechanism
    from .mechanisms.parts import PartsMechanism
    from .mechanisms.parts.grouping import discovered_head, with_found_keys

    if not isinstance(mechanism, Mechanism):
        raise ParameterError(
            f"mechanism={mechanism!r} is not a dpharness Mechanism; declare it with dpharness.parts.mechanism(...)."
        )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ParameterError(f"seed={seed!r} must be a non-negative integer or None.")
    rng = np.random.default_rng(seed)
    parts = getattr(mechanism, "parts", mechanism)
    if isinstance(parts, PartsMechanism) and discovered_head(parts.steps) is not None:
        # keys from the data: the group-by over the keys present (labels or numbers, sorted), whose
        # encoded release, with its zeros dropped, is the mapping m.sample gives (same seed, same draws)
        found = _present(parts, data, columns)
        if not found:  # no records, no key: nothing is released, whatever the randomness
            return {}
        parts = dataclasses.replace(parts, steps=with_found_keys(parts.steps, found))
        mechanism = parts
    if _is_dask(data):
        if not isinstance(parts, PartsMechanism) or parts.shape != "dataset":
            raise UnsupportedError(
                f"{mechanism.name} is not a data-set mechanism declared from dpharness.parts; a Dask frame is "
                "released only for those. Pass data.compute() (a pandas frame) if it fits in memory."
            )
        return _as_released(parts, _first(_dask_release(parts, data, columns, rng)))
    labels = _label_columns(parts) if isinstance(parts, PartsMechanism) else {}
    arr = _records(data, columns, "data", labels)
    return _as_released(parts, _first(mechanism.sample(arr, 1, rng)))


def _present(m: Any, data: Any, columns: Sequence[str] | None) -> list:
    """The distinct keys in the key column of ``data`` (labels or numbers), sorted (numbers by value, labels
    by type name and then value); a Dask frame's found partition by partition and merged."""
    from .mechanisms.parts.grouping import discovered_head

    g = discovered_head(m.steps)
    assert g is not None  # release() calls this for such mechanisms only
    if _is_dask(data) or (hasattr(data, "columns") and hasattr(data, "dtypes")):
        cols = list(data.columns) if columns is None else list(columns)
        if g.by >= len(cols):
            raise ParameterError(f"columns={cols!r} has no column {g.by} (the group-by's key column); pass it.")
        col = data[cols[g.by]]
        found = col.unique().compute() if _is_dask(data) else col.unique()
        values = [v.item() if isinstance(v, np.generic) else v for v in np.asarray(found, dtype=object).tolist()]
    else:
        arr = np.asarray(data)
        arr = arr.reshape(len(arr), -1) if arr.ndim == 1 else arr
        values = np.unique(arr[:, g.by]).tolist() if len(arr) else []
    if any(v is None or (isinstance(v, float) and v != v) for v in values):
        raise ParameterError(f"the key column (column {g.by}) of data has missing values; fill or drop them first.")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        found = sorted(set(values), key=float)  # 0 and -0.0 are one key, as the group-by counts them
        return list({float(v): v for v in found}.values())
    try:
        return sorted(set(values), key=lambda v: (type(v).__name__, v))
    except TypeError:
        return sorted(set(values), key=lambda v: (type(v).__name__, repr(v)))


def _group_bys(steps: Any) -> list:
    """The group-bys that read the input's own columns: the whole structure, or a part of a top-level
    ``dp.compose``, each possibly after ``dp.bound_contributions`` (which keeps the columns)."""
    from .mechanisms.parts import _base as B
    from .mechanisms.parts.combinators import Compose
    from .mechanisms.parts.grouping import BoundContributions, GroupBy

    if isinstance(steps, Compose):
        return [g for p in steps.parts for g in _group_bys(p)]
    if isinstance(steps, B.Chain) and isinstance(steps.first, BoundContributions):
        steps = steps.second
        steps = steps.first if isinstance(steps, B.Chain) else steps
    return [steps] if type(steps) is GroupBy else []


def _label_columns(m: Any) -> dict:
    """Input column -> the labelled group-by reading it (its keys map a frame's labels to positions)."""
    found: dict = {}
    for g in _group_bys(m.steps):
        if g.labelled:
            if g.by in found and found[g.by].keys != g.keys:
                raise UnsupportedError(
                    f"column {g.by} is grouped with two different key lists; use one key list per column"
                )
            lo, hi = m.space.lo[g.by], m.space.hi[g.by]
            if not (lo <= 0 and len(g.keys) - 1 <= hi):  # of the mechanism alone, never of the data
                raise ParameterError(
                    f"{g.describe()} carries its {len(g.keys)} labels as positions 0..{len(g.keys) - 1} in "
                    f"column {g.by}, but records={m.records.describe()} holds [{float(lo):g}, {float(hi):g}] there; "
                    "declare records whose key column holds every position."
                )
            found[g.by] = g
    return found


def _as_released(m: Any, out: Any) -> Any:
    """A mechanism whose whole output is one group-by releases a mapping: released key -> its noisy count,
    or -> (noisy count, part values...) with a per-key part; keys not released are absent."""
    from .mechanisms.parts.grouping import whole_group_by

    steps = whole_group_by(getattr(m, "steps", None))
    if steps is None:
        return out
    rows = np.asarray(out, dtype=float).reshape(len(steps.keys), 1 + steps.part_width)
    released = {}
    for key, row in zip(steps.keys, rows.tolist()):
        if row[0] != 0:
            count = int(row[0]) if float(row[0]).is_integer() else row[0]
            released[key] = count if len(row) == 1 else (count, *row[1:])
    return released


def _first(out: Any) -> Any:
    out = np.asarray(out)
    return out[0].item() if out.ndim == 1 else out[0]


def _is_dask(data: Any) -> bool:
    return type(data).__module__.startswith("dask") and hasattr(data, "to_delayed")


def _records(data: Any, columns: Sequence[str] | None, name: str, labels: dict | None = None) -> np.ndarray:
    """A numpy array of records from an array or a pandas frame: numeric columns, and the key column of a
    group-by with label keys (``labels``: column index -> group-by), whose labels become their positions
    in the keys."""
    labels = labels or {}
    if hasattr(data, "columns") and hasattr(data, "dtypes"):  # a pandas DataFrame
        cols = list(data.columns) if columns is None else list(columns)
        missing = [c for c in cols if c not in data.columns]
        if missing:
            raise ParameterError(f"columns={cols!r}: {missing[0]!r} is not a column of {name}; pass its column names.")
        arr = np.empty((len(data), len(cols)))
        for j, c in enumerate(cols):
            if j in labels:
                arr[:, j] = _positions(data[c], labels[j], c, name)
                continue
            kind = getattr(data[c].dtype, "kind", "O")  # numpy and pandas dtypes: "b", "i", "u", "f" are numbers
            if kind not in "biuf":
                raise ParameterError(
                    f"column {c!r} of {name} has dtype {data[c].dtype}; records are numbers: encode it "
                    "(e.g. a category's codes), group by it with dp.group_by(keys=[its labels]), or leave it "
                    "out with columns=[...]."
                )
            arr[:, j] = data[c].to_numpy(dtype=float)
        return arr[:, 0] if arr.shape[1] == 1 else arr
    if columns is not None:
        raise ParameterError(f"columns={list(columns)!r} names frame columns, but {name} is an array; leave it out.")
    arr = np.asarray(data)
    if labels and arr.dtype == object:  # an object array holding labels in its key columns
        out = np.empty(arr.shape)
        for j in range(arr.shape[1] if arr.ndim == 2 else 1):
            col = arr[:, j] if arr.ndim == 2 else arr
            out_col = _positions(col, labels[j], j, name) if j in labels else np.asarray(col, dtype=float)
            if arr.ndim == 2:
                out[:, j] = out_col
            else:
                out = out_col
        return out
    return arr


def _positions(values: Any, g: Any, column: Any, name: str) -> np.ndarray:
    """Each label's position in ``g.keys`` (as a float); a label outside them is refused."""
    try:
        import pandas as pd
    except ImportError:  # an object array without pandas: a look-up per record
        index = {k: i for i, k in enumerate(g.keys)}
        codes = np.array([index.get(v, -1) for v in np.asarray(values, dtype=object).tolist()], dtype=np.int64)
    else:
        codes = pd.Index(list(g.keys), dtype=object).get_indexer(np.asarray(values, dtype=object))
    if (codes < 0).any():
        raise ParameterError(
            f"column {column!r} of {name} holds labels that are not keys of {g.describe()}; declare every "
            "label in keys=[...], or filter those records out before the release."
        )
    return codes.astype(float)


# --------------------------------------------------------------------------- streamed partials


@dataclass(frozen=True)
class _Leaf:
    """A path to one aggregate: record-wise steps, the aggregate, and what runs on its value."""

    rowwise: tuple
    aggregate: Any
    rest: Any
    space_in: Any  # the records' space before the record-wise steps
    space_out: Any  # the aggregate's output space (what ``rest`` runs on)


@dataclass(frozen=True)
class _Groups:
    """A record-level group-by without a per-key part: per-key counts add across partitions."""

    prefix: tuple
    group_by: Any
    space_in: Any


def _plan(step: Any, space: Any) -> Any:
    """The streaming plan of ``step`` on records of ``space``: a _Leaf, a _Groups, ("compose", plans),
    ("post", plan, post step), or an UnsupportedError naming the step."""
    from .mechanisms.parts import _base as B
    from .mechanisms.parts.combinators import Compose
    from .mechanisms.parts.grouping import GroupBy

    rowwise: list = []
    here = space
    while True:
        if isinstance(step, Compose):
            if rowwise:
                raise UnsupportedError("a record-wise step before dp.compose is not streamed here")
            return ("compose", [_plan(p, here) for p in step.parts])
        if type(step) is GroupBy and step.part is None:
            return _Groups(tuple(rowwise), step, space)
        if isinstance(step, B.Chain):
            t = step.first
            if isinstance(t, B.Transformation) and t.rowwise:
                rowwise.append(t)
                here = t.out_space(here)
                step = step.second
                continue
            if isinstance(t, B.Transformation) and type(t).__name__ in _ADDITIVE:
                return _Leaf(tuple(rowwise), t, step.second, space, t.out_space(here))
            if not isinstance(t, B.Transformation) and not rowwise:
                return ("post", _plan(t, here), step.second)
        raise UnsupportedError(
            f"{getattr(step, 'describe', lambda: repr(step))()} is not streamed from a Dask frame (only record-wise "
            "steps into count/sum/sum_squares/sum_products/histogram, compose, post, and a group_by without a "
            "per-key part are); pass data.compute() (a pandas frame) if it fits in memory"
        )


_ADDITIVE = {"Count", "Sum", "SumSquares", "SumProducts", "Histogram"}  # exact values that add across partitions


def _leaves(plan: Any) -> list:
    if isinstance(plan, (_Leaf, _Groups)):
        return [plan]
    if plan[0] == "compose":
        return [leaf for p in plan[1] for leaf in _leaves(p)]
    return _leaves(plan[1])


def _partial(plan: Any, arr: np.ndarray) -> list:
    """Each leaf's exact partial on one partition's records."""
    out = []
    for leaf in _leaves(plan):
        value = arr
        for t in leaf.rowwise if isinstance(leaf, _Leaf) else leaf.prefix:
            value = t.apply(value)
        if isinstance(leaf, _Leaf):
            out.append(leaf.aggregate.apply(value))
        else:
            out.append(leaf.group_by.counts(value))
    return out


def _merge(a: list, b: list) -> list:
    merged = []
    for x, y in zip(a, b):
        if isinstance(x, tuple):
            merged.append(tuple(u + v for u, v in zip(x, y)))
        else:
            merged.append(x + y)
    return merged


def _run(plan: Any, values: list, rng: np.random.Generator) -> Any:
    """The noise and what follows, on the merged values, in the order the sampler draws them."""
    from .mechanisms.parts import _base as B

    if isinstance(plan, _Leaf):
        return B.execute(plan.rest, values.pop(0), plan.space_out, 1, rng)
    if isinstance(plan, _Groups):
        return plan.group_by.release(np.asarray(values.pop(0), dtype=np.int64)[None, :], rng)
    if plan[0] == "compose":
        return B._Tuple([_run(p, values, rng) for p in plan[1]])
    return B._post_chain(plan[2], _run(plan[1], values, rng))


def _dask_release(m: Any, frame: Any, columns: Sequence[str] | None, rng: np.random.Generator) -> np.ndarray:
    import dask

    from .mechanisms.parts import _base as B

    plan = _plan(m.steps, m.space)
    spec = m.input_spec
    dim = m.space.dim
    labels = _label_columns(m)

    def partial(part: Any) -> tuple[int, list]:
        arr = _records(part, columns, "a partition of data", labels)
        arr = arr.reshape(-1, dim) if dim > 1 else arr.reshape(-1)
        if len(arr):
            m.records.validate("data", arr)  # the domain, partition by partition (never the values in a message)
        return len(arr), _partial(plan, arr)

    parts = dask.compute(*[dask.delayed(partial)(p) for p in frame.to_delayed()])
    n = sum(k for k, _ in parts)
    if spec.size is not None and n != spec.size:
        raise ParameterError(f"data has {n} records; this mechanism is fixed to size={spec.size} records.")
    empty = np.zeros((0, dim)) if dim > 1 else np.zeros(0)
    merged = _partial(plan, empty)
    for _, p in parts:
        merged = _merge(merged, p)
    return B.flatten(_run(plan, merged, rng)).reshape(1, -1)
