"""Audit targets for IBM's diffprivlib (``pip install diffprivlib``).

Written from diffprivlib's public documentation: ``diffprivlib.mechanisms`` (``Laplace``,
``Gaussian``, ``GaussianAnalytic``, ``GaussianDiscrete``, ``Geometric``: constructed with
``epsilon``, ``delta``, ``sensitivity``, ``random_state``; ``randomise(value)`` releases one noisy
value) and ``diffprivlib.tools`` (``sum``, ``mean`` with ``bounds``, ``epsilon``, ``random_state``,
``accountant``). Claims are read from the library: a mechanism's ``epsilon`` and ``delta``
attributes (after its own validation), and for the tools the budget a ``BudgetAccountant`` records
as spent by one call.

Randomness: the mechanisms accept ``random_state``; each chunk of samples builds the mechanism
with a ``numpy.random.RandomState`` seeded from the auditor's ``rng``, so audits are reproducible
and forked workers draw independent streams. (Without ``random_state`` diffprivlib uses
``secrets.SystemRandom``; the seeded path runs the same sampling code with another uniform source.)

Neighbour relation: the mechanisms release a scalar query answer of the given ``sensitivity``
(pair 0 vs ``sensitivity``: 0 is where float rounding leaks show first); the tools clip records to
``bounds`` and compute the sensitivity for a data set of known size, i.e. substitute-one-record
(bounded DP): ``upper - lower`` for the sum, ``(upper - lower) / n`` for the mean (pair: three
zeros vs two zeros and a 1.0).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from dpharness.core import BoundedChange, Substitute

from ._registry import Param, pair_params, register

_LIB, _MOD, _EXTRA = "diffprivlib", "diffprivlib", "diffprivlib"


def _seed(rng: np.random.Generator) -> np.random.RandomState:
    return np.random.RandomState(int(rng.integers(0, 2**32)))


def _mechanism_sampler(make: Callable[[Any], Any], cast: Callable) -> Callable:
    """``fn(data, size, rng)``: a mechanism seeded from ``rng``, ``randomise`` called ``size`` times."""

    def fn(data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        mech = make(_seed(rng))
        value = cast(data)
        return np.asarray([mech.randomise(value) for _ in range(int(size))])

    return fn


def _mechanism_target(cls_name: str, v: dict, *, integer: bool, with_delta: bool) -> dict:
    import diffprivlib.mechanisms as mechs

    cls = getattr(mechs, cls_name)
    kwargs = {"epsilon": v["epsilon"], "sensitivity": v["sensitivity"]}
    if with_delta:
        kwargs["delta"] = v["delta"]
    try:
        probe = cls(**kwargs)
    except (ValueError, TypeError) as exc:
        from dpharness.errors import ParameterError

        raise ParameterError(f"diffprivlib refused the parameters {kwargs}: {exc}; pass values it accepts.") from exc
    eps, delta = float(probe.epsilon), float(getattr(probe, "delta", 0.0))
    cast = int if integer else float
    sens = v["sensitivity"]
    return dict(
        fn=_mechanism_sampler(lambda rs: cls(**kwargs, random_state=rs), cast),
        vectorized=True,
        data=cast(v["data"]),
        neighbor=cast(v["neighbor"]),
        epsilon=eps,
        delta=delta,
        relation=f"scalar query answers at absolute distance <= {sens} (the mechanism's sensitivity={sens})",
        claim_source=(
            f"diffprivlib {cls_name}(**{kwargs}).epsilon = {eps!r} and .delta = {delta!r} "
            f"(the mechanism's own validated parameters)"
        ),
        neighbor_relation=BoundedChange(sens, "l1"),
    )


_EPS = Param("epsilon", 1.0, "positive", "the mechanism's epsilon")
_SENS = Param("sensitivity", 1.0, "positive", "the query's sensitivity")
_ISENS = Param("sensitivity", 1, "positive_int", "the integer query's sensitivity")
_DELTA = Param("delta", 1e-5, "probability", "the mechanism's delta")


@register(
    "diffprivlib:laplace",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="mechanisms.Laplace.randomise on a float scalar (delta=0: pure ε-DP)",
    params=(
        _EPS,
        Param("delta", 0.0, "nonnegative", "the mechanism's delta (0: pure DP)"),
        _SENS,
        *pair_params(0.0, 1.0),
    ),
)
def _laplace(v: dict) -> dict:
    return _mechanism_target("Laplace", v, integer=False, with_delta=True)


@register(
    "diffprivlib:gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="mechanisms.Gaussian (classic, epsilon <= 1) on a float scalar",
    params=(
        Param("epsilon", 0.5, "positive", "the mechanism's epsilon (diffprivlib requires <= 1)"),
        _DELTA,
        _SENS,
        *pair_params(0.0, 1.0),
    ),
)
def _gaussian(v: dict) -> dict:
    return _mechanism_target("Gaussian", v, integer=False, with_delta=True)


@register(
    "diffprivlib:gaussian_analytic",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="mechanisms.GaussianAnalytic (Balle-Wang calibration) on a float scalar",
    params=(_EPS, _DELTA, _SENS, *pair_params(0.0, 1.0)),
)
def _gaussian_analytic(v: dict) -> dict:
    return _mechanism_target("GaussianAnalytic", v, integer=False, with_delta=True)


@register(
    "diffprivlib:discrete_gaussian",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="mechanisms.GaussianDiscrete on an integer scalar",
    params=(_EPS, _DELTA, _ISENS, *pair_params(0, 1)),
)
def _discrete_gaussian(v: dict) -> dict:
    return _mechanism_target("GaussianDiscrete", v, integer=True, with_delta=True)


@register(
    "diffprivlib:geometric",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="mechanisms.Geometric on an integer scalar",
    params=(_EPS, _ISENS, *pair_params(0, 1)),
)
def _geometric(v: dict) -> dict:
    return _mechanism_target("Geometric", v, integer=True, with_delta=False)


def _tool_target(tool: str, v: dict) -> dict:
    import diffprivlib.tools as tools
    from diffprivlib.accountant import BudgetAccountant

    fn_tool = getattr(tools, tool)
    bounds = (float(v["lower"]), float(v["upper"]))
    eps = v["epsilon"]
    data = [float(x) for x in np.atleast_1d(v["data"])]
    nb = [float(x) for x in np.atleast_1d(v["neighbor"])]
    probe = BudgetAccountant()
    fn_tool(np.asarray(data), epsilon=eps, bounds=bounds, random_state=0, accountant=probe)
    spent_eps, spent_delta = (float(x) for x in probe.total())

    def fn(d: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        arr = np.asarray(d, dtype=float)
        rs = _seed(rng)
        acc = BudgetAccountant()  # a private ledger per chunk: the global default one would grow without bound
        return np.asarray(
            [fn_tool(arr, epsilon=eps, bounds=bounds, random_state=rs, accountant=acc) for _ in range(int(size))],
            dtype=float,
        )

    n = len(data)
    sens = "upper - lower" if tool == "sum" else "(upper - lower) / n"
    return dict(
        fn=fn,
        vectorized=True,
        data=data,
        neighbor=nb,
        epsilon=spent_eps,
        delta=spent_delta,
        relation=(
            f"data sets of {n} records clipped to bounds={bounds} that differ in one record (substitution; "
            f"diffprivlib.tools.{tool} calibrates to sensitivity {sens} for the array's size)"
        ),
        claim_source=(
            f"diffprivlib BudgetAccountant.total() after one tools.{tool}(epsilon={eps}, bounds={bounds}) "
            f"call: (ε, δ) = ({spent_eps!r}, {spent_delta!r})"
        ),
        neighbor_relation=Substitute(),
    )


_BOUNDS = (Param("lower", 0.0, "value", "lower bound of a record"), Param("upper", 1.0, "value", "upper bound"))


@register(
    "diffprivlib:sum",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="tools.sum of float records in bounds (truncated Laplace)",
    params=(_EPS, *_BOUNDS, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 1.0])),
)
def _sum(v: dict) -> dict:
    return _tool_target("sum", v)


@register(
    "diffprivlib:mean",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="tools.mean of float records in bounds (truncated Laplace)",
    params=(_EPS, *_BOUNDS, *pair_params([0.0, 0.0, 0.0], [0.0, 0.0, 1.0])),
)
def _mean(v: dict) -> dict:
    return _tool_target("mean", v)


# --------------------------------------------------------------------------- models and statistics over data sets
#
# Each sample is one call of the library (one fit of a model, one statistic) on the data set; a chunk of
# calls shares a ``numpy.random.RandomState`` seeded from the auditor's rng (reproducible, independent
# across chunks and workers) and a private BudgetAccountant. The output is the released parameter vector.
# The audit searches its pairs over the declared records (``inputs``: the box of the bounds the target
# passes to the library, data sets of 1-10 records; :mod:`dpharness.auditors.pairsearch`).
#
# Relations, read from diffprivlib 0.6.6's source: the models and tools.var/std/quantile treat the data
# set's size n as public (sensitivities divided by n, noisy class counts forced to sum to n), i.e.
# substitute-one-record (bounded DP); tools.histogram adds noise of sensitivity 1 to every bin count,
# i.e. add/remove-one-record (one record moves one count by 1).
#
# The claim is what the library's BudgetAccountant records as spent by one call (every model calls
# ``accountant.spend(self.epsilon, 0)`` at the end of ``fit``).

_ROWS_DEFAULT = (None, None)  # a data set of one record: the box's low corner against its high corner


def _box_bounds(v: dict) -> tuple[float, float]:
    from dpharness.errors import ParameterError

    lo, hi = v["lower"], v["upper"]
    for name, x in (("lower", lo), ("upper", hi)):
        if isinstance(x, list):
            raise ParameterError(
                f"{name}={x!r:.60} is a list; model targets take one number, the bound of every "
                f"column of the box of records (pass e.g. {name}=0.0)."
            )
    if not float(lo) < float(hi):
        raise ParameterError(
            f"lower={lo!r}, upper={hi!r}: pass lower < upper (the box of records is [lower, upper]^columns)."
        )
    return float(lo), float(hi)


def _spent(call: Callable[[Any], Any]) -> tuple[float, float]:
    """(ε, δ) a BudgetAccountant records as spent by ``call(accountant)`` (one fit or one statistic)."""
    from diffprivlib.accountant import BudgetAccountant

    probe = BudgetAccountant()
    with _quiet():
        call(probe)
    eps, delta = probe.total()
    return float(eps), float(delta)


class _quiet:
    """One BLAS thread (the fits are tiny: a threaded BLAS made them 17× slower on a loaded 2-core machine)
    and no solver chatter (scipy's deprecation of L-BFGS-B options, sklearn's convergence warnings, overflow
    in an optimiser that diverges on a noisy objective; the library's PrivacyLeakWarning is not silenced)."""

    def __enter__(self):
        import warnings

        from threadpoolctl import threadpool_limits

        self._warn = warnings.catch_warnings()
        self._warn.__enter__()
        for category in (DeprecationWarning, RuntimeWarning, FutureWarning):
            warnings.simplefilter("ignore", category)
        try:
            from sklearn.exceptions import ConvergenceWarning

            warnings.simplefilter("ignore", ConvergenceWarning)
        except ImportError:  # pragma: no cover - sklearn comes with diffprivlib
            pass
        self._threads = threadpool_limits(1)
        self._threads.__enter__()
        return self

    def __exit__(self, *exc):
        self._threads.__exit__(*exc)
        return self._warn.__exit__(*exc)


def _calls(one: Callable, shape: Callable[[Any], np.ndarray], width: int, dtype=float) -> Callable:
    """``fn(data, size, rng)``: ``one(records, random_state, accountant)`` called ``size`` times, stacked.
    ``shape`` turns the audited data set into what ``one`` takes."""

    def fn(data: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        from diffprivlib.accountant import BudgetAccountant

        records = shape(data)
        rs, acc = _seed(rng), BudgetAccountant()  # a private ledger per chunk
        out = np.empty((int(size), width), dtype=dtype)
        with _quiet():
            for i in range(int(size)):
                out[i] = one(records.copy(), rs, acc)  # a fresh copy a call: PCA.fit centres its input in place
        return out if width > 1 else out[:, 0]

    return fn


def _rows_of(dim: int) -> Callable[[Any], np.ndarray]:
    return lambda data: np.asarray(data, dtype=float).reshape(-1, dim)


def _model_target(v: dict, *, model: str, one: Callable, width: int, relation_text: str, min_n: int = 1) -> dict:
    from dpharness.auditors.pairsearch import Datasets
    from dpharness.core import RealBox
    from dpharness.errors import ParameterError

    lo, hi = _box_bounds(v)
    dim = int(v["columns"])
    if v["max_n"] < min_n:
        raise ParameterError(
            f"max_n={v['max_n']} is below {min_n}, the smallest data set {model} fits on; pass max_n >= {min_n}."
        )
    space = Datasets(RealBox(lo, hi, dim), Substitute(), (min_n, int(v["max_n"])))
    if v["data"] is None or v["neighbor"] is None:  # default: the low corner against the high corner, one record
        base = [[lo] * dim] * (min_n - 1)
        v = {**v, "data": v["data"] or base + [[lo] * dim], "neighbor": v["neighbor"] or base + [[hi] * dim]}
    data, nb = (np.asarray(x, dtype=float) for x in (v["data"], v["neighbor"]))
    if data.ndim != 2 or data.shape[1] != dim or nb.ndim != 2 or nb.shape[1] != dim:
        raise ParameterError(
            f"data={v['data']!r:.60} / neighbor={v['neighbor']!r:.60}: pass lists of records of "
            f"columns={dim} numbers each."
        )
    shape = _rows_of(dim)
    eps, delta = _spent(lambda acc: one(shape(data).copy(), np.random.RandomState(0), acc))
    return dict(
        fn=_calls(one, shape, width),
        vectorized=True,
        data=data.tolist(),
        neighbor=nb.tolist(),
        epsilon=eps,
        delta=delta,
        neighbor_relation=Substitute(),
        inputs=space,
        relation=(
            f"data sets of {min_n}..{int(v['max_n'])} records in [{lo:g}, {hi:g}]^{dim} that differ in one "
            f"record (substitution: {relation_text})"
        ),
        claim_source=(
            f"diffprivlib BudgetAccountant.total() after one {model} fit (epsilon={v['epsilon']}): "
            f"(ε, δ) = ({eps!r}, {delta!r})"
        ),
    )


def _labels(rows: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Features and a binary label (last column >= the box's midpoint) of each record, with two public
    anchor records appended (features at the box's centre, labels 0 and 1) so every fit sees both classes:
    the library's models read the class set from the data (and fail on one class). A deterministic
    per-record map and the same two records on both sides: neighbouring data sets stay neighbours."""
    mid = (lo + hi) / 2
    centre = np.full((2, rows.shape[1] - 1), mid)
    X = np.vstack([rows[:, :-1], centre])
    y = np.concatenate([(rows[:, -1] >= mid).astype(np.int64), [0, 1]])
    return X, y


_MODEL_PARAMS = (
    _EPS,
    Param("lower", 0.0, "value", "lower bound of every column of a record"),
    Param("upper", 1.0, "value", "upper bound of every column of a record"),
    Param("columns", 2, "positive_int", "columns of a record (features, then the target or label)"),
    Param("max_n", 10, "positive_int", "largest data set the pair search builds"),
)


def _rows_params(data, neighbor) -> tuple[Param, Param]:
    return (
        Param(
            "data",
            data,
            "rows",
            "the data side of the pair (a list of records; default: the box's low corner, after min_n - 1 of them)",
        ),
        Param(
            "neighbor",
            neighbor,
            "rows",
            "the neighbour side of the pair (default: the high corner in place of the last low one)",
        ),
    )


def _linear_regression_noisy_fit():
    """A LinearRegression whose ``fit`` is diffprivlib's own code object run with one name rebound:
    ``minimize`` (scipy's, a post-processing of the noisy objective that touches no data) by a
    stand-in returning zeros; ``_set_intercept`` records the noisy offsets. Every step that reads the
    data (clipping, the two DP means, the Laplace noise on the objective's coefficients, the budget
    split) is the library's, unchanged. Why: on small data sets the noisy quadratic objective is
    often unbounded below and scipy's BFGS then runs to ±1e152 in about a second a fit."""
    import types

    import diffprivlib.models.linear_regression as lr_module
    from diffprivlib.models import LinearRegression

    class _Result:
        def __init__(self, x):
            self.x = x

    def stand_in(fun, x0, jac=None, **_kwargs):
        return _Result(np.zeros_like(x0))

    fit = LinearRegression.fit
    names = {**lr_module.__dict__, "minimize": stand_in}
    noisy_fit = types.FunctionType(fit.__code__, names, fit.__name__, fit.__defaults__, fit.__closure__)

    class NoisyLinearRegression(LinearRegression):
        fit = noisy_fit

        def _set_intercept(self, X_offset, y_offset, X_scale):
            self.noisy_offsets_ = (np.array(X_offset, dtype=float), np.array(y_offset, dtype=float))
            super()._set_intercept(X_offset, y_offset, X_scale)

    return NoisyLinearRegression


@register(
    "diffprivlib:linear_regression",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="models.LinearRegression(bounds_X, bounds_y) fit on (x, y) records: the noisy means and "
    "objective coefficients it releases (coef_, intercept_ with minimize=true)",
    params=(
        *_MODEL_PARAMS,
        Param(
            "minimize",
            False,
            "bool",
            "true: run scipy's minimize and release coef_ and intercept_ (about a second a fit on small data sets)",
        ),
        *_rows_params(*_ROWS_DEFAULT),
    ),
)
def _linear_regression(v: dict) -> dict:
    from diffprivlib.models import LinearRegression

    lo, hi = _box_bounds(v)
    eps, f = v["epsilon"], int(v["columns"]) - 1
    _need_features(v)
    if v["minimize"]:

        def one(rows: np.ndarray, rs, acc) -> np.ndarray:
            m = LinearRegression(
                epsilon=eps, bounds_X=(lo, hi), bounds_y=(lo, hi), random_state=rs, accountant=acc
            ).fit(rows[:, :-1], rows[:, -1])
            return np.concatenate([np.ravel(m.coef_), np.ravel(m.intercept_)])

        width, what = f + 1, "coef_ and intercept_"
    else:
        model = _linear_regression_noisy_fit()
        upper = np.triu_indices(f)

        def one(rows: np.ndarray, rs, acc) -> np.ndarray:
            m = model(epsilon=eps, bounds_X=(lo, hi), bounds_y=(lo, hi), random_state=rs, accountant=acc).fit(
                rows[:, :-1], rows[:, -1]
            )
            x_off, y_off = m.noisy_offsets_
            c0, c1, c2 = m._obj_coefs
            return np.concatenate([np.ravel(x_off), np.ravel(y_off), np.ravel(c0), np.ravel(c1), c2[upper]])

        width = 2 * f + 2 + f * (f + 1) // 2
        what = (
            "the noisy means X_offset, y_offset and the noisy objective coefficients _obj_coefs (y·y, x·y, "
            "x·xᵀ) that fit() computes and keeps on the model; coef_ and intercept_ are their post-processing"
        )
    target = _model_target(
        v,
        model="models.LinearRegression",
        one=one,
        width=width,
        relation_text="the means are calibrated to (upper - lower) / n and the objective's "
        "coefficients to the range of one record's terms",
    )
    target["relation"] += f"; output: {what}"
    return target


@register(
    "diffprivlib:logistic_regression",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="models.LogisticRegression(data_norm) fit on (x, label) records: coef_ and intercept_",
    params=(*_MODEL_PARAMS, *_rows_params(*_ROWS_DEFAULT)),
)
def _logistic_regression(v: dict) -> dict:
    from diffprivlib.models import LogisticRegression

    lo, hi = _box_bounds(v)
    eps = v["epsilon"]
    norm = float(np.sqrt(int(v["columns"]) - 1) * max(abs(lo), abs(hi)))  # no feature vector of the box is clipped

    def one(rows: np.ndarray, rs, acc) -> np.ndarray:
        X, y = _labels(rows, lo, hi)
        m = LogisticRegression(epsilon=eps, data_norm=norm, random_state=rs, accountant=acc).fit(X, y)
        return np.concatenate([np.ravel(m.coef_), np.ravel(m.intercept_)])

    _need_features(v)
    return _model_target(
        v,
        model=f"models.LogisticRegression(data_norm={norm:g})",
        one=one,
        width=int(v["columns"]),
        relation_text="objective perturbation (the Vector mechanism) for n training records, "
        "labels from the last column, two public anchor records added",
    )


@register(
    "diffprivlib:gaussian_nb",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="models.GaussianNB(bounds) fit on (x, label) records: theta_, var_ and class_prior_",
    params=(*_MODEL_PARAMS, *_rows_params(*_ROWS_DEFAULT)),
)
def _gaussian_nb(v: dict) -> dict:
    from diffprivlib.models import GaussianNB

    lo, hi = _box_bounds(v)
    eps = v["epsilon"]

    def one(rows: np.ndarray, rs, acc) -> np.ndarray:
        X, y = _labels(rows, lo, hi)
        m = GaussianNB(epsilon=eps, bounds=(lo, hi), random_state=rs, accountant=acc).fit(X, y)
        return np.concatenate([np.ravel(m.theta_), np.ravel(m.var_), np.ravel(m.class_prior_)])

    _need_features(v)
    f = int(v["columns"]) - 1
    return _model_target(
        v,
        model="models.GaussianNB",
        one=one,
        width=4 * f + 2,
        relation_text="noisy class counts forced to sum to n, per-class sums calibrated to the "
        "bounds; labels from the last column, two public anchor records added",
    )


@register(
    "diffprivlib:pca",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="models.PCA(data_norm, bounds) fit on records: components_, explained_variance_ and mean_",
    params=(*_MODEL_PARAMS, *_rows_params(*_ROWS_DEFAULT)),
)
def _pca(v: dict) -> dict:
    from diffprivlib.models import PCA

    lo, hi = _box_bounds(v)
    eps, d = v["epsilon"], int(v["columns"])
    norm = float(np.sqrt(d) * max(abs(lo), abs(hi)))  # no record of the box is clipped

    def one(rows: np.ndarray, rs, acc) -> np.ndarray:
        m = PCA(n_components=d, epsilon=eps, data_norm=norm, bounds=(lo, hi), random_state=rs, accountant=acc).fit(rows)
        return np.concatenate([np.ravel(m.components_), np.ravel(m.explained_variance_), np.ravel(m.mean_)])

    # two records at least: sklearn's explained variance divides by n - 1
    return _model_target(
        v,
        model=f"models.PCA(n_components={d}, data_norm={norm:g})",
        one=one,
        width=d * d + 2 * d,
        relation_text="the mean calibrated to (upper - lower) / n, the covariance to data_norm",
        min_n=2,
    )


def _need_features(v: dict) -> None:
    from dpharness.errors import ParameterError

    if int(v["columns"]) < 2:
        raise ParameterError(f"columns={v['columns']} leaves no feature beside the label; pass columns >= 2.")


def _statistic_target(
    v: dict, *, tool: str, one: Callable, width: int, dtype, relation, relation_text: str, min_n: int
) -> dict:
    from dpharness.auditors.pairsearch import Datasets
    from dpharness.core import RealInterval

    lo, hi = _box_bounds(v)
    space = Datasets(RealInterval(lo, hi), relation, (min_n, int(v["max_n"])))
    data = [float(x) for x in np.atleast_1d(v["data"])]
    nb = [float(x) for x in np.atleast_1d(v["neighbor"])]
    shape = lambda d: np.asarray(d, dtype=float)  # noqa: E731
    eps, delta = _spent(lambda acc: one(shape(data).copy(), np.random.RandomState(0), acc))
    return dict(
        fn=_calls(one, shape, width, dtype),
        vectorized=True,
        data=data,
        neighbor=nb,
        epsilon=eps,
        delta=delta,
        neighbor_relation=relation,
        inputs=space,
        relation=f"data sets of {min_n}..{int(v['max_n'])} records in [{lo:g}, {hi:g}] ({relation_text})",
        claim_source=(
            f"diffprivlib BudgetAccountant.total() after one tools.{tool} call (epsilon={v['epsilon']}): "
            f"(ε, δ) = ({eps!r}, {delta!r})"
        ),
    )


_STAT_PARAMS = (_EPS, *_BOUNDS, Param("max_n", 10, "positive_int", "largest data set the pair search builds"))


def _spread(tool: str):
    @register(
        f"diffprivlib:{tool}",
        library=_LIB,
        module=_MOD,
        extra=_EXTRA,
        description=f"tools.{tool} of float records in bounds (Laplace on a bounded domain)",
        params=(*_STAT_PARAMS, *pair_params([0.0, 0.0], [0.0, 1.0])),
    )
    def build(v: dict) -> dict:
        import diffprivlib.tools as tools

        fn_tool = getattr(tools, tool)
        bounds = _box_bounds(v)
        eps = v["epsilon"]
        one = lambda x, rs, acc: fn_tool(x, epsilon=eps, bounds=bounds, random_state=rs, accountant=acc)  # noqa: E731
        return _statistic_target(
            v,
            tool=tool,
            one=one,
            width=1,
            dtype=float,
            relation=Substitute(),
            min_n=1,
            relation_text=f"substitute one record: tools.{tool} calibrates to the array's size n",
        )

    return build


_var = _spread("var")
_std = _spread("std")


@register(
    "diffprivlib:quantile",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="tools.quantile of float records in bounds (exponential mechanism over the sorted records)",
    params=(*_STAT_PARAMS, Param("quant", 0.25, "probability", "the quantile"), *pair_params([0.0, 0.0], [0.0, 1.0])),
)
def _quantile(v: dict) -> dict:
    from diffprivlib.tools import quantile

    bounds, eps, q = _box_bounds(v), v["epsilon"], v["quant"]
    one = lambda x, rs, acc: quantile(x, q, epsilon=eps, bounds=bounds, random_state=rs, accountant=acc)  # noqa: E731
    return _statistic_target(
        v,
        tool=f"quantile(quant={q})",
        one=one,
        width=1,
        dtype=float,
        relation=Substitute(),
        min_n=1,
        relation_text="substitute one record: utility -|rank - quant·n| of sensitivity 1",
    )


@register(
    "diffprivlib:median",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="tools.median of float records in bounds (exponential mechanism over the sorted records)",
    params=(*_STAT_PARAMS, *pair_params([0.0, 0.0], [0.0, 1.0])),
)
def _median(v: dict) -> dict:
    from diffprivlib.tools import median

    bounds, eps = _box_bounds(v), v["epsilon"]
    one = lambda x, rs, acc: median(x, epsilon=eps, bounds=bounds, random_state=rs, accountant=acc)  # noqa: E731
    return _statistic_target(
        v,
        tool="median",
        one=one,
        width=1,
        dtype=float,
        relation=Substitute(),
        min_n=1,
        relation_text="substitute one record: utility -|rank - n/2| of sensitivity 1",
    )


@register(
    "diffprivlib:histogram",
    library=_LIB,
    module=_MOD,
    extra=_EXTRA,
    description="tools.histogram of float records over range=(lower, upper) (geometric noise per bin)",
    params=(
        *_STAT_PARAMS,
        Param("bins", 4, "positive_int", "number of equal-width bins"),
        *pair_params([0.0], [0.0, 1.0]),
    ),
)
def _histogram(v: dict) -> dict:
    from dpharness.core import AddRemove
    from diffprivlib.tools import histogram

    bounds, eps, bins = _box_bounds(v), v["epsilon"], int(v["bins"])
    one = lambda x, rs, acc: histogram(
        x,
        epsilon=eps,
        bins=bins,
        range=bounds,
        random_state=rs,  # noqa: E731
        accountant=acc,
    )[0]
    return _statistic_target(
        v,
        tool=f"histogram(bins={bins})",
        one=one,
        width=bins,
        dtype=np.int64,
        relation=AddRemove(),
        min_n=0,
        relation_text="add or remove one record: one bin count moves by 1, the noise's sensitivity",
    )
