"""dpharness.release on data as teams hold it: one reader for numpy, pandas and Dask (harness/_records.py).

Identities (user ids, keys found in the data) are compared exactly whatever their type, never through a
double; labels found in the data can never make a release raise; missing keys are one key (None) on every
input type; unsupported dtypes are refused by dtype on every input type, with no value in the message; and
the same query returns the same Python type and value from every input type."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dpharness
from dpharness import AddRemove, ApproxDP, PureDP, RealBox, RealInterval, parts as dp
from dpharness.errors import ParameterError, UnsupportedError

pd = pytest.importorskip("pandas")

SEED = 11
BIG = 2**53  # 2**53 and 2**53 + 1 are one double


def _user_level(keys=None, lo=0, hi=1000):
    return dp.mechanism(
        name="users_per_key",
        records=RealBox(lo, hi, 3),  # (user id, key, value)
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=2, max_per_partition=1)
        >> dp.group_by(
            by=1,
            keys=keys,
            select=dp.partition_select(threshold=3, scale=1),
            part=dp.column(2) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(20),
        ),
        claim=ApproxDP(4, 1e-3),
    )


def _record_level(lo=0, hi=1000, part=True):
    return dp.mechanism(
        name="records_per_key",
        records=RealBox(lo, hi, 2),  # (value, key)
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=3, scale=1),
            part=dp.column(0) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(10) if part else None,
        ),
        claim=ApproxDP(2, 1e-3),
    )


def _dask(frame, n):
    dd = pytest.importorskip("dask.dataframe")
    return dd.from_pandas(frame, npartitions=n)


def _objects_kept():
    """Dask's setting that keeps object columns as objects (a frame built from pandas turns them into
    strings by default), or None without the dask extra: a test then compares pandas and numpy only (the
    Dask stage of .ci/run, which requires dask, compares Dask too)."""
    try:
        import dask
    except ImportError:  # pragma: no cover - the Dask stage of .ci/run requires dask
        return None
    return dask.config.set({"dataframe.convert-string": False})


def _release(m, data):
    import contextlib

    try:
        import dask

        ctx = dask.config.set(scheduler="synchronous")
    except ImportError:  # pragma: no cover - the Dask stage of .ci/run requires dask
        ctx = contextlib.nullcontext()
    with ctx:
        return dpharness.release(m, data, seed=SEED)


def test_user_ids_beyond_2_53_are_distinct_users():
    """Two users with ids 2**53 and 2**53 + 1 (one double) are two users: the release equals the release
    with the same users renamed 0..U-1 in the same order (bounding and selection read ids only through
    equality and order). On the double-reading path they merged into one user."""
    rng = np.random.default_rng(SEED)
    n = 400
    small = rng.integers(0, 60, n)
    key = rng.integers(0, 4, n).astype(float)
    value = rng.uniform(0, 10, n)
    ranks = np.unique(small, return_inverse=True)[1].reshape(-1)
    big = np.array([BIG + int(u) for u in small], dtype=np.int64)  # ids 2**53 .. 2**53 + 59
    want = _release(_user_level(), pd.DataFrame({"u": ranks.astype(float), "k": key, "v": value}))
    frame = pd.DataFrame({"u": big, "k": key, "v": value})
    assert _release(_user_level(), frame) == want
    assert _release(_user_level(), frame.assign(u=frame["u"].astype(str).str.zfill(20))) == want  # strings
    assert _release(_user_level(), frame.assign(u=frame["u"].astype("category"))) == want
    assert _release(_user_level(), np.column_stack([big.astype(object), key, value])) == want  # numpy, exact ints


def test_missing_user_ids_are_refused_by_column_without_values():
    frame = pd.DataFrame({"u": pd.array([1, None, 3], dtype="Int64"), "k": [1.0, 1.0, 2.0], "v": [1.0, 2.0, 3.0]})
    with pytest.raises(ParameterError, match="user column") as e:
        _release(_user_level(), frame)
    assert "1.0" not in str(e.value) and "3" not in str(e.value).replace("column 0", "")


def test_int64_keys_beyond_2_53_are_two_keys_released_exactly():
    rng = np.random.default_rng(SEED)
    keys = np.array([BIG, BIG + 1] * 200, dtype=np.int64)
    frame = pd.DataFrame({"x": rng.uniform(0, 10, 400), "k": keys})
    got = _release(_record_level(part=False), frame)
    assert list(got) == [BIG, BIG + 1] and BIG + 1 in got and float(BIG + 1) == BIG  # two keys, one double
    assert [type(k) for k in got] == [float, int]  # a number is released as a double when one holds it exactly
    for n in (1, 4, 7):
        assert _release(_record_level(part=False), _dask(frame, n)) == got
    records = np.empty((400, 2), dtype=object)  # a numpy object array holding the exact ints
    records[:, 0], records[:, 1] = frame["x"].to_numpy(), keys.tolist()
    assert _release(_record_level(part=False), records) == got


def test_ids_and_keys_no_double_holds_are_identities_not_a_raise():
    """A user id or key beyond the largest double (10**400 as an int, a Decimal or a Fraction) is an identity
    held exactly: the release equals the one with the same users renamed in the same order (it raised
    OverflowError, so one added user made the release raise while its neighbour released)."""
    from decimal import Decimal
    from fractions import Fraction

    rng = np.random.default_rng(SEED)
    n = 120
    small = rng.integers(0, 40, n)
    key = rng.integers(0, 3, n).astype(float)
    value = rng.uniform(0, 10, n)
    want = _release(_user_level(), pd.DataFrame({"u": small.astype(float), "k": key, "v": value}))
    for huge in (10**400, Decimal("1e400"), Fraction(10**400, 3)):
        users = pd.Series([huge * (1 + int(u)) for u in small], dtype=object)
        frame = pd.DataFrame({"u": users, "k": key, "v": value})
        assert _release(_user_level(), frame) == want
        assert _release(_user_level(), np.column_stack([users.to_numpy(), key, value])) == want
        keys = pd.Series([huge * (1 + int(k)) for k in key], dtype=object)
        got = _release(_record_level(part=False), pd.DataFrame({"x": value, "k": keys}))
        assert set(got) <= {huge * (1 + k) for k in range(3)} and got


def test_a_new_label_or_a_box_above_zero_never_makes_a_release_raise():
    """Labels found in the data are identities, not positions in the numeric box: one added record with a
    new label, or records declared above 0, release (the release raised on one neighbour before)."""
    rng = np.random.default_rng(SEED)
    frame = pd.DataFrame({"x": rng.uniform(5, 6, 300), "k": rng.choice(["FR", "DE", "IT"], 300)})
    neighbour = pd.concat([frame, pd.DataFrame({"x": [5.5], "k": ["only-one-record"]})], ignore_index=True)
    for m in (_record_level(part=False), _record_level(lo=5, hi=6, part=False)):
        a, b = _release(m, frame), _release(m, neighbour)
        assert set(a) <= {"FR", "DE", "IT"} and set(b) <= {"FR", "DE", "IT", "only-one-record"}
        assert _release(m, _dask(neighbour, 3)) == b


def test_missing_keys_are_one_key_none_on_every_input_type():
    """None, NaN, NaT and pd.NA in a key column are the key None, a key like any other."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(0, 10, 300)
    labels = np.array(["a", "b", None], dtype=object)[rng.integers(0, 3, 300)]
    frame = pd.DataFrame({"x": x, "k": labels})
    got = _release(_record_level(part=False), frame)
    assert set(got) == {"a", "b", None}
    nan_frame = frame.assign(k=[float("nan") if v is None else v for v in labels])
    assert _release(_record_level(part=False), nan_frame) == got
    assert _release(_record_level(part=False), frame.assign(k=[pd.NA if v is None else v for v in labels])) == got
    assert _release(_record_level(part=False), frame.assign(k=[pd.NaT if v is None else v for v in labels])) == got
    assert _release(_record_level(part=False), np.column_stack([x.astype(object), labels])) == got
    assert _release(_record_level(part=False), _dask(frame, 4)) == got
    # a nullable integer column with pd.NA: numbers and None, no switch to another path
    ints = pd.array(np.where(labels == None, None, np.where(labels == "a", 1, 2)).tolist(), dtype="Int64")  # noqa: E711
    got_ints = _release(_record_level(part=False), frame.assign(k=ints))
    assert set(got_ints) == {1.0, 2.0, None}
    assert [got_ints[k] for k in (1.0, 2.0, None)] == [got[k] for k in ("a", "b", None)]


