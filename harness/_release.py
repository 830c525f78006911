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
an aggregate (count, sum, sum_squares, sum_products, histogram) or a quantile's score (from the counts
below and above each candidate) and then noise or the selection, and post-processing,
under ``dp.compose``; and a record-level ``dp.group_by`` (declared keys or keys found in the data) whose
per-key part is count/sum/sum_squares/sum_products with noise (per-key counts and exact per-key aggregates
add across partitions); and user-level ``bound_contributions >> group_by`` with such parts: the users
within the bounds counted where their records lie, the records of the others gathered and drawn
(:func:`_dask_bounded`). Any other structure is refused for a Dask frame with the reason, from the
structure alone before any partition is read (it runs on a numpy array or pandas frame in memory).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ._memory import with_reused_memory
from ._records import (
    MISSING,
    Reader,
    _is_frame,
    as_list,
    columns_of,
    merge_distinct,
    numbers_of,
    reader,
    sorting_order,
)
from .errors import ParameterError, UnsupportedError

__all__ = ["release"]


def release(
    mechanism: Any, data: Any, *, seed: int | None = None, columns: Sequence[str] | None = None, quiet: bool = False
) -> Any:
    """One release of ``mechanism`` (declared from :mod:`dpharness.parts`) on ``data``.

    ``data``: a numpy array of records, a pandas DataFrame or a ``dask.dataframe.DataFrame``; a frame's
    ``columns`` are read in the order given (default: all of them, in the frame's order). Every input type
    is read by one reader (:mod:`dpharness._records`): number columns exactly (bool, int, uint, float up to double precision;
    other dtypes refused by dtype), user and key columns as identities compared exactly, label columns
    by their declared keys. ``seed``: an integer for a reproducible release (the same output, of the same
    type, whatever the input type and partitioning), None for fresh randomness. Returns what
    ``mechanism.sample(data, 1, rng)[0]`` returns: a float, or an array of the output's coordinates; a
    group-by releases a mapping of its released keys. A release that runs longer than
    :data:`PROGRESS_AFTER` seconds shows its progress unless ``quiet``: a Dask frame's with Dask's own
    diagnostics (:class:`_Progress`), an in-memory release's time elapsed on the standard error."""
    from .core import Mechanism

    if not isinstance(mechanism, Mechanism):
        raise ParameterError(
            f"mechanism={mechanism!r} is not a dpharness Mechanism; declare it with dpharness.parts.mechanism(...)."
        )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ParameterError(f"seed={seed!r} must be a non-negative integer or None.")
    if not isinstance(quiet, bool):
        raise ParameterError(f"quiet={quiet!r} must be True or False.")
    if _is_dask(data):
        return _release(mechanism, data, seed, columns, _Progress(quiet))
    with _Elapsed(quiet):
        return _release(mechanism, data, seed, columns, _Progress(True))


def _release(mechanism: Any, data: Any, seed: int | None, columns: Sequence[str] | None, progress: "_Progress") -> Any:
    from .mechanisms.parts import PartsMechanism
    from .mechanisms.parts.grouping import BoundContributions, discovered_head, with_found_keys

    rng = np.random.default_rng(seed)
    parts: Any = getattr(mechanism, "parts", mechanism)
    is_parts = isinstance(parts, PartsMechanism) and parts.shape == "dataset"
    g = discovered_head(parts.steps) if is_parts else None
    plan = None
    if _is_dask(data):  # decided from the structure alone, before any partition is read
        if not is_parts:
            raise UnsupportedError(
                f"{mechanism.name} is not a data-set mechanism declared from dpharness.parts; a Dask frame is "
                "released only for those. Pass data.compute() (a pandas frame) if it fits in memory."
            )
        bounded = _bounded(parts.steps)
        if bounded is not None:
            _check_bounded_streams(*bounded)
            plan = bounded
        else:
            plan = _plan(with_found_keys(parts.steps, [0.0]) if g is not None else parts.steps, parts.space)
    if not is_parts:
        return _first(mechanism.sample(_records(mechanism, data, columns), 1, rng))
    r = reader(parts)
    bounding = isinstance(plan, tuple) and isinstance(plan[0], BoundContributions)  # user-level, on Dask
    arr: np.ndarray | None = None
    if r.identities and not _is_dask(data):  # identities read once: fixed and carried in one pass
        arr = r.read(data, columns, "data", fix=True)
    elif r.identities:  # a Dask frame: every partition's distinct values, merged (a user column: by partition)
        import dask

        # a user column is read by partition; keys found in the data under bounding are found as it counts
        users = {plan[0].user, plan[1].by} if bounding and isinstance(plan, tuple) else set()
        wanted = [j for j in r.identities if j not in users]
        if wanted:
            found = progress.compute(
                *[dask.delayed(with_reused_memory(r.distinct))(p, columns, "data", wanted) for p in data.to_delayed()]
            )
            r.fix({j: merge_distinct([f[j] for f in found]) for j in wanted})
    names = None
    if g is not None and g.by not in r.identities:  # keys a part reads as values: the distinct numbers present
        dim = parts.space.dim

        def present(part: Any) -> np.ndarray:
            rows = r.read(part, columns, "data").reshape(-1, dim)
            return np.unique(rows[:, g.by] + 0.0)  # -0.0 is the key 0.0

        if _is_dask(data):
            import dask

            values = np.unique(
                np.concatenate(
                    [np.zeros(0), *progress.compute(*map(dask.delayed(with_reused_memory(present)), data.to_delayed()))]
                )
            )
        else:
            arr = r.read(data, columns, "data")
            values = present(arr) if len(arr) else np.zeros(0)
        if not len(values):
            return {}
        parts = dataclasses.replace(parts, steps=with_found_keys(parts.steps, values.tolist()))
        names = values.tolist()
    elif g is not None and not bounding:
        key = r.identities[g.by]
        if not len(key.values):  # no records, no key: nothing is released, whatever the randomness
            return {}
        parts = dataclasses.replace(parts, steps=with_found_keys(parts.steps, key.numbers.tolist()))
        names = [None if v is MISSING else v for v in as_list(key.values)]
    if bounding:
        parts, out, names = _dask_bounded(parts, data, columns, rng, r, names, progress)
        if out is None:
            return {}
    elif plan is not None:
        if g is not None:
            plan = _plan(parts.steps, parts.space)
        out = _dask_release(parts, data, columns, rng, r, plan, progress)
    else:
        out = parts.sample(r.read(data, columns, "data") if arr is None else arr, 1, rng)
    return _as_released(parts, _first(out), names)


def _records(m: Any, data: Any, columns: Sequence[str] | None) -> np.ndarray:
    """The input of a mechanism that is not a parts data-set mechanism, read as numbers."""
    from .core import IntegerRange, RealBox

    if not (_is_frame(data) or columns is not None):
        return data
    domain = m.input_spec.domain
    width = domain.dim if isinstance(domain, RealBox) else 1
    cols = columns_of(data, columns, width, "data")
    arr = np.column_stack([numbers_of(c, name, "data", isinstance(domain, IntegerRange)) for name, c in cols])
    return arr[:, 0] if arr.shape[1] == 1 and width == 1 else arr


