"""The auditor's faster proposal, ranking and counting paths give exactly what the plain numpy
computations they replace give: the same keys, histograms, quantile grids, row statistics, scores and
event counts (issue 20 §2: events evaluated on statistics, not row by row, with no change in power).
Deterministic: fixed seeds, exact comparisons."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpharness.auditors import events as ev
from dpharness.auditors import floats as fl
from dpharness.auditors import vector as vec
from dpharness.auditors.families import rounding as ro

_SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1.0, -1.0, 2.0**60, 1e308]


def _floats(seed: int, n: int) -> np.ndarray:
    """Continuous values, values on a 2^-20 grid, special values and subnormals, shuffled."""
    rng = np.random.default_rng(seed)
    parts = [
        rng.laplace(size=n),
        np.round(rng.laplace(size=n) * 2**20) / 2**20,
        rng.choice(_SPECIALS, n // 4),
        rng.standard_normal(n // 8) * 1e-310,
    ]
    x = np.concatenate(parts)
    rng.shuffle(x)
    return x


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


# --------------------------------------------------------------------------- features computed in blocks


@pytest.mark.parametrize("seed", [0, 1])
def test_float_features_in_blocks_equal_whole_array(seed):
    x = _floats(seed, 150_000)  # several blocks of ev._BLOCK, and a ragged last block
    assert len(x) > 2 * ev._BLOCK
    assert _same_bits(fl.float_cells(x), fl._float_cells(x))
    assert _same_bits(fl.lowest_bit(x), fl._lowest_bit(x))
    assert _same_bits(fl.round_trip_cells(x, (1.0, -1.0, 3.5)), fl._round_trip_cells(x, (1.0, -1.0, 3.5)))
    for k, b in ro.FLOAT_SPLITS:
        assert _same_bits(ro.float_subrange_bits(x, k, b), ro._float_subrange_bits(x, k, b))
    single = x[~(np.abs(x) > 1e38)].astype(np.float32)  # NaN kept, values float32 cannot hold left out
    assert _same_bits(fl.float_cells(single), fl._float_cells(single))


@pytest.mark.parametrize(
    "shifts", [(), (1.0, -1.0), (1.0, -1.0, 3.5), (3.0, 1e308, -1e308, 1.0, -1.0, 2.5), tuple(range(1, 11))]
)
def test_round_trip_cells_equal_their_formula(shifts):
    """The round-trip keys gathered in one scratch array are ``(sign, exponent) << n | sum_i [fl(fl(x - c_i)
    + c_i) == x] << i``, computed here one temporary per operation (specials, subnormals, overflow)."""
    x = _floats(3, 40_000)
    v = x + 0.0
    want = ((v.view(np.uint64) >> np.uint64(52)) & np.uint64(0xFFF)).astype(np.int64) << len(shifts)
    with np.errstate(over="ignore", invalid="ignore"):
        for i, c in enumerate(shifts):
            want |= (((v - c) + c) == v).astype(np.int64) << i
    assert _same_bits(fl.round_trip_cells(x, shifts), want)


def test_integer_features_in_blocks_and_tables_equal_direct():
    rng = np.random.default_rng(2)
    big = np.concatenate([rng.integers(-(2**62), 2**62, 150_000), np.array([0, -1, 2**53 + 1, 2**53 - 1, 2**62])])
    for k, b in ro.INT_SPLITS:
        assert _same_bits(ro.int_subrange_bits(big, k, b), ro._int_subrange_bits(big, k, b))
    for dtype in ("uint8", "int8", "int16", "uint16", "int32"):
        rows = rng.integers(-40_000, 40_000, (300_000, 3)).astype(dtype)
        for fn, args in ((ro.int_residues, (2,)), (ro.int_subrange_bits, (2, 1)), (ro.int_subrange_bits, (4, 1))):
            for column in (None, 1):
                direct = fn(rows.reshape(-1) if column is None else rows[:, column], *args)
                assert _same_bits(ro._Feature(fn, column, *args)(rows), direct), (dtype, fn, column)


# --------------------------------------------------------------------------- histograms and quantiles


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([np.int64, np.uint64]), st.booleans())
def test_two_sided_histogram_equals_unique_with_inverse(seed, dtype, wide):
    rng = np.random.default_rng(seed)
    n1, n2 = (int(v) for v in rng.integers(1, 3000, 2))
    high = 2**62 if wide else int(rng.integers(1, 50_000))
    a = rng.integers(0, high, n1).astype(dtype)
    b = np.concatenate([a[: n2 // 2], rng.integers(0, high, n2 - n2 // 2).astype(dtype)])
    uniq, ca, cb = ev._count_keys(a, b, False)
    want, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    assert uniq.dtype == want.dtype and np.array_equal(uniq, want)
    assert np.array_equal(ca, np.bincount(inv[:n1], minlength=len(want)))
    assert np.array_equal(cb, np.bincount(inv[n1:], minlength=len(want)))


def test_quantile_grid_by_index_equals_numpy():
    """Equal values (numpy itself returns either zero's sign, depending on how it partitions)."""
    rng = np.random.default_rng(3)
    for trial in range(400):
        n = int(rng.integers(1, 3000)) if trial % 10 else int(rng.integers(3000, 200_000))
        kind = trial % 5
        if kind == 0:
            x = rng.laplace(size=n)
        elif kind == 1:
            x = rng.integers(-3, 4, n).astype(float)
        elif kind == 2:
            x = rng.choice([0.0, -0.0, 1.0, -1.0, 1e-300, 2.5], n)
        elif kind == 3:
            x = np.round(rng.laplace(size=n) * 2**20) / 2**20
        else:
            x = rng.choice([0.0, np.inf, -np.inf, 1e308, 3.0, np.nan] if trial % 3 == 0 else [0.0, 5.0, 1e300], n)
        pooled = np.sort(x, kind="stable")
        for points in (7, 128, 512):
            q = np.linspace(0, 1, points + 1)[1:-1]
            got = ev._inverted_cdf_sorted(pooled, q)
            assert np.array_equal(got, np.quantile(x, q, method="inverted_cdf"), equal_nan=True), (trial, points)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sorted_copy_equals_sort(seed):
    rng = np.random.default_rng(seed)
    for x in (rng.integers(0, 5, 20_000).astype(float), rng.integers(-50, 50, 20_000) * 0.25, _floats(seed, 5_000)):
        assert _same_bits(ev._sorted_floats(x), np.sort(x))


def test_atoms_match_unique_and_isin():
    rng = np.random.default_rng(4)
    a = np.round(rng.laplace(size=20_000) * 2**8) / 2**8
    b = np.round((1 + rng.laplace(size=20_000)) * 2**8) / 2**8
    a[::97], b[::89] = np.nan, -0.0
    vals, counts = np.unique(np.concatenate([a, b]), return_counts=True)
    atoms = vals[counts >= 2]
    ina, inb = np.isin(a, atoms), np.isin(b, atoms)
    want = ev._discrete_events(
        ev.row_keys(a[ina]), ev.row_keys(b[inb]), a[ina], b[inb], max_events=40, object_kind=False, label="output"
    )
    got = ev.propose_atoms(a, b, max_events=40)
    assert [e.description for e in got] == [e.description for e in want]
    for g, w in zip(got, want):
        assert np.array_equal(g.contains(a), w.contains(a)) and np.array_equal(g.contains(b), w.contains(b))


# --------------------------------------------------------------------------- row statistics and scores


@pytest.mark.parametrize("dtype", ["float64", "uint8", "int8", "int16", "int32", "bool"])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 10])
def test_row_sum_and_max_equal_numpy(dtype, k):
    rng = np.random.default_rng(k)
    if dtype == "float64":
        rows = rng.laplace(size=(20_000, k))
        rows[::7] = -0.0
        rows[::11, 0] = 0.0
    else:
        rows = rng.integers(-100, 100, (20_000, k)).astype(dtype)
    floats = np.asarray(rows, dtype=float).reshape(len(rows), -1)
    assert _same_bits(ev._row_max(rows), floats.max(axis=1))
    got, want = ev._row_sum(rows), floats.sum(axis=1)
    assert _same_bits(got, want) if (k <= 2 or dtype != "float64") else np.array_equal(got, want)