def test_keys_are_normalised_once_on_every_input_type():
    """-0.0 is the key 0.0 and True the key 1.0, released as the same Python float from every input."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(0, 10, 200)
    k = np.where(rng.integers(0, 2, 200) == 1, -0.0, 1.0)
    want = _release(_record_level(part=False), np.column_stack([x, np.abs(k)]))
    assert list(want) == [0.0, 1.0] and all(type(v) is float for v in want)
    assert _release(_record_level(part=False), pd.DataFrame({"x": x, "k": k})) == want
    assert _release(_record_level(part=False), _dask(pd.DataFrame({"x": x, "k": k}), 3)) == want
    booleans = pd.DataFrame({"x": x, "k": k == 1.0})
    assert _release(_record_level(part=False), booleans) == want
    assert all(type(v) is float for v in _release(_record_level(part=False), booleans))


@pytest.mark.parametrize("dtype", ["complex128", "timedelta64[ns]", "datetime64[ns]"])
def test_unsupported_dtypes_are_refused_everywhere_by_dtype(dtype):
    m = dp.mechanism(
        name="total",
        records=RealInterval(-10, 10),
        relation=AddRemove(),
        steps=dp.sum() >> dp.laplace(10),
        claim=PureDP(2),
    )
    values = np.array([1, 2, 3]).astype(dtype)
    for data in (values, pd.DataFrame({"v": values}), _dask(pd.DataFrame({"v": values}), 2)):
        with pytest.raises(ParameterError, match="dtype") as e:
            _release(m, data)
        assert "1" not in str(e.value).replace("64", "").replace("128", "")  # no value in the message
    with pytest.raises(ParameterError, match="dtype"):
        m.sample(values, 1, np.random.default_rng(0))


def test_a_scalar_release_is_a_float_on_every_input_type():
    m = dp.mechanism(
        name="total",
        records=RealInterval(-10, 10),
        relation=AddRemove(),
        steps=dp.sum() >> dp.laplace(10),
        claim=PureDP(2),
    )
    x = np.random.default_rng(SEED).uniform(-10, 10, 50)
    got = [_release(m, x), _release(m, pd.DataFrame({"v": x})), _release(m, _dask(pd.DataFrame({"v": x}), 3))]
    assert all(type(v) is float for v in got) and got[0] == got[1] == got[2]


def test_integers_beyond_2_53_in_a_number_column_are_refused_on_every_input_type():
    m = dp.mechanism(
        name="total",
        records=RealBox(0, 2.0**60, 1),
        relation=AddRemove(),
        steps=dp.clamp(0, 1) >> dp.sum() >> dp.laplace(10),
        claim=PureDP(1),
    )
    values = np.array([BIG + 1, 3], dtype=np.int64)
    for data in (values, pd.DataFrame({"v": values}), _dask(pd.DataFrame({"v": values}), 2)):
        with pytest.raises(ParameterError, match="beyond 2\\*\\*53") as e:
            _release(m, data)
        assert str(BIG + 1) not in str(e.value)


def test_dask_refuses_an_unstreamed_structure_before_reading_and_names_no_key():
    """Refused from the structure alone: no partition is read (the complex column would be refused if it
    were), and the message names no key found in the data."""
    frame = pd.DataFrame({"u": [1, 2], "k": ["secret-label", "other"], "v": np.array([1, 2], dtype=complex)})
    reads_user = dp.mechanism(
        name="sums_user_ids",
        records=RealBox(0, 1000, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=2, max_per_partition=1)
        >> dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=3, scale=1),
            part=dp.column(0) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(20),
        ),
        claim=ApproxDP(4, 1e-3),
    )
    sampled = dp.mechanism(
        name="sampled",
        records=RealBox(0, 1000, 3),
        relation=AddRemove(),
        steps=dp.poisson_sample(0.5) >> dp.count() >> dp.laplace(1),
        claim=PureDP(1),
    )
    for m in (reads_user, sampled):
        with pytest.raises(UnsupportedError, match="not streamed") as e:
            _release(m, _dask(frame, 2))
        assert "secret-label" not in str(e.value)


@pytest.mark.parametrize("seed", range(6))
def test_no_neighbour_raises_where_the_other_releases(seed):
    """Each family with keys found in the data, on random frames of mixed labels (strings, ints beyond
    2**53, floats, None, NaN), against the frame with one record (or one user) added: both release."""
    rng = np.random.default_rng(seed)
    pool = ["a", "b", BIG, BIG + 1, 2.5, -0.0, None, float("nan"), True]
    n = int(rng.integers(0, 40))
    keys = [pool[i] for i in rng.integers(0, len(pool), n)]
    users = rng.integers(0, 10, n) + BIG
    frame = pd.DataFrame({"u": users, "k": pd.Series(keys, dtype=object), "v": rng.uniform(5, 6, n)})
    extra = pd.DataFrame(
        {"u": [BIG + 99], "k": pd.Series([pool[int(rng.integers(0, len(pool)))]], dtype=object), "v": [5.5]}
    )
    bigger = pd.concat([frame, extra], ignore_index=True)
    for data in (frame, bigger):
        _release(_user_level(), data)
        _release(_record_level(), data[["v", "k"]])
        _release(_record_level(part=False), _dask(data[["v", "k"]], 3))
        _release(_user_level(lo=5, hi=6), data)


_LABELS = ["a", "b", "zz", BIG, BIG + 1, BIG + 2, -(BIG + 1), 2.5, -0.0, 0, True, None, float("nan"), pd.NA]


def _canonical(v):
    """The identity a value stands for: missing values one, -0.0 and 0, True and 1 one."""
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return ("missing",)
    if isinstance(v, (bool, int, float)):
        return ("number", v + 0)
    return ("label", v)


def _ranked(values):
    """Each value's rank among the distinct identities (numbers by value, then labels, missing last)."""
    kinds = {"number": 0, "label": 1, "missing": 2}
    ident = sorted({_canonical(v) for v in values}, key=lambda c: (kinds[c[0]], *c[1:]))
    index = {c: i for i, c in enumerate(ident)}
    return np.array([float(index[_canonical(v)]) for v in values])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(st.sampled_from(_LABELS), min_size=0, max_size=60),
    users=st.lists(st.sampled_from([0, 1, 2, BIG, BIG + 1, -(2**62), "u1", "u2"]), min_size=60, max_size=60),
    added=st.sampled_from(_LABELS),
)
def test_identity_columns_are_read_exactly_property(keys, users, added):
    """Property: the release on identity columns of any mix of types (strings, ints beyond 2**53, -0.0,
    True, None, NaN, pd.NA) is the release on their ranks (read exactly: equality and order only), and the
    neighbour with one more record or user releases too (no input makes one neighbour raise)."""
    n = len(keys)
    v = np.linspace(0, 10, n)
    u = users[:n]
    frame = pd.DataFrame({"u": pd.Series(u, dtype=object), "k": pd.Series(keys, dtype=object), "v": v})
    ranked = pd.DataFrame({"u": _ranked(u), "k": _ranked(keys), "v": v})
    by_key = _release(_record_level(), frame[["v", "k"]])
    assert list(by_key.values()) == list(_release(_record_level(), ranked[["v", "k"]]).values())
    by_user = _release(_user_level(), frame)
    assert list(by_user.values()) == list(_release(_user_level(), ranked).values())
    bigger = pd.concat(
        [
            frame,
            pd.DataFrame(
                {"u": pd.Series(["new-user"], dtype=object), "k": pd.Series([added], dtype=object), "v": [5.0]}
            ),
        ],
        ignore_index=True,
    )
    _release(_record_level(), bigger[["v", "k"]])
    _release(_user_level(), bigger)


@pytest.mark.parametrize("keys", [None, ["DE", "ES", "FR", "IT", "PT"]])
def test_user_level_group_by_on_dask_is_the_pandas_release_for_any_partitioning(keys):
    """User-level bounding streamed: users kept whatever the order counted where their records lie (per
    (user, key) counts merged by buckets of users), the others gathered and drawn once in the canonical order: the release equals the pandas release (same
    seed, exact type and value) for 1, 4 and 7 partitions, users split across the input's partitions, and
    empty partitions; ids beyond 2**53 and string keys."""
    dask = pytest.importorskip("dask")

    rng = np.random.default_rng(SEED)
    n = 3_000
    users = rng.integers(0, 400, n) + BIG  # ~7.5 rows a user: many users are drawn
    country = rng.choice(["FR", "DE", "IT", "ES"], n, p=[0.4, 0.3, 0.2, 0.1])
    frame = pd.DataFrame({"u": users, "k": country, "v": rng.uniform(0, 12, n)})
    m = dp.mechanism(
        name="users_per_country",
        records=RealBox(0, 1000, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=4, max_per_partition=2)
        >> dp.group_by(
            by=1,
            keys=keys,
            select=dp.partition_select(threshold=20, scale=2),
            part=dp.compose(dp.count() >> dp.laplace(8), dp.column(2) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(80)),
        ),
        claim=ApproxDP(5, 1e-4),
    )
    want = _release(m, frame)
    assert {"FR", "DE", "IT"} <= set(want)
    for parts in (1, 4, 7):
        assert _release(m, _dask(frame, parts)) == want
    dd = pytest.importorskip("dask.dataframe")
    empty = dd.from_pandas(frame.iloc[:0], npartitions=1)
    with dask.config.set(scheduler="synchronous"):
        assert dpharness.release(m, dd.concat([empty, _dask(frame, 3), empty]), seed=SEED) == want
    part_less = dp.mechanism(
        name="users_per_country_only",
        records=RealBox(0, 1000, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=3, max_per_partition=1)
        >> dp.group_by(by=1, keys=keys, select=dp.partition_select(threshold=20, scale=2)),
        claim=ApproxDP(3, 1e-4),
    )
    want = _release(part_less, frame)
    assert _release(part_less, _dask(frame, 5)) == want and want


