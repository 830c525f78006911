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
    median = dp.mechanism(
        name="median",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.quantile(0.5, candidates=[0, 0.25, 0.5, 0.75, 1], scale=2),
        claim=PureDP(1),
    )
    with pytest.raises(UnsupportedError, match="not streamed.*data.compute"):
        dpharness.release(median, frame, seed=SEED)
    narrow = dp.mechanism(
        name="narrow",
        records=RealInterval(0, 0.5),
        relation=AddRemove(),
        steps=dp.sum() >> dp.laplace(1),
        claim=PureDP(1),
    )
    with pytest.raises(ParameterError, match="outside the domain"):
        dpharness.release(narrow, frame, seed=SEED)
    assert np.isfinite(dpharness.release(median, frame.compute(), seed=SEED))


def test_bad_arguments_are_named():
    m = _pipeline()
    with pytest.raises(ParameterError, match="seed="):
        dpharness.release(m, _data(10), seed=-1)
    with pytest.raises(ParameterError, match="mechanism="):
        dpharness.release(lambda d: d, _data(10))
    with pytest.raises(ParameterError, match="columns="):
        dpharness.release(m, _data(10), columns=["a"])