def _as_released(m: Any, out: Any, names: list | None = None) -> Any:
    """A mechanism whose whole output is one group-by releases a mapping: released key -> its noisy count,
    or -> a named tuple ``(selection_count, <part values by aggregate>...)`` with a per-key part
    (:func:`released_fields`); keys not released are absent. ``names``: the
    keys found in the data (normalised), which the structure's keys stand in for."""
    from .mechanisms.parts.grouping import whole_group_by

    steps = whole_group_by(getattr(m, "steps", None))
    if steps is None:
        return out
    keys = steps.keys if names is None else names
    rows = np.asarray(out, dtype=float).reshape(len(keys), 1 + steps.part_width)
    fields = released_fields(steps)
    released = {}
    for key, row in zip(keys, rows.tolist()):
        if row[0] != 0:
            count = int(row[0]) if float(row[0]).is_integer() else row[0]
            released[key] = count if len(row) == 1 else fields(count, *row[1:])
    return released


def released_fields(g: Any) -> Any:
    """The named tuple of one released key's values: ``selection_count`` (the selection's noisy count of
    distinct users, or of records), then each part by its aggregate, in the part's order (``count``,
    ``sum``, ``sum_squares``, ``sum_products``; a second one of a kind numbered ``sum_2``, ...)."""
    import re

    from .mechanisms.parts.grouping import simple_parts

    names = ["selection_count"]
    for _, agg, _ in simple_parts(g.part) if g.part is not None else []:
        base = re.sub(r"(?<!^)(?=[A-Z])", "_", type(agg).__name__).lower()
        name, i = base, 2
        while name in names:
            name, i = f"{base}_{i}", i + 1
        names.append(name)
    return _named(tuple(names))


_NAMED: dict = {}  # one named tuple type per field list


def _named(names: tuple) -> Any:
    """The named tuple type of ``names`` (made once; pickled by its field names, so it unpickles anywhere)."""
    import collections

    if names not in _NAMED:
        base = collections.namedtuple("Released", names)  # type: ignore[misc]
        _NAMED[names] = type(
            "Released", (base,), {"__slots__": (), "__reduce__": lambda self: (_rebuild, (names, tuple(self)))}
        )
    return _NAMED[names]


def _rebuild(names: tuple, values: tuple) -> Any:
    return _named(names)(*values)


def _first(out: Any) -> Any:
    out = np.asarray(out)
    return out[0].item() if out.ndim == 1 else out[0]


def _is_dask(data: Any) -> bool:
    return type(data).__module__.startswith("dask") and hasattr(data, "to_delayed")


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
    """A record-level group-by: per-key counts, and its part's per-key exact aggregates, add across
    partitions."""

    prefix: tuple
    group_by: Any
    space_in: Any
    space_out: Any  # the records' space after the record-wise steps (what the group-by reads)


def _additive_parts(g: Any) -> bool:
    """Whether each aggregate of the group-by's part (if any) is exact and adds across partitions."""
    from .mechanisms.parts.grouping import simple_parts

    return g.part is None or all(
        type(agg).__name__ in _ADDITIVE - {"Histogram"} and hasattr(agg, "apply_by")
        for _, agg, _ in simple_parts(g.part)
    )


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
        if type(step) is GroupBy and _additive_parts(step):
            return _Groups(tuple(rowwise), step, space, here)
        if isinstance(step, B.Chain):
            t = step.first
            if isinstance(t, B.Transformation) and t.rowwise:
                rowwise.append(t)
                here = t.out_space(here)
                step = step.second
                continue
            if isinstance(t, B.Transformation) and (type(t).__name__ in _ADDITIVE or _by_counts(t)):
                return _Leaf(tuple(rowwise), t, step.second, space, t.out_space(here))
            if not isinstance(t, B.Transformation) and not rowwise:
                return ("post", _plan(t, here), step.second)
        raise UnsupportedError(
            f"{getattr(step, 'describe', lambda: repr(step))()} is not streamed from a Dask frame (only record-wise "
            "steps into count/sum/sum_squares/sum_products/histogram or a quantile, compose, post, and a record-level group_by "
            "whose per-key part is count/sum/sum_squares/sum_products are); pass data.compute() (a pandas frame) "
            "if it fits in memory"
        )


_ADDITIVE = {"Count", "Sum", "SumSquares", "SumProducts", "Histogram"}  # exact values that add across partitions


def _by_counts(t: Any) -> bool:
    """A score read from counts that add across partitions (``counts`` and ``from_counts``: a quantile's)."""
    from .mechanisms.parts.selection import QuantileScore

    return type(t) is QuantileScore


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
            out.append(leaf.aggregate.counts(value) if _by_counts(leaf.aggregate) else leaf.aggregate.apply(value))
            continue
        g = leaf.group_by
        rows = value.reshape(-1, leaf.space_out.dim) if value.ndim == 1 else value
        codes = g.codes(rows[:, g.by]) if len(rows) else np.zeros(0, dtype=np.int64)
        counts = g.counts(rows, codes=codes)
        if g.part is None:
            out.append(counts)
        else:  # the counts and each part's per-key exact aggregates (lists of numbers)
            aggregates = [per_key for per_key, _, _ in g.part_aggregates(rows, leaf.space_out, codes)]
            out.append((counts, [list(per_key) for per_key in aggregates]))
    return out


def _merge(a: list, b: list) -> list:
    """Two partitions' partials added exactly, leaf by leaf."""
    merged = []
    for x, y in zip(a, b):
        if isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], list):  # a group-by with a part
            parts = [[u + v for u, v in zip(px, py)] for px, py in zip(x[1], y[1])]
            merged.append((x[0] + y[0], parts))
        elif isinstance(x, tuple):
            merged.append(tuple(u + v for u, v in zip(x, y)))
        else:
            merged.append(x + y)
    return merged


def _run(plan: Any, values: list, rng: np.random.Generator) -> Any:
    """The noise and what follows, on the merged values, in the order the sampler draws them."""
    from .mechanisms.parts import _base as B

    if isinstance(plan, _Leaf):
        value = values.pop(0)
        if _by_counts(plan.aggregate):
            value = plan.aggregate.from_counts(value)
        return B.execute(plan.rest, value, plan.space_out, 1, rng)
    if isinstance(plan, _Groups):
        g, value = plan.group_by, values.pop(0)
        if g.part is None:
            return g.release(np.asarray(value, dtype=np.int64)[None, :], rng)
        counts, per_key = value
        structure = g.part_aggregates(np.zeros((0, plan.space_out.dim)), plan.space_out)  # spaces and noises
        aggregates = [(merged, sp, noise) for merged, (_, sp, noise) in zip(per_key, structure)]
        return g.release(np.asarray(counts, dtype=np.int64)[None, :], rng, space=plan.space_out, aggregates=aggregates)
    if plan[0] == "compose":
        return B._Tuple([_run(p, values, rng) for p in plan[1]])
    return B._post_chain(plan[2], _run(plan[1], values, rng))


def _dask_release(
    m: Any,
    frame: Any,
    columns: Sequence[str] | None,
    rng: np.random.Generator,
    r: Reader,
    plan: Any,
    progress: "_Progress",
) -> np.ndarray:
    import dask

    from .mechanisms.parts import _base as B

    spec = m.input_spec
    dim = m.space.dim

    def partial(part: Any) -> tuple[int, list]:
        arr = r.read(part, columns, "a partition of data")
        arr = arr.reshape(-1, dim) if dim > 1 else arr.reshape(-1)
        if len(arr):
            m.records.validate("data", arr)  # the domain, partition by partition (never the values in a message)
        return len(arr), _partial(plan, arr)

    parts = progress.compute(*[dask.delayed(with_reused_memory(partial))(p) for p in frame.to_delayed()])
    n = sum(k for k, _ in parts)
    if spec.size is not None and n != spec.size:
        raise ParameterError(f"data has {n} records; this mechanism is fixed to size={spec.size} records.")
    empty = np.zeros((0, dim)) if dim > 1 else np.zeros(0)
    merged = _partial(plan, empty)
    for _, p in parts:
        merged = _merge(merged, p)
    out = B.flatten(_run(plan, merged, rng)).reshape(1, -1)
    return out[:, 0] if out.shape[1] == 1 else out  # the shape m.sample gives: one coordinate is a number


