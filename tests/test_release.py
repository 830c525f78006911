"""dpharness.release: one release of a declared mechanism on a numpy array, a pandas frame or a Dask frame
streamed by partitions, merged exactly, so for the same seed the output is the same, bit for bit,
whichever the input type and partitioning, and equal to the sampler's own output on the data in memory."""

from __future__ import annotations

import numpy as np
import pytest

import dpharness
from dpharness import AddRemove, ApproxDP, PureDP, RealBox, RealInterval, parts as dp
from dpharness.errors import ParameterError, UnsupportedError

SEED = 5


def _pipeline():
    return dp.mechanism(
        name="team_stats",
        records=RealBox(-1e300, 1e300, 2),
        relation=AddRemove(),
        steps=dp.compose(
            dp.column(0) >> dp.clamp(-100, 100) >> dp.sum() >> dp.laplace(100),
            dp.count() >> dp.laplace(2),
            dp.column(0) >> dp.clamp(0, 4) >> dp.sum_squares() >> dp.gaussian(sigma=30),
            dp.column(1) >> dp.histogram(edges=[0, 50, 100, 200]) >> dp.laplace(2),
            dp.group_by(by=1, keys=list(range(0, 200, 10)), select=dp.partition_select(threshold=3, scale=1)),
        ),
        claim=ApproxDP(40, 1e-3),
    )


