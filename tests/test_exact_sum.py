"""Exact sums of doubles (:mod:`dpharness.mechanisms._exactsum`) against the rational truth
``sum(Fraction(v) for v in x)``: adversarial data (cancellation, subnormals, every binade from 2**-1074
to 2**1023, sums beyond the double range, signed zeros, clamp edges), small blocks that exercise every
path on small inputs, and hypothesis property tests on any finite doubles. Deterministic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpharness import parts as dp
from dpharness.errors import ParameterError
from dpharness.mechanisms import _exactsum
from dpharness.mechanisms._exactsum import exact_sum, exact_sum_products, exact_sum_squares, exact_sums_by

MAX = np.finfo(float).max
TINY = 5e-324  # 2**-1074
NORMAL = np.finfo(float).tiny  # 2**-1022


def _sum(x) -> Fraction:
    return sum((Fraction(v) for v in np.ravel(x).tolist()), Fraction(0))


def _squares(x) -> Fraction:
    return sum((Fraction(v) ** 2 for v in np.ravel(x).tolist()), Fraction(0))


def _products(x, y) -> Fraction:
    return sum((Fraction(a) * Fraction(b) for a, b in zip(np.ravel(x).tolist(), np.ravel(y).tolist())), Fraction(0))


def _by(codes, x, n) -> list[Fraction]:
    return [_sum(np.asarray(x)[np.asarray(codes) == j]) for j in range(n)]


def _check_all(x, seed=0) -> None:
    """Every function on ``x`` (and a permutation of it as the second factor, random group codes)."""
    x = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    y = rng.permutation(x)
    codes = rng.integers(0, 5, x.size)
    assert exact_sum(x) == _sum(x)
    assert exact_sum_squares(x) == _squares(x)
    assert exact_sum_products(x, y) == _products(x, y)
    assert exact_sums_by(codes, x, 6) == _by(codes, x, 6)  # group 5 is empty


def _powers_of_two(seed: int) -> np.ndarray:
    """Every binade from 2**-1074 to 2**1023, both signs, with random significands, shuffled."""
    rng = np.random.default_rng(seed)
    e = np.arange(-1074, 1024)
    significand = np.where(e >= -1022, 1 + rng.random(e.size), 1.0)  # subnormal powers as they are
    v = np.ldexp(significand, e) * rng.choice([-1.0, 1.0], e.size)
    return rng.permutation(np.concatenate([v, np.ldexp(1.0, e), -np.ldexp(1.0, e[::3])]))


ADVERSARIAL = {
    "empty": [],
    "one": [0.1],
    "one subnormal": [TINY],
    "minus zero only": [-0.0],
    "signed zeros": [0.0, -0.0, -0.0, 0.0],
    "cancellation": [1e308, -1e308, TINY],
    "cancellation at the top": [MAX, MAX, -MAX, -MAX, TINY, -NORMAL],
    "beyond the double range": [MAX] * 1000,
    "beyond the double range, negative": [-MAX] * 999 + [TINY],
    "huge and tiny": [MAX, TINY, -TINY, 2.0**-1000, -MAX, 3 * TINY],
    "subnormals": [TINY * k for k in (1, 2, 3, 2**51, 2**52 - 1)] + [-TINY * 7, NORMAL, -NORMAL / 2],
    "every binade": _powers_of_two(0),
    "many equal": [0.1] * 5000,
    "many equal and one large": [1e-16] * 4096 + [1.0],
    "alternating": [1.0, -1.0 + 2**-53] * 3000,
    "ulp below one": [1 - 2**-53, 2**-53, -(2**-54)] * 100,
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_data(name):
    _check_all(ADVERSARIAL[name])


def test_results_are_fractions_and_the_empty_sum_is_zero():
    for value in (exact_sum([]), exact_sum_squares([]), exact_sum_products([], []), exact_sum([-0.0])):
        assert type(value) is Fraction and value == 0
    assert exact_sums_by(np.zeros(0, dtype=np.int64), [], 3) == [0, 0, 0]
    assert exact_sum(np.array([[0.5, 0.25], [0.125, 1.0]])) == Fraction(15, 8)  # any shape


@pytest.mark.parametrize(
    "lo, hi",
    [(0, 100), (-1, 1), (-MAX, MAX), (0, TINY), (-NORMAL, NORMAL), (-1e-300, 1e300), (2.0**-600, 2.0**600)],
)
def test_every_clamp_edge(lo, hi):
    """Records at the bounds, next to them, beyond them and between, clamped as dp.clamp does."""
    rng = np.random.default_rng(1)
    edges = [lo, hi, math.nextafter(lo, math.inf), math.nextafter(hi, -math.inf), 0.0, -0.0]
    beyond = [math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf), -MAX, MAX]
    r = rng.random(500)
    inside = lo * (1 - r) + hi * r
    x = np.concatenate([np.repeat(edges + beyond, 50), inside])
    _check_all(dp.clamp(lo, hi).apply(x))


@pytest.mark.parametrize("n", [1, 2, 3, 100, 2**15 - 1, 2**15, 2**15 + 1, 3 * 2**15 + 7])
def test_random_data_of_several_sizes(n):
    rng = np.random.default_rng(n)
    for x in (rng.random(n) * 100, rng.standard_normal(n) * np.exp2(rng.integers(-60, 60, n)), rng.integers(-9, 9, n)):
        x = x.astype(float)
        assert exact_sum(x) == _sum(x)
    assert exact_sum_squares(x) == _squares(x)


def test_squares_and_products_of_subnormals_and_huge_values():
    rng = np.random.default_rng(2)
    sub = TINY * rng.integers(1, 2**52, 300).astype(float) * rng.choice([-1.0, 1.0], 300)
    huge = MAX * rng.random(300)
    tiny = np.ldexp(1 + rng.random(300), rng.integers(-1022, -400, 300))
    mixed = rng.permutation(np.concatenate([sub, huge, tiny, rng.random(300), [0.0, -0.0, TINY, MAX, -MAX]]))
    for x in (sub, huge, tiny, mixed):
        y = rng.permutation(x)
        assert exact_sum_squares(x) == _squares(x)
        assert exact_sum_products(x, y) == _products(x, y)
    assert exact_sum_squares([TINY]) == Fraction(1, 2**2148)  # below the smallest double, still exact
    assert exact_sum_products([TINY, MAX], [MAX, MAX]) == Fraction(TINY) * Fraction(MAX) + Fraction(MAX) ** 2
    assert exact_sum_squares([MAX] * 3) == 3 * Fraction(MAX) ** 2


def test_grouped_sums_with_empty_groups():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.random(2000) * 100, [MAX, MAX, -MAX, TINY, 1e308, -1e308]])
    codes = rng.choice([0, 3, 7], x.size)
    got = exact_sums_by(codes, x, 10)
    assert got == _by(codes, x, 10) and got[1] == 0 and got[9] == 0
    assert all(type(v) is Fraction for v in got)
    assert exact_sums_by(np.full(4, 2), [MAX] * 4, 3) == [0, 0, 4 * Fraction(MAX)]


def test_large_n_of_the_largest_double():
    """3·10^6 copies of the largest double (an exact sum near 2**1045) and of values around it."""
    x = np.full(3_000_000, MAX)
    assert exact_sum(x) == 3_000_000 * Fraction(MAX)
    x[::2] = -MAX / 3
    x[1::4] = TINY
    want = 1_500_000 * Fraction(-MAX / 3) + 750_000 * Fraction(TINY) + 750_000 * Fraction(MAX)
    assert exact_sum(x) == want
    codes = np.arange(x.size) % 4
    assert exact_sums_by(codes, x, 4) == [
        750_000 * Fraction(-MAX / 3),
        750_000 * Fraction(TINY),
        750_000 * Fraction(-MAX / 3),
        750_000 * Fraction(MAX),
    ]


def test_large_n_of_few_values_against_counts():
    """10^6 records of a few values (exact truth from the counts), across grouped blocks of 2**20."""
    rng = np.random.default_rng(4)
    values = np.array([0.1, -0.3, 1e-300, 7.0, MAX / 2**20, -TINY, 0.0])
    x = values[rng.integers(0, values.size, (1 << 20) + 5)]
    codes = rng.integers(0, 3, x.size)
    want = sum((Fraction(v) * int(np.sum(x == v)) for v in values), Fraction(0))
    assert exact_sum(x) == want
    assert exact_sum_squares(x) == sum((Fraction(v) ** 2 * int(np.sum(x == v)) for v in values), Fraction(0))
    by = [sum((Fraction(v) * int(np.sum((x == v) & (codes == j))) for v in values), Fraction(0)) for j in range(3)]
    assert exact_sums_by(codes, x, 3) == by


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 7 (grouped: 5) values: every level, compression and block boundary on small inputs."""
    monkeypatch.setattr(_exactsum, "_BLOCK", 7)
    monkeypatch.setattr(_exactsum, "_GROUP_BLOCK", 5)


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_data_in_small_blocks(name, small_blocks):
    x = ADVERSARIAL[name]
    _check_all(x[:600] if len(x) > 600 else x)