def test_linear_score_in_blocks_equals_whole():
    rng = np.random.default_rng(5)
    a = np.column_stack([rng.laplace(size=40_000), rng.choice([0.0, 1.0, 0.5], 40_000)])
    b = np.column_stack([1 + rng.laplace(size=40_000), rng.choice([0.0, 1.0, 0.5], 40_000)])
    fmap = vec._FeatureMap(a, b)
    w = rng.standard_normal(fmap.n_features)
    x = np.column_stack([rng.laplace(size=200_000), rng.choice([0.0, 1.0, 0.5, 2.0], 200_000)])
    assert _same_bits(vec._LinearScorer(fmap, w).score(x), fmap.score(x, w))


def _score_reference(fmap, x, w):
    """The feature map's score as first written: atom indicators added, then the value terms with
    the atoms' rows zeroed (the arithmetic that ``_FeatureMap.score`` must reproduce bit for bit)."""
    s = np.zeros(len(x))
    f = 0
    for c in fmap.columns:
        nf = len(c.values) + (2 if c.kind == "continuous" else 0)
        wc = w[f : f + nf]
        v = x[:, c.j]
        for i, val in enumerate(c.values):
            if wc[i] != 0:
                s[v == val] += wc[i]
        if c.kind == "continuous":
            vf = v.astype(float)
            part = np.zeros(len(x))
            if wc[-2] != 0:
                part += wc[-2] * np.clip((vf - c.center) / c.scale, -50, 50)
            if wc[-1] != 0:
                if c.hi > c.lo:
                    part += wc[-1] * ((np.clip(vf, c.lo, c.hi) - c.lo) / (c.hi - c.lo))
                else:
                    part += wc[-1] * (vf > c.lo)
            if len(c.values):
                part[np.isin(v, c.values)] = 0.0
            s += part
        f += nf
    return s


