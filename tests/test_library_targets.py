"""Library audit targets (dpharness.auditors.libraries): registry, errors, claims read from the
libraries, pairs under the stated relations, the zCDP conversion, and small audits.

Tests that need a library skip when it is not installed (the default stage of ``.ci/run`` installs
only ``.[test]``), except for the libraries named in ``DPHARNESS_REQUIRE_LIBS`` (comma-separated
target prefixes, e.g. ``opendp,diffprivlib``): there a missing library is a failure, never a skip.
``.ci/run``'s library stage sets it in each library's own environment, so every target is tested
against its real library in CI."""

from __future__ import annotations

import importlib
import math
import os
import sys

import numpy as np
import pytest

from dpharness.auditors import AuditResult
from dpharness.auditors.libraries import LibraryTarget, MissingExtra, get_target, list_targets, zcdp_to_approx
from dpharness.errors import DPHarnessError, ParameterError

LIBRARIES = {  # import name -> target prefix
    "opendp": "opendp:",
    "diffprivlib": "diffprivlib:",
    "pydp": "pydp:",
    "pipeline_dp": "pipeline-dp:",
    "tmlt.core": "tmlt.core:",
    "opacus": "opacus:",
}


def _required() -> frozenset[str]:
    names = frozenset(n.strip() for n in os.environ.get("DPHARNESS_REQUIRE_LIBS", "").split(",") if n.strip())
    known = {p.rstrip(":") for p in LIBRARIES.values()}
    if names - known:  # a misspelt name would let its library's tests skip: refuse it at collection
        raise ValueError(
            f"DPHARNESS_REQUIRE_LIBS names {sorted(names - known)}, not libraries with targets; "
            f"pass some of {sorted(known)}."
        )
    return names


REQUIRED = _required()


def _need(module: str):
    """Import a library's module; skip when it is missing, fail when DPHARNESS_REQUIRE_LIBS names its library."""
    if LIBRARIES[module].rstrip(":") not in REQUIRED:
        return pytest.importorskip(module)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(
            f"{module} is required here (DPHARNESS_REQUIRE_LIBS={','.join(sorted(REQUIRED))}) "
            f"but does not import: {exc}"
        )


# opacus imports torch (tens of seconds on a loaded machine): its tests are marked slow, except where
# the library stage requires it
_OPACUS_SLOW = () if "opacus" in REQUIRED else (pytest.mark.slow,)
_PREFIXES = [pytest.param(p, marks=_OPACUS_SLOW) if p == "opacus:" else p for p in LIBRARIES.values()]


def _names(prefix: str) -> list[str]:
    return [t.name for t in list_targets() if t.name.startswith(prefix)]


# --------------------------------------------------------------------------- registry (no library needed)


def test_list_targets_covers_every_library_with_parameters():
    infos = list_targets()
    names = [t.name for t in infos]
    assert len(names) == len(set(names))
    for prefix in LIBRARIES.values():
        assert _names(prefix), prefix
    for info in infos:
        params = dict(info.parameters)
        assert "data" in params and "neighbor" in params, info.name
        assert info.description and info.library


def test_unknown_target_suggests_the_close_name():
    with pytest.raises(ParameterError, match="did you mean 'opendp:laplace'"):
        get_target("opendp:laplce")


def test_unknown_parameter_names_the_accepted_ones():
    with pytest.raises(
        ParameterError, match=r"scal= is not a parameter.*did you mean 'scale'.*accepted: scale, sensitivity"
    ):
        get_target("opendp:laplace", {"scal": 1.0})


def test_missing_library_raises_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "opendp", None)  # makes `import opendp` raise ImportError
    with pytest.raises(MissingExtra) as info:
        get_target("opendp:laplace")
    msg = str(info.value)
    assert msg == "opendp is not installed; pip install -e '.[opendp]' in the dpharness checkout"
    assert isinstance(info.value, DPHarnessError)


@pytest.mark.parametrize(
    "module,name,extra",
    [
        ("pydp", "pydp:laplace", "pydp"),
        ("pipeline_dp", "pipeline-dp:sum", "pipeline-dp"),
        ("tmlt.core", "tmlt.core:laplace", "tmlt"),
        ("opacus", "opacus:gaussian", "opacus"),
        ("diffprivlib", "diffprivlib:sum", "diffprivlib"),
    ],
)
def test_missing_library_message_per_library(monkeypatch, module, name, extra):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(
        MissingExtra, match=rf"is not installed; pip install -e '\.\[{extra}\]' in the dpharness checkout$"
    ):
        get_target(name)


# --------------------------------------------------------------------------- the zCDP conversion