@pytest.mark.parametrize("fn", [exact_sum, exact_sum_squares, lambda x: exact_sum_products(x, x[::-1])])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_value_that_is_not_finite_is_refused(fn, bad):
    x = np.array([1.0, bad, 2.0])
    with pytest.raises(ParameterError, match="not finite"):
        fn(x)
    with pytest.raises(ParameterError, match="not finite"):
        exact_sums_by(np.zeros(3, dtype=np.int64), x, 1)


def test_bad_codes_are_refused():
    with pytest.raises(ParameterError, match="n_groups"):
        exact_sums_by(np.array([0, 3]), [1.0, 2.0], 3)
    with pytest.raises(ParameterError, match="codes"):
        exact_sums_by(np.array([0.0, 1.0]), [1.0, 2.0], 3)
    with pytest.raises(ParameterError, match="same length"):
        exact_sum_products([1.0], [1.0, 2.0])


def test_the_aggregates_return_the_exact_sums():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.random(1000) * 100, [0.0, -0.0, TINY, 100.0]])
    pairs = np.column_stack([x, rng.permutation(x) - 50])
    assert dp.sum().apply(x) == _sum(x)
    assert dp.sum_squares().apply(x) == _squares(x)
    assert dp.sum_products(0, 1).apply(pairs) == _products(pairs[:, 0], pairs[:, 1])
    assert dp.sum_products(1, 1).apply(pairs) == _squares(pairs[:, 1])
    assert dp.sum_products(0, 1).apply(np.zeros((0, 2))) == 0