def _user_frame(users: str, rng: np.random.Generator, n: int = 2_400) -> "pd.DataFrame":
    """~6 rows a user over 4 keys, rows in random order (each user's rows spread over the partitions)."""
    ids = np.arange(400)
    if users == "strings":
        names = np.array([f"user-{i}" for i in ids], dtype=object)
    elif users == "big":
        names = ids.astype(np.int64) + BIG  # int64 ids that are not doubles exactly
    elif users == "floats":
        names = ids * 0.5 - 100.0  # float ids, -0.0 among them in some rows and 0.0 in others (one user)
    elif users == "unsigned":
        names = ids.astype(np.uint64)  # doubles exactly: read as a float array
    else:
        names = ids.astype(np.int64)  # doubles exactly: read as a float array
    owner = rng.integers(0, len(ids), n)
    frame = pd.DataFrame({"u": names[owner], "k": rng.choice([0.0, 1.0, 2.0, 7.0], n), "v": rng.uniform(0, 12, n)})
    if users == "floats":
        zero = np.flatnonzero(frame["u"].to_numpy() == 0.0)
        frame.loc[frame.index[zero[::2]], "u"] = -0.0
    if users == "mixed":  # the first half holds small ids only (a float array), the second also ids beyond 2**53
        extra = pd.DataFrame({"u": np.full(40, BIG + 3, dtype=np.int64), "k": 1.0, "v": 1.0})
        frame = pd.concat([frame, extra], ignore_index=True)
    return frame


@pytest.mark.parametrize("keys", ["declared", "found"])
@pytest.mark.parametrize("users", ["small", "big", "floats", "unsigned", "mixed", "strings"])
@pytest.mark.parametrize("bounds", [(4, 2, None), (3, 1, 2), (40, 40, None)])
def test_user_level_on_dask_bounds_in_place_as_in_memory(users, bounds, keys, monkeypatch):
    """Users within the bounds are counted where their records lie, the others are gathered and drawn: the
    release is the pandas release, of the same type and value, for 1, 4 and 7 partitions and with empty
    partitions, whatever the type of the user ids (ids read as doubles, as int64 beyond 2**53, strings,
    and a column read as doubles in some partitions and as int64 in others, the same user in both), with
    and without a bound on the keys per user, and when no user is over a bound. Declared numeric keys
    with numbers that are none of them (7.0: dropped, but a key of its own for the bounds), and keys found
    in the data, a missing one among them (found while counting, in some partitions only)."""
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(SEED)
    frame = _user_frame(users, rng)
    if keys == "found":
        frame.loc[frame.index[-30:], "k"] = np.nan  # the key None, in the last partitions only
    k, m_, l_ = bounds
    m = dp.mechanism(
        name="users_per_key",
        records=RealBox(0, 1000, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=k, max_per_partition=m_, max_partitions=l_)
        >> dp.group_by(
            by=1,
            keys=[0.0, 1.0, 2.0] if keys == "declared" else None,
            select=dp.partition_select(threshold=20, scale=2),
            part=dp.compose(dp.count() >> dp.laplace(8), dp.column(2) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(80)),
        ),
        claim=ApproxDP(200, 1e-2),
    )
    want = _release(m, frame)
    assert want
    from dpharness import _release as module

    searched = []  # number ids are searched in the users over a bound, not read as identities
    original = module._in_sorted
    monkeypatch.setattr(module, "_in_sorted", lambda v, o, f=None: searched.append(len(v)) or original(v, o, f))
    for parts in (1, 4, 7):
        _same(_release(m, _dask(frame, parts)), want)
    empty = dd.from_pandas(frame.iloc[:0], npartitions=1)
    _same(_release(m, dd.concat([empty, _dask(frame, 3), empty])), want)
    if users != "mixed":  # (mixed: searched where every partition reads the ids alike, 1 partition)
        assert bool(searched) is (users != "strings"), searched


@pytest.mark.parametrize("kind", ["int64", "float64"])
def test_member_filter_search_is_exact(kind):
    """The bit filter in front of the search of the users over a bound lets every one of them through and
    changes no answer: the same membership as np.isin, for int64 ids across the whole range and float ids
    (0.0, large and tiny doubles, integers held as doubles with trailing zero bits)."""
    from dpharness._release import _in_sorted, _member_filter

    rng = np.random.default_rng(SEED)
    if kind == "int64":
        pool = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 40_000, dtype=np.int64), np.arange(-50, 50)])
        pool = np.concatenate([pool, np.array([-(2**63), 2**63 - 1], dtype=np.int64)])
    else:
        pool = np.concatenate([rng.normal(0, 1e6, 20_000), np.arange(20_000) * 1.0, [0.0, 5e-324, -5e-324, 1e308]])
    pool = np.unique(pool)
    over = np.unique(rng.choice(pool, len(pool) // 3, replace=False))
    filt = _member_filter(over)
    assert filt is not None
    values = rng.choice(pool, 200_000)
    assert np.array_equal(_in_sorted(values, over, filt), np.isin(values, over))
    assert _in_sorted(over, over, filt).all()


def test_user_level_on_dask_with_many_users_over_a_bound(monkeypatch):
    """Thousands of users over a bound (their ids searched through the bit filter, the buckets' pairs
    summed by one packed sort): the release is the pandas release for 1, 3 and 6 partitions."""
    pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(SEED)
    n = 30_000
    owner = rng.integers(0, 5_000, n)
    frame = pd.DataFrame({"u": owner * 7 + 1, "k": rng.choice([0.0, 1.0, 2.0], n), "v": rng.uniform(0, 12, n)})
    m = dp.mechanism(
        name="many_over",
        records=RealBox(0, 40_000, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=4, max_per_partition=2)
        >> dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=20, scale=2),
            part=dp.compose(dp.count() >> dp.laplace(8), dp.column(2) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(80)),
        ),
        claim=ApproxDP(200, 1e-2),
    )
    from dpharness import _release as module

    built = []
    original = module._member_filter
    monkeypatch.setattr(module, "_member_filter", lambda o: built.append(original(o)) or built[-1])
    assert (np.bincount(owner) > 4).sum() > 1024  # enough users over a bound for the filter to be built
    want = _release(m, frame)
    assert want
    for parts in (1, 3, 6):
        _same(_release(m, _dask(frame, parts)), want)
    assert len(built) == 3 and all(f is not None for f in built)