def _gaussian_profile(eps: float, rho: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with ρ = Δ²/(2σ²) (Balle & Wang 2018, Thm. 8), via scipy."""
    from scipy.stats import norm

    a, b = math.sqrt(rho / 2), eps / math.sqrt(2 * rho)
    return float(norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b))


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.125, 0.5, 2.0, 50.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_zcdp_to_approx_is_valid_for_the_gaussian_and_beats_bun_steinke(rho, delta):
    eps = zcdp_to_approx(rho, delta)
    # valid: the Gaussian with this ρ (which is exactly ρ-zCDP) satisfies (ε, δ)-DP
    assert _gaussian_profile(eps, rho) <= delta
    # not vacuous: no worse than Bun-Steinke's ρ + 2 sqrt(ρ ln 1/δ), and above the exact ε of the Gaussian
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-12
    assert _gaussian_profile(0.9 * eps, rho) > delta * 1e-3 or eps < 1e-3


def test_zcdp_to_approx_edges_and_errors():
    assert zcdp_to_approx(0.0, 1e-6) == 0.0
    with pytest.raises(ParameterError, match="delta="):
        zcdp_to_approx(0.5, 0.0)
    with pytest.raises(ParameterError, match="rho="):
        zcdp_to_approx(-1.0, 1e-6)


# --------------------------------------------------------------------------- per library


def _installed(prefix: str) -> list[str]:
    module = next(m for m, p in LIBRARIES.items() if p == prefix)
    _need(module)
    return _names(prefix)


_UNSEEDED = ("opendp:", "pydp:", "pipeline-dp:", "tmlt.core:")  # libraries drawing from a generator that takes no seed


def _check_target(t: LibraryTarget) -> None:
    assert isinstance(t, LibraryTarget)
    assert bool(t.unseeded) == t.name.startswith(_UNSEEDED), t.name
    assert t.epsilon > 0 and 0 <= t.delta < 1
    assert t.version and t.version != "unknown"
    assert t.relation and t.claim_source
    assert t.neighbor_relation is not None and t.neighbor_relation.is_neighbour(
        np.asarray(t.data), np.asarray(t.neighbor)
    )
    if t.vectorized:
        out = np.asarray(t.fn(t.data, 7, np.random.default_rng(1)))
        assert out.shape[0] == 7 and np.all(np.isfinite(out.astype(float)))
    else:  # one output: a number, or a fixed-length vector of numbers (the group-by's keys and counts)
        assert np.all(np.isfinite(np.asarray(t.fn(t.data), dtype=float)))


@pytest.mark.parametrize("prefix", _PREFIXES)
def test_every_target_of_an_installed_library_constructs(prefix):
    for name in _installed(prefix):
        _check_target(get_target(name))


@pytest.mark.parametrize("prefix", _PREFIXES)
def test_every_target_ships_to_worker_processes(prefix):
    """The audit's worker pool ships the sampler with cloudpickle; a target holding an object of the
    library that does not pickle (OpenDP's ctypes pointers, PyDP's C++ mechanisms) ran in one process
    only, with a warning (issue 17: opendp:sum took 153 s at the defaults)."""
    import pickle

    import cloudpickle

    for name in _installed(prefix):
        t = get_target(name)
        fn = pickle.loads(cloudpickle.dumps(t.fn))
        out = fn(t.data, 3, np.random.default_rng(0)) if t.vectorized else [fn(t.data) for _ in range(3)]
        assert np.all(np.isfinite(np.asarray(out, dtype=float))), name


def test_opendp_sum_audits_in_worker_processes_without_a_pickling_warning():
    """issue 17: OpenDP targets warned "cloudpickle raised ValueError: ctypes objects containing
    pointers cannot be pickled" and drew in one process. 20000 samples: certification draws of about
    10 s at this target's pace, so the audit starts its worker pool. Not a statistical assertion."""
    import warnings

    _need("opendp")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = get_target("opendp:sum").audit(samples=20_000, seed=0, workers=2, progress=False)
    assert isinstance(res, AuditResult)
    assert not [w for w in caught if "pickle" in str(w.message)], [str(w.message) for w in caught]


@pytest.mark.parametrize("prefix", _PREFIXES)
def test_a_library_target_is_sized_by_a_time_budget(prefix, capsys):
    """``dpharness audit LIBRARY:MECHANISM --time-budget S`` (and the gate, which always has one) sizes the
    target's samples from its measured pace, its samples a cap, and states the samples used."""
    import json

    from dpharness.cli import main

    names = _installed(prefix)
    if not names:
        pytest.skip(f"no {prefix} target installed")
    code = main(["audit", names[0], "--time-budget", "4", "--samples", "300000", "--workers", "1", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and 2 <= payload["samples"] <= 300_000
    assert f"time budget 4 s: {payload['samples']} samples a side" in payload["method"]


@pytest.mark.parametrize("prefix", _PREFIXES)
def test_pair_override_is_validated_against_the_relation(prefix):
    for name in _installed(prefix):
        t = get_target(name)
        with pytest.raises(ParameterError, match="not neighbours"):
            get_target(name, {"data": t.data, "neighbor": t.data})


def test_opendp_claims_are_its_privacy_maps():
    _need("opendp")
    import opendp.prelude as dp

    dp.enable_features("contrib")
    t = get_target("opendp:laplace", {"scale": "2.0", "sensitivity": "1.0"})
    assert t.epsilon == dp.m.make_laplace(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=2.0
    ).map(1.0)
    g = get_target("opendp:gaussian", {"scale": 2.0, "delta": 1e-6})
    rho = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=2.0).map(1.0)
    assert g.epsilon == pytest.approx(zcdp_to_approx(rho, 1e-6), rel=1e-12) and g.delta == 1e-6
    # OpenDP's own zCDP -> approx-DP conversion agrees with ours (both CKS 2020)
    meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=2.0)
    theirs = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), 1e-6).map(1.0)[0]
    assert g.epsilon == pytest.approx(theirs, rel=1e-6)
    s = get_target("opendp:sum")
    assert s.epsilon > 1.0 and s.epsilon < 1.0 + 1e-6  # float sum: OpenDP adds a rounding allowance