# --------------------------------------------------------------------------- user-level bounding, streamed


def _bounded(steps: Any) -> tuple | None:
    """``(bounding, group-by, post or None)`` when ``steps`` is ``bound_contributions >> group_by [>> post]``."""
    from .mechanisms.parts import _base as B
    from .mechanisms.parts.grouping import BoundContributions, GroupBy, split_bounded

    if isinstance(steps, B.Chain) and isinstance(steps.first, BoundContributions):
        b, g, post = split_bounded(steps)
        if type(g) is GroupBy:
            return b, g, post
    return None


def _check_bounded_streams(b: Any, g: Any, post: Any) -> None:
    """What the streamed bounding supports, from the structure alone: per-key parts whose aggregates add
    across partitions and that do not read the user column (read there as a stand-in of the partition)."""
    from .mechanisms.parts.grouping import simple_parts
    from .mechanisms.parts.transformations import Column

    if not _additive_parts(g):
        raise UnsupportedError(
            f"{g.describe()} has a per-key part that is not streamed from a Dask frame (count, sum, sum_squares "
            "and sum_products are); pass data.compute() (a pandas frame) if it fits in memory"
        )
    if g.part is not None and any(
        isinstance(t, Column) and t.j == b.user for pre, _, _ in simple_parts(g.part) for t in pre
    ):
        raise UnsupportedError(
            f"{g.describe()} reads the user column (column {b.user}) as a value, which is not streamed from a Dask "
            "frame; pass data.compute() (a pandas frame) if it fits in memory"
        )