def test_identities_hash_alike_in_every_representation():
    """The bucket of a user is the same whichever representation its partition reads its id in."""
    from dpharness._records import identities_of, identity_hash

    as_floats = identity_hash(identities_of(np.array([5, 2**60], dtype=np.int64) // 1, "u", "d")[1])
    small = identity_hash(identities_of(np.array([5, 7], dtype=np.int64), "u", "d")[1])
    big = identity_hash(identities_of(np.array([5, BIG + 1], dtype=np.int64), "u", "d")[1])
    objects = identity_hash(identities_of(np.array([5, BIG + 1, "a"], dtype=object), "u", "d")[1])
    assert as_floats[0] == small[0] == big[0] and BIG + 1 != 5
    assert set(big.tolist()) <= set(objects.tolist())
    assert identity_hash(["user-1"])[0] == identity_hash(["user-1", 3.0])[0]


def _same(a, b):
    """Exact type, shape, dtype and value (no broadcasting), recursively through mappings and tuples."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b) and all(type(k) is type(j) for k, j in zip(a, b))
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple):
        assert len(a) == len(b) and all(_same(x, y) is None for x, y in zip(a, b))
    elif isinstance(a, np.ndarray):
        assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("case", ["scalar", "compose", "histogram", "group_by_in_compose", "keys_found"])
def test_one_output_for_every_input_type(case):
    """The same Python type, shape, dtype and value from a numpy array, a pandas frame and a Dask frame (1
    and 3 partitions), for each released structure."""
    rng = np.random.default_rng(SEED)
    x = np.column_stack([rng.uniform(0, 100, 600), rng.integers(0, 4, 600).astype(float)])
    box = RealBox(0, 100, 2)
    steps = {
        "scalar": dp.column(0) >> dp.sum() >> dp.laplace(100),
        "compose": dp.compose(dp.column(0) >> dp.sum() >> dp.laplace(100), dp.count() >> dp.laplace(2)),
        "histogram": dp.column(0) >> dp.histogram(edges=[0, 25, 50, 100]) >> dp.laplace(2),
        "group_by_in_compose": dp.compose(
            dp.count() >> dp.laplace(2),
            dp.group_by(by=1, keys=[0, 1, 2, 3], select=dp.partition_select(threshold=10, scale=1)),
        ),
        "keys_found": dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=10, scale=1)),
    }[case]
    m = dp.mechanism(name=case, records=box, relation=AddRemove(), steps=steps, claim=ApproxDP(30, 1e-3))
    frame = pd.DataFrame({"v": x[:, 0], "k": x[:, 1]})
    want = _release(m, x)
    for data in (frame, _dask(frame, 1), _dask(frame, 3)):
        _same(_release(m, data), want)


def test_the_guides_parquet_release_on_dask_runs(tmp_path, monkeypatch):
    """The releasing section's user-level release from parquet on Dask (docs/guide/declaring.rst, the
    ``needs-dask`` block) runs as written and releases what pandas releases from the same file."""
    import os
    import sys

    pytest.importorskip("dask.dataframe")
    sys.path.insert(0, os.path.dirname(__file__))
    from test_docs_guide import guide_blocks

    (code,) = [c for c, options in guide_blocks("declaring") if options.get("class") == "needs-dask"]
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "guide/declaring.rst", "exec"), namespace)
    released = namespace["released"]
    assert set(released) == {"FR", "DE", "IT"}
    frame = pd.read_parquet(tmp_path / "visits.parquet")
    assert dpharness.release(namespace["per_country"], frame, seed=1) == released
    for r in released.values():
        assert 45_000 < r.sum / r.count < 55_000  # Gamma(2, 25 000) clamped: a mean near 50 000


def test_a_column_a_part_reads_as_a_value_is_never_an_identity():
    """Stand-ins move with the other values present (adding one label shifts every rank), so a key or user
    column that a part reads as a value is read as numbers (exact doubles), never as stand-ins: otherwise
    one added record would move every key's released sum. Labels there are refused by dtype."""
    m = dp.mechanism(
        name="sums_the_keys",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=3, scale=1),
            part=dp.column(1) >> dp.clamp(0, 1000) >> dp.sum() >> dp.laplace(1000),
        ),
        claim=ApproxDP(3, 1e-3),
    )
    rng = np.random.default_rng(SEED)
    x = np.column_stack([rng.uniform(0, 10, 300), rng.choice([10.0, 20.0, 700.0], 300)])
    got = _release(m, pd.DataFrame({"v": x[:, 0], "k": x[:, 1]}))
    assert got == _release(m, x) and set(got) <= {10.0, 20.0, 700.0}
    assert got[700.0].sum > 10 * got[10.0].sum  # the keys' own values are summed, not stand-ins
    with pytest.raises(ParameterError, match="dtype"):
        _release(m, pd.DataFrame({"v": [1.0], "k": ["a-label"]}))
    from dpharness._records import reader

    assert reader(m).identities == {} and set(reader(_record_level()).identities) == {1}
    assert set(reader(_user_level()).identities) == {0, 1}


def test_an_integer_record_beyond_the_domain_is_refused_on_every_input_type():
    """IntegerRange(0, 2**53): the record 2**53 + 1 is outside it on numpy, pandas and Dask alike (pandas
    and Dask read it through a double before, where it became 2**53, inside the domain)."""
    from dpharness import IntegerRange

    m = dp.mechanism(
        name="count_ints",
        records=IntegerRange(0, 2**53),
        relation=AddRemove(),
        steps=dp.count() >> dp.laplace(1),
        claim=PureDP(1),
    )
    bad = np.array([BIG + 1, 5], dtype=np.int64)
    for data in (bad, pd.DataFrame({"a": bad}), _dask(pd.DataFrame({"a": bad}), 2)):
        with pytest.raises(ParameterError, match="outside the domain") as e:
            _release(m, data)
        assert str(BIG + 1) not in str(e.value)
    good = np.array([BIG, 5], dtype=np.int64)
    got = [_release(m, d) for d in (good, pd.DataFrame({"a": good}), _dask(pd.DataFrame({"a": good}), 2))]
    assert all(type(v) is float for v in got) and got[0] == got[1] == got[2]


def test_a_fraction_in_integer_records_is_refused_never_truncated():
    """IntegerRange records read from a float column: 1.5 (or NaN, or ±inf) is outside the domain and refused
    on every input type, naming the column and no value, as ``m.sample`` refuses it; the release read it
    into int64 before (1.5 released as the record 1, NaN as -2**63). Whole floats are the integers."""
    from dpharness import IntegerRange

    m = dp.mechanism(
        name="sum_ints",
        records=IntegerRange(0, 10),
        relation=AddRemove(),
        steps=dp.sum() >> dp.laplace(10),
        claim=PureDP(1),
    )
    with pytest.raises(ParameterError, match="outside the domain"):
        m.sample(np.array([1.5, 2.0]), 1, np.random.default_rng(SEED))
    for bad in ([1.5, 2.0], [float("nan"), 2.0], [float("inf"), 2.0], [2.0**64, 2.0]):
        frame = pd.DataFrame({"a": bad})
        for data in (np.array(bad), frame, frame.astype(object), _dask(frame, 2)):
            with pytest.raises(ParameterError, match="not integers") as e:
                _release(m, data)
            assert "1.5" not in str(e.value) and "column" in str(e.value)
    whole = np.array([1.0, 2.0])
    want = _release(m, np.array([1, 2]))
    assert [_release(m, d) for d in (whole, pd.DataFrame({"a": whole}), _dask(pd.DataFrame({"a": whole}), 2))] == [
        want
    ] * 3


def test_complex_and_decimal_nan_labels_never_make_one_neighbour_raise():
    """A key, user or label column of objects holding, in one record, a complex number, Decimal('NaN') or a
    signalling Decimal('sNaN'): the neighbour with that record releases, the same on pandas, numpy and Dask
    (it raised: complex numbers were refused by value, and the sNaN raised from pandas' own missing-value
    check). A complex number is a value like any other (``1+0j`` is the number 1.0, as ``True`` is); a
    Decimal NaN of either kind is missing (the key None, like NaN); a label that is not a key is dropped."""
    from decimal import Decimal

    rng = np.random.default_rng(SEED)
    n = 120
    frame = pd.DataFrame(
        {
            "u": pd.Series(rng.integers(0, 40, n), dtype=object),
            "k": pd.Series(rng.choice(np.array(["a", "b", 1.0], dtype=object), n), dtype=object),
            "v": rng.uniform(0, 10, n),
        }
    )
    for odd, read_as in ((1 + 0j, 1.0), (complex(1, 2), None), (Decimal("NaN"), None), (Decimal("sNaN"), None)):
        user = 999 if isinstance(odd, Decimal) else odd  # a missing user id is refused (documented)
        added = pd.DataFrame({"u": pd.Series([user], dtype=object), "k": pd.Series([odd], dtype=object), "v": [5.0]})
        bigger = pd.concat([frame, added], ignore_index=True)
        for m, data in (
            (_record_level(part=False), bigger[["v", "k"]]),
            (_user_level(), bigger),
            (_user_level(keys=["a", "b"]), bigger),
        ):
            got = _release(m, data)
            kept = _objects_kept()
            if kept is not None:
                with kept:  # the objects as they are
                    assert _release(m, _dask(data, 3)) == got
            assert _release(m, data.to_numpy(dtype=object)) == got
            if isinstance(odd, Decimal) or odd == 1.0:  # the same release as the value it reads as
                twin = data.assign(k=pd.Series([*data["k"][:n], read_as], dtype=object))
                assert _release(m, twin) == got