def test_opendp_aggregate_claims_are_their_privacy_maps_and_search_add_remove():
    """The aggregate targets' claims are OpenDP's privacy maps at d_in = 1 of the same chains built here
    from OpenDP's constructors; their input is SymmetricDistance (add/remove), searched over data sets of
    0..max_n records in [lower, upper]."""
    _need("opendp")
    import opendp.prelude as dp

    from dpharness.auditors.pairsearch import Datasets
    from dpharness.core import AddRemove, RealInterval

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()
    var = space >> dp.t.then_clamp((-1.0, 2.0)) >> dp.t.then_resize(size=5, constant=0.5)
    var = var >> dp.t.then_variance(ddof=1) >> dp.m.then_laplace(scale=0.3)
    t = get_target("opendp:variance", {"lower": -1.0, "upper": 2.0, "size": 5, "scale": 0.3})
    assert t.epsilon == var.map(1) and t.delta == 0.0
    assert isinstance(t.inputs, Datasets) and t.inputs.records == RealInterval(-1.0, 2.0)
    assert isinstance(t.inputs.relation, AddRemove) and t.inputs.size == (0, 10)
    q = dp.m.make_private_quantile(
        *space, dp.max_divergence(), candidates=[0.0, 0.25, 0.5, 0.75, 1.0], alpha=0.25, scale=2.0
    )
    assert get_target("opendp:quantile", {"candidates": 5, "alpha": 0.25, "scale": 2.0}).epsilon == q.map(1)
    assert get_target("opendp:count", {"scale": 4.0}).epsilon == (
        space >> dp.t.then_count() >> dp.m.then_laplace(scale=4.0)
    ).map(1)
    h = get_target("opendp:histogram", {"bins": 3, "scale": 0.5})
    assert h.epsilon == 2.0 and h.fn([0.0, 0.5, 1.0], 4, np.random.default_rng(0)).shape == (4, 3)
    m = get_target("opendp:context_mean", {"epsilon": 0.5})
    assert 0.5 * (1 - 1e-9) <= m.epsilon <= 0.5  # the scale OpenDP solved for, mapped back by its own privacy map
    for name in ("opendp:variance", "opendp:quantile", "opendp:count", "opendp:histogram", "opendp:context_mean"):
        assert "SymmetricDistance" in get_target(name).relation, name
        with pytest.raises(ParameterError, match=r"lower=1.0, upper=0.0: pass lower < upper"):
            get_target(name, {"lower": 1.0, "upper": 0.0})
    with pytest.raises(ParameterError, match=r"candidates=1: pass at least 2"):
        get_target("opendp:quantile", {"candidates": 1})
    with pytest.raises(ParameterError, match=r"bins=1: pass at least 2"):
        get_target("opendp:histogram", {"bins": 1})
    with pytest.raises(ParameterError, match=r"size=1, ddof=1"):
        get_target("opendp:variance", {"size": 1})


def test_opendp_string_params_and_bad_values():
    _need("opendp")
    assert get_target("opendp:geometric", {"scale": "3"}).epsilon == pytest.approx(1 / 3)
    with pytest.raises(ParameterError, match="scale=-1.0 must be > 0"):
        get_target("opendp:laplace", {"scale": "-1"})
    with pytest.raises(ParameterError, match="delta=2.0 must lie in"):
        get_target("opendp:gaussian", {"delta": 2.0})
    with pytest.raises(ParameterError, match="sensitivity=1.5 is not an integer"):
        get_target("opendp:geometric", {"sensitivity": 1.5})


def test_diffprivlib_claims_are_its_attributes_and_seeded():
    _need("diffprivlib")
    import diffprivlib.mechanisms as mechs

    t = get_target("diffprivlib:gaussian_analytic", {"epsilon": 0.7, "delta": 1e-4})
    m = mechs.GaussianAnalytic(epsilon=0.7, delta=1e-4, sensitivity=1.0)
    assert (t.epsilon, t.delta) == (m.epsilon, m.delta)
    a = t.fn(t.data, 50, np.random.default_rng(3))
    b = t.fn(t.data, 50, np.random.default_rng(3))
    assert np.array_equal(a, b)  # random_state seeded from the auditor's rng
    assert get_target("diffprivlib:sum", {"epsilon": 0.25}).epsilon == 0.25  # BudgetAccountant.total()
    with pytest.raises(ParameterError, match="diffprivlib refused"):
        get_target("diffprivlib:gaussian", {"epsilon": 2.0})  # classic Gaussian needs epsilon <= 1


_MODELS = ("linear_regression", "logistic_regression", "gaussian_nb", "pca")
_STATISTICS = ("var", "std", "quantile", "median", "histogram")