def _dask_bounded(
    m: Any,
    frame: Any,
    columns: Sequence[str] | None,
    rng: np.random.Generator,
    r: Reader,
    names: list | None,
    progress: "_Progress",
) -> tuple:
    """``bound_contributions >> group_by`` on a Dask frame, the release ``m.sample`` gives in memory, for any
    partitioning, without moving the records: ``(m with the keys found, its output, the keys' names)``
    (output None: no key in the data).

    In memory (:func:`~dpharness.mechanisms.parts.grouping._drawn`), a user whose records are all kept
    whatever the order (at most k records, m per key, ℓ keys: counts of the user's records, so exact
    integers that add across partitions) draws nothing and keeps every record; only the other users draw,
    from one random order of all their records (N, taken in the canonical order: user, key, other
    columns), and each user's kept records depend only on the order of that user's own records in it.
    So: (1) each partition counts its records per (user, key) and sends the counts to buckets by a hash of
    the user's identity (:func:`~dpharness._records.identity_hash`: equal identities hash alike in every
    process), with its distinct keys when the keys are found in the data (number ids with keys found in
    the data: each record's (id, key) sent as read, :class:`_Rows`, and counted in the bucket, one sort
    there instead of one per partition, whose users are nearly all distinct); each bucket adds the counts,
    decides for its users which are over a bound (with their numbers of records), and counts the distinct
    users per key of the others; (2) this process orders the users over a bound (their identities' order,
    the canonical order's first key), so each one's records hold known positions in the canonical order,
    and makes the in-memory generator call (:func:`_drawn_order`), while (3) each partition adds the exact
    per-key aggregates of its records of users within the bounds in place and sends the records of the
    users over a bound to their bucket, which puts them in the canonical order and keeps what the
    in-memory draw keeps (:func:`_draw_in_bucket`); (4) the counts and aggregates add exactly, and the
    selection's and the parts' noise is drawn here as in memory. No record crosses to this process, and
    the records that move between workers are those of the users over a bound."""
    import dask

    from ._records import Identity, as_list, identities_of, merge_distinct, refuse_missing_users
    from .mechanisms.parts import _base as B
    from .mechanisms.parts.grouping import with_found_keys

    b, g, post = _bounded(m.steps)  # type: ignore[misc]
    space, dim = m.space, m.space.dim
    cols = list(frame.columns) if columns is None else list(columns)
    frame = frame[cols]
    # one bucket per two partitions: half the pieces each pass sends (npartitions x n_buckets: the graph and
    # the scheduler's cost at 50 partitions), a bucket's (user, key) counts from about two partitions' records
    n_buckets = max(1, -(-frame.npartitions // 2))
    found_keys = g.from_data and g.by in r.identities  # keys found here, in the same pass as the counts
    name = "a partition of data"

    r._check_width(cols, name)
    user_column, key_column = cols[b.user], cols[g.by]

    def pairs(part: Any) -> list:
        """The counting pass reads the user and key columns only (a parquet source reads no other)."""
        user, key = part[user_column], part[key_column]
        ids = _raw_users(user) if found_keys else None
        if ids is not None:  # number ids: the records sent to their users' buckets as read, counted there
            key_codes, keys = identities_of(key, repr(key_column), name)
            return _row_pieces(ids, key_codes, keys, n_buckets)
        codes, values = identities_of(user, repr(user_column), name)
        refuse_missing_users(b.user, values)
        if found_keys:  # each key by its code here; the buckets map the codes to the keys found everywhere
            key_codes, keys = identities_of(key, repr(key_column), name)
            return _pair_counts(codes, values, key_codes, len(as_list(keys)), keys, n_buckets)
        found = {g.by: identities_of(key, repr(key_column), name)} if g.by in r.identities else {}
        return _pair_counts(codes, values, r._column(g.by, repr(key_column), key, found, name), g, None, n_buckets)

    counted = frame[list(dict.fromkeys([user_column, key_column]))]  # the two columns (one if the same)
    split = [dask.delayed(with_reused_memory(pairs), nout=n_buckets)(p) for p in counted.to_delayed()]
    decided = [
        dask.delayed(with_reused_memory(_over_in_bucket))([s[k] for s in split], b, None if found_keys else g)
        for k in range(n_buckets)
    ]
    buckets = progress.compute(*decided)
    counts = np.asarray(np.sum([c for _, c, _, _ in buckets], axis=0, dtype=np.int64))
    over = merge_distinct([v for v, _, _, _ in buckets])
    if found_keys:  # the keys found in the data: the group-by's keys, and its counts in their order
        keys = buckets[0][2]
        r.fix({g.by: keys})
        key = r.identities[g.by]
        if not len(key.values):  # no records, no key: nothing is released, whatever the randomness
            return m, None, names
        m = dataclasses.replace(m, steps=with_found_keys(m.steps, key.numbers.tolist()))
        b, g, post = _bounded(m.steps)  # type: ignore[misc]
        names = [None if v is MISSING else v for v in as_list(key.values)]
        if not isinstance(keys, np.ndarray):  # found in the partitions' order: put in the keys' order
            at = {v: i for i, v in enumerate(keys)}
            counts = counts[[at[v] for v in as_list(key.values)]]

    def read(part: Any, found: dict | None = None) -> tuple:
        """The partition's records (its users' stand-ins local to it) and each identity column's (codes,
        values) (``found``: those known already)."""
        local = dataclasses.replace(r, identities={**r.identities, b.user: Identity(b.user, "user")})
        found = {} if found is None else found
        arr = local.read(part, None, name, fix=(b.user,), found=found).reshape(-1, dim)
        return arr, found

    def in_place(part: Any, shared: tuple) -> tuple:
        """The exact per-key aggregates of the records of the users within the bounds, and per bucket the
        records of the users over a bound with their identities (their stand-ins local to the partition)."""
        over, filt = shared
        raw = _number_users(part[user_column], over) if b.user not in (b.by, g.by) else None
        if raw is not None:  # number ids: the users over a bound found by id, the partition's users not read
            return in_place_by_id(part, raw, over, filt)
        arr, found = read(part)
        codes, values = found[b.user]
        chosen = _members(values, over) if len(arr) else np.zeros(len(values), dtype=bool)
        rows = np.flatnonzero(chosen[codes]) if len(arr) else np.zeros(0, dtype=np.int64)
        return (aggregated(arr, found, rows), *_by_bucket(codes[rows], values, arr[rows], n_buckets))

    def in_place_by_id(part: Any, raw: np.ndarray, over: np.ndarray, filt: tuple | None) -> tuple:
        """:func:`in_place` where the user ids are numbers compared exactly with ``over`` (a sorted array):
        the records of the users over a bound found by a search in ``over``, and only their identities read
        (the others' user column is read as one stand-in: the parts read no user column, and every record
        of a user within the bounds is kept, whoever it is)."""
        rows = np.flatnonzero(_in_sorted(raw, over, filt))
        # the user column read as one identity, 0.0 (what a column of zeros reads as): its stand-in, in the domain
        ones = np.zeros(1) if len(part) else np.zeros(0, dtype=np.int64)  # as identities_of reads it
        arr, found = read(part, {b.user: (np.zeros(len(part), dtype=np.int64), ones)})
        return (aggregated(arr, found, rows), *_rows_by_bucket(raw[rows], arr, rows, n_buckets))

    def aggregated(arr: np.ndarray, found: dict, rows: np.ndarray) -> list | None:
        """The partition's records checked against the domain, and the exact per-key aggregates of all but
        ``rows`` (the records of the users over a bound)."""
        if len(arr):
            m.records.validate("data", arr)  # the domain, partition by partition (never the values in a message)
        keep = np.ones(len(arr), dtype=bool)
        keep[rows] = False
        at = np.flatnonzero(keep)
        kept = arr.take(at, axis=0)  # one list of rows for the records and their keys (a take copies rows whole)
        key_codes = None  # keys found in the data: each record's key position as read (not from its stand-in)
        if found_keys and len(arr):
            key_codes = r.identities[g.by].positions(found[g.by][1])[found[g.by][0].take(at)]
        return None if g.part is None else [list(pk) for pk, _, _ in g.part_aggregates(kept, space, key_codes)]

    def draw(*given: Any) -> tuple:
        *pieces, (users, ranks) = given
        return _draw_in_bucket(pieces, users, ranks, b, g, space)

    filt = _member_filter(over) if isinstance(over, np.ndarray) else None
    shared = progress.share((over, filt))  # sent once to every worker
    split = [dask.delayed(with_reused_memory(in_place), nout=1 + n_buckets)(p, shared) for p in frame.to_delayed()]
    # the partitions' second pass needs only the users over a bound: it runs while this process makes the
    # bounding draw (the generator's only call between the two passes, as in memory)
    handles, drawn = progress.start(
        [*[s[0] for s in split], *[s[1 + k] for k in range(n_buckets) for s in split]],
        lambda: _drawn_order(list(buckets), over, rng),  # per bucket: its users in canonical order, their ranks
    )
    given = [progress.share(d, broadcast=False) for d in drawn]
    del drawn
    n_parts = len(split)
    pieces = [handles[n_parts * (1 + k) : n_parts * (2 + k)] for k in range(n_buckets)]
    partials, in_buckets = progress.finish(
        handles[:n_parts],
        [dask.delayed(with_reused_memory(draw))(*pieces[k], given[k]) for k in range(n_buckets)],
    )
    del handles, pieces
    aggregates: list | None = None
    for a in [*partials, *[x for _, x in in_buckets]]:
        if a is not None:
            aggregates = a if aggregates is None else [[u + v for u, v in zip(x, y)] for x, y in zip(aggregates, a)]
    for c, _ in in_buckets:
        counts += c
    if g.part is None:
        out = g.release(counts[None, :], rng)
    else:
        if aggregates is None:
            aggregates = [list(pk) for pk, _, _ in g.part_aggregates(np.zeros((0, dim)), space)]
        structure = g.part_aggregates(np.zeros((0, dim)), space)
        merged = [(x, sp, noise) for x, (_, sp, noise) in zip(aggregates, structure)]
        out = g.release(counts[None, :], rng, space=space, aggregates=merged)
    out = out if post is None else B._post_chain(post, out)
    return m, B.flatten(out).reshape(1, -1), names


def _by_bucket(codes: np.ndarray, values: Any, rows: np.ndarray, n_buckets: int) -> list:
    """Records of users over a bound (``codes`` into the partition's user ``values``), split into the users'
    buckets (the hash of :func:`_pair_counts`): per bucket ``(each record's user identity, the records)``."""
    bucket = _buckets(values, n_buckets)[codes] if len(codes) else codes
    out = []
    for j in range(n_buckets):
        mine = np.flatnonzero(bucket == j)
        ids = values[codes[mine]] if isinstance(values, np.ndarray) else [values[c] for c in codes[mine].tolist()]
        out.append((ids, rows[mine]))
    return out


def _rows_by_bucket(ids: np.ndarray, arr: np.ndarray, rows: np.ndarray, n_buckets: int) -> list:
    """:func:`_by_bucket` of the records ``arr[rows]`` of users over a bound given by their ids (``ids``, in
    ``over``'s representation: the buckets compare them with it), each hashed as itself (the hash of its
    identity): per bucket ``(the records' ids, the records)``, in the partition's order."""
    order, slices = _bucket_slices(ids, n_buckets)
    ids, records = ids[order], arr.take(rows[order], axis=0)
    return [(ids[at], records[at]) for at in slices]


def _bucket_slices(ids: np.ndarray, n_buckets: int) -> tuple[np.ndarray, list]:
    """The order that puts ``ids`` bucket by bucket (:func:`_buckets`; within a bucket in their order here)
    and each bucket's slice of it."""
    bucket = _buckets(ids, n_buckets)
    if n_buckets <= 2**16:  # a stable sort of 16-bit integers is a radix sort
        bucket = bucket.astype(np.uint16)
    order = np.argsort(bucket, kind="stable")
    ends = np.cumsum(np.bincount(bucket, minlength=n_buckets)).tolist()
    return order, [slice(a, z) for a, z in zip([0, *ends[:-1]], ends)]


def _buckets(values: Any, n_buckets: int) -> np.ndarray:
    """Each user identity's bucket: the hash of :func:`~dpharness._records.identity_hash` (equal identities
    hash alike in every process) modulo ``n_buckets``; the one rule the counting pass and the move of the
    records over a bound share."""
    from ._records import identity_hash

    if not len(values):
        return np.zeros(0, dtype=np.int64)
    return (_mixed(identity_hash(values)) % np.uint64(n_buckets)).astype(np.int64)


def _mixed(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser of ``h`` (uint64): every input bit moves every output bit, so the low
    bits of the bucket rule and the high bits of :func:`_member_filter` are spread even where the identity
    hashes are not (an integer id held as a double has trailing zero bits)."""
    x = h ^ (h >> np.uint64(33))
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


_FILTER_BITS_PER_ID = 32  # bits of the membership filter per user over a bound (about 3% false hits)


def _member_filter(ordered: np.ndarray) -> tuple[np.ndarray, int] | None:
    """A one-hash bit filter of the sorted ids ``ordered`` (int64 or float64, as :func:`_number_users` reads
    them): ``(bits, b)``, an id's bit being the top ``b`` bits of :func:`_mixed` of its 64 bits. A filter
    says "maybe" for every id of ``ordered``, so :func:`_in_sorted` searches only the ids it lets through."""
    if ordered.dtype not in (np.int64, np.float64) or len(ordered) < 1024:
        return None
    width = max(16, int(np.ceil(np.log2(_FILTER_BITS_PER_ID * len(ordered)))))
    at = np.sort(_mixed(ordered.view(np.uint64)) >> np.uint64(64 - width))
    byte, bit = (at >> np.uint64(3)).astype(np.int64), (at & np.uint64(7)).astype(np.uint8)
    starts = np.flatnonzero(np.concatenate([[True], byte[1:] != byte[:-1]]))
    bits = np.zeros(1 << (width - 3), dtype=np.uint8)
    bits[byte[starts]] = np.bitwise_or.reduceat(np.left_shift(np.uint8(1), bit), starts)
    return bits, width


def _drawn_order(buckets: list, every: Any, rng: np.random.Generator) -> list:
    """The bounding draw of the users over a bound, made as in memory (:func:`~dpharness.mechanisms.parts.
    grouping._kept_draws`: one random order of all their N records in the canonical order, user by user
    in the users' order, ``rng.permuted`` of ``0..N-1``; a record's rank is its position in that order),
    and per bucket ``(its users' identities in the users' order with their first canonical position, the
    ranks of their records in canonical order)``: a user's records are ``first .. first + its records``
    in the canonical order, and every bounding decision reads the ranks of one user's records only.
    ``every``: all the buckets' users over a bound (:func:`~dpharness._records.merge_distinct`)."""
    from ._records import as_list, sort_values

    ordered = every if isinstance(every, np.ndarray) else sort_values(every)  # the users' (stand-ins') order
    index: dict | None = None
    at: list[np.ndarray] = []  # each bucket's users' positions in the users' order
    arrays = [v for v, *_ in buckets]
    if isinstance(ordered, np.ndarray) and all(isinstance(v, np.ndarray) and v.dtype == ordered.dtype for v in arrays):
        every_user = np.concatenate([ordered[:0], *arrays])
        if len(every_user) == len(ordered):  # the buckets' users are disjoint: their sort is the users' order
            place = np.empty(len(every_user), dtype=np.int64)
            place[sorting_order(every_user)] = np.arange(len(every_user))  # distinct: one order, one sort
            return _drawn_from(buckets, np.split(place, np.cumsum([len(v) for v in arrays])[:-1]), len(ordered), rng)
    for v, *_ in buckets:
        if isinstance(ordered, np.ndarray) and isinstance(v, np.ndarray) and v.dtype == ordered.dtype:
            at.append(np.searchsorted(ordered, v))
            continue
        index = {u: i for i, u in enumerate(as_list(ordered))} if index is None else index
        at.append(np.array([index[u] for u in as_list(v)], dtype=np.int64))
    return _drawn_from(buckets, at, len(ordered), rng)


def _drawn_from(buckets: list, at: list, n_users: int, rng: np.random.Generator) -> list:
    """:func:`_drawn_order` from each bucket's users' positions in the users' order (``at``)."""
    from .mechanisms.parts.grouping import random_orders

    records = np.zeros(n_users, dtype=np.int64)
    for a, (_, _, _, r) in zip(at, buckets):
        records[a] = r
    first = np.cumsum(records) - records
    n = int(records.sum())
    rank = np.zeros(0, dtype=np.int64)
    if n:  # the generator call of _kept_draws for one release: a permutation of 0..n-1, then its inverse
        order = random_orders(n, 1, rng)[0]
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        del order
    out = []
    for a, (v, _, _, r) in zip(at, buckets):
        o = sorting_order(a)  # the bucket's users in the users' order (distinct positions: one order)
        starts, sizes = first[a[o]], r[o]
        positions = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))
        users = v[o] if isinstance(v, np.ndarray) else [v[i] for i in o.tolist()]
        out.append(((users, a[o]), rank[positions]))
    return out


def _draw_in_bucket(pieces: list, users: tuple, ranks: np.ndarray, b: Any, g: Any, space: Any) -> tuple:
    """One bucket's users over a bound (all of their records, from every partition): their kept records as
    in memory, and their per-key distinct-user counts and exact aggregates. ``users``: (identities in the
    users' order, their position in it); ``ranks``: the ranks of their records in the canonical order."""
    from ._records import as_list
    from .mechanisms.parts.grouping import _kept_by_order, _pairs, canonical_rows

    values, position = users
    dim = space.dim
    held = [p for p in pieces if len(p[1])]
    counts = np.zeros(len(g.keys), dtype=np.int64)
    if not held:
        return counts, None if g.part is None else [
            list(pk) for pk, _, _ in g.part_aggregates(np.zeros((0, dim)), space)
        ]
    rows = np.concatenate([p[1] for p in held])
    if isinstance(values, np.ndarray) and all(
        isinstance(p[0], np.ndarray) and p[0].dtype == values.dtype for p in held
    ):
        ids = np.concatenate([p[0] for p in held])
        order = sorting_order(values)  # distinct identities (and ranks below): any sort gives the one order
        by_id = sorting_order(ids)
        at = np.empty(len(ids), dtype=np.int64)
        at[by_id] = np.searchsorted(values[order], ids[by_id])  # the ids in order: a walk, not random probes
        local = order[at]
    else:
        index = {v: i for i, v in enumerate(as_list(values))}
        local = np.array([index[v] for p in held for v in as_list(p[0])], dtype=np.int64)
    rows[:, b.user] = position[local]  # the user's position in the users' order: the canonical order's first key
    assert len(rows) == len(ranks), (len(rows), len(ranks))  # the records counted in the first pass
    rank = np.empty(len(ranks), dtype=np.int64)  # the ranks' order among these records (what is read)
    rank[sorting_order(ranks)] = np.arange(len(ranks))
    key_code = g.codes(rows[:, b.by])
    canonical = _canonical_in_bucket(rows, local, len(position), key_code, b, g)
    if canonical is None:  # the general order, and the pairs by float equality
        rows = rows[canonical_rows(rows, np.arange(len(rows)), b)]
        ucode, pcode, pair_user = _pairs(rows[:, b.user], rows[:, b.by])
        kept = rows[_kept_by_order(ucode, pcode, pair_user, rank[None, :], b)[0]]
        counts += g.counts(kept, user=b.user)
        aggregates = None if g.part is None else [list(pk) for pk, _, _ in g.part_aggregates(kept, space)]
        return counts, aggregates
    rows, key_code, local = rows.take(canonical, axis=0), key_code[canonical], local[canonical]
    new_user = np.empty(len(rows), dtype=bool)
    new_user[0] = True
    np.not_equal(local[1:], local[:-1], out=new_user[1:])
    new_pair = new_user.copy()
    new_pair[1:] |= key_code[1:] != key_code[:-1]
    ucode, pcode = np.cumsum(new_user) - 1, np.cumsum(new_pair) - 1  # _pairs' codes: the records in (user, key) order
    pair_first = np.flatnonzero(new_pair)
    kept = _kept_by_order(ucode, pcode, ucode[pair_first], rank[None, :], b)[0]
    held_pairs = np.zeros(len(pair_first), dtype=bool)
    held_pairs[pcode[kept]] = True  # a (user, key) counted once: g.counts(kept, user) without its sort
    counts += np.bincount(key_code[pair_first[held_pairs]], minlength=len(g.keys)).astype(np.int64)
    if g.part is None:
        return counts, None
    at = np.flatnonzero(kept)
    return counts, [list(pk) for pk, _, _ in g.part_aggregates(rows.take(at, axis=0), space, key_code[at])]


def _canonical_in_bucket(
    rows: np.ndarray, local: np.ndarray, n_users: int, key_code: np.ndarray, b: Any, g: Any
) -> np.ndarray | None:
    """:func:`~dpharness.mechanisms.parts.grouping.canonical_rows` of one bucket's records, from what is known
    of them: each record's user by its index in the users' order (``local``: the order of the user column)
    and its key by ``key_code`` (:meth:`GroupBy.codes`: the keys' order when the keys increase and every
    record's key is one of them), then the one other column: its values' order (one sort), then one sort of
    (user, key, place in that order) packed in one integer. Records tied in all three are equal in every
    column (interchangeable: any order of them is the canonical order). None where that does not hold
    (canonical_rows then orders them)."""
    others = [j for j in range(rows.shape[1]) if j not in (b.user, b.by)]
    keys = np.array([float(k) for k in g.key_values])
    if len(others) > 1 or not len(keys) or not np.all(keys[1:] > keys[:-1]) or (key_code < 0).any():
        return None
    primary = local * len(keys) + key_code  # (user, key), in their order
    if not others:
        return sorting_order(primary)
    bits = max(len(rows) - 1, 1).bit_length()
    if n_users * len(keys) >= 2 ** (63 - bits):
        return None
    other = rows[:, others[0]]
    by_value = sorting_order(other + 0.0 if other.dtype.kind == "f" else other)  # -0.0 is 0.0, as sorted_distinct
    place = np.empty(len(rows), dtype=np.int64)
    place[by_value] = np.arange(len(rows))
    packed = primary << bits
    packed |= place
    packed.sort()  # distinct: by (user, key), then the other column's value
    packed &= (1 << bits) - 1
    return by_value[packed]


def _pair_counts(codes: np.ndarray, values: Any, keys: np.ndarray, g: Any, found: Any, n_buckets: int) -> list:
    """One partition's records counted per (user, key), split into ``n_buckets`` by the hash of the user's
    identity: per bucket ``(the bucket's users' values (sorted when an array), the number of pairs of each
    of them, per pair (by user, in the users' order, then by key): the key, the count; the partition's
    distinct keys)``. ``found`` None: ``keys`` as read (equal as doubles),
    ``g`` the group-by; else ``keys`` are codes into ``found`` (the partition's distinct keys, from
    :func:`~dpharness._records.identities_of`) and ``g`` their number."""
    from ._records import _used

    n_values = len(values)
    if len(codes):
        if found is not None:
            key_code, width = keys, max(int(g), 1)
            key_of = np.arange(width, dtype=np.min_scalar_type(width))  # sent on: 1 byte for up to 256 keys
        else:
            key_code = g.codes(keys)  # equal as doubles: the same code; a number that is none of the keys: by value
            width, key_of = len(g.keys), np.array([float(k) for k in g.key_values])
            if (key_code < 0).any():
                key_of, key_code = np.unique(keys, return_inverse=True)
                key_code = key_code.reshape(-1)
                width = len(key_of)
        ordered = np.sort(codes * width + key_code)  # the pairs by user, then key (a sort, no inverse needed)
        starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        pair = ordered[starts]
        pu, pk = pair // width, key_of[pair % width]
        pc = np.diff(np.append(starts, len(ordered)))  # records per pair
        pc = pc.astype(np.min_scalar_type(int(pc.max())))  # sent on: compact (1 byte below 256)
    else:
        pu, pk, pc = np.zeros(0, dtype=np.int64), keys[:0], np.zeros(0, dtype=np.int64)
    held = None if found is None else (found, _used(keys, found))
    bucket = _buckets(values, n_buckets)
    if n_buckets <= 2**16:  # a stable sort of 16-bit integers is a radix sort
        bucket = bucket.astype(np.uint16)
    users = np.argsort(bucket, kind="stable")  # the users bucket by bucket, in the users' order in each
    user_ends = np.cumsum(np.bincount(bucket, minlength=n_buckets))
    runs = np.bincount(pu, minlength=n_values)  # pairs per user (at least one: every user has a record)
    runs = runs.astype(np.min_scalar_type(int(runs.max()) if len(runs) else 0))  # sent on: 1 byte below 256
    pair_bucket = bucket[pu]
    pairs = np.argsort(pair_bucket, kind="stable")  # pu ascending: each bucket's pairs by user, then key
    pair_ends = np.cumsum(np.bincount(pair_bucket, minlength=n_buckets))
    out = []
    for j in range(n_buckets):
        mine_users = users[(user_ends[j - 1] if j else 0) : user_ends[j]]
        mine = pairs[(pair_ends[j - 1] if j else 0) : pair_ends[j]]
        subset = values[mine_users] if isinstance(values, np.ndarray) else [values[i] for i in mine_users.tolist()]
        out.append((subset, runs[mine_users], pk[mine], pc[mine], held))
    return out


def _over_in_bucket(pieces: list, b: Any, g: Any) -> tuple:
    """One bucket's users (all of their records' (user, key) counts, from every partition): ``(the values of
    the users over a bound, per key the number of distinct users within the bounds, the keys found)``;
    over a bound as in memory (:func:`~dpharness.mechanisms.parts.grouping._user_runs`): more than k
    records, more than m under one key, or more than ℓ keys. ``g`` the group-by (keys as read, counts per
    encoded key), or None: keys found in the data, each piece's keys codes into its partition's keys, the
    counts per key of the keys found (:func:`~dpharness._records.merge_distinct` of the partitions', the
    same in every bucket)."""
    from ._records import as_list, merge_distinct, sorted_distinct, sorted_unique

    if any(isinstance(p, _Rows) for p in pieces):
        decided = _over_of_rows(pieces, b)
        if decided is not None:
            return decided
        pieces = [p.counted() if isinstance(p, _Rows) else p for p in pieces]
    found = None
    if g is None:
        found = merge_distinct([p[4][1] for p in pieces])
        where = {v: i for i, v in enumerate(as_list(found))}
        remaps = [np.array([where.get(v, -1) for v in as_list(p[4][0])], dtype=np.int64) for p in pieces]
        k = np.concatenate([np.zeros(0, dtype=np.int64), *[a[p[2]] for a, p in zip(remaps, pieces)]])
        n_keys = len(found)
    else:
        k = np.concatenate([p[2] for p in pieces])
        n_keys = len(g.keys)
    counts = np.zeros(n_keys, dtype=np.int64)
    held = [p[0] for p in pieces if len(p[0])]
    if not held:
        return pieces[0][0][:0], counts, found, np.zeros(0, dtype=np.int64)
    c = np.concatenate([p[3] for p in pieces]).astype(np.int64)
    key_of, kcode = sorted_distinct(k + 0 if g is None else k + 0.0)  # -0.0 is 0.0; NaNs one key
    if all(isinstance(v, np.ndarray) for v in held) and len({v.dtype for v in held}) == 1:
        # users by their values themselves (sorted distinct values of one dtype in each piece: equal exactly
        # when equal): the bucket's distinct users by a sort, each piece's users found by a walk through them
        values = None
        distinct = sorted_unique(np.concatenate(held))
        u = np.concatenate(
            [np.zeros(0, dtype=np.int64)]
            + [np.repeat(np.searchsorted(distinct, p[0]), p[1]) for p in pieces if len(p[0])]  # sorted: a walk
        )
    else:
        values = merge_distinct([p[0] for p in pieces])
        index = {v: i for i, v in enumerate(as_list(values))}
        u = np.concatenate(
            [np.repeat(np.array([index[v] for v in as_list(p[0])], dtype=np.int64), p[1]) for p in pieces]
        )
        distinct = np.arange(len(index), dtype=np.int64)
    pu, kc, pc = _pairs_summed(u, kcode, c, len(distinct), max(len(key_of), 1))
    pk = key_of[kc]
    n_users = len(distinct)
    records = np.bincount(pu, weights=pc, minlength=n_users).astype(np.int64)
    over = (records > b.max_records) | (np.bincount(pu[pc > b.max_per_partition], minlength=n_users) > 0)
    if b.max_partitions is not None:
        over |= np.bincount(pu, minlength=n_users) > b.max_partitions
    within = pk[~over[pu]]
    code = within if g is None else g.codes(within)
    counts += np.bincount(code[code >= 0], minlength=n_keys).astype(np.int64)
    users = distinct[over]
    if values is not None:
        users = values[users] if isinstance(values, np.ndarray) else [values[i] for i in users.tolist()]
    return users, counts, found, records[over]


def _raw_users(col: Any) -> np.ndarray | None:
    """A partition's user column of numbers (a numpy int or float dtype, no NaN) as
    :func:`~dpharness._records.identities_of` represents its values: float64 when the column is float or
    every id is a double exactly, else int64; None for any other column (read as identities)."""
    from ._records import _EXACT

    dtype = getattr(col, "dtype", None)
    if not isinstance(dtype, np.dtype) or dtype.kind not in "if":
        return None
    raw = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
    if dtype.kind == "f":
        ids = raw.astype(np.float64) + 0.0  # -0.0 -> 0.0
        return None if np.isnan(ids).any() else ids  # a missing id: refused by the identities' path
    ids = raw.astype(np.int64, copy=False)
    if len(ids) and -_EXACT <= int(ids.min()) and int(ids.max()) <= _EXACT:
        return ids.astype(np.float64)  # every id a double exactly (identities_of's sorted values are doubles)
    return ids


@dataclass(frozen=True)
class _Rows:
    """One partition's records of one bucket's users, as read, for :func:`_over_in_bucket` to count: each
    record's user id (:func:`_raw_users`), its key's code into the partition's distinct keys, the number
    of those keys, and ``held`` as :func:`_pair_counts` gives it (the partition's distinct keys, those
    some record holds). :meth:`counted` is the piece :func:`_pair_counts` makes of the same records."""

    ids: np.ndarray
    keys: np.ndarray
    width: int
    held: tuple

    def counted(self) -> tuple:
        from ._records import sorted_distinct

        values, codes = sorted_distinct(self.ids)
        users, runs, pk, pc, _ = _pair_counts(codes, values, self.keys, self.width, self.held[0], 1)[0]
        return users, runs, pk, pc, self.held


def _row_pieces(ids: np.ndarray, key_codes: np.ndarray, keys: Any, n_buckets: int) -> list:
    """A partition's records split into ``n_buckets`` by the hash of their users (the rule of
    :func:`_pair_counts`, of each id as read: :func:`~dpharness._records.identity_hash` of the values
    themselves), uncounted: per bucket a :class:`_Rows`."""
    from ._records import _used, as_list

    width = len(as_list(keys))
    held = (keys, _used(key_codes, keys))
    codes = key_codes.astype(np.min_scalar_type(max(width - 1, 0)))  # sent on: 1 byte for up to 256 keys
    order, slices = _bucket_slices(ids, n_buckets)
    ids, codes = ids[order], codes[order]
    return [_Rows(ids[at], codes[at], width, held) for at in slices]


def _over_of_rows(pieces: list, b: Any) -> tuple | None:
    """:func:`_over_in_bucket` of pieces that are all :class:`_Rows` whose ids (those of pieces holding
    records) have one dtype, from one sort of the bucket's records by user and one of its (user, key)
    pairs; None for any other pieces (counted as :func:`_pair_counts` would, then decided as such)."""
    from ._records import as_list, merge_distinct, sorted_with_order

    if not all(isinstance(p, _Rows) for p in pieces):
        return None
    held = [p for p in pieces if len(p.ids)]
    if len({p.ids.dtype for p in held}) > 1:
        return None
    found = merge_distinct([p.held[1] for p in pieces])
    where = {v: i for i, v in enumerate(as_list(found))}
    n_keys = len(found)
    counts = np.zeros(n_keys, dtype=np.int64)
    if not held:
        return pieces[0].ids[:0], counts, found, np.zeros(0, dtype=np.int64)
    small = np.min_scalar_type(-max(n_keys, 1))  # a signed type holding -1 and every key's position
    k = np.concatenate(
        [np.array([where.get(v, -1) for v in as_list(p.held[0])], dtype=small)[p.keys] for p in held]
    )  # each record's key by its position among the keys found
    ids, order = sorted_with_order(np.concatenate([p.ids for p in held]))
    k = k[order]
    new = np.empty(len(ids), dtype=bool)
    new[0] = True
    np.not_equal(ids[1:], ids[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    users = ids[starts]
    records = np.diff(np.append(starts, len(ids)))
    width = max(n_keys, 1)
    pair = np.cumsum(new) - 1  # each record's user, by the users' order
    pair *= width
    pair += k  # (int64)
    pair.sort()  # by user, then key
    first = np.empty(len(pair), dtype=bool)
    first[0] = True
    np.not_equal(pair[1:], pair[:-1], out=first[1:])
    pair_starts = np.flatnonzero(first)
    pu, pk = np.divmod(pair[pair_starts], width)
    over = records > b.max_records
    if b.max_per_partition < b.max_records or b.max_partitions is not None:
        # (at most k records each, a user's pair holds at most k <= m: over only by its records otherwise)
        pc = np.diff(np.append(pair_starts, len(pair)))
        over |= np.bincount(pu[pc > b.max_per_partition], minlength=len(users)) > 0
    if b.max_partitions is not None:
        over |= np.bincount(pu, minlength=len(users)) > b.max_partitions
    counts += np.bincount(pk[~over[pu]], minlength=n_keys).astype(np.int64)
    return users[over], counts, found, records[over]


def _pairs_summed(u: np.ndarray, k: np.ndarray, c: np.ndarray, n_users: int, width: int) -> tuple:
    """Entries (user code ``u`` < n_users, key code ``k`` < width, count ``c`` >= 0) summed per (user, key):
    ``(user, key, count)`` per distinct pair, in (user, key) order. One sort of the entries packed into one
    int64 (user, key, count) when they fit (a SIMD sort: several times an argsort's speed), else an argsort."""
    if not len(u):
        return u, k, c
    top = int(c.max()) + 1
    if n_users * width * top < 2**62:  # (user * width + key) * top + count: order by (user, key), then count
        packed = (u * width + k) * top + c
        packed.sort()
        pair, count = np.divmod(packed, top)
    else:
        pair = u * width + k
        order = np.argsort(pair)
        pair, count = pair[order], c[order]
    starts = np.flatnonzero(np.concatenate([[True], pair[1:] != pair[:-1]]))
    pc = np.add.reduceat(count, starts)  # records per (user, key): exact integers
    pu, pk = np.divmod(pair[starts], width)
    return pu, pk, pc


def _number_users(col: Any, over: Any) -> np.ndarray | None:
    """A partition's user column as numbers that compare exactly with ``over`` (the users over a bound as
    :func:`~dpharness._records.identities_of` gives a number column's values: a sorted float64 array when
    every id is a double exactly, int64 beyond), or None (any other column or representation: the ids are
    then read as identities)."""
    from ._records import _EXACT

    dtype = getattr(col, "dtype", None)
    if not isinstance(over, np.ndarray) or not isinstance(dtype, np.dtype) or dtype.kind not in "iuf":
        return None
    raw = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
    if dtype.kind == "f":
        return raw + 0.0 if over.dtype == np.float64 else None  # -0.0 -> 0.0 (a NaN was refused by the counting)
    if over.dtype == np.int64 and dtype.kind == "i":
        return raw.astype(np.int64, copy=False)
    if over.dtype == np.float64 and (not len(raw) or (-_EXACT <= int(raw.min()) and int(raw.max()) <= _EXACT)):
        return raw.astype(np.float64)  # integers that are doubles exactly
    return None


def _in_sorted(values: np.ndarray, ordered: np.ndarray, filt: tuple | None = None) -> np.ndarray:
    """Whether each of ``values`` is one of ``ordered`` (sorted, distinct, the same dtype), exactly; with
    ``filt`` (:func:`_member_filter` of ``ordered``) only the values the filter lets through are searched."""
    if not len(ordered) or not len(values):
        return np.zeros(len(values), dtype=bool)
    if filt is not None:
        bits, width = filt
        at = _mixed(np.ascontiguousarray(values).view(np.uint64)) >> np.uint64(64 - width)
        maybe = np.flatnonzero((bits[(at >> np.uint64(3)).astype(np.intp)] >> (at & np.uint64(7)).astype(np.uint8)) & 1)
        out = np.zeros(len(values), dtype=bool)
        out[maybe] = _in_sorted(values[maybe], ordered)
        return out
    order = sorting_order(values)  # searched in order: a walk through ``ordered``, not random probes (10x faster)
    probe = values[order]
    at = np.searchsorted(ordered, probe)
    at[at == len(ordered)] = 0
    out = np.empty(len(values), dtype=bool)
    out[order] = ordered[at] == probe
    return out


def _members(values: Any, over: Any) -> np.ndarray:
    """Whether each of a partition's user ``values`` is one of ``over`` (the users over a bound), exactly."""
    from ._records import as_list

    if isinstance(values, np.ndarray) and isinstance(over, np.ndarray) and values.dtype == over.dtype:
        return _in_sorted(values, over)  # over: merge_distinct's sorted distinct values
    if not len(over):
        return np.zeros(len(values), dtype=bool)
    chosen = set(as_list(over))
    return np.array([v in chosen for v in as_list(values)], dtype=bool)


# --------------------------------------------------------------------------- progress

PROGRESS_AFTER = 2.0  # seconds a release runs before its progress is shown


class _Progress:
    """Runs the release's Dask computations, with a progress bar once one runs longer than
    :data:`PROGRESS_AFTER` seconds (unless ``quiet``): on a local scheduler drawn on the standard error by a
    Dask callback (:func:`_task_bar`), on a distributed client ``distributed.progress`` (Dask's own, on
    the standard output, where Dask writes it)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def share(self, value: Any, broadcast: bool = True) -> Any:
        """``value`` as an argument of delayed calls: scattered to the workers of a distributed client (not
        copied into the graph; to every worker with ``broadcast``), else one delayed value."""
        import dask

        client = self._client()
        if client is None:
            return dask.delayed(value, pure=True)
        return client.scatter([value], broadcast=broadcast)[0]  # in a list: one value, not its elements

    @staticmethod
    def _client() -> Any:
        """The distributed client that runs ``dask.compute``, or None."""
        import dask

        client = getattr(dask.base.get_scheduler(), "__self__", None)
        if type(client).__name__ == "Client" and type(client).__module__.startswith("distributed"):
            return client
        return None

    def compute(self, *objects: Any) -> tuple:
        import dask

        if self.quiet:
            return dask.compute(*objects)
        client = self._client()
        if client is not None:
            futures = client.compute(list(objects))
            self._wait(futures)
            return tuple(client.gather(futures))
        with _TaskBar():
            return dask.compute(*objects)

    def _wait(self, futures: list) -> None:
        """Until ``futures`` are done, with Dask's progress bar after :data:`PROGRESS_AFTER` seconds."""
        import distributed

        if self.quiet:
            distributed.wait(futures)
            return
        try:
            distributed.wait(futures, timeout=PROGRESS_AFTER)
        except (TimeoutError, distributed.TimeoutError):
            distributed.progress(futures)  # until all are done

    def start(self, objects: list, meanwhile: Any) -> tuple[list, Any]:
        """Starts computing ``objects`` and runs ``meanwhile()`` here while they compute: ``(handles, what
        meanwhile returned)``. On a distributed client the handles are futures (the values stay on the
        workers: pass them to :meth:`finish`), else the values themselves (``meanwhile`` in a thread)."""
        client = self._client()
        if client is not None:
            futures = client.compute(list(objects))
            try:
                return futures, meanwhile()
            except BaseException:
                client.cancel(futures)
                raise
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(meanwhile)
            values = list(self.compute(*objects))  # an error here waits for meanwhile, then is raised
            return values, job.result()

    def finish(self, handles: list, objects: list) -> tuple[list, list]:
        """``(the values of handles from :meth:`start`, the computed objects)``: ``objects`` may take the
        handles as arguments (on a distributed client they are futures: resolved on the workers)."""
        client = self._client()
        if client is None:
            return handles, list(self.compute(*objects))
        futures = client.compute(list(objects))
        self._wait([*handles, *futures])
        return list(client.gather(handles)), list(client.gather(futures))


def _task_bar() -> Any:
    """A Dask callback (``dask.callbacks.Callback``: Dask's diagnostics of a local scheduler) drawing the
    share of tasks done on the standard error, from PROGRESS_AFTER seconds on, as each task finishes (no
    timer thread: nothing to wait for at the end of a short computation)."""
    from dask.callbacks import Callback

    class TaskBar(Callback):
        def _start(self, dsk: Any) -> None:
            self.start, self.shown = time.monotonic(), False

        def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
            elapsed = time.monotonic() - self.start
            if elapsed >= PROGRESS_AFTER:
                done = len(state["finished"])
                total = done + sum(len(state[k]) for k in ("ready", "waiting", "running"))
                self._draw(done / max(total, 1), elapsed)

        def _finish(self, dsk: Any, state: Any, errored: bool) -> None:
            if self.shown or time.monotonic() - self.start >= PROGRESS_AFTER:
                self._draw(1.0, time.monotonic() - self.start)
                sys.stderr.write("\n")
                sys.stderr.flush()

        def _draw(self, fraction: float, elapsed: float) -> None:
            self.shown = True
            bar = "#" * int(40 * fraction)
            sys.stderr.write(f"\r[{bar:<40}] | {100 * fraction:3.0f}% Completed | {elapsed:.1f}s")
            sys.stderr.flush()

    return TaskBar


class _TaskBar:
    def __enter__(self) -> None:
        self._callback = _task_bar()()
        self._callback.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._callback.__exit__(*exc)


class _Elapsed:
    """The time a release in memory has run, on the standard error, once it runs longer than
    :data:`PROGRESS_AFTER` seconds (its sampler is one call: the time is all there is to show)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "_Elapsed":
        if not self.quiet:
            self._thread = threading.Thread(target=self._show, daemon=True)
            self._thread.start()
        return self

    def _show(self) -> None:
        start = time.monotonic()
        if self._stop.wait(PROGRESS_AFTER):
            return
        while not self._stop.wait(0.5):
            sys.stderr.write(f"\rrelease: {time.monotonic() - start:.0f} s")
            sys.stderr.flush()
        sys.stderr.write(f"\rrelease: done in {time.monotonic() - start:.1f} s\n")
        sys.stderr.flush()

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