def test_decimal_ids_and_keys_are_the_numbers_they_equal_on_every_input_type():
    """User ids and keys held as ``Decimal`` in some rows and as ints or floats in others (equal values):
    one user and one key each, the release of the plain numbers on pandas and Dask, whatever the rows' order.
    Before, a Decimal was a label, not a number: the users drew in another order (another release), a
    key was named by whichever of its spellings came first, and on Dask the equal ids hashed to different
    buckets (one user counted in two: an IndexError here, and a user over a bound could pass as two)."""
    from decimal import Decimal

    rng = np.random.default_rng(SEED)
    n = 200
    u, k, v = rng.integers(0, 30, n), rng.integers(0, 2, n).astype(float), rng.uniform(0, 10, n)
    plain = pd.DataFrame({"u": u, "k": k, "v": v})
    mixed = pd.DataFrame(
        {
            "u": pd.Series([Decimal(int(x)) if i % 2 else int(x) for i, x in enumerate(u)], dtype=object),
            "k": pd.Series([Decimal(int(x)) if i % 2 else x for i, x in enumerate(k)], dtype=object),
            "v": v,
        }
    )
    want = _release(_user_level(), plain)
    want_keys = _release(_record_level(part=False), plain[["v", "k"]])
    assert [type(key) for key in want_keys] == [float, float]
    kept = _objects_kept()
    inputs = [mixed, mixed.iloc[::-1]]
    with kept if kept is not None else contextlib.nullcontext():
        if kept is not None:
            inputs += [_dask(mixed, 4), _dask(mixed.iloc[::-1], 3)]
        for data in inputs:
            assert _release(_user_level(), data) == want
            got = _release(_record_level(part=False), data[["v", "k"]])
            assert got == want_keys and [type(key) for key in got] == [float, float]


def test_an_unhashable_value_is_dropped_as_a_label_and_refused_as_an_identity_by_column():
    """A list in one record: a label column drops it (no label can make a release raise); a key or user
    column, whose values are compared as hashable values, refuses it with a ParameterError naming the column
    and the fix, never the value (it raised pandas' TypeError before)."""
    rng = np.random.default_rng(SEED)
    n = 60
    frame = pd.DataFrame(
        {
            "u": rng.integers(0, 20, n),
            "k": pd.Series(rng.choice(["a", "b"], n), dtype=object),
            "v": rng.uniform(0, 10, n),
        }
    )
    odd = pd.DataFrame({"u": [7], "k": pd.Series([["secret"]], dtype=object), "v": [5.0]})
    bigger = pd.concat([frame, odd], ignore_index=True)
    labelled = _user_level(keys=["a", "b"])
    assert _release(labelled, bigger) == _release(labelled, bigger.assign(k=bigger["k"].where(bigger.index < n, "zz")))
    for m, data in ((_user_level(), bigger), (_record_level(part=False), bigger[["v", "k"]])):
        with pytest.raises(ParameterError, match="column 'k'.*hashable") as e:
            _release(m, data)
        assert "secret" not in str(e.value)


def test_integer_records_group_by_their_exact_keys_and_drop_undeclared_labels():
    """IntegerRange records, one key column. Declared labels: a label that is not a key is dropped (its drop
    number was 1.5, which the integer records truncated to the position 1: 'IT' was counted as 'DE').
    Keys found in the data: the integers present, read as numbers in the domain; a label or an integer
    outside the domain is refused like any record outside it (they were evenly spaced stand-ins, which the
    integer records truncated: 20 labels released as 2 merged keys, 0..11 as the keys 0 and 11)."""
    from dpharness import IntegerRange

    def by_key(keys):
        return dp.mechanism(
            name="per_key_ints",
            records=IntegerRange(0, 10),
            relation=AddRemove(),
            steps=dp.group_by(by=0, keys=keys, select=dp.partition_select(threshold=3, scale=1)),
            claim=ApproxDP(4, 1e-3),
        )

    declared = pd.DataFrame({"k": ["FR"] * 50 + ["DE"] * 50})
    with_it = pd.concat([declared, pd.DataFrame({"k": ["IT"] * 500})], ignore_index=True)
    want = _release(by_key(["FR", "DE"]), declared)
    assert _release(by_key(["FR", "DE"]), with_it) == want
    assert _release(by_key(["FR", "DE"]), _dask(with_it, 3)) == want
    rng = np.random.default_rng(SEED)
    ints = rng.integers(0, 11, 600)
    got = _release(by_key(None), pd.DataFrame({"k": ints}))
    assert set(got) <= set(range(11)) and len(got) == 11
    assert _release(by_key(None), _dask(pd.DataFrame({"k": ints}), 3)) == got
    assert _release(by_key(None), ints) == got
    for bad, word in (
        (pd.DataFrame({"k": [f"L{i:02d}" for i in range(20)] * 30}), "non-numbers"),
        (pd.DataFrame({"k": np.append(ints, 11)}), "outside the domain"),
    ):
        for data in (bad, _dask(bad, 2)):
            with pytest.raises(ParameterError, match=word):
                _release(by_key(None), data)


def test_a_masked_array_is_refused_by_type_never_read_under_its_mask():
    """A numpy masked array: its masked entries were read as the values under the mask (999 released as a
    salary, by ``release`` and by ``m.sample``); refused by its type, whatever its mask, naming the fix. A
    frame naming two columns alike is refused naming the column (it raised numpy's broadcast error)."""
    m = dp.mechanism(
        name="total",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.column(0) >> dp.sum() >> dp.laplace(10),
        claim=PureDP(1),
    )
    masked = np.ma.array([[1.0, 5.0], [2.0, 5.0], [999.0, 5.0]], mask=[[0, 0], [0, 0], [1, 0]])
    for data in (masked, np.ma.array([[1.0, 5.0]])):
        with pytest.raises(ParameterError, match="masked array.*compress_rows") as e:
            _release(m, data)
        assert "999" not in str(e.value)
        with pytest.raises(ParameterError, match="masked array"):
            m.sample(data, 1, np.random.default_rng(SEED))
    with pytest.raises(ParameterError, match="'x' names 2 columns"):
        _release(m, pd.DataFrame([[1.0, 2.0]], columns=["x", "x"]))


@pytest.mark.skipif(np.finfo(np.longdouble).nmant <= 52, reason="numpy.longdouble is a double on this platform")
def test_extended_precision_floats_are_refused_by_dtype():
    """numpy.longdouble (float128) was read as doubles, rounded silently: user ids one ulp of a long double
    apart were one user, so one added user (id 1 + 2**-63) merged into user 1 and moved that user's bounded
    record between two keys (a neighbour touching two keys where the proof counts one: P_D'(S) − e·P_D(S)
    ≈ 0.107 against the proven δ ≈ 6.9e-14). Refused by dtype, on every input type, naming the column."""
    one = np.longdouble(1)
    users = np.array([one, one + np.finfo(np.longdouble).eps, np.longdouble(7)], dtype=np.longdouble)
    frame = pd.DataFrame({"user": users, "key": np.zeros(3), "value": np.ones(3)})
    for data in (frame, frame.iloc[:0], frame.to_numpy(), np.zeros((0, 3), dtype=np.longdouble)):
        with pytest.raises(ParameterError, match=r"float128 \(extended precision\).*convert it"):
            _release(_user_level(), data)
    for col in ("key", "value"):
        wide = frame.assign(user=users.astype(float), **{col: np.ones(3, dtype=np.longdouble)})
        with pytest.raises(ParameterError, match=f"column '{col}' .*extended precision"):
            _release(_user_level(), wide)
    objects = frame.assign(user=[1.0, 2.0, 3.0], value=pd.Series([np.longdouble(1)] * 3, dtype=object))
    with pytest.raises(ParameterError, match="extended-precision floats"):
        _release(_user_level(), objects)
    m = _record_level()
    with pytest.raises(ParameterError, match="data has dtype float128"):
        m.sample(np.ones((2, 2), dtype=np.longdouble), 1, np.random.default_rng(SEED))
    with pytest.raises(ParameterError, match=r"epsilon=.*extended precision"):
        PureDP(np.longdouble(1) / 3)