def test_diffprivlib_model_and_statistic_targets_declare_their_records_and_claims():
    """Model and statistics targets search their pairs over the box of the bounds they pass to the
    library, under the library's relation; the claim is what a BudgetAccountant records for one call."""
    _need("diffprivlib")
    from dpharness.auditors.pairsearch import Datasets
    from dpharness.core import AddRemove, RealBox, RealInterval, Substitute

    for name in _MODELS:
        t = get_target(f"diffprivlib:{name}", {"epsilon": 0.5, "lower": -1.0, "upper": 2.0, "columns": 3})
        assert isinstance(t.inputs, Datasets) and t.inputs.records == RealBox(-1.0, 2.0, 3), name
        assert isinstance(t.inputs.relation, Substitute) and t.inputs.size[1] == 10, name
        assert (t.epsilon, t.delta) == (0.5, 0.0), name  # LinearRegression & co. spend self.epsilon at the end of fit
        assert "substitut" in t.relation
    for name in _STATISTICS:
        t = get_target(f"diffprivlib:{name}", {"epsilon": 0.25})
        assert t.inputs.records == RealInterval(0.0, 1.0) and (t.epsilon, t.delta) == (0.25, 0.0), name
        assert isinstance(t.inputs.relation, AddRemove if name == "histogram" else Substitute), name
    # an explicit pair is audited as given (no search), and must lie in the box
    t = get_target("diffprivlib:gaussian_nb", {"data": [[0.0, 0.0]], "neighbor": [[0.0, 1.0]]})
    assert t.inputs is None and t.data == [[0.0, 0.0]]
    with pytest.raises(ParameterError, match="inputs= is fixed by the target"):
        get_target("diffprivlib:gaussian_nb").audit(inputs=None)
    with pytest.raises(ParameterError, match=r"data=.*records in real 2-vectors in \[0.0, 1.0\]"):
        get_target("diffprivlib:gaussian_nb", {"data": [[0.0, 2.0]], "neighbor": [[0.0, 1.0]]})


@pytest.mark.parametrize(
    "params,match",
    [
        ({"lower": [0.0, 0.0]}, r"lower=\[0.0, 0.0\] is a list"),
        ({"lower": 1.0, "upper": 1.0}, r"lower=1.0, upper=1.0: pass lower < upper"),
        ({"columns": 1}, r"columns=1 leaves no feature"),
        ({"data": "[[0, 1], [2]]"}, r"data=.*is not a list of records of equal length"),
        ({"data": [[0.0, 0.0, 0.0]], "neighbor": [[1.0, 1.0, 1.0]]}, r"columns=2 numbers each"),
        ({"max_n": 0}, r"max_n=0 must be >= 1"),
    ],
)
def test_diffprivlib_model_targets_refuse_bad_parameters_by_name(params, match):
    _need("diffprivlib")
    with pytest.raises(ParameterError, match=match):
        get_target("diffprivlib:logistic_regression", params)


def test_diffprivlib_pca_needs_two_records():
    _need("diffprivlib")
    with pytest.raises(ParameterError, match=r"max_n=1 is below 2"):
        get_target("diffprivlib:pca", {"max_n": 1})


def test_diffprivlib_linear_regression_releases_what_the_library_fit_computes():
    """The default linear_regression target runs diffprivlib's own fit with scipy's minimize (a
    post-processing) swapped for a stand-in: the noisy means and objective coefficients it outputs are
    those of the library's real fit on the same random stream, and the real intercept_ is their
    post-processing with the real coef_."""
    _need("diffprivlib")
    import warnings

    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.models import LinearRegression

    rows = np.array([[0.0, 0.2, 1.0], [0.7, 1.0, 0.1], [1.0, 0.0, 0.5]])
    t = get_target("diffprivlib:linear_regression", {"columns": 3, "epsilon": 2.0})
    seed = np.random.default_rng(4)
    ours = t.fn(rows.tolist(), 1, np.random.default_rng(4))[0]
    state = np.random.RandomState(int(seed.integers(0, 2**32)))  # what the target seeds a chunk with
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = LinearRegression(
            epsilon=2.0, bounds_X=(0.0, 1.0), bounds_y=(0.0, 1.0), random_state=state, accountant=BudgetAccountant()
        ).fit(rows[:, :2], rows[:, 2])
    x_off, y_off = ours[:2], ours[2]
    c0, c1, c2 = real._obj_coefs
    assert np.array_equal(ours[3:], np.concatenate([np.ravel(c0), np.ravel(c1), c2[np.triu_indices(2)]]))
    assert real.intercept_ == pytest.approx(y_off - x_off @ real.coef_, rel=1e-12, abs=1e-12)
    coef = get_target("diffprivlib:linear_regression", {"minimize": True}).fn([[0.0, 1.0]], 2, np.random.default_rng(0))
    assert coef.shape == (2, 2)  # coef_ and intercept_ of the real fit


def test_pydp_and_pipeline_dp_claims():
    _need("pydp")
    from pydp.algorithms.numerical_mechanisms import GaussianMechanism

    g = get_target("pydp:gaussian", {"epsilon": 0.5, "delta": 1e-6})
    m = GaussianMechanism(epsilon=0.5, delta=1e-6, sensitivity=1.0)
    assert (g.epsilon, g.delta) == (m.epsilon, m.delta) and not g.vectorized
    _need("pipeline_dp")
    s = get_target("pipeline-dp:sum", {"epsilon": 0.3})
    assert (s.epsilon, s.delta) == (0.3, 0.0) and not s.vectorized


