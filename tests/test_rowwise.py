"""User functions run per record by construction (issue 35, item 4; :mod:`dpharness.mechanisms._rowwise`).

* the row-mixing functions of the issue (scale by the batch's largest value, winsorise at the batch's 99th
  percentile, a matrix product whose last bits depend on the batch) declared ``vectorized=True`` are no
  longer run on a batch: row k's value is the function of row k alone (before: PROVED while the audit
  certified ε >= 10 for the first);
* an honest function compiled with numba (``compiled=True`` or an ``numba.njit`` function) gives, for every
  row, bit for bit the value of the compiled function on that row alone, whatever the batch and its split,
  with the total rule (a raise or a wrong length: zeros; NaN: 0; ±inf: ±max double);
* the proof's assumptions and the gate line name the path that ran; without numba, compiled=True runs
  one record at a time and says so; bad input is a ParameterError naming the argument and the fix.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpharness
from dpharness import AddRemove, ApproxDP, PureDP, RealBox, RealInterval
from dpharness import parts as dp
from dpharness.errors import ParameterError
from dpharness.mechanisms import _rowwise

SEED = 5
numba = pytest.importorskip("numba", reason="the compiled path needs the numba extra")


def _scale_by_max(rows):
    return rows / np.max(np.abs(rows))


def _winsorise(rows):
    return np.minimum(rows, np.percentile(rows, 99))


def _sum_mechanism(fn, **kw):
    return dp.mechanism(
        name="mixing_sum",
        records=RealInterval(-100, 100),
        relation=AddRemove(),
        steps=dp.map_records(fn, **kw) >> dp.clamp(-1, 1) >> dp.sum() >> dp.laplace(1),
        claim=PureDP(1),
    )


@pytest.mark.parametrize("fn", [_scale_by_max, _winsorise], ids=["scale_by_max", "winsorise"])
def test_row_mixing_vectorized_functions_see_one_row(fn):
    """The issue's examples: PROVED at ε = 1, and now each call sees one record, so the release is the
    per-record map's (scale by its own |x|: the sign; winsorise at its own percentile: itself) — on
    3e8efa1 the batch call mixed the records and an audit certified ε >= 10.2 for the first."""
    seen = []

    def spy(rows):
        seen.append(len(rows))
        return fn(rows)

    data = np.concatenate([np.full(20, 0.01), [100.0]])
    m = _sum_mechanism(spy, vectorized=True)
    assert dpharness.prove(m).verdict.value == "PROVED"
    got = m.sample(data, 200, np.random.default_rng(SEED))
    assert set(seen) == {1}
    per_record = {_scale_by_max: np.sign, _winsorise: lambda r: r}[fn]
    want = _sum_mechanism(per_record).sample(data, 200, np.random.default_rng(SEED))
    np.testing.assert_array_equal(got, want)


def test_a_vectorized_matrix_product_is_row_k_alone():
    """``rows @ w`` on a batch differs from the one-row product in the last bits on most rows (BLAS
    blocks by the batch): run one row at a time, row k's value is the same in any batch (fails on
    3e8efa1)."""
    rng = np.random.default_rng(SEED)
    w = rng.normal(size=7)
    t = dp.map_records(lambda rows: rows @ w, vectorized=True)
    rows = rng.normal(size=(500, 7))
    whole = t.apply_rows(rows, None)
    alone = np.array([t.apply_rows(rows[k : k + 1], None)[0] for k in range(len(rows))])
    np.testing.assert_array_equal(whole, alone)


def _poly(r):
    return np.exp(-0.5 * r[0] * r[1]) + np.dot(r, r) / (1.0 + r[2] ** 2) - np.sqrt(abs(r[1]))


@pytest.mark.parametrize("fn", [_poly, numba.njit(_poly)], ids=["compiled=True", "an njit function"])
def test_compiled_rows_are_bit_identical_for_any_split(fn):
    """Row k's value is, bit for bit, the compiled function on row k alone, whatever the batch size and
    the split of the rows into batches (and equal to calling the compiled function on the row)."""
    t = dp.map_records(fn, compiled=True) if fn is _poly else dp.map_records(fn)
    assert t.path == _rowwise.COMPILED
    rng = np.random.default_rng(SEED)
    rows = rng.normal(size=(2000, 3)) * 10.0 ** rng.integers(-3, 4, size=(2000, 1))
    whole = t.apply_rows(rows, None)
    one_call = numba.njit(_poly)
    big = np.finfo(float).max  # the total rule: ±inf is ±(the largest double), NaN is 0
    np.testing.assert_array_equal(whole, np.nan_to_num([one_call(r.copy()) for r in rows], posinf=big, neginf=-big))
    for _ in range(5):
        cuts = np.sort(rng.choice(np.arange(1, len(rows)), size=int(rng.integers(1, 40)), replace=False))
        parts = np.concatenate([t.apply_rows(p, None) for p in np.split(rows, cuts)])
        np.testing.assert_array_equal(whole, parts)


def test_compiled_map_is_total_and_reads_its_row_only():
    """The total rule on the compiled path: a raise (here an index past the row: bounds are checked, so it
    reads nothing of the next row) or a wrong length gives zeros, NaN gives 0, ±inf ±max double; the
    other rows keep their values."""

    def f(r):
        if r[0] > 1.0:
            return r[2]  # a two-column row: IndexError
        if r[0] < -1.0:
            return np.log(r[0])  # NaN
        if r[1] > 1.0:
            return np.inf
        return r[0] + r[1]

    t = dp.map_records(f, compiled=True)
    rows = np.array([[0.5, 0.25], [2.0, 1.0], [-2.0, 0.0], [0.0, 2.0], [0.125, 0.5]])
    got = t.apply_rows(rows, None)
    np.testing.assert_array_equal(got, [0.75, 0.0, 0.0, np.finfo(float).max, 0.625])

    def pair(r):
        return np.array([r[0], 1.0]) if r[0] > 0 else np.zeros(3)  # the wrong length on the second row

    t2 = dp.map_records(pair, columns=2, compiled=True)
    np.testing.assert_array_equal(t2.apply_rows(np.array([[1.5, 0.0], [-1.0, 0.0]]), None), [[1.5, 1.0], [0.0, 0.0]])


def _grad(theta, record):
    x, y = record
    return (1 / (1 + np.exp(-theta[0] * x)) - y) * x


def _step(theta, noisy_sum):
    return theta - 0.5 * noisy_sum / 100


def _dpsgd(rounds=20, **kw):
    return dp.mechanism(
        name="dpsgd_small",
        records=RealBox(-1, 1, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            rounds,
            dp.poisson_sample(0.25)
            >> dp.map_records(_grad, compiled=kw.pop("map_compiled", kw.get("compiled", False)))
            >> dp.clip_norm(1)
            >> dp.sum()
            >> dp.gaussian(sigma=1.0),
            init=[0.0],
            update=_step,
            **kw,
        ),
        claim=ApproxDP(10, 1e-5),
    )


def _sgd_data():
    rng = np.random.default_rng(SEED)
    return np.column_stack([rng.uniform(-1, 1, 10), rng.integers(0, 2, 10)]).astype(float)


def test_compiled_dpsgd_matches_the_per_record_path_and_any_run_count():
    """The compiled grad and step give the per-record Python path's releases here (these functions round
    the same way compiled), and each run's state is the same whether 1, 7 or 64 runs go side by side
    (the runs are independent, so run 0 of a batch of n with seed s is not comparable across n: compare
    the whole outputs for one n, and one run alone against a batch of one)."""
    data = _sgd_data()
    compiled, python = _dpsgd(compiled=True), _dpsgd()
    for n in (1, 7, 64):
        a = compiled.sample(data, n, np.random.default_rng(SEED))
        b = python.sample(data, n, np.random.default_rng(SEED))
        np.testing.assert_array_equal(a, b)


def test_the_proof_and_the_gate_name_the_path():
    data_free = {
        "compiled": (_dpsgd(compiled=True), "compiled per row (numba njit", "compiled per run (numba)"),
        "python": (_dpsgd(), "called from Python on each row alone", "one run at a time (Python)"),
        "vectorized": (
            _sum_mechanism(_scale_by_max, vectorized=True),
            "one row at a time (vectorized=True: called on a one-row array per row, never on a batch",
            "map_records(_scale_by_max): one row at a time (vectorized=True)",
        ),
    }
    from dpharness.cli import _gate_line
    from dpharness.pipeline import Check, _user_code

    for name, (m, in_proof, in_gate) in data_free.items():
        proof = dpharness.prove(m)
        assert proof.verdict.value == "PROVED", name
        said = [a for a in proof.assumptions if a.startswith("user functions run on one record")]
        assert len(said) == 1 and in_proof in said[0], (name, proof.assumptions)
        check = Check(name=name, user_code=_user_code(m))
        assert in_gate in _gate_line(check) or in_gate in "; ".join(check.user_code), (name, check.user_code)
        assert Check.from_json(check.to_json()).user_code == check.user_code
    line = _gate_line(Check(name="x", user_code=_user_code(data_free["compiled"][0]), proof=None))
    assert (
        "user code: iterate's update _step: compiled per run (numba); map_records(_grad): compiled per row (numba)"
        in line
    )


def test_without_numba_compiled_runs_one_record_at_a_time_and_says_so(monkeypatch):
    monkeypatch.setattr(_rowwise, "numba_installed", lambda: False)
    m = _dpsgd(rounds=3, compiled=True)
    assert dpharness.prove(m).verdict.value == "PROVED"
    said = " ".join(dpharness.prove(m).assumptions)
    assert "numba is not installed" in said and "pip install numba" in said
    data = _sgd_data()
    np.testing.assert_array_equal(
        m.sample(data, 9, np.random.default_rng(SEED)), _dpsgd(rounds=3).sample(data, 9, np.random.default_rng(SEED))
    )


def test_with_intel_svml_compiled_runs_one_record_at_a_time_and_says_so(monkeypatch):
    """numba with Intel SVML may vectorise math across rows (a row's last bits then depend on its position):
    the compiled path is not taken there, and the proof says why and how to turn SVML off."""
    monkeypatch.setattr(_rowwise, "_svml", lambda: True)
    t = dp.map_records(_poly, compiled=True)
    assert t.path == _rowwise.SVML
    assert "NUMBA_DISABLE_INTEL_SVML=1" in t.user_code()[0]
    rows = np.random.default_rng(SEED).normal(size=(5, 3))
    np.testing.assert_array_equal(t.apply_rows(rows, None), dp.map_records(_poly).apply_rows(rows, None))


def test_bad_input_names_the_argument_and_the_fix():
    with pytest.raises(
        ParameterError, match=r"compiled=True \(or an numba.njit function\) and vectorized=True: pass one"
    ):
        dp.map_records(_poly, compiled=True, vectorized=True)
    with pytest.raises(ParameterError, match="and vectorized=True: pass one"):
        dp.map_records(numba.njit(_poly), vectorized=True)
    with pytest.raises(ParameterError, match=r"compiled='yes' is not one of"):
        dp.map_records(_poly, compiled="yes")
    with pytest.raises(ParameterError, match="is not a Python function, so numba cannot compile it"):
        dp.map_records(np.sin, compiled=True)
    held = {"a": 1}

    def uses_a_dict(r):
        return held["a"] * r

    t = dp.map_records(uses_a_dict, compiled=True)
    with pytest.raises(ParameterError, match=r"fn='uses_a_dict' could not be compiled with numba .*drop compiled=True"):
        t.apply_rows(np.array([1.0, 2.0]), None)

    def bad_step(theta, noisy_sum):
        return theta / 0.0 * noisy_sum  # inf or NaN

    m = dp.mechanism(
        name="bad_update",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.iterate(2, dp.count() >> dp.laplace(1), init=[1.0], update=bad_step, compiled=True),
        claim=PureDP(2),
    )
    with pytest.raises(ParameterError, match="update returned, for run 0, a value that is not 1 finite numbers"):
        m.sample(np.array([0.5]), 4, np.random.default_rng(SEED))


def test_a_compiled_update_sees_one_run():
    """A compiled update that would average the runs cannot: it receives one run's state and release."""

    def centred(theta, release):
        return theta + release - np.mean(np.array([release]))  # one run: theta

    m = dp.mechanism(
        name="centred_runs",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.iterate(3, dp.count() >> dp.laplace(1), init=[1.0], update=centred, compiled=True),
        claim=PureDP(3),
    )
    np.testing.assert_array_equal(m.sample(np.array([0.5, 0.25]), 50, np.random.default_rng(SEED)), np.ones(50))


def _whole_batch(a):
    """The array ``a`` is a view of (its ``base``, followed to the end), or ``a`` itself."""
    while getattr(a, "base", None) is not None and isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _batch_mean(row):
    """A function of one row that reads the whole batch through the row's ``base`` when it is a view."""
    return float(np.mean(_whole_batch(np.asarray(row))))


def _doubled_in_place(row):
    row *= 2  # writes into its argument
    return float(np.sum(row))


@pytest.mark.parametrize("vectorized", [False, True], ids=["per record", "vectorized=True"])
def test_a_row_is_passed_as_a_copy_not_a_view_of_the_batch(vectorized):
    """Row k's value cannot depend on another row even through the argument's ``base`` (a view of the
    batch), and a function writing into its argument changes neither the records nor the other runs (before:
    row k was ``rows[k]`` / ``rows[k:k+1]``, a view of the whole batch: the first row's value was the batch's
    mean, and the records were doubled in place)."""
    data = np.array([[1.0, 1.0], [2.0, 2.0], [9.0, 9.0]])
    mean = dp.map_records(_batch_mean, vectorized=vectorized)
    np.testing.assert_array_equal(mean.apply(data), [1.0, 2.0, 9.0])
    np.testing.assert_array_equal(mean.apply(data[:1]), [1.0])
    kept = data.copy()
    np.testing.assert_array_equal(
        dp.map_records(_doubled_in_place, vectorized=vectorized).apply(data), [4.0, 8.0, 36.0]
    )
    np.testing.assert_array_equal(data, kept)  # the records are as they were


def test_an_update_gets_its_own_runs_state_and_release():
    """An update reading the batch of states through its argument's ``base`` sees its own run only."""

    def batch_size(theta, release):
        return [float(np.size(_whole_batch(np.asarray(theta))))]

    m = dp.mechanism(
        name="batch_size_update",
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.iterate(2, dp.count() >> dp.laplace(1), init=[1.0], update=batch_size),
        claim=PureDP(2),
    )
    np.testing.assert_array_equal(m.sample(np.array([0.5]), 7, np.random.default_rng(SEED)), np.ones(7))


_SEEN = [0.0]


def _running_max(r):  # the largest record seen so far, kept in Python and reached from compiled code
    with numba.objmode(y="float64"):
        _SEEN[0] = max(_SEEN[0], r)
        y = _SEEN[0]
    return y


@numba.njit
def _objmode_helper(r):
    with numba.objmode(y="float64"):
        _SEEN[0] += r
        y = _SEEN[0]
    return y


def _calls_objmode_helper(r):  # the escape one call down
    return _objmode_helper(r) + 0.0


def _ctypes_counter():
    import ctypes

    state = [0.0]

    @ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    def bump(x):
        state[0] += x
        return state[0]

    def fn(r):  # a ctypes callback: Python state reached from compiled code at a baked-in address
        return bump(r)

    fn.keep = bump  # the callback must outlive the function
    return fn


@pytest.mark.parametrize(
    "fn", [_running_max, _calls_objmode_helper, _ctypes_counter()], ids=["objmode", "objmode_callee", "ctypes"]
)
def test_a_compiled_function_that_leaves_compiled_code_is_refused(fn):
    """numba.objmode (here or in a function it calls) and ctypes callbacks run code that keeps state between
    rows: the running maximum was PROVED at ε = 1 (assumption: row k's value depends on row k alone) while
    one record 1.0 placed first moved every later row to 1 (mean release 0.02 vs 100.98 on 100 zeros). It is
    refused before any row runs, on every input, and the proof is not PROVED."""
    m = _sum_mechanism(fn, compiled=True)
    _SEEN[0] = 0.0
    for data in ([], [0.5], [1.0, 0.0, 0.0]):
        with pytest.raises(ParameterError, match=r"leaves compiled code.*numba\.njit compiles"):
            m.sample(np.asarray(data, dtype=float), 3, np.random.default_rng(SEED))
        with pytest.raises(ParameterError, match="leaves compiled code"):
            dpharness.release(m, np.asarray(data, dtype=float), seed=SEED, quiet=True)
    assert _SEEN[0] == 0.0  # no row reached the function
    assert dpharness.prove(m).verdict.value != "PROVED"


def test_an_uncompilable_function_is_refused_on_the_empty_data_set_too():
    """It was compiled when a row first reached it: the empty data set released and its neighbour with one
    record raised (a raise as one neighbour's output)."""
    g = np.zeros(1)

    def writes_a_global(r):  # numba refuses to write a global array
        g[0] += r
        return g[0]

    m = _sum_mechanism(writes_a_global, compiled=True)
    for data in ([], [0.5]):
        with pytest.raises(ParameterError, match="could not be compiled with numba"):
            dpharness.release(m, np.asarray(data, dtype=float), seed=SEED, quiet=True)


def test_a_compiled_update_that_leaves_compiled_code_is_refused():
    def update(state, release):
        with numba.objmode(y="float64"):
            _SEEN[0] += release
            y = _SEEN[0]
        return (y,)

    m = dp.mechanism(
        name="objmode_update",
        records=RealBox(-1, 1, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            2,
            dp.map_records(lambda s, r: r[0] * s[0], compiled=True)
            >> dp.clip_norm(1)
            >> dp.sum()
            >> dp.gaussian(sigma=1),
            init=[1.0],
            update=update,
            compiled=True,
        ),
        claim=ApproxDP(4, 1e-5),
    )
    with pytest.raises(ParameterError, match="update=.*leaves compiled code"):
        m.sample(np.zeros((3, 2)), 2, np.random.default_rng(SEED))