def test_integer_columns_are_refused_by_dtype_where_the_domain_holds_integers_beyond_doubles():
    """With records in [0, 1e20] an int64 column was refused only when it held an integer a double cannot
    hold: D = [1, 2] released and D + [2**53 + 1] (inside the domain) raised, one neighbour's output a raise.
    Where the domain reaches beyond 2**53 (or is unbounded), 64-bit integer and object columns are refused
    whatever they hold; narrower integers, and any integer column of a domain within ±2**53, still read."""

    def clamped_sum(records):
        return dp.mechanism(
            name="clamped_sum",
            records=records,
            relation=AddRemove(),
            steps=dp.clamp(0, 10) >> dp.sum() >> dp.laplace(scale=10),
            claim=PureDP(1),
        )

    for records in (RealInterval(0, 1e20), RealInterval(), RealInterval(-(2.0**60), 10)):
        m = clamped_sum(records)
        for data in ([1, 2], [1, 2, 2**53 + 1], []):
            for value in (
                np.array(data, dtype=np.int64).reshape(-1),
                pd.DataFrame({"v": pd.Series(data, dtype=np.int64)}),
                pd.DataFrame({"v": pd.Series(data, dtype=object)}),
                pd.DataFrame({"v": pd.array(data, dtype="Int64")}),
            ):
                with pytest.raises(ParameterError, match=r"(dtype|domain) .*beyond 2\*\*53"):
                    _release(m, value)
            with pytest.raises(ParameterError, match="beyond 2\\*\\*53"):
                m.sample(np.array(data, dtype=np.int64), 1, np.random.default_rng(SEED))
        floats = _release(m, np.array([1.0, 2.0]))
        assert _release(m, np.array([1, 2], dtype=np.int32)) == floats
    narrow = clamped_sum(RealInterval(0, 2**53))
    assert _release(narrow, np.array([1, 2], dtype=np.int64)) == _release(narrow, pd.DataFrame({"v": [1, 2]}))
    # m.sample checked an empty data set's dtype not at all (an empty object array passed, [1.0] as objects
    # was refused) and refused [] for multi-column records by its shape (0,) (np.zeros((0, 2)) passed)
    with pytest.raises(ParameterError, match="dtype object"):
        narrow.sample(np.array([], dtype=object), 1, np.random.default_rng(SEED))
    box = _record_level()
    assert box.sample([], 1, np.random.default_rng(SEED)) == box.sample(
        np.zeros((0, 2)), 1, np.random.default_rng(SEED)
    )


def test_unused_categories_and_infinite_keys_release_like_any_label():
    """A categorical key column with a category no row holds, and a float key column holding ±inf, release
    on numpy, pandas and Dask alike (they raised KeyError and OverflowError): an unused category is not a
    value of the column; an infinite key is a label of its own."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(0, 10, 60)
    frames = [
        pd.DataFrame({"x": x, "k": pd.Categorical(["a", "b"] * 30, categories=["a", "b", "unused"])}),
        pd.DataFrame({"x": x, "k": [np.inf, 1.0, -np.inf] * 20}),
    ]
    for frame in frames:
        got = _release(_record_level(), frame)
        assert _release(_record_level(), frame.astype({"k": object}).to_numpy()) == got
        assert "unused" not in got
        try:
            import dask.dataframe  # noqa: F401
        except ImportError:  # pragma: no cover - the Dask stage of .ci/run requires dask
            continue
        for n in (1, 3):
            assert _release(_record_level(), _dask(frame, n)) == got


def test_datetime_and_timedelta_keys_and_users_are_identities_on_every_input_type():
    """A datetime64 (naive or with a time zone) or timedelta64 key or user column is read exactly, as pandas
    Timestamps / Timedeltas, the same release as a numpy object array holding them (it was refused on pandas
    and Dask while the object array was accepted); NaT is the missing key None."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(0, 10, 60)
    days = pd.to_datetime(["2024-01-01", "2024-01-02", None] * 20)
    keys = [days, days.tz_localize("Europe/Paris"), pd.to_timedelta([1, 2, 3] * 20, unit="h")]
    for k in keys:
        frame = pd.DataFrame({"x": x, "k": k})
        got = _release(_record_level(), frame)
        assert len(got) == len(set(k.dropna())) + int(k.isna().any())
        assert all(key is None or isinstance(key, (pd.Timestamp, pd.Timedelta)) for key in got)
        assert _release(_record_level(), frame.astype({"k": object}).to_numpy()) == got
        try:
            import dask.dataframe  # noqa: F401
        except ImportError:  # pragma: no cover - the Dask stage of .ci/run requires dask
            continue
        for n in (1, 3):
            assert _release(_record_level(), _dask(frame, n)) == got
    users = pd.Series(pd.to_datetime(rng.integers(0, 10**15, 30), unit="us")).repeat(2).reset_index(drop=True)
    frame = pd.DataFrame({"user": users, "k": ["a", "b"] * 30, "v": rng.uniform(0, 10, 60)})
    got = _release(_user_level(keys=["a", "b"]), frame)
    assert _release(_user_level(keys=["a", "b"]), frame.astype({"user": object}).to_numpy()) == got


def test_numpy_datetime64_objects_are_the_timestamps_they_stand_for():
    """A numpy object array (or object column) holding ``np.datetime64`` / ``np.timedelta64`` values releases
    as the datetime64 column of the same instants (Timestamps, Timedeltas); before, a lone nanosecond value
    was read as its integer (numpy's ``.item()``): one key with the number it spells (5 ns and 5 were one
    key), and on Dask one user in two identities when partitions held the two forms."""
    rng = np.random.default_rng(SEED)
    n = 60
    x = rng.uniform(0, 10, n)
    days = pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"] * (n // 3))
    frame = pd.DataFrame({"x": x, "k": days})
    want = _release(_record_level(), frame)
    records = np.empty((n, 2), dtype=object)
    records[:, 0] = x.tolist()
    records[:, 1] = list(days.to_numpy())  # np.datetime64[ns] objects
    assert isinstance(records[0, 1], np.datetime64)
    assert _release(_record_level(), records) == want
    assert _release(_record_level(), pd.DataFrame({"x": x, "k": pd.Series(list(records[:, 1]), dtype=object)})) == want
    mixed = pd.DataFrame(
        {"x": x[:4], "k": pd.Series([np.timedelta64(5, "ns"), 5, 5.0, np.timedelta64(5, "ns")], dtype=object)}
    )
    got = _release(_record_level(part=False, hi=10), pd.concat([mixed] * 10, ignore_index=True))
    assert set(got) == {5.0, pd.Timedelta(5, "ns")}  # a duration is not a number


def test_user_level_on_a_distributed_client_is_the_pandas_release():
    """On a distributed client (the users over a bound and their draws scattered to the workers, drawn per
    bucket of users) the release is the pandas release, for 1 and 4 partitions."""
    distributed = pytest.importorskip("distributed")
    import dpharness

    rng = np.random.default_rng(SEED)
    frame = _user_frame("big", rng)
    m = dp.mechanism(
        name="users_per_key",
        records=RealBox(0, 1000, 3),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=4, max_per_partition=2)
        >> dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=20, scale=2),
            part=dp.compose(dp.count() >> dp.laplace(8), dp.column(2) >> dp.clamp(0, 10) >> dp.sum() >> dp.laplace(80)),
        ),
        claim=ApproxDP(200, 1e-2),
    )
    want = _release(m, frame)
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None):
        for parts in (1, 4):
            _same(dpharness.release(m, _dask(frame, parts), seed=SEED, quiet=True), want)


def test_equal_identities_in_other_forms_are_one_value_named_alike():
    """Keys that are equal values in other forms (inside a tuple or frozenset: 1, 1.0, True and -0.0, 0.0; a
    datetime and a Timestamp; one instant in two time zones; a named tuple and its tuple) are one key,
    released under one name whichever form the data holds first (the first record's form was the name:
    one added user renamed the key); NaN inside a tuple id is the missing value, so on Dask a user whose
    records lie in many partitions is one user (each partition's (nan, 1) was a user of its own)."""
    import collections
    import datetime

    point = collections.namedtuple("point", "x y")
    forms = [
        [(1, "a"), (True, "a"), (1.0, "a"), point(1, "a")],
        [(0.0, (0.0,)), (-0.0, (-0.0,))],
        [frozenset({1, 2}), frozenset({True, 2.0})],
        [
            datetime.datetime(2020, 1, 1, 1),
            pd.Timestamp("2020-01-01 01:00"),
            pd.Timestamp("2020-01-01 01:00").as_unit("s"),
            np.datetime64("2020-01-01T01:00"),
        ],
        [pd.Timestamp("2020-01-01", tz="UTC"), pd.Timestamp("2020-01-01 01:00", tz="Europe/Paris")],
        [datetime.timedelta(hours=1), pd.Timedelta(1, "h"), np.timedelta64(3600, "s")],
    ]
    x = np.random.default_rng(SEED).uniform(0, 10, 40)
    for equal in forms:
        names = set()
        for first in equal:
            keys = pd.Series([first] + [equal[i % len(equal)] for i in range(39)], dtype=object)
            got = _release(_record_level(part=False), pd.DataFrame({"x": x, "k": keys}))
            assert len(got) == 1, got
            names.add(repr(next(iter(got))))
        assert len(names) == 1, names
    users = [(i,) for i in range(30)] + [(float("nan"), 1) for _ in range(30)]  # one user: 30 records
    frame = pd.DataFrame({"u": pd.Series(users, dtype=object), "k": [0.0] * 30 + [1.0] * 30, "v": x[:1].repeat(60)})
    m = _user_level(keys=None)
    want = _release(m, frame)
    context = _objects_kept()
    if context is None:  # pragma: no cover - the Dask stage of .ci/run requires dask
        return
    with context:
        for n in (1, 7, 30):
            _same(_release(m, _dask(frame, n)), want)