@pytest.mark.statistical
@pytest.mark.parametrize("strategy", ["truncated_geometric", "laplace_thresholding"])
def test_pipeline_dp_group_by_is_audited_where_its_partition_selection_pays(strategy):
    """PipelineDP's DPEngine.aggregate with private partitions at its own claim (1, 1e-6): with no pair
    given, the pair search's threshold scan finds the key multiplicity where the release probability
    crosses 0.05..0.95 (about 20-30 units at this budget), and the audit certifies a positive ε there
    that stays within the claim.

    False-failure rate: the pass fails with probability <= 1 - confidence = 5% if PipelineDP is correct;
    the bound at 20 000 samples a side was 0.6-0.9 in development runs (unseeded library, 10 runs), so
    falling below 0.3 means the scan missed the threshold."""
    _need("pipeline_dp")
    t = get_target("pipeline-dp:group-count", {"strategy": strategy})
    res = t.audit(samples=20_000, seed=0, workers=1, progress=False)
    assert "threshold scan of record 0's multiplicity" in res.method, res.method
    held = min(res.witness.data.count(0), res.witness.neighbor.count(0))
    seen = f"certified {res.epsilon_lower_bound:.3f} on a key held by {held} units: {res.witness_description}"
    assert res.passed, f"violation of PipelineDP's own claim certified (false-failure rate <= 5%): {seen}"
    assert res.epsilon_lower_bound >= 0.3 and 10 <= held <= 40, seen


def test_pipeline_dp_group_by_refuses_bad_parameters():
    _need("pipeline_dp")
    for params, match in (({"strategy": "median"}, "strategy='median'"), ({"partitions": 1}, "partitions=1")):
        with pytest.raises(ParameterError, match=match):
            get_target("pipeline-dp:group-count", params)


@pytest.mark.parametrize("_", [pytest.param(None, marks=_OPACUS_SLOW)])
def test_opacus_claim_is_its_accountant(_):
    _need("opacus")
    from opacus.accountants import RDPAccountant

    t = get_target("opacus:gaussian", {"noise_multiplier": 2.0, "delta": 1e-6})
    acc = RDPAccountant()
    acc.step(noise_multiplier=2.0, sample_rate=1.0)
    assert t.epsilon == acc.get_epsilon(1e-6)
    # the real optimizer step and the noise primitive release the same law on the default pair
    step = get_target("opacus:dpsgd_step")
    out = step.fn(step.neighbor, 300, np.random.default_rng(0))
    assert abs(out.mean() - 1.0) < 0.3 and 0.8 < out.std() < 1.2


def test_tmlt_core_claims_are_its_privacy_functions():
    _need("tmlt.core")
    t = get_target("tmlt.core:discrete_gaussian", {"sigma_squared": 4.0})
    assert t.epsilon == pytest.approx(zcdp_to_approx(1 / 8, 1e-6))
    assert get_target("tmlt.core:laplace", {"scale": 2.0}).epsilon == 0.5


@pytest.mark.parametrize("name", ["tmlt.core:laplace", "tmlt.core:gaussian"])
def test_tmlt_core_targets_audit_in_worker_processes_and_say_they_are_not_seeded(name):
    """Tumult Core draws from its own secure generator (RDRAND, or os.urandom without it): nothing
    to reseed in a worker process, and nothing a seed can repeat (issue 17: the worker pool, which
    starts workers by fork+exec, refused the RDRAND generator). Not a statistical assertion: only
    that the audit runs in two workers and its result says it is not reproducible by seed. 60000
    samples: enough certification draws (about 10 s at this library's pace) that the audit starts
    its worker pool rather than drawing in this process."""
    _need("tmlt.core")
    res = get_target(name).audit(samples=60_000, seed=0, workers=2, progress=False)
    assert isinstance(res, AuditResult)
    notes = " ".join(res.extra.get("notes", ()))
    assert "not reproducible by seed" in notes and "Tumult Core" in notes, notes


# --------------------------------------------------------------------------- small audits

# mechanisms with exact (integer or grid) outputs: no floating-point leak is expected, so a correct
# implementation must not be flagged
_EXACT = [
    "opendp:laplace",
    "opendp:discrete_laplace",
    "opendp:geometric",
    "opendp:discrete_gaussian",
    "diffprivlib:geometric",
    "diffprivlib:discrete_gaussian",
    "pydp:laplace",
    "pipeline-dp:laplace",
    "tmlt.core:geometric",
    "tmlt.core:discrete_gaussian",
]

