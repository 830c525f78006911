"""Counting events on a chunk's key histogram gives exactly the counts of their membership functions,
and the packed row keys and the float features are the same integers as their direct definitions."""

from __future__ import annotations

import numpy as np
import pytest

from dpharness.auditors import events as ev
from dpharness.auditors import floats as fl
from dpharness.auditors.families import rounding


@pytest.mark.parametrize(
    "dtype,k,lo,hi",
    [(np.uint8, 4, 0, 2), (np.int8, 10, -1, 2), (bool, 6, 0, 2), (np.int64, 3, -5, 7), (np.int16, 2, -300, 300)],
)
def test_packed_row_keys_equal_the_row_hashes(dtype, k, lo, hi):
    rng = np.random.default_rng(3)
    x = rng.integers(lo, hi, (5_000, k)).astype(dtype)
    ev.clear_cache()
    assert ev.pattern_codes(x) is not None
    assert np.array_equal(ev.row_keys(x), ev._hash_rows(x.reshape(len(x), -1)))


def test_wide_or_float_rows_are_not_packed():
    rng = np.random.default_rng(4)
    assert ev.pattern_codes(rng.integers(0, 2, (100, 30))) is None  # 2^30 codes
    assert ev.pattern_codes(rng.random((100, 3))) is None
    assert ev.pattern_codes(rng.integers(0, 2, 100)) is None  # scalars are their own keys


def _direct(events, out):
    return [int(np.asarray(e.contains(out), dtype=bool).sum()) for e in events]


@pytest.mark.parametrize("kind", ["int", "pattern", "float"])
def test_histogram_counts_equal_membership_counts(kind):
    rng = np.random.default_rng(5)
    if kind == "int":
        a, b, fresh = (rng.geometric(p, 4_000) - 1 for p in (0.3, 0.35, 0.3))
        events = [e for e in ev.propose_discrete(a, b, max_events=20)]
        events += [e for e, _ in ev.one_sided_events(a, b)]
        events += [e for e, _ in rounding.propose_rounding(a, b, max_events=24)]
    elif kind == "pattern":
        a, b, fresh = ((rng.random((4_000, 5)) < p).astype(np.uint8) for p in (0.3, 0.4, 0.3))
        events = ev.propose_discrete(a, b, max_events=30) + [
            e for e, _ in ev.one_sided_events(ev.row_keys(a), ev.row_keys(b))
        ]
    else:
        a, b, fresh = (np.round(rng.laplace(m, 1.0, 4_000) * 64) / 64 for m in (0.0, 1.0, 0.0))
        events = [e for e, _ in fl.float_structure_proposals(a, b, max_events=30)]
        events += [e for e, _ in rounding.propose_rounding(a, b, max_events=24)] + ev.propose_atoms(a, b, max_events=20)
    ev.clear_cache()
    got = ev.histogram_counts(events, fresh)
    assert got, "no event was counted on the histogram"
    want = _direct(events, fresh)
    assert all(got[i] == want[i] for i in got)
    ev.clear_cache()


def test_float_features_match_their_definitions():
    rng = np.random.default_rng(6)
    edge = [0.0, -0.0, 5e-324, -5e-324, 1e-310, 2.0, -4.0, 1.5, np.finfo(float).max, np.finfo(float).tiny, 1 / 3]
    x = np.concatenate([rng.laplace(0, 1, 2_000), np.round(rng.laplace(0, 1, 2_000) * 2**10) / 2**10, edge])
    bits = (x + 0.0).view(np.uint64)
    mant = (bits & np.uint64((1 << 52) - 1)).astype(object)
    tz = np.array([52 if m == 0 else (int(m) & -int(m)).bit_length() - 1 for m in mant], dtype=np.int64)
    sign, expo = (bits >> np.uint64(63)).astype(np.int64), ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    assert np.array_equal(fl.float_cells(x), (sign << 20) | (expo << 8) | tz)
    lowest = np.where(expo == 0, -1074 + tz, expo - 1075 + tz)
    assert np.array_equal(fl.lowest_bit(x), np.where(x == 0, 2000, lowest))
    k, b = 3, 1
    m = bits & np.uint64((1 << 52) - 1)
    want = (
        ((bits >> np.uint64(52)).astype(np.int64) << (k + b))
        | ((m >> np.uint64(52 - k)).astype(np.int64) << b)
        | (m & np.uint64(1)).astype(np.int64)
    )
    assert np.array_equal(rounding.float_subrange_bits(x, k, b), want)