def test_the_order_of_released_keys_never_follows_the_order_of_the_records():
    """Keys released in the same order whatever the order of the records, for keys whose own ``<`` is not a
    total order (frozensets: inclusion) or fails (tuples holding None): before, frozensets that include
    none of the others were released in the order the data held them."""
    x = np.zeros(60)
    for values in (
        [frozenset({1}), frozenset({2}), frozenset({3}), frozenset({1, 2})],
        [(None, 1), (2, 1), (1, None), ("a", 1)],
    ):
        keys = [values[i % len(values)] for i in range(60)]
        want = list(_release(_record_level(part=False), pd.DataFrame({"x": x, "k": pd.Series(keys, dtype=object)})))
        assert len(want) == len(values)
        for shift in range(1, len(values)):
            turned = keys[shift:] + keys[:shift]
            got = _release(_record_level(part=False), pd.DataFrame({"x": x, "k": pd.Series(turned, dtype=object)}))
            assert list(got) == want
    # one record whose key does not compare with another's (a zoned Timestamp beside a naive one; an Enum),
    # not released itself, leaves the others' order alone (all keys were sorted by repr then: 10.0 < 9.0)
    import enum

    colour = enum.Enum("colour", "RED BLUE")
    keys = [9.0] * 20 + [10.0] * 20 + [pd.Timestamp("2020-01-01")] * 20 + [colour.RED] * 20
    want = list(_release(_record_level(part=False), pd.DataFrame({"x": np.zeros(80), "k": keys})))
    assert want[:2] == [9.0, 10.0]
    for extra in (pd.Timestamp("2020-01-01", tz="UTC"), colour.BLUE, frozenset({1})):
        got = _release(_record_level(part=False), pd.DataFrame({"x": np.zeros(81), "k": [*keys, extra]}))
        assert list(got) == want


def test_equal_user_ids_hash_alike_in_every_representation():
    """A user id hashes to its bucket alike whether a partition reads it in an int64 array or as a Python
    value (an object column): -2**63 hashed as an integer in the array and as the double it is in a list, so
    on Dask a user with records in both kinds of partition was two users, each bounded alone (a key's
    distinct-user count 12 on Dask, 11 on pandas)."""
    from dpharness._records import identity_hash, normalise

    ids = np.array([-(2**63), -(2**63) + 1, -(2**53) - 1, -(2**53), 0, 2**53 + 1, 2**62, 2**63 - 1], dtype=np.int64)
    assert identity_hash(ids).tolist() == identity_hash([normalise(v) for v in ids.tolist()]).tolist()
    floats = np.array([-0.0, 0.5, -(2.0**63), 1e300])
    assert identity_hash(floats).tolist() == identity_hash([normalise(v) for v in floats.tolist()]).tolist()
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")
    m = dp.mechanism(
        name="users_per_key",
        records=RealBox(0, 1000, 2),
        relation=dp.AddRemoveUser(user=0),
        steps=dp.bound_contributions(user=0, by=1, max_records=1, max_per_partition=1)
        >> dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=3, scale=0.5)),
        claim=ApproxDP(4, 1e-3),
    )
    low = -(2**63)
    ints = pd.DataFrame({"u": np.array([low] + [2**60 + i for i in range(5)], dtype=np.int64), "k": ["b"] * 6})
    objects = pd.DataFrame({"u": pd.Series([low] + [2**61 + i for i in range(5)], dtype=object), "k": ["b"] * 6})
    other = pd.DataFrame({"u": np.array([7, 8], dtype=np.int64), "k": ["c", "c"]})
    pieces = [ints, objects, other, other.assign(u=[9, 10])]
    want = _release(m, pd.concat(pieces, ignore_index=True).astype({"u": np.int64}))
    with _objects_kept():
        frame = dd.from_delayed([dask.delayed(p) for p in pieces], meta=ints.iloc[:0], verify_meta=False)
        _same(_release(m, frame), want)


def test_identity_columns_in_bounds_too_narrow_are_refused_for_every_data_set():
    """Identities stand in as distinct doubles in the records' bounds: bounds that hold few doubles made the
    release raise once the data held more distinct users than that (RealBox(0, 5e-324): 2 users released,
    3 raised). Such a structure is refused before any record is read, whatever the data (an empty frame
    too); bounds narrow but holding 2**48 doubles or more take stand-ins spread over their doubles."""
    from fractions import Fraction

    from dpharness._records import stand_ins

    def users_per_key(lo, hi):
        return dp.mechanism(
            name="users_per_key",
            records=RealBox(lo, hi, 2),
            relation=dp.AddRemoveUser(user=0),
            steps=dp.bound_contributions(user=0, by=1, max_records=1, max_per_partition=1)
            >> dp.group_by(by=1, keys=None, select=dp.partition_select(threshold=3, scale=1)),
            claim=ApproxDP(2, 1e-3),
        )

    for lo, hi in ((0, 5e-324), (1.0, 1.0 + 2**-50), (1000.0, 1000.0 + 1e-4)):
        for users in ([], ["a"], ["a", "b", "c"]):
            frame = pd.DataFrame({"u": pd.Series(users, dtype=object), "k": ["x"] * len(users)})
            with pytest.raises(ParameterError, match="2[*][*]48"):
                _release(users_per_key(lo, hi), frame)
    frame = pd.DataFrame({"u": [f"u{i}" for i in range(40)], "k": ["x", "y"] * 20})
    assert set(_release(users_per_key(1, 1 + 2**-4), frame)) <= {"x", "y"}  # 2**48 + 1 doubles
    narrow = stand_ins([None] * 5, Fraction(1), Fraction(1) + Fraction(1, 2**50))  # 5 doubles: each one
    assert narrow.tolist() == [1.0 + i * 2.0**-52 for i in range(5)]
    with pytest.raises(ParameterError, match="too few doubles"):
        stand_ins([None] * 6, Fraction(1), Fraction(1) + Fraction(1, 2**50))


def test_missing_keys_on_worker_processes_are_the_pandas_release():
    """On a Dask scheduler with worker processes the missing key None releases as on pandas, record-level
    and user-level: the one missing value pickles as itself (it came back from each worker as a new object,
    so the partitions' missing keys were distinct values and the release raised KeyError only when the data
    held a missing key)."""
    import pickle

    from dpharness._records import MISSING, UNHASHABLE

    assert pickle.loads(pickle.dumps([MISSING, UNHASHABLE])) == [MISSING, UNHASHABLE]
    dask = pytest.importorskip("dask")
    rng = np.random.default_rng(SEED)
    n = 240
    keys = pd.Series(np.array(["a", "b", None], dtype=object)[rng.integers(0, 3, n)], dtype=object)
    records = pd.DataFrame({"x": rng.uniform(0, 10, n), "k": keys})
    users = pd.DataFrame({"u": rng.integers(0, 80, n), "k": keys, "v": rng.uniform(0, 10, n)})
    cases = [(_record_level(), records), (_user_level(), users)]
    wants = [_release(m, frame) for m, frame in cases]
    assert all(None in want for want in wants)
    with _objects_kept(), dask.config.set(scheduler="processes", num_workers=2):
        for (m, frame), want in zip(cases, wants):
            _same(dpharness.release(m, _dask(frame, 3), seed=SEED, quiet=True), want)


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40).map(lambda v: np.array(v, dtype=np.int64)),
        st.lists(st.integers(0, 5), max_size=40).map(lambda v: np.array(v, dtype=np.int64)),
        st.lists(st.integers(-(2**63), -(2**63) + 9), max_size=40).map(lambda v: np.array(v, dtype=np.int64)),
        st.lists(st.integers(2**64 - 9, 2**64 - 1), max_size=40).map(lambda v: np.array(v, dtype=np.uint64)),
        st.lists(st.integers(-128, 127), max_size=40).map(lambda v: np.array(v, dtype=np.int8)),
        st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40).map(lambda v: np.array(v, dtype=float)),
        st.lists(st.sampled_from([0.0, 1.5, float("nan"), -2.0]), max_size=40).map(lambda v: np.array(v, dtype=float)),
        st.lists(st.booleans(), max_size=10).map(lambda v: np.array(v, dtype=bool)),
    )
)
def test_sorted_distinct_and_unique_are_numpys_unique(arr):
    """The sort-based distinct values the Dask release reads identities with are np.unique's, exactly: the
    same sorted values (NaNs one value, last), dtype and codes."""
    from dpharness._records import sorted_distinct, sorted_unique

    arr = arr + 0.0 if arr.dtype == float else arr  # identities_of reads -0.0 as 0.0
    values, codes = np.unique(arr, return_inverse=True)
    got_values, got_codes = sorted_distinct(arr)
    assert got_values.dtype == values.dtype and np.array_equal(got_values, values, equal_nan=True)
    assert got_codes.dtype == np.int64 and np.array_equal(got_codes, codes.reshape(-1))
    unique = sorted_unique(arr)
    assert unique.dtype == values.dtype and np.array_equal(unique, values, equal_nan=True)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300).map(lambda v: np.array(v, dtype=np.int64)),
        st.lists(st.integers(0, 2**64 - 1), max_size=300).map(lambda v: np.array(v, dtype=np.uint64)),
        st.lists(st.integers(-5, 5), max_size=300).map(lambda v: np.array(v, dtype=np.int16)),
        st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=300).map(lambda v: np.array(v)),
        st.lists(st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1e308, -np.inf]), max_size=300).map(np.array),
        st.lists(st.floats(width=32, allow_nan=False), max_size=300).map(lambda v: np.array(v, dtype=np.float32)),
    )
)
def test_sorting_order_sorts_as_argsort_does(arr):
    """The packed sort's permutation sorts every number array as np.argsort's does (equal values in any
    order): integers over their whole range, floats with ±0, subnormals, infinities (NaN: an argsort)."""
    from dpharness._records import sorting_order

    order = sorting_order(arr)
    assert np.array_equal(np.sort(order), np.arange(len(arr)))
    assert np.array_equal(arr[order], np.sort(arr), equal_nan=True)