PASS, LEAK, BUG = "pass", "leak", "bug"
# every target's smoke audit: samples a side, the expected verdict and parameters (default ones when
# absent; a larger noise, hence a smaller claim, where the float leak needs fewer samples to show). PASS: no violation is certified at
# this budget (the exact mechanisms above, and float ones whose rounding shows no leak this small);
# LEAK: a violation is certified at this budget, by a floating-point event (the noise is a float added
# to the input: Mironov 2012), with the bound far above the claim (measured in .ci/run's library stage);
# BUG: a violation is certified by an event on the output's values, not its float structure (a
# sensitivity bug: diffprivlib 0.6.6's LinearRegression calibrates the noise on Σ x_j² to
# max(|lower_j|, |lower_j|)², the lower bound twice — IBM/differential-privacy-library issue 105).
# Model and statistics targets search their pairs over the box of their bounds (data sets of 1-10 records).
SMOKE = {
    "diffprivlib:laplace": (5_000, LEAK),
    "diffprivlib:gaussian": (5_000, LEAK),
    "diffprivlib:gaussian_analytic": (5_000, LEAK),
    "diffprivlib:discrete_gaussian": (10_000, PASS),
    "diffprivlib:geometric": (10_000, PASS),
    "diffprivlib:sum": (5_000, LEAK),
    "diffprivlib:mean": (5_000, LEAK),
    "diffprivlib:linear_regression": (1_000, BUG),
    "diffprivlib:gaussian_nb": (1_000, PASS),
    "diffprivlib:logistic_regression": (400, PASS, {"data": [[0.0, 0.0]], "neighbor": [[1.0, 1.0]]}),
    "diffprivlib:pca": (1_000, PASS),
    "diffprivlib:var": (3_000, LEAK),
    "diffprivlib:std": (3_000, PASS),
    "diffprivlib:quantile": (3_000, LEAK),
    "diffprivlib:median": (3_000, LEAK),
    "diffprivlib:histogram": (3_000, PASS),
    "opacus:dpsgd_step": (3_000, LEAK, {"noise_multiplier": 3.0}),
    "opacus:gaussian": (5_000, LEAK, {"noise_multiplier": 3.0}),
    "opendp:laplace": (10_000, PASS),
    "opendp:gaussian": (10_000, PASS),
    "opendp:discrete_laplace": (10_000, PASS),
    "opendp:geometric": (10_000, PASS),
    "opendp:discrete_gaussian": (10_000, PASS),
    "opendp:sum": (5_000, PASS),
    "opendp:mean": (5_000, PASS),
    "opendp:variance": (10_000, PASS),
    "opendp:quantile": (10_000, PASS),
    "opendp:count": (10_000, PASS),
    "opendp:histogram": (10_000, PASS),
    "opendp:context_mean": (10_000, PASS),
    "pipeline-dp:laplace": (5_000, PASS),
    "pipeline-dp:gaussian": (5_000, LEAK),
    "pipeline-dp:sum": (1_000, PASS),
    "pipeline-dp:mean": (1_000, PASS),
    "pipeline-dp:group-count": (5_000, PASS),
    "pydp:laplace": (5_000, PASS),
    "pydp:gaussian": (5_000, LEAK),
    "pydp:bounded_sum": (5_000, PASS),
    "pydp:bounded_mean": (5_000, PASS),
    "tmlt.core:laplace": (5_000, PASS),
    "tmlt.core:geometric": (5_000, PASS),
    "tmlt.core:discrete_gaussian": (3_000, PASS),
    "tmlt.core:gaussian": (5_000, LEAK, {"sigma_squared": 9.0}),
}
_SMOKE_CONFIDENCE = 0.999


def test_every_target_has_a_smoke_audit():
    assert set(SMOKE) == {t.name for t in list_targets()}
    assert all(SMOKE[n][1] == PASS for n in _EXACT)


def _smoke_param(name: str):
    return pytest.param(name, marks=_OPACUS_SLOW) if name.startswith("opacus:") else name


@pytest.mark.statistical
@pytest.mark.parametrize("name", [_smoke_param(n) for n in SMOKE])
def test_smoke_audit_of_every_target(name):
    """Each target audited against its real library at a small budget, at confidence 0.999: a target
    expected to PASS is flagged only if the certified bound exceeds its true ε, probability <= 0.1%
    when the library is correct (most libraries draw unseeded, so that is the false-failure rate
    per run, not a fixed outcome); a LEAK target's certified bound was far above its claim (several
    times the margin) in development runs, so a missed leak means the library changed."""
    prefix = name.split(":")[0] + ":"
    _need(next(m for m, p in LIBRARIES.items() if p == prefix))
    samples, expected, *params = SMOKE[name]
    t = get_target(name, params[0] if params else None)
    res = t.audit(samples=samples, seed=0, workers=1, confidence=_SMOKE_CONFIDENCE, progress=False)
    assert isinstance(res, AuditResult)
    assert res.epsilon == t.epsilon and res.delta == t.delta
    seen = (
        f"{name} ({t.library} {t.version}): certified ε >= {res.epsilon_lower_bound:.3f} against the claim "
        f"{t.epsilon:.4g} at {samples} samples a side: {res.witness_description}"
    )
    if expected == PASS:
        assert res.passed, f"violation certified (false-failure rate <= 0.1%): {seen}"
    elif expected == BUG:
        assert not res.passed and res.extra.get("family") not in ("float structure", "rounding"), (
            f"the expected sensitivity bug was not certified by an event on the values (expected in development runs): {seen}"
        )
    else:
        assert not res.passed and res.extra.get("family") in ("float structure", "rounding"), (
            f"the expected floating-point leak was not certified (expected in development runs): {seen}"
        )


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("name", _EXACT)
def test_false_alarm_at_larger_budget(name):
    """The exact mechanisms at 200000 samples a side: each would be flagged with probability <= 5%
    (confidence 0.95) if correct; fixed seed 0."""
    prefix = name.split(":")[0] + ":"
    module = next(m for m, p in LIBRARIES.items() if p == prefix)
    _need(module)
    t = get_target(name)
    res = t.audit(samples=200_000, seed=0)
    assert res.passed, f"{name}: certified {res.epsilon_lower_bound} > {t.epsilon} (false-failure rate <= 5%)"
    assert res.epsilon_lower_bound <= t.epsilon