# --------------------------------------------------------------------------- properties

_WIDTHS = st.sampled_from([16, 32, 64])


@st.composite
def _doubles(draw, min_size=0, max_size=60):
    width = draw(_WIDTHS)
    values = draw(
        st.lists(st.floats(allow_nan=False, allow_infinity=False, width=width), min_size=min_size, max_size=max_size)
    )
    return np.array(values, dtype=float)


_PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(_doubles())
def test_property_sum(x):
    assert exact_sum(x) == _sum(x)


@_PROPERTY
@given(_doubles())
def test_property_squares(x):
    assert exact_sum_squares(x) == _squares(x)


@_PROPERTY
@given(st.integers(0, 60).flatmap(lambda n: st.tuples(_doubles(n, n), _doubles(n, n))))
def test_property_products(xy):
    x, y = xy
    assert exact_sum_products(x, y) == _products(x, y)


@_PROPERTY
@given(_doubles(), st.integers(1, 5), st.randoms(use_true_random=False))
def test_property_grouped(x, n_groups, rnd):
    codes = np.array([rnd.randrange(n_groups) for _ in range(x.size)], dtype=np.int64)
    assert exact_sums_by(codes, x, n_groups) == _by(codes, x, n_groups)


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_doubles(max_size=40))
def test_property_in_small_blocks(x):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_exactsum, "_BLOCK", 3)
        mp.setattr(_exactsum, "_GROUP_BLOCK", 4)
        assert exact_sum(x) == _sum(x)
        assert exact_sum_squares(x) == _squares(x)
        codes = np.arange(x.size) % 3
        assert exact_sums_by(codes, x, 3) == _by(codes, x, 3)


