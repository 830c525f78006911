"""The group-by executes at numpy speed with the same outputs as before: key codes by table look-up or
binary search equal ``col == float(k)``; counts and per-key parts computed for all keys at once give,
for the same seed, the releases of the per-key loop they replace (kept here as the reference:
``arr[col == float(k)]`` per key, the part executed on each key's records in turn; a key no release
counts anything under is never released and draws no noise, and a key's part draws noise only for
the releases that release the key, in both; grid noises are drawn in one call per part over the keys
(``run_repeated``), other noises key after key)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpharness import AddRemove, ApproxDP, RealBox
from dpharness import parts as dp
from dpharness.mechanisms.parts import grouping
from dpharness.mechanisms.parts._base import execute, flatten


# --------------------------------------------------------------------------- the per-key loop, as it was


def _reference_counts(self, value, user=None, kept=None, codes=None):
    arr = np.asarray(value, dtype=float)
    arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
    if kept is not None:
        arr = arr[kept]
    out = np.zeros(len(self.keys), dtype=np.int64)
    if len(arr) == 0:
        return out
    col = arr[:, self.by]
    for i, k in enumerate(self.keys):
        rows = col == float(k)
        out[i] = int(rows.sum()) if user is None else len(np.unique(arr[rows, user]))
    return out


def _reference_release(self, counts, rng, records=None, space=None, codes=None, size=None):
    from dpharness.mechanisms._exact import discrete_laplace

    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim == 1:  # the same counts for every release
        counts = np.tile(counts, (size, 1))
    present = [i for i in range(counts.shape[1]) if counts[:, i].any()]  # only these can be released
    sel = np.zeros(counts.shape)
    noise = discrete_laplace(self.select.t, (len(counts), len(present)), rng)
    for j, i in enumerate(present):
        noisy = noise[:, j].astype(np.int64) + counts[:, i]
        sel[:, i] = np.where((counts[:, i] > 0) & (noisy >= self.select.T), noisy, 0).astype(float)
    if self.part is None:
        return sel
    size, w = len(sel), self.part_width
    arr = np.asarray(records, dtype=float)
    arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
    col = arr[:, self.by] if len(arr) else np.zeros(0)
    vals = np.zeros((size, counts.shape[1], w))
    released = [np.flatnonzero(sel[:, i] != 0) for i in range(counts.shape[1])]  # where each key's part runs

    def run(part, i, k):
        ran = execute(part, arr[col == float(k)], space, len(released[i]), rng)
        return flatten(ran).reshape(len(released[i]), -1)

    leaves = _leaf_parts(self.part)
    if all(hasattr(_steps(p)[-1], "run_repeated") for p in leaves):  # part after part: one draw over the keys
        rel = [(i, k) for i, k in enumerate(self.keys) if len(released[i])]
        for at, part in enumerate(leaves if rel else []):  # (one output each here)
            *pre, noise = _steps(part)
            values = []
            for i, k in rel:  # the key's aggregate, by the steps' own apply on its records
                value = arr[col == float(k)]
                for step in pre:
                    value = step.apply(value)
                values.append(value)
            got = noise.run_repeated(values, [len(released[i]) for i, _ in rel], rng)[:, 0]
            start = 0
            for i, _ in rel:
                vals[released[i], i, at] = got[start : start + len(released[i])]
                start += len(released[i])
    else:  # key after key, the whole part
        for i, k in enumerate(self.keys):
            if len(released[i]):
                vals[released[i], i, :] = run(self.part, i, k)
    blocks = [np.concatenate([sel[:, i : i + 1], vals[:, i, :]], axis=1) for i in range(counts.shape[1])]
    return np.concatenate(blocks, axis=1)


def _leaf_parts(part):
    """The chains of a (nested) compose, in order."""
    return [q for p in part.parts for q in _leaf_parts(p)] if hasattr(part, "parts") else [part]


def _steps(chain):
    out = []
    while hasattr(chain, "second"):
        out.append(chain.first)
        chain = chain.second
    return out + [chain]


def _reference_run(self, value, space, size, rng):
    return self.release(np.tile(self.counts(value), (size, 1)), rng, value, space)


def _reference(monkeypatch):
    monkeypatch.setattr(grouping.GroupBy, "counts", _reference_counts)
    monkeypatch.setattr(grouping.GroupBy, "release", _reference_release)
    monkeypatch.setattr(grouping.GroupBy, "run", _reference_run)


def _same_releases(m, data, monkeypatch, size=40, seed=7):
    fast = m.sample(data, size, np.random.default_rng(seed))
    with monkeypatch.context() as mp:
        _reference(mp)
        slow = m.sample(data, size, np.random.default_rng(seed))
    assert fast.shape == slow.shape
    assert np.array_equal(fast, slow)
    return fast


# --------------------------------------------------------------------------- key codes


@pytest.mark.parametrize(
    "keys",
    [
        range(10),
        (-3, 0, 7, 2),  # integers, a table from -3
        (0.5, -1.25, 3.0),  # not integers: binary search
        (0, 10**6, -5),  # integers spanning more than 2**16: binary search
        (2.0**60, 2.0**60 + 256),  # integers too large for the table
        (Fraction(1, 4), 0),
    ],
)
def test_codes_are_float_equality_with_the_keys(keys):
    g = dp.group_by(by=0, keys=keys, select=dp.partition_select(threshold=2, scale=1))
    kf = [float(k) for k in g.keys]
    rng = np.random.default_rng(0)
    col = np.concatenate(
        [
            np.array(kf),
            np.nextafter(kf, np.inf),
            np.nextafter(kf, -np.inf),
            [-0.0, 0.0, 0.25, 2.5, 1e300, -1e300, 2.0**60 + 1, 2.0**53 + 2, -4.0, 8.0, 5e-324],
            rng.choice(kf, 50) + rng.choice([0.0, 0.5, 1.0], 50),
        ]
    )
    want = np.full(col.size, -1)
    for i, k in enumerate(kf):
        want[col == k] = i
    assert np.array_equal(g.codes(col), want)


# --------------------------------------------------------------------------- the same releases


_SELECT = dp.partition_select(threshold=3, scale=1)


def _record_level(keys, part):
    return dp.mechanism(
        name="per_key",
        records=RealBox(-20, 20, 2),
        relation=AddRemove(),
        steps=dp.group_by(by=0, keys=keys, select=_SELECT, part=part),
        claim=ApproxDP(100, 0.5),
    )


def _data(seed, n=400):
    rng = np.random.default_rng(seed)
    key = rng.choice([0.0, -0.0, 1.0, 2.0, 3.0, 2.5, 7.0, -3.0, 19.0], n)
    return np.column_stack([key, rng.uniform(-20, 20, n)])


_PARTS = {
    "none": None,
    "sum": dp.column(1) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(20),
    "count and sum": dp.compose(
        dp.count() >> dp.laplace(2), dp.clamp(-5, 5) >> dp.column(1) >> dp.sum() >> dp.laplace(10)
    ),
    "nested": dp.compose(
        dp.count() >> dp.discrete_laplace(Fraction(1, 2)),
        dp.compose(dp.column(1) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(20), dp.count() >> dp.laplace(3)),
    ),
}


@pytest.mark.parametrize("part", list(_PARTS))
@pytest.mark.parametrize("keys", [range(10), (2.5, -3.0, 0.0, 19.0, 4.0), (0, 10**6, 7)])
def test_record_level_releases_are_those_of_the_per_key_loop(part, keys, monkeypatch):
    m = _record_level(keys, _PARTS[part])
    out = _same_releases(m, _data(1), monkeypatch)
    assert (out != 0).any()
    _same_releases(m, np.zeros((0, 2)), monkeypatch)
    _same_releases(m, _data(2, n=3), monkeypatch)


@pytest.mark.parametrize("part", ["none", "count and sum"])
@pytest.mark.parametrize("max_records", [1, 40])  # random bounding, and every record kept
def test_user_level_releases_are_those_of_the_per_key_loop(part, max_records, monkeypatch):
    m = dp.mechanism(
        name="per_user",
        records=RealBox(-20, 20, 2),
        relation=dp.AddRemoveUser(user=1),
        steps=dp.bound_contributions(user=1, by=0, max_records=max_records, max_per_partition=40)
        >> dp.group_by(by=0, keys=range(-3, 8), select=_SELECT, part=_PARTS[part]),
        claim=ApproxDP(1000, 0.9),
    )
    data = _data(3, n=300)
    data[:, 1] = np.round(data[:, 1] / 4)  # about ten users, several records each
    _same_releases(m, data, monkeypatch, size=30)


def test_distinct_users_per_key_are_counted_as_np_unique_does():
    g = dp.group_by(by=0, keys=(0, 1, 2), select=_SELECT)
    data = np.array([[0, 5.0], [0, 5.0], [0, -0.0], [0, 0.0], [1, 2.0], [1, 3.0], [2.5, 1.0], [-0.0, 7.0]])
    assert list(g.counts(data, user=1)) == [3, 2, 0]
    assert list(g.counts(data)) == [5, 2, 0]
    kept = np.arange(8) >= 2
    assert list(g.counts(data, user=1, kept=kept)) == [2, 2, 0]
    for user in (None, 1):
        for rows in (None, kept):
            assert np.array_equal(g.counts(data, user, rows), _reference_counts(g, data, user, rows))


# --------------------------------------------------------------------------- contribution bounding, user by user as it was


def _reference_user_groups(arr, b):
    users = arr[:, b.user]
    order = np.lexsort((arr[:, b.by], users))  # users by id, each user's rows by key
    _, starts = np.unique(users[order], return_index=True)
    return np.split(order, starts[1:]) if len(order) else []


def _reference_draws(b, arr, size, rng):
    """The bounding's law written user by user: one uniformly random order of the drawn users' records per
    release (those not kept whatever the order, grouped by increasing id), restricted to each user's
    records (a uniformly random order of them, independent across users), walked by _kept_in_order."""
    groups = [r for r in _reference_user_groups(arr, b) if not grouping._kept_deterministically(arr, r, b)]
    # each user's rows by key, then the other columns (the canonical order: independent of the row order)
    groups = [
        r[np.lexsort((*(arr[r, j] for j in range(arr.shape[1]) if j not in (b.user, b.by)), arr[r, b.by]))]
        for r in groups
    ]
    rows = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
    kept = np.ones((size, len(rows)), dtype=bool)
    chunk = grouping._chunk(len(rows))
    for start in range(0, size if len(rows) else 0, chunk):
        stop = min(size, start + chunk)
        order = rng.permuted(np.tile(np.arange(len(rows), dtype=np.int64), (stop - start, 1)), axis=1)
        rank = np.argsort(order, axis=1, kind="stable")
        at = 0
        for r in groups:
            own = rank[:, at : at + len(r)]
            own_order = np.argsort(np.argsort(own, axis=1, kind="stable"), axis=1, kind="stable")
            kept[start:stop, at : at + len(r)] = grouping._kept_in_order(arr[r, b.by], own_order, b)
            at += len(r)
    return groups, rows, kept


def _reference_user_counts(b, g, arr, size, rng):
    total = np.zeros((size, len(g.keys)), dtype=np.int64)
    key_index = {float(k): i for i, k in enumerate(g.keys)}
    for rows in _reference_user_groups(arr, b):
        if grouping._kept_deterministically(arr, rows, b):
            for k in np.unique(arr[rows, b.by]):
                if float(k) in key_index:
                    total[:, key_index[float(k)]] += 1
    groups, rows, kept = _reference_draws(b, arr, size, rng)
    at = 0
    for r in groups:
        keys, own = arr[r, b.by], kept[:, at : at + len(r)]
        for k in np.unique(keys):
            if float(k) in key_index:
                total[:, key_index[float(k)]] += own[:, keys == k].any(axis=1)
        at += len(r)
    return total


def _reference_kept_rows(b, arr, size, rng):
    mask = np.ones((size, len(arr)), dtype=bool)
    _, rows, kept = _reference_draws(b, arr, size, rng)
    mask[:, rows] = kept
    return mask


@pytest.mark.parametrize("max_records, max_per_partition, max_partitions", [(3, 1, None), (4, 2, 2), (50, 50, None)])
def test_bounding_draws_user_by_user_as_before(max_records, max_per_partition, max_partitions):
    """Users whose records are all kept whatever the order are counted at once; the others' records are
    walked in one random order per release, all users at once, so counts and masks equal the user-by-user
    walk of that order's restriction to each user for the same seed."""
    rng = np.random.default_rng(11)
    users = rng.choice([-0.0, 0.0, 1.0, 2.0, 3.0, 4.5, 7.0, 9.0, 12.0], 200)
    keys = rng.choice([0.0, -0.0, 1.0, 2.0, 3.0, 2.5, 30.0], 200)
    values = rng.integers(0, 3, 200).astype(float)  # a third column: rows of a (user, key) differ in it
    arr = np.column_stack([users, keys, values])
    small = [[20.0, 1.0, 0.0], [21.0, 2.0, 1.0], [21.0, 3.0, 0.0], [22.0, 1.0, 2.0], [22.0, 1.0, 0.0]]
    arr = np.concatenate([arr, small])  # small users
    b = dp.bound_contributions(
        user=0, by=1, max_records=max_records, max_per_partition=max_per_partition, max_partitions=max_partitions
    )
    g = dp.group_by(by=1, keys=range(4), select=_SELECT)
    shuffled = arr[np.random.default_rng(5).permutation(len(arr))]  # deterministic users anywhere in the rows
    for data in (arr, arr[:0], arr[-5:], shuffled):
        assert np.array_equal(
            grouping.user_counts(b, g, data, 25, np.random.default_rng(3)),
            _reference_user_counts(b, g, data, 25, np.random.default_rng(3)),
        )
        assert np.array_equal(
            grouping.kept_rows(b, data, 25, np.random.default_rng(4)),
            _reference_kept_rows(b, data, 25, np.random.default_rng(4)),
        )
        kept = grouping._user_runs(data, b)[2] if len(data) else np.zeros(0, dtype=bool)
        assert kept.tolist() == [grouping._kept_deterministically(data, r, b) for r in _reference_user_groups(data, b)]