# --------------------------------------------------------------------------- report, gate and register of a target


def test_unseedable_generator_that_would_repeat_is_refused_with_the_fix():
    """A generator held by the mechanism that cannot be given its own stream and is not known to draw
    fresh randomness in every copy (here a PCG64 that ignores any seed: every worker's copy would draw
    the same numbers) is refused in a worker, and the message says what to do. No library needed."""
    from dpharness.auditors import _runner
    from dpharness.errors import MechanismError

    class FixedPCG(np.random.PCG64):
        def __init__(self, seed=None):
            if seed is not None:
                raise TypeError("this generator takes no seed")
            super().__init__(1234)

    g = np.random.Generator(FixedPCG())
    with pytest.raises(MechanismError, match=r"would repeat draws.*Fix: draw from the rng argument"):
        _runner._reseed([g], (1, 0, 0, 0), 0)


def test_rdrand_is_left_to_draw_fresh_in_worker_processes():
    """randomgen's RDRAND (Tumult Core's generator) takes no seed; a copy shipped to a worker draws fresh
    words from the processor, so the reseeding leaves it alone instead of refusing it."""
    _need("tmlt.core")
    import pickle

    from randomgen.rdrand import RDRAND

    from dpharness.auditors import _runner

    try:
        g = np.random.Generator(RDRAND())
    except RuntimeError:  # no RDRAND on this processor: Tumult Core's os.urandom generator is the case
        import tmlt.core.random.rng as tr

        g = tr.prng()
        assert _runner._fresh_in_every_copy(g, g.bit_generator)
        return
    g.integers(0, 2**62, 4)
    copies = [pickle.loads(pickle.dumps(g)) for _ in range(2)]
    draws = [tuple(c.integers(0, 2**62, 4)) for c in copies]
    assert draws[0] != draws[1]  # two copies of one state do not repeat (a collision has probability ~2^-248)
    _runner._reseed([g], (1, 0, 0, 0), 0)  # no error: nothing to reseed


def _held_measurement(kind):
    from fractions import Fraction

    from tmlt.core.domains.numpy_domains import NumpyFloatDomain
    from tmlt.core.measurements.noise_mechanisms import AddGaussianNoise, AddLaplaceNoise

    if kind == "laplace":
        return AddLaplaceNoise(NumpyFloatDomain(), scale=Fraction(1))
    return AddGaussianNoise(NumpyFloatDomain(), sigma_squared=Fraction(1))


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_tmlt_core_measurement_held_by_a_function_audits_with_the_defaults(kind):
    """Issue 30: a function that holds Tumult Core's AddLaplaceNoise or AddGaussianNoise (and so reaches
    its RDRAND generator) audited with the default settings (workers: every core) stopped with 'cannot
    give the RDRAND generator ... its own stream'. It now runs on the worker processes. Not a
    statistical assertion: the audit finishes, says it is not reproducible by seed, with its certification
    on the workers where there are several cores (60 000 samples: about 10 s of this library's draws, past the pool's threshold)."""
    _need("tmlt.core")
    from dpharness.auditors import audit
    from dpharness.auditors._runner import default_workers

    meas = _held_measurement(kind)

    def fn(data, size, rng):
        return np.asarray([meas(float(data)) for _ in range(int(size))])

    res = audit(fn, 0.0, 1.0, epsilon=1.0, delta=1e-6 if kind == "gaussian" else 0.0, samples=60_000, progress=False)
    assert isinstance(res, AuditResult) and math.isfinite(res.epsilon_lower_bound)
    notes = " ".join(res.extra.get("notes", ()))
    assert "not reproducible by seed" in notes, notes
    if default_workers() > 1:
        assert res.extra["phases"]["certification"]["on_workers"], res.extra["phases"]


def _cli(*argv):
    from dpharness.cli import main

    return main(list(argv))


def test_report_of_a_library_target_gives_the_bound_of_audit(tmp_path, capsys):
    """`dpharness report diffprivlib:laplace` audits as `dpharness audit diffprivlib:laplace` does: the
    same samples and seed give the same certified bound (deterministic: diffprivlib's Laplace draws from
    the audit's seeded generator); the index lists it under the library targets, not the catalog."""
    _need("diffprivlib")
    from dpharness import report

    assert _cli("report", "diffprivlib:laplace", "--samples", "20000", "--seed", "1", "--out", str(tmp_path)) in (0, 1)
    meta = report.read_metadata(str(tmp_path / "diffprivlib--laplace.md"))
    capsys.readouterr()
    code = _cli("audit", "diffprivlib:laplace", "--samples", "20000", "--seed", "1", "--json")
    import json

    audited = json.loads(capsys.readouterr().out)
    assert meta["epsilon_lower_bound"] == audited["epsilon_lower_bound"]
    assert meta["audit_passed"] == audited["passed"] and code == (0 if audited["passed"] else 1)
    assert meta["kind"] == "library"
    index = (tmp_path / "README.md").read_text()
    assert "## Library targets" in index and "## Catalog" not in index
    assert "[diffprivlib:laplace](diffprivlib--laplace.md)" in index