@pytest.mark.parametrize("zeros", ["none", "values", "ramps", "atoms", "columns"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_linear_score_equals_reference_bit_for_bit(zeros, seed):
    # continuous columns with atoms (a sparse vector's ⊥ and stop codes), one with equal medians (a
    # step instead of a ramp), a categorical column; weights with zeros in every position
    rng = np.random.default_rng(seed)
    n = 30_000
    same = rng.laplace(size=n)

    def side(shift):
        cols = [rng.laplace(size=n) + shift for _ in range(3)]
        cols[0][rng.random(n) < 0.3] = -4.6e18
        cols[1][rng.random(n) < 0.2] = -9.2e18
        cols[1][rng.random(n) < 0.2] = -4.6e18
        cols.append(same.copy())  # the same on both sides: equal medians, lo == hi
        cols.append(rng.choice([0.0, 1.0, 2.0], n, p=[0.5, 0.3 + shift / 10, 0.2 - shift / 10]))
        return np.column_stack(cols)

    a, b = side(1.0), side(0.0)
    fmap = vec._FeatureMap(a, b)
    assert {c.kind for c in fmap.columns} == {"continuous", "discrete"}
    assert any(c.kind == "continuous" and c.hi == c.lo for c in fmap.columns)
    w = rng.standard_normal(fmap.n_features)
    f = 0
    for c in fmap.columns:
        nv = len(c.values)
        nf = nv + (2 if c.kind == "continuous" else 0)
        if zeros == "values" and c.kind == "continuous":
            w[f + nv] = 0.0
        if zeros == "ramps" and c.kind == "continuous":
            w[f + nv + 1] = 0.0
        if zeros == "atoms":
            w[f : f + nv] = 0.0
        if zeros == "columns" and c.j % 2 == 0:
            w[f : f + nf] = 0.0
        f += nf
    x = np.vstack([side(0.5), a[:1000]])
    assert _same_bits(fmap.score(x, w), _score_reference(fmap, x, w))


# --------------------------------------------------------------------------- counting on histograms


def test_set_events_counted_on_histogram_equal_row_counts():
    rng = np.random.default_rng(6)
    x = np.round(rng.laplace(size=300_000) * 2**10) / 2**10
    keys = ev.row_keys(x)
    uniq = np.unique(keys)
    sets = [uniq[rng.choice(len(uniq), size, replace=False)] for size in (1, 3, 10, 200, len(uniq) // 2)]
    sets.append(np.concatenate([uniq[:5], np.array([1, 2, 3], dtype=uniq.dtype)]))  # keys never seen
    events = [ev.set_event(s, object_kind=False) for s in sets]
    events += [ev.Event(ev._Outside(e.contains), "complement") for e in events[:3]]
    events += [ev.set_event(s, object_kind=False) for s in sets[:6]]  # 12 or more: the histogram is sorted
    counts = ev.histogram_counts(events, x)
    assert set(counts) == set(range(len(events)))
    for i, e in enumerate(events):
        assert counts[i] == int(np.count_nonzero(e.contains(x)))
    ev.clear_cache()


def test_example_outputs_are_the_first_rows_holding_each_key():
    rng = np.random.default_rng(7)
    keys_a, keys_b = rng.integers(0, 500, 50_000), rng.integers(300, 900, 50_000)
    outs_a, outs_b = keys_a * 0.5, keys_b * 0.5
    wanted = np.array([0, 17, 299, 300, 650, 899, 12345])
    got = ev._first_outputs(wanted, ((keys_a, outs_a), (keys_b, outs_b)))
    for k in wanted.tolist():
        ia, ib = np.flatnonzero(keys_a == k), np.flatnonzero(keys_b == k)
        if len(ia):
            assert got[k] == repr(outs_a[ia[0]].item())
        elif len(ib):
            assert got[k] == repr(outs_b[ib[0]].item())
        else:
            assert k not in got


def test_interval_in_blocks_equals_comparisons():
    x = _floats(8, 100_000)
    for lo, hi in ((0.5, 2.0), (-np.inf, 0.0), (0.0, np.inf), (1.0, 1.0), (-0.0, 1e-300)):
        assert np.array_equal(ev._interval(lo, hi).contains(x), (x >= lo) & (x < hi))
        assert np.array_equal(ev._interval(lo, hi).contains(x[:1000]), (x[:1000] >= lo) & (x[:1000] < hi))


def test_set_events_on_dense_counts_equal_row_counts():
    """Small-range integer keys (float cells, lowest bits, residues): events read off counts by offset,
    with key sets that reach outside the chunk's range, complements and half-lines."""
    rng = np.random.default_rng(9)
    x = _floats(9, 60_000)
    for feature in (fl.float_cells, fl.lowest_bit):
        transform = fl._Picked(feature, None)
        keys = feature(x)
        uniq = np.unique(keys)
        sets = [uniq[:1], uniq[rng.choice(len(uniq), 5, replace=False)], np.array([uniq[0] - 1, uniq[-1] + 1, 2**62])]
        sets.append(np.array([-(2**63) + 1, uniq[0]]))  # far below the range: no wrap-around
        events = [ev.Event(ev.KeyMembership(ev.KeySet(s), transform), "set") for s in sets]
        events += [ev.Event(ev._Outside(e.contains), "complement") for e in events[:2]]
        for bound in (int(uniq[0]) - 5, int(uniq[len(uniq) // 2]), int(uniq[-1]) + 5):
            events += [ev.Event(ev._Beyond(bound, below, transform), "beyond") for below in (True, False)]
        counts = ev.histogram_counts(events, x)
        assert set(counts) == set(range(len(events)))
        for i, e in enumerate(events):
            assert counts[i] == int(np.count_nonzero(e.contains(x))), (feature.__name__, i)
        ev.clear_cache()


@pytest.mark.parametrize("kind", ["continuous", "few values", "many integers", "grid"])
def test_too_many_patterns_only_when_pattern_events_propose_nothing(kind):
    rng = np.random.default_rng(10)
    for trial in range(6):
        n, k = int(rng.integers(100, 12_000)), int(rng.integers(1, 4))
        if kind == "continuous":
            fa, fb = rng.laplace(size=(n, k)), rng.laplace(size=(n, k))
        elif kind == "few values":
            fa, fb = rng.integers(0, 3, (n, k)), rng.integers(0, 3, (n, k))
        elif kind == "many integers":
            fa, fb = rng.integers(0, 6000, (n, k)), rng.integers(0, 6000, (n, k))
        else:
            fa, fb = np.round(rng.laplace(size=(n, k)) * 4) / 4, np.round(rng.laplace(size=(n, k)) * 4) / 4
        coder = vec._PatternCoder(fa, fb)
        if vec._too_many_patterns(fa, fb):
            assert coder.ok is False or vec._pattern_events(coder, fa, fb, fa, fb, (10**6,), 3.0) == []


def test_one_large_set_event_counted_by_offset_equals_row_count():
    x = _floats(11, 60_000)
    transform = fl._Picked(fl.lowest_bit, None)
    keys = np.unique(fl.lowest_bit(x))
    for event in (
        ev.Event(ev.KeyMembership(ev.KeySet(keys[::2]), transform), "set"),
        ev.Event(ev._Outside(ev.KeyMembership(ev.KeySet(keys[1:-1]), transform)), "complement"),
    ):
        counts = ev.histogram_counts([event], x)
        assert counts == {0: int(np.count_nonzero(event.contains(x)))}
        ev.clear_cache()


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int64", "uint64", "bool"])
def test_pattern_features_column_by_column_equal_numpy(dtype):
    rng = np.random.default_rng(12)
    for k in (1, 4, 10):
        rows = rng.integers(-3, 3, (5_000, k)).astype(dtype)
        if dtype in ("int64", "uint64"):
            rows[::7, 0] = np.array(2**62, dtype=dtype)  # large entries: the int64 sum wraps alike
        want_nonzero = np.count_nonzero(rows.reshape(len(rows), -1), axis=1)
        want_sum = rows.reshape(len(rows), -1).astype(np.int64).sum(axis=1)
        assert np.array_equal(ev._nonzero_coordinates(rows), want_nonzero)
        assert _same_bits(ev._integer_row_sum(rows), want_sum)


def _atoms_by_rows(train_a, train_b, *, max_events):
    """propose_atoms as it was: the rows holding an atom matched by key, in their order."""
    a = np.asarray(train_a, dtype=float).reshape(-1)
    b = np.asarray(train_b, dtype=float).reshape(-1)
    pooled = np.sort(np.concatenate([a, b]))
    atoms = pooled[1:][pooled[1:] == pooled[:-1]]
    if len(atoms) == 0:
        return []
    ka, kb = ev.row_keys(a), ev.row_keys(b)
    atom_keys = ev.KeySet(ev.row_keys(atoms))
    ina, inb = atom_keys(ka), atom_keys(kb)
    return ev._discrete_events(
        ka[ina], kb[inb], a[ina], b[inb], max_events=max_events, object_kind=False, label="output"
    )


@pytest.mark.parametrize("seed", range(6))
def test_atoms_read_off_sorted_outputs_equal_atoms_matched_by_rows(seed):
    """The atom events found from the sorted outputs are the events found by matching rows: the same
    words, the same members on fresh outputs (grids, clamping bounds, -0.0 beside 0.0, NaN, no atom)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 30_000))
    kinds = [
        lambda: np.clip(rng.laplace(size=n), -1, 1),
        lambda: np.round(rng.laplace(size=n) * 2**10) / 2**10,
        lambda: rng.choice(_SPECIALS, n),
        lambda: rng.laplace(size=n),
        lambda: np.where(rng.random(n) < 0.5, -0.0, 0.0) + np.round(rng.laplace(size=n)) * (rng.random(n) < 0.3),
    ]
    a, b = kinds[seed % len(kinds)](), kinds[(seed + 1) % len(kinds)]()
    fresh = np.concatenate([a, b, _floats(seed, 2_000)])
    for x, y in ((a, b), (b, a), (a, a[:0])):
        ev.clear_cache()
        got = ev.propose_atoms(x, y, max_events=40)
        ev.clear_cache()
        want = _atoms_by_rows(x, y, max_events=40)
        assert [e.description for e in got] == [e.description for e in want]
        for e, f in zip(got, want):
            assert np.array_equal(e.contains(fresh), f.contains(fresh))


def _distinct_reference(flat: np.ndarray):
    """What :func:`ev.distinct_outputs` returns for a float chunk, by its rule, from ``np.unique``: the
    distinct values and their rows when they lie on the grid of the first 4096 nonzero outputs, span at
    most 2^22 of its steps, hold no -0.0 and are at most a quarter of the rows; else None."""
    probe = flat[: ev._PROBE]
    probe = probe[probe != 0]
    if len(probe) == 0:
        return None
    e = int(fl.lowest_bit(probe).min())
    if not -1000 < e < 1000:
        return None
    s = flat / 2.0**e
    if not (np.all(np.isfinite(s)) and np.all(s == np.round(s)) and np.all(np.abs(s) <= 2.0**52)):
        return None
    if s.max() - s.min() > ev._DISTINCT_RANGE or np.any(np.signbit(flat[flat == 0])):
        return None
    values, counts = np.unique(flat, return_counts=True)
    return None if len(values) > len(flat) // ev._DISTINCT_SHARE else (values, counts)


@pytest.mark.parametrize("steps", [2**10, 2**21, 2**22, 2**22 + 1, 2**23, 2**30])
@pytest.mark.parametrize("tail", [False, True])
def test_distinct_float_outputs_equal_unique_whatever_the_span(steps, tail):
    """Grid outputs spread over about ``steps`` grid steps, in the first 4096 rows (the probe, which can
    answer None by itself) or only in the rows after them (``tail``: the probe sees a narrow span, the
    chunk does not): the distinct outputs and their rows are those of ``np.unique``, or both None."""
    rng = np.random.default_rng(steps)
    k = rng.integers(0, 64, 40_000)
    k[[0, 1]] = 1  # the grid's step is 2^-20: its lowest bit is set in the probe
    span_rows = slice(5_000, None) if tail else slice(None)
    k[span_rows][::997] = rng.integers(-(steps // 2), steps // 2 + 1, len(k[span_rows][::997]))
    k[span_rows][0], k[span_rows][1] = -(steps // 2), steps // 2
    flat = k.astype(np.float64) * 2.0**-20
    got, want = ev.distinct_outputs(flat), _distinct_reference(flat)
    if want is None:
        assert got is None
    else:
        assert got is not None and np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