def _data(n=20_000):
    """Cancellation-heavy values (1e16 + 1 − 1e16 in different partitions), subnormals, clamp edges."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(-150, 150, (n, 2))
    x[:, 1] = np.floor(rng.uniform(0, 200, n) / 10) * 10
    x[:5, 0] = [1e16, 1.0, -1e16, 5e-324, -0.0]
    x[-5:, 0] = [100.0, -100.0, np.nextafter(100.0, 200), 1e-300, 2.0**-1074]
    return x


def test_numpy_release_is_the_samplers_output():
    m, x = _pipeline(), _data()
    got = dpharness.release(m, x, seed=SEED)
    np.testing.assert_array_equal(got, m.sample(x, 1, np.random.default_rng(SEED))[0])
    assert not np.array_equal(got, dpharness.release(m, x, seed=SEED + 1))


def test_pandas_frame_by_order_or_by_name():
    pd = pytest.importorskip("pandas")
    m, x = _pipeline(), _data()
    want = dpharness.release(m, x, seed=SEED)
    frame = pd.DataFrame({"income": x[:, 0], "region": x[:, 1]})
    np.testing.assert_array_equal(dpharness.release(m, frame, seed=SEED), want)
    wide = frame.assign(name=["a"] * len(frame))[["name", "region", "income"]]
    np.testing.assert_array_equal(dpharness.release(m, wide, seed=SEED, columns=["income", "region"]), want)
    with pytest.raises(ParameterError, match="column 'name'.*encode it"):
        dpharness.release(m, wide, seed=SEED)
    with pytest.raises(ParameterError, match="'wage' is not a column"):
        dpharness.release(m, frame, seed=SEED, columns=["wage", "region"])


@pytest.mark.parametrize("partitions", [1, 4, 7])
def test_dask_frame_streams_partitions_and_merges_exactly(partitions):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    m, x = _pipeline(), _data()
    want = dpharness.release(m, x, seed=SEED)
    frame = dd.from_pandas(pd.DataFrame({"income": x[:, 0], "region": x[:, 1]}), npartitions=partitions)
    np.testing.assert_array_equal(dpharness.release(m, frame, seed=SEED), want)


def test_dask_refuses_what_it_cannot_stream_and_checks_the_domain():
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    frame = dd.from_pandas(pd.DataFrame({"v": np.linspace(0, 1, 100)}), npartitions=3)
    sampled = dp.mechanism(
        name="sampled",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.poisson_sample(0.5) >> dp.count() >> dp.laplace(1),
        claim=PureDP(1),
    )
    with pytest.raises(UnsupportedError, match="not streamed.*data.compute"):
        dpharness.release(sampled, frame, seed=SEED)
    narrow = dp.mechanism(
        name="narrow",
        records=RealInterval(0, 0.5),
        relation=AddRemove(),
        steps=dp.sum() >> dp.laplace(1),
        claim=PureDP(1),
    )
    with pytest.raises(ParameterError, match="outside the domain"):
        dpharness.release(narrow, frame, seed=SEED)
    assert np.isfinite(dpharness.release(sampled, frame.compute(), seed=SEED))


def test_bad_arguments_are_named():
    m = _pipeline()
    with pytest.raises(ParameterError, match="seed="):
        dpharness.release(m, _data(10), seed=-1)
    with pytest.raises(ParameterError, match="mechanism="):
        dpharness.release(lambda d: d, _data(10))
    with pytest.raises(ParameterError, match="columns="):
        dpharness.release(m, _data(10), columns=["a"])


def _income_by_region(keys, part=True):
    """Incomes (column 0) grouped by region (column 1) over ``keys`` (labels, or None: from the data)."""
    return dp.mechanism(
        name="income_by_region",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=keys,
            select=dp.partition_select(threshold=20, scale=1),
            part=(dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(200)) if part else None,
        ),
        claim=ApproxDP(3, 1e-5),
    )


def _regions():
    names = [f"region-{i:03d}" for i in range(12)]
    return _income_by_region(names), names


def test_string_keys_release_a_mapping_of_the_released_keys():
    """Label keys: a frame's labels become their positions in keys; the release is {key: (count, sum)} of the
    keys that pass the selection, equal to the encoded output of the numeric records (positions)."""
    pd = pytest.importorskip("pandas")
    m, names = _regions()
    assert dpharness.prove(m).verdict.value == "PROVED"
    rng = np.random.default_rng(SEED)
    pos = rng.integers(0, 12, 3_000)
    pos[pos == 11] = 10  # region-011 has no records: never released
    income = rng.uniform(0, 300, 3_000)
    frame = pd.DataFrame({"income": income, "region": [names[i] for i in pos]})
    got = dpharness.release(m, frame, seed=SEED)
    assert isinstance(got, dict) and "region-011" not in got and set(got) <= set(names) and len(got) >= 9
    encoded = m.sample(np.column_stack([income, pos.astype(float)]), 1, np.random.default_rng(SEED))[0]
    for i, name in enumerate(names):
        count, total = encoded[2 * i], encoded[2 * i + 1]
        assert (name in got) == (count != 0)
        if name in got:
            assert got[name] == (count, total)
    cat = frame.assign(region=frame["region"].astype("category"))
    assert dpharness.release(m, cat, seed=SEED) == got


def test_labels_and_numbers_outside_the_keys_are_dropped():
    """A record whose label is not a declared key is dropped, as a number outside declared numeric keys is
    (the proof's public partitions): a refusal would reveal that one record holds another label."""
    pd = pytest.importorskip("pandas")
    m, names = _regions()
    rng = np.random.default_rng(SEED)
    frame = pd.DataFrame({"income": rng.uniform(0, 300, 400), "region": rng.choice(names[:3], 400)})
    stray = pd.DataFrame({"income": [1.0, 2.0, 3.0], "region": ["elsewhere", None, float("nan")]})
    assert dpharness.release(m, pd.concat([frame, stray]), seed=SEED) == dpharness.release(m, frame, seed=SEED)
    numeric = dp.mechanism(
        name="numeric_keys",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(by=1, keys=[1, 2, 3], select=dp.partition_select(threshold=5, scale=1)),
        claim=ApproxDP(3, 1e-5),
    )
    # a number that is not a key is dropped, as the proof says (public partitions), not refused: a refusal
    # would reveal that one record holds another key
    data = np.array([[0.0, 1.0]] * 30 + [[0.0, 7.0]] * 30)
    assert dpharness.release(numeric, data, seed=SEED) == dpharness.release(numeric, data[:30], seed=SEED)


def test_string_keys_on_dask_are_the_pandas_release():
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    names = ["FR", "DE", "IT", "ES"]
    m = dp.mechanism(
        name="counts_by_country",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(by=1, keys=names, select=dp.partition_select(threshold=3, scale=1)),
        claim=ApproxDP(3, 1e-5),
    )
    rng = np.random.default_rng(SEED)
    frame = pd.DataFrame({"x": rng.uniform(0, 1, 400), "country": rng.choice(names[:3], 400)})
    want = dpharness.release(m, frame, seed=SEED)
    assert set(want) == {"FR", "DE", "IT"}
    import dask

    with dask.config.set(scheduler="synchronous"):
        got = dpharness.release(m, dd.from_pandas(frame, npartitions=4), seed=SEED)
    assert got == want


def _discovered(part=True):
    return _income_by_region(None, part)


def test_keys_from_the_data_need_no_key_list():
    """keys=None: string keys found in the frame (plain or categorical), numbers in an array; the release
    is the same mapping as the declared-keys release of the same seed (absent keys draw nothing)."""
    pd = pytest.importorskip("pandas")
    names = ["FR", "DE", "IT", "ES"]
    rng = np.random.default_rng(SEED)
    frame = pd.DataFrame({"income": rng.uniform(0, 300, 2_000), "country": rng.choice(names, 2_000)})
    got = dpharness.release(_discovered(), frame, seed=SEED)
    assert list(got) == sorted(names)
    assert dpharness.release(_discovered(), frame.assign(country=frame["country"].astype("category")), seed=SEED) == got
    declared = dp.mechanism(
        name="declared",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=sorted(names),
            select=dp.partition_select(threshold=20, scale=1),
            part=dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(200),
        ),
        claim=ApproxDP(3, 1e-5),
    )
    assert dpharness.release(declared, frame, seed=SEED) == got
    assert dpharness.release(_discovered(), frame.iloc[:0], seed=SEED) == {}
    # numbers: the sampler's mapping (sorted tuples) is the release's
    arr = np.column_stack([frame["income"], rng.integers(0, 7, 2_000) * 10.0])
    mapping = _discovered().sample(arr, 1, np.random.default_rng(SEED))[0]
    assert dpharness.release(_discovered(), arr, seed=SEED) == {k: tuple(v) for k, *v in mapping}
    assert [k for k, *_ in mapping] == sorted({float(k) for k in arr[:, 1]})