@pytest.mark.parametrize("name", ["diffprivlib:laplace", "diffprivlib:geometric"])
def test_gate_target_agrees_with_audit(name, tmp_path, capsys):
    """`dpharness gate --target T` gates the library target: its exit code is `dpharness audit T`'s
    verdict (diffprivlib's float Laplace leaks through its float structure, exit 1; its geometric
    mechanism has exact outputs and passes, exit 0), and its bound is `dpharness audit T`'s for the
    same samples and seed (an audit with no proof beside it is certified in one look whatever the
    command). Deterministic (the audit's seed fixes diffprivlib's draws); the expected verdicts are
    those of the smoke table above."""
    _need("diffprivlib")
    import json

    args = ["--samples", "20000", "--seed", "2"]
    gate = _cli("gate", "--target", name, *args, "--jobs", "1", "--no-cache", "--json")
    gated = json.loads(capsys.readouterr().out)["mechanisms"][0]
    audit_code = _cli("audit", name, *args, "--json")
    audited = json.loads(capsys.readouterr().out)
    assert gate == audit_code == (1 if name == "diffprivlib:laplace" else 0)
    assert gated["audit"]["epsilon_lower_bound"] == audited["epsilon_lower_bound"]
    assert "sequential" not in gated["audit"]["extra"]


def test_audit_report_and_gate_print_one_bound_for_diffprivlib_laplace(tmp_path, capsys):
    """One audit procedure whatever the command: `dpharness audit diffprivlib:laplace`, `dpharness
    report` (its page) and `dpharness gate --target` (its line, JSON and JUnit property) print the same
    certified bound for the same samples and seed, rounded down alike (deterministic: diffprivlib's
    Laplace draws from the audit's seeded generator)."""
    _need("diffprivlib")
    import json
    import xml.etree.ElementTree as ET

    from dpharness._display import fmt_lower

    name, args = "diffprivlib:laplace", ["--samples", "20000", "--seed", "3"]
    assert _cli("audit", name, *args, "--json") == 1
    bound = json.loads(capsys.readouterr().out)["epsilon_lower_bound"]
    shown = fmt_lower(bound)
    _cli("audit", name, *args)
    assert f"certified ε lower bound {shown} " in capsys.readouterr().out
    _cli("report", name, *args, "--out", str(tmp_path / "r"))
    capsys.readouterr()
    assert shown in (tmp_path / "r" / "diffprivlib--laplace.md").read_text()
    junit = tmp_path / "gate.xml"
    assert _cli("gate", "--target", name, *args, "--jobs", "1", "--no-cache", "--junit", str(junit)) == 1
    assert f"audit ε_lb={shown} " in capsys.readouterr().out
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).iter("property")}
    assert float(props["audit.epsilon_lower_bound"]) == bound, (props, bound)
    _cli("gate", "--target", name, *args, "--jobs", "1", "--no-cache", "--json")
    assert json.loads(capsys.readouterr().out)["mechanisms"][0]["audit"]["epsilon_lower_bound"] == bound


def test_register_a_target_gates_it_under_its_name(tmp_path):
    """`register(get_target(...), name=...)` registers a library target for audit only, at the parameters
    given; the check pipeline audits it with the target's own audit."""
    _need("diffprivlib")
    from dpharness import registry
    from dpharness.pipeline import check

    target = get_target("diffprivlib:geometric", {"epsilon": 0.5})
    assert registry.register(target, name="team_dpl_geometric") is target
    assert registry.audit_only("team_dpl_geometric") and registry.kind("team_dpl_geometric") == "library"
    c = check("team_dpl_geometric", samples=5_000, seed=0, workers=1)
    direct = target.audit(samples=5_000, seed=0, workers=1, progress=False)  # one look, as `audit` does
    assert c.audit.epsilon_lower_bound == direct.epsilon_lower_bound and c.audit.epsilon == 0.5
    assert c.policy.value == "audit-only"


def test_cli_audit_of_a_target_honours_its_module_registration(tmp_path, monkeypatch, capsys):
    """``dpharness audit LIB:MECH --module PKG`` audits the target PKG registered under that name: its
    parameters and its registered ``samples=`` (issue 36, item 5); without the module, the defaults. (The
    verdict is not the point here: the float Laplace may be caught leaking through its doubles.)"""
    import json

    _need("diffprivlib")
    from dpharness import registry
    from dpharness.cli import main

    # this process may have registered the target at its defaults already (another test's audit of it)
    monkeypatch.setattr(
        registry, "_REGISTRY", {k: v for k, v in registry._REGISTRY.items() if k != "diffprivlib:laplace"}
    )
    monkeypatch.setattr(
        registry, "_SETTINGS", {k: v for k, v in registry._SETTINGS.items() if k != "diffprivlib:laplace"}
    )

    (tmp_path / "own_targets.py").write_text(
        "from dpharness import register\n"
        "from dpharness.auditors.libraries import get_target\n"
        "register(get_target('diffprivlib:laplace', {'epsilon': 0.5}), samples=4000)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["audit", "diffprivlib:laplace", "--module", "own_targets", "--workers", "1", "--json"]) in (0, 1)
    got = json.loads(capsys.readouterr().out)
    assert got["epsilon"] == 0.5 and got["samples"] == 4000, got
    assert main(["audit", "diffprivlib:laplace", "--samples", "3000", "--workers", "1", "--json"]) in (0, 1)
    got = json.loads(capsys.readouterr().out)
    assert got["epsilon"] == 1.0 and got["samples"] == 3000, got