def test_grouped_level_sums_stay_below_two_to_the_53_spacings():
    """A full block (2**15) of values in [1, 2) in one group: the level sums of the grouped extraction are
    exact only because its spacing is chosen from the block size (2**m >= 2n); three bits less and they
    round."""
    x = 1 + np.random.default_rng(6).random(2**15)
    assert exact_sums_by(np.zeros(x.size, dtype=np.int64), x, 1) == [_sum(x)]


# --------------------------------------------------------------------------- clip_norm's exact check, per row


def _norm_exceeds(row, bound: Fraction, order: int) -> bool:
    values = [Fraction(v) for v in row.tolist()]
    if order == 1:
        return sum(abs(v) for v in values) > bound
    return sum(v * v for v in values) > bound * bound


def _adversarial_rows(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((300, 3)) * np.exp2(rng.integers(-30, 30, (300, 1)))
    special = np.array(
        [
            [0.6, 0.8, 0.0],
            [1.0, 1e-17, 0.0],
            [1.0, 1e-10, -0.0],
            [TINY, -TINY, 3 * TINY],
            [2.0**-600, 1.0, 0.0],
            [1e200, 1e200, -1e200],
            [MAX, 0.0, 0.0],
            [NORMAL, 1e-300, -1.0],
        ]
    )
    return np.concatenate([rows, special])


@pytest.mark.parametrize("order", [1, 2])
def test_row_norms_are_compared_with_the_bound_exactly(order):
    from dpharness.mechanisms.parts.transformations import _norms_exceed

    rows = _adversarial_rows(7)
    for bound in (Fraction(1), Fraction(MAX), Fraction(TINY), Fraction(3, 7)):
        want = [_norm_exceeds(row, bound, order) for row in rows]
        assert _norms_exceed(rows, bound, order).tolist() == want
    if order == 1:  # a row at exactly the bound does not exceed it; below its norm by 2**-2000, it does
        for row in rows[-8:]:
            exact = sum(abs(Fraction(v)) for v in row.tolist())
            assert not _norms_exceed(row[None, :], exact, 1)[0]
            assert _norms_exceed(row[None, :], exact - Fraction(1, 2**2000), 1)[0] == (exact > 0)


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_clip_norm_shrinks_each_row_as_the_row_by_row_check_did(norm, monkeypatch):
    from dpharness.mechanisms.parts import transformations

    rows = _adversarial_rows(8)
    rows[:50] = rows[:50] / np.linalg.norm(rows[:50], axis=1, keepdims=True)  # at the bound, up to ulps
    for bound in (1.0, 0.5, 1e-300):
        fast = dp.clip_norm(bound, norm=norm).apply(rows)
        order = 1 if norm == "l1" else 2
        monkeypatch.setattr(
            transformations,
            "_norms_exceed",
            lambda v, b, o: np.array([_norm_exceeds(row, b, o) for row in v], dtype=bool),
        )
        slow = dp.clip_norm(bound, norm=norm).apply(rows)
        monkeypatch.undo()
        assert np.array_equal(fast, slow)
        assert not any(_norm_exceeds(row, Fraction(bound), order) for row in fast)


def _squares_by(codes, x, n) -> list[Fraction]:
    units, exponent = _exactsum.sums_by_units(codes, x, n, squares=True)
    return [int(u) * Fraction(2) ** exponent for u in units.tolist()]


def test_grouped_sums_of_squares():
    rng = np.random.default_rng(9)
    x = np.concatenate([ADVERSARIAL["every binade"][:800], rng.random(500), [MAX, -MAX, TINY, 0.0, -0.0]])
    codes = rng.integers(0, 4, x.size)
    assert _squares_by(codes, x, 5) == [_squares(x[codes == j]) for j in range(5)]
    safe = rng.random(1000)
    assert _squares_by(np.arange(1000) % 3, safe, 3) == [_squares(safe[j::3]) for j in range(3)]


@_PROPERTY
@given(_doubles(), st.integers(1, 4))
def test_property_grouped_squares(x, n_groups):
    codes = np.arange(x.size) % n_groups
    assert _squares_by(codes, x, n_groups) == [_squares(x[codes == j]) for j in range(n_groups)]