@pytest.mark.parametrize("seed", range(4))
def test_sorting_order_puts_shared_top_bits_in_order(seed):
    """Ids spread over the whole int64 range, a few of them a unit apart (their keys share the packed
    top bits: ordered by their full keys), and floats one ulp apart: sorted as np.sort sorts them."""
    from dpharness._records import sorting_order

    rng = np.random.default_rng(seed)
    ids = rng.integers(-(2**63), 2**63 - 1, 50_000, dtype=np.int64)
    close = ids[:300] + np.int64(1)  # a unit apart: the same shifted key
    for arr in (np.concatenate([ids, close, ids[:50]]), np.nextafter(ids.astype(float), np.inf)):
        arr = np.concatenate([arr, arr[:200].astype(arr.dtype)])
        rng.shuffle(arr)
        order = sorting_order(arr)
        assert np.array_equal(arr[order], np.sort(arr))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 40), st.integers(2, 4), st.integers(0, 2**32 - 1), st.sampled_from([2**63, 2**14, 2**9, 50]))
def test_canonical_rows_sorts_as_lexsort_does(n, dim, seed, limit):
    """The canonical order (one argsort of the columns' ranks and the rows' places) is lexsort's by user,
    key, then the other columns, row for row (ties, -0.0 and 0.0, NaNs: in the order given), also when
    the digits are re-ranked or do not fit (a smaller integer limit than int64's)."""
    from types import SimpleNamespace

    from dpharness.mechanisms.parts import grouping
    from dpharness.mechanisms.parts.grouping import canonical_rows

    rng = np.random.default_rng(seed)
    high = int(rng.choice([4, 1000]))
    arr = rng.integers(0, high, (n, dim)).astype(float)
    if n:
        arr[rng.integers(0, n, 2), -1] = np.nan
        arr[rng.integers(0, n, 2), 0] = -0.0
    b = SimpleNamespace(user=int(rng.integers(0, dim)), by=int(rng.integers(0, dim)))
    rows = rng.permutation(n)
    sub = arr[rows]
    others = [sub[:, j] for j in reversed(range(dim)) if j not in (b.user, b.by)]
    expected = rows[np.lexsort((*others, sub[:, b.by], sub[:, b.user]))]
    saved = grouping._DIGITS_LIMIT
    grouping._DIGITS_LIMIT = limit
    try:
        assert np.array_equal(canonical_rows(arr, rows, b), expected)
    finally:
        grouping._DIGITS_LIMIT = saved


def test_reused_memory_restores_the_worker_settings(monkeypatch):
    """Inside a release task on a process started with MALLOC_TRIM_THRESHOLD_ (a Dask worker), glibc keeps
    freed memory; when the last such task ends, the thresholds the process was started with are put back
    and the memory trimmed. Nested and concurrent tasks restore once; a process without that variable (its
    thresholds slide) is left alone."""
    from dpharness import _memory

    calls = []

    class Libc:
        def mallopt(self, what, value):
            calls.append(("mallopt", what, value))
            return 1

        def malloc_trim(self, pad):
            calls.append(("trim", pad))
            return 1

    monkeypatch.setattr(_memory, "_libc", Libc())
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    with _memory.reused_memory():
        pass
    assert calls == []  # glibc's sliding thresholds: nothing set, nothing to restore
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    task = _memory.with_reused_memory(lambda x: x + 1)
    with _memory.reused_memory():
        assert task(1) == 2  # nested: set once, restored once, by the outermost
    held = [("mallopt", -3, _memory._MMAP_HELD), ("mallopt", -1, _memory._TRIM_HELD)]
    assert calls == [*held, ("mallopt", -3, 128 * 1024), ("mallopt", -1, 65536), ("trim", 0)]
    calls.clear()
    with pytest.raises(ZeroDivisionError), _memory.reused_memory():
        1 / 0  # noqa: B018 - a task that raises restores too
    assert calls[-3:] == [("mallopt", -3, 128 * 1024), ("mallopt", -1, 65536), ("trim", 0)]
    monkeypatch.setattr(_memory, "_libc", None)  # the real C library (glibc here: set and restored; else nothing)
    with _memory.reused_memory():
        assert np.arange(10**6).sum() == 10**6 * (10**6 - 1) // 2
    assert _memory._running == 0


def test_a_process_dpharness_owns_holds_freed_memory_unless_the_environment_decides(monkeypatch):
    """The command line's processes (limit_memory: the CLI's audit, gate and report, and their pools'
    workers) keep freed memory for reuse; a threshold set in the environment (the user's, or Dask's) is
    left as it is."""
    from dpharness import _memory, _run

    calls = []

    class Libc:
        def mallopt(self, what, value):
            calls.append((what, value))
            return 1

    monkeypatch.setattr(_memory, "_libc", Libc())
    monkeypatch.setattr(_run, "single_blas_thread", lambda: None)
    monkeypatch.setattr("resource.setrlimit", lambda *a: None)
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_"):
        monkeypatch.delenv(name, raising=False)
    _run.limit_memory(0.8)
    assert calls == [(-3, _memory._MMAP_HELD), (-1, _memory._HOLD_TRIM)]
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_"):
        calls.clear()
        monkeypatch.setenv(name, "65536")
        _memory.hold_freed_memory()
        assert calls == []
        monkeypatch.delenv(name)


def test_pairs_summed_by_packed_sort_and_by_argsort_agree():
    """The bucket's (user, key) sums: one sort of packed integers when they fit in int64, else an argsort;
    both give the exact sums per distinct pair in (user, key) order."""
    from dpharness._release import _pairs_summed

    rng = np.random.default_rng(SEED)
    u, k, c = rng.integers(0, 300, 5_000), rng.integers(0, 7, 5_000), rng.integers(0, 4, 5_000)
    packed = _pairs_summed(u, k, c, 300, 7)
    searched = _pairs_summed(u, k, c, 2**61, 7)  # too wide to pack: the argsort
    pairs = {}
    for a, b_, n in zip(u.tolist(), k.tolist(), c.tolist()):
        pairs[(a, b_)] = pairs.get((a, b_), 0) + n
    want = sorted(pairs.items())
    for pu, pk, pc in (packed, searched):
        assert [((a, b_), n) for a, b_, n in zip(pu.tolist(), pk.tolist(), pc.tolist())] == want


def test_ragged_rows_are_refused_naming_the_data():
    """Rows of different lengths: ParameterError naming data (numpy's ValueError leaked before)."""
    m = dp.mechanism(
        name="ragged",
        records=RealBox(0, 100, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=0, keys=range(3), select=dp.partition_select(threshold=5, scale=1), part=dp.count() >> dp.laplace(2)
        ),
        claim=ApproxDP(3, 1e-3),
    )
    with pytest.raises(ParameterError, match="data is not an array of records"):
        dpharness.release(m, [[1, 2], [3]], seed=1)