def test_keys_from_the_data_on_dask_are_the_pandas_release():
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import dask

    rng = np.random.default_rng(SEED)
    frame = pd.DataFrame({"x": rng.uniform(0, 1, 900), "city": rng.choice(["Lyon", "Graz", "Turku"], 900)})
    want = dpharness.release(_discovered(part=False), frame, seed=SEED)
    with dask.config.set(scheduler="synchronous"):
        got = dpharness.release(_discovered(part=False), dd.from_pandas(frame, npartitions=4), seed=SEED)
    assert got == want and list(got) == ["Graz", "Lyon", "Turku"]


def test_labels_whose_positions_the_records_cannot_hold_are_refused_up_front():
    """Positions 0..K-1 outside the declared records: refused for the mechanism, before reading any data
    (never an error that depends on which labels a frame holds)."""

    def _too_many():
        return dp.mechanism(
            name="too_many_labels",
            records=RealBox(0, 2, 2),
            relation=AddRemove(),
            steps=dp.group_by(by=1, keys=["a", "b", "c", "d"], select=dp.partition_select(threshold=20, scale=1)),
            claim=ApproxDP(3, 1e-5),
        )

    with pytest.raises(ParameterError, match="positions 0..3"):
        _too_many()
    with pytest.raises(ParameterError, match="positions 0..1"):
        dp.mechanism(
            name="labels_above_zero",
            records=RealBox(1, 10, 2),
            relation=AddRemove(),
            steps=dp.group_by(by=1, keys=["a", "b"], select=dp.partition_select(threshold=20, scale=1)),
            claim=ApproxDP(3, 1e-5),
        )


@pytest.mark.parametrize("keys", ["declared", "found"])
def test_dask_group_by_with_parts_is_the_pandas_release_for_any_partitioning(keys):
    """A record-level group-by with per-key count and clamped sum parts: each partition's per-key counts and
    exact sums are merged exactly, selection and noise drawn once on the merged values, so the release is
    the pandas release, of the same type and value, for 1, 4 and 7 partitions (empty ones included)."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import dask

    names = ["FR", "DE", "IT", "ES", "PT"]
    m = dp.mechanism(
        name="count_and_income_by_country",
        records=RealBox(0, 1e17, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=names if keys == "declared" else None,
            select=dp.partition_select(threshold=20, scale=2),
            part=dp.compose(
                dp.count() >> dp.laplace(4),
                dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(400),
            ),
        ),
        claim=ApproxDP(3, 1e-5),
    )
    rng = np.random.default_rng(SEED)
    x = rng.uniform(0, 300, 3_000)
    x[:3] = [1e16, 1.0, -1e16]  # cancellation across partitions: exact sums or nothing
    frame = pd.DataFrame({"income": np.abs(x), "country": rng.choice(names[:4], 3_000, p=[0.5, 0.3, 0.195, 0.005])})
    want = dpharness.release(m, frame, seed=SEED)
    assert {"FR", "DE", "IT"} <= set(want)
    with dask.config.set(scheduler="synchronous"):
        for n in (1, 4, 7):
            got = dpharness.release(m, dd.from_pandas(frame, npartitions=n), seed=SEED)
            assert got == want and all(type(v).__name__ == "Released" and type(v.sum) is float for v in got.values())
        empty = dd.from_pandas(frame.iloc[:0], npartitions=1)
        with_empty = dd.concat([empty, dd.from_pandas(frame, npartitions=3), empty])
        assert dpharness.release(m, with_empty, seed=SEED) == want


def test_a_group_by_release_names_its_fields():
    """Each released key's values are a named tuple: the selection's noisy count, then each part by its
    aggregate (a second of a kind numbered); equal to the plain tuple, and it pickles."""
    import pickle

    pd = pytest.importorskip("pandas")
    m = dp.mechanism(
        name="named",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=None,
            select=dp.partition_select(threshold=20, scale=1),
            part=dp.compose(
                dp.count() >> dp.laplace(4),
                dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(200),
                dp.column(0) >> dp.clamp(0, 100) >> dp.sum() >> dp.laplace(100),
            ),
        ),
        claim=ApproxDP(5, 1e-5),
    )
    frame = pd.DataFrame({"income": [30.0] * 50 + [45.0] * 60, "country": ["FR"] * 50 + ["DE"] * 60})
    got = dpharness.release(m, frame, seed=1)
    de = got["DE"]
    assert de._fields == ("selection_count", "count", "sum", "sum_2")
    assert de == (de.selection_count, de.count, de.sum, de.sum_2) and isinstance(de.selection_count, int)
    assert pickle.loads(pickle.dumps(got)) == got


def test_dask_median_and_count_are_the_pandas_release_for_any_partitioning():
    """A quantile reads the records only through #{x < c} and #{x > c} per candidate: each partition's
    counts are added and the selection runs once on the merged score, so a median plus a count under one
    budget releases from Dask what it releases from pandas, for 1, 4 and 7 partitions."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import dask

    m = dp.mechanism(
        name="median_and_count",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.compose(
            dp.clamp(0, 100) >> dp.quantile(0.5, candidates=list(range(0, 101, 5)), scale=2),
            dp.count() >> dp.laplace(2),
        ),
        claim=PureDP(1.5),
    )
    x = np.random.default_rng(SEED).gamma(3, 10, 4_000).clip(0, 100)
    frame = pd.DataFrame({"age": x})
    want = dpharness.release(m, frame, seed=SEED)
    np.testing.assert_array_equal(want, m.sample(x, 1, np.random.default_rng(SEED))[0])
    with dask.config.set(scheduler="synchronous"):
        for n in (1, 4, 7):
            got = dpharness.release(m, dd.from_pandas(frame, npartitions=n), seed=SEED)
            assert type(got) is type(want) and got.dtype == want.dtype and np.array_equal(got, want)


