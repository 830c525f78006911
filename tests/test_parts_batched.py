"""Iterated rounds run side by side (a batch axis: run i on its own records with its own state), with the
same law per run as one run alone.

* exact: the law of a two-round iteration whose second round's map reads the state (a Poisson subsample,
  a state-dependent map, a clamp, a sum and discrete Laplace noise on the grid Z), computed here by
  enumerating subsamples and noise (truncated at 40 scales, mass lost < 1e-15), against the sampler's
  outputs (chi-square; false-failure rate 1e-6 per test at the fixed seed);
* the declared ``vectorized=True`` map and update (run one row, one run, at a time) give the same outputs,
  bit for bit, as the per-record ones for the same seed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from dpharness import AddRemove, PureDP, RealInterval
from dpharness import parts as dp

SEED = 11


def _shift(state, r):
    return state[0] + r  # one-column records: r is a number


def _shift_rows(states, rows):
    return states[:, 0] + rows


def _next(state, release):
    return [float(np.asarray(release).reshape(-1)[0])]


def _next_rows(states, releases):
    return releases[:, :1]


def _mechanism(vectorized: bool, output: str = "state"):
    return dp.mechanism(
        name="two_rounds",
        records=RealInterval(0, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            2,
            dp.poisson_sample(0.5)
            >> dp.map_records(_shift_rows if vectorized else _shift, vectorized=vectorized)
            >> dp.clamp(0, 3)
            >> dp.sum()
            >> dp.laplace(1, granularity=1),
            init=[1.0],
            update=_next_rows if vectorized else _next,
            output=output,
            vectorized=vectorized,
        ),
        claim=PureDP(4),
    )


def _dlap(t, span):
    ks = np.arange(-span, span + 1)
    q = math.exp(-1 / t)
    return ks, (1 - q) / (1 + q) * q ** np.abs(ks)


def _exact_law(data, scale=1.0, span=60):
    """P(final state = y): round 1 from state 1, round 2 from the first release (the update keeps it)."""
    ks, pk = _dlap(scale, span)

    def round_law(state):
        law = {}
        for keep in itertools.product((0, 1), repeat=len(data)):
            p_sub = 0.5 ** len(data)
            total = sum(min(max(state + x, 0.0), 3.0) for x, k in zip(data, keep) if k)
            c = math.floor(total + 0.5)
            for k, p in zip(ks, pk):
                law[c + k] = law.get(c + k, 0.0) + p_sub * p
        return law

    final = {}
    for y1, p1 in round_law(1.0).items():
        if p1 < 1e-18:
            continue
        for y2, p2 in round_law(float(y1)).items():
            final[y2] = final.get(y2, 0.0) + p1 * p2
    return final


@pytest.mark.statistical
@pytest.mark.parametrize("vectorized", [False, True])
def test_batched_iteration_has_the_exact_law(vectorized):
    """Chi-square of 40 000 runs against the enumerated law (cells with expectation < 5 pooled);
    false-failure rate 1e-6."""
    data = np.array([0.5, 2.0])
    law = _exact_law(data)
    m = _mechanism(vectorized)
    n = 40_000
    out = np.asarray(m.sample(data, n, np.random.default_rng(SEED))).reshape(-1)
    values = sorted(law)
    expected = np.array([law[v] * n for v in values])
    observed = np.array([np.sum(out == v) for v in values])
    assert observed.sum() == n  # every output is on the enumerated support
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    exp = exp * obs.sum() / exp.sum()
    p = stats.chisquare(obs, exp).pvalue
    assert p > 1e-6, p


@pytest.mark.parametrize("output", ["state", "releases"])
def test_vectorized_contract_gives_the_same_outputs(output):
    data = np.array([0.25, 1.5, 2.0])
    a = _mechanism(False, output).sample(data, 500, np.random.default_rng(SEED))
    b = _mechanism(True, output).sample(data, 500, np.random.default_rng(SEED))
    np.testing.assert_array_equal(a, b)


def test_a_vectorized_map_that_breaks_the_contract_falls_back_row_by_row():
    """A 'vectorized' function that only works on one record is redone row by row (the total rule)."""

    def scalar_only(state, r):
        return float(state[0]) + float(r)  # float() of an array of rows raises

    m = dp.mechanism(
        name="fallback",
        records=RealInterval(0, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            2,
            dp.map_records(scalar_only, vectorized=True) >> dp.clamp(0, 3) >> dp.sum() >> dp.laplace(1, granularity=1),
            init=[1.0],
            update=_next,
        ),
        claim=PureDP(8),
    )
    ref = _mechanism(False)
    assert np.all(np.isfinite(m.sample(np.array([0.5, 1.0]), 100, np.random.default_rng(SEED))))
    assert ref is not None


def test_a_map_that_exits_on_one_record_gives_the_zero_record():
    """sys.exit() in a per-record function on one record (SystemExit is not an Exception) is a failing call
    like any other: the zero record, so the data set with that record releases as its neighbour does,
    instead of ending the process on one of them."""
    import sys

    import dpharness

    def exits_on_big(r):
        if r > 1.5:
            sys.exit(3)
        return float(r)

    m = dp.mechanism(
        name="exits",
        records=RealInterval(0, 2),
        relation=AddRemove(),
        steps=dp.map_records(exits_on_big) >> dp.clamp(0, 2) >> dp.sum() >> dp.laplace(2, granularity=1),
        claim=PureDP(1),
    )
    small = dpharness.release(m, np.array([0.5, 1.0]), seed=SEED)
    big = dpharness.release(m, np.array([0.5, 1.0, 1.75]), seed=SEED)
    assert small == big  # the same seed: the record that exits adds 0 to the sum


def _mixing(map_fn, update_fn, map_vectorized=True, update_vectorized=True):
    return dp.mechanism(
        name="mixing",
        records=RealInterval(0, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            3,
            dp.map_records(map_fn, vectorized=map_vectorized)
            >> dp.clamp(0, 3)
            >> dp.sum()
            >> dp.laplace(1, granularity=1),
            init=[1.0],
            update=update_fn,
            output="releases",
            vectorized=update_vectorized,
        ),
        claim=PureDP(12),
    )


def _centred_rows(states, rows):
    """Mixes rows (each row minus the mean of all): on one record, state + r - r."""
    return np.asarray(states)[..., 0] + rows - np.mean(rows)


def _centred_runs(states, releases):
    """Mixes runs (each release minus the mean of all, plus 1): on one run, [1.0]."""
    r = np.asarray(releases, dtype=float)
    return np.reshape(r - r.mean() + 1, np.shape(states))


@pytest.mark.parametrize("which", ["map", "update"])
def test_vectorized_functions_that_mix_rows_run_row_by_row(which):
    """A ``vectorized=True`` function is run on one row (one run) at a time, never on a batch: a map that
    centres the rows on their mean, or an update that centres the runs, gives the outputs of the same
    functions declared per record, for the same seed (and not what mixing would give)."""
    data = np.array([0.25, 1.5, 2.0])
    if which == "map":
        mixing, per_row = _mixing(_centred_rows, _next_rows), _mixing(_centred_rows, _next_rows, map_vectorized=False)
    else:
        mixing, per_row = (
            _mixing(_shift_rows, _centred_runs),
            _mixing(_shift_rows, _centred_runs, update_vectorized=False),
        )
    a = mixing.sample(data, 300, np.random.default_rng(SEED))
    b = per_row.sample(data, 300, np.random.default_rng(SEED))
    np.testing.assert_array_equal(a, b)


def test_a_vectorized_function_is_never_called_on_a_batch():
    """Issue 35: a function declared ``vectorized=True`` sees one row (and one run's state) per call, so no
    row's value can depend on another row; before, it was called on all 600 rows at once."""
    sizes, runs = [], []

    def counted(states, rows):
        sizes.append(len(rows))
        return _shift_rows(states, rows)

    def counted_update(states, releases):
        runs.append(len(states))
        return _next_rows(states, releases)

    m = _mixing(counted, counted_update)
    m.sample(np.array([0.25, 1.5, 2.0]), 200, np.random.default_rng(SEED))
    assert set(sizes) == {1} and len(sizes) == 3 * 200 * 3 and set(runs) == {1}


def test_centres_from_integer_units_are_the_exact_rounding():
    """Grid centres computed from (units, exponent) equal floor(v/g + 1/2) of the exact value, at halves,
    negatives, zero and far beyond 2**52 steps (never capped), for grids that are and are not powers of two."""
    from fractions import Fraction

    from dpharness.mechanisms.parts._base import _rhu
    from dpharness.mechanisms.parts._grid import _centres_units

    rng = np.random.default_rng(SEED)
    units = [0, 1, -1, 3, -3, 2**60 + 1, -(2**70) - 7] + [int(u) for u in rng.integers(-(2**62), 2**62, 200)]
    for exponent in (-1074, -60, -3, -1, 0, 2):
        for g in (Fraction(1, 2**20), Fraction(1), Fraction(3, 8), Fraction(10)):
            got = _centres_units(np.array(units, dtype=object), exponent, g).tolist()
            want = [_rhu(Fraction(u) * Fraction(2) ** exponent / g) for u in units]
            assert got == want, (exponent, g)


def test_empty_data_runs_batched(monkeypatch):
    """A Poisson-subsampled iteration on an empty data set (an audit's smallest neighbour) runs every run
    side by side, as on any other data set; one run at a time made it thousands of times slower."""
    from dpharness.mechanisms.parts._base import Batch

    def refuse(*args, **kwargs):
        raise AssertionError("ran one sample at a time")

    monkeypatch.setattr(Batch, "one_by_one", refuse)
    for vectorized in (False, True):
        out = np.asarray(_mechanism(vectorized).sample(np.zeros(0), 300, np.random.default_rng(SEED)))
        assert out.shape == (300,) and np.all(out == np.round(out))  # the grid Z: integer releases


def _adversarial_groups(rng, n_groups):
    """Doubles chosen to defeat a float filter: exact ties of v/g + 1/2, cancellation to tiny remainders,
    subnormals, magnitudes up to 2**1000, ±0, many equal values, values at a grid step ± one ulp."""
    pools = [
        [0.5, -0.5, 1.5, 2.5, -2.5, 0.0, -0.0],
        [1e300, -1e300, 2.0**-1074, 3.0, -(2.0**-1074)],
        [2.0**1000, -(2.0**1000), 0.25, 2.0**-1022],
        [0.1] * 10 + [-0.1] * 10 + [0.5],
        [np.nextafter(0.5, 1), np.nextafter(0.5, 0), 1.0, -1.0],
        [2.0**52, 2.0**52 + 1, -(2.0**53), 0.5],
        [np.nextafter(3.5, 4), -3.0, np.nextafter(-0.5, 0)],
    ]
    codes, x = [], []
    for j in range(n_groups):
        pool = pools[j % len(pools)]
        k = int(rng.integers(0, 12))
        vals = list(rng.choice(pool, size=k)) + list(rng.uniform(-4, 4, int(rng.integers(0, 4))))
        codes += [j] * len(vals)
        x += vals
    order = rng.permutation(len(x))
    return np.array(codes, dtype=np.int64)[order], np.array(x, dtype=float)[order]


def test_centres_of_sums_are_the_exact_rounding():
    """The filtered grid centres (float sums with a certified error, exact sums where undecided) equal
    floor(v/g + 1/2) of the exact sum v, saturated, on adversarial groups and grids."""
    from fractions import Fraction

    from dpharness.mechanisms.parts._base import _rhu
    from dpharness.mechanisms.parts._grid import centres_of_sums

    rng = np.random.default_rng(SEED)
    for trial in range(60):
        n_groups = int(rng.integers(1, 60))
        codes, x = _adversarial_groups(rng, n_groups)
        if trial >= 40:  # sparse: most groups hold nothing (the path that computes the others only)
            n_groups = 5 * len(x) + n_groups + int(rng.integers(1, 30))
            codes = rng.permutation(n_groups)[codes]
        for g in (
            Fraction(1),
            Fraction(1, 2**20),
            Fraction(3, 8),
            Fraction(1, 10),
            Fraction(2**40),
            Fraction(1, 2**60),
        ):
            got = centres_of_sums(codes, x, n_groups, g).tolist()
            sums = [sum((Fraction(float(v)) for v in x[codes == j]), Fraction(0)) for j in range(n_groups)]
            want = [_rhu(s / g) for s in sums]
            assert got == want, (trial, g)


def test_centres_of_int64_units_are_the_exact_rounding():
    from fractions import Fraction

    from dpharness.mechanisms.parts._base import _rhu
    from dpharness.mechanisms.parts._grid import _centres_units

    rng = np.random.default_rng(SEED)
    units = np.concatenate([[0, 1, -1, 3, -3, 2**40, -(2**40)], rng.integers(-(2**20), 2**20, 300)]).astype(np.int64)
    for exponent in (-60, -3, -1, 0, 2):
        for g in (Fraction(1, 2**20), Fraction(1), Fraction(3, 8), Fraction(10)):
            got = _centres_units(units, exponent, g).tolist()
            want = [_rhu(Fraction(int(u)) * Fraction(2) ** exponent / g) for u in units]
            assert got == want, (exponent, g)