def _progress_cases():
    m = dp.mechanism(
        name="total",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.sum() >> dp.laplace(10),
        claim=PureDP(0.1),
    )
    return m, np.linspace(0, 1, 200)


@pytest.mark.parametrize("quiet", [False, True])
def test_a_long_release_shows_its_progress_unless_quiet(monkeypatch, capsys, quiet):
    """Past PROGRESS_AFTER seconds (set to 0 here) a release shows its progress: Dask's own bar for a Dask
    frame (local scheduler: on the standard error), the time elapsed for one in memory; nothing when
    quiet, and the same release either way."""
    from dpharness import _release as module

    dd = pytest.importorskip("dask.dataframe")
    import dask

    pd = pytest.importorskip("pandas")
    m, x = _progress_cases()
    want = dpharness.release(m, x, seed=SEED, quiet=True)
    capsys.readouterr()
    monkeypatch.setattr(module, "PROGRESS_AFTER", 0.0)
    assert dpharness.release(m, x, seed=SEED, quiet=quiet) == want
    err = capsys.readouterr().err
    assert ("release: done in" in err) is not quiet
    with dask.config.set(scheduler="synchronous"):
        frame = dd.from_pandas(pd.DataFrame({"v": x}), npartitions=3)
        assert dpharness.release(m, frame, seed=SEED, quiet=quiet) == want
    err = capsys.readouterr().err
    assert ("100% Completed" in err) is not quiet
    monkeypatch.setattr(module, "PROGRESS_AFTER", 60.0)  # a short release shows nothing
    dpharness.release(m, x, seed=SEED)
    with dask.config.set(scheduler="synchronous"):
        dpharness.release(m, frame, seed=SEED)
    assert capsys.readouterr().err == ""


def test_a_release_on_a_distributed_client_shows_dasks_progress(monkeypatch, capsys):
    """On a distributed client the release runs on its workers (the same release) and shows
    ``distributed.progress`` past PROGRESS_AFTER seconds; nothing when quiet."""
    from dpharness import _release as module

    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    pd = pytest.importorskip("pandas")
    m, x = _progress_cases()
    want = dpharness.release(m, x, seed=SEED, quiet=True)
    frame = dd.from_pandas(pd.DataFrame({"v": x}), npartitions=3)
    monkeypatch.setattr(module, "PROGRESS_AFTER", 0.0)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None):
        capsys.readouterr()
        assert dpharness.release(m, frame, seed=SEED, quiet=True) == want
        assert capsys.readouterr() == ("", "")
        assert dpharness.release(m, frame, seed=SEED) == want
    out = capsys.readouterr()
    assert "100%" in out.out + out.err or "Completed" in out.out + out.err
