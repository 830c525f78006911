"""Library audit targets (dpharness.auditors.libraries): registry, errors, claims read from the
libraries, pairs under the stated relations, the zCDP conversion, and small audits.

Tests that need a library skip (``pytest.importorskip``) when it is not installed: CI installs only
``.[test]``."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from dpharness.auditors import AuditResult
from dpharness.auditors.libraries import LibraryTarget, MissingExtra, get_target, list_targets, zcdp_to_approx
from dpharness.errors import DPHarnessError, ParameterError

LIBRARIES = {  # import name -> target prefix
    "opendp": "opendp:", "diffprivlib": "diffprivlib:", "pydp": "pydp:", "pipeline_dp": "pipeline-dp:",
    "tmlt.core": "tmlt.core:", "opacus": "opacus:",
}


# opacus imports torch (tens of seconds on a loaded machine): its tests are marked slow
_PREFIXES = [pytest.param(p, marks=pytest.mark.slow) if p == "opacus:" else p for p in LIBRARIES.values()]


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
    with pytest.raises(ParameterError, match=r"scal= is not a parameter.*did you mean 'scale'.*accepted: scale, sensitivity"):
        get_target("opendp:laplace", {"scal": 1.0})


def test_missing_library_raises_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "opendp", None)  # makes `import opendp` raise ImportError
    with pytest.raises(MissingExtra) as info:
        get_target("opendp:laplace")
    msg = str(info.value)
    assert msg == "opendp is not installed; pip install 'dpharness[opendp]'"
    assert isinstance(info.value, DPHarnessError)


@pytest.mark.parametrize("module,name,extra", [("pydp", "pydp:laplace", "pydp"), ("pipeline_dp", "pipeline-dp:sum", "pipeline-dp"),
                                               ("tmlt.core", "tmlt.core:laplace", "tmlt"), ("opacus", "opacus:gaussian", "opacus"),
                                               ("diffprivlib", "diffprivlib:sum", "diffprivlib")])
def test_missing_library_message_per_library(monkeypatch, module, name, extra):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtra, match=rf"is not installed; pip install 'dpharness\[{extra}\]'$"):
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
    pytest.importorskip(module)
    return _names(prefix)


def _check_target(t: LibraryTarget) -> None:
    assert isinstance(t, LibraryTarget)
    assert t.epsilon > 0 and 0 <= t.delta < 1
    assert t.version and t.version != "unknown"
    assert t.relation and t.claim_source
    assert t.neighbor_relation is not None and t.neighbor_relation.is_neighbour(np.asarray(t.data), np.asarray(t.neighbor))
    if t.vectorized:
        out = np.asarray(t.fn(t.data, 7, np.random.default_rng(1)))
        assert out.shape[0] == 7 and np.all(np.isfinite(out.astype(float)))
    else:
        assert np.isfinite(float(t.fn(t.data)))


@pytest.mark.parametrize("prefix", _PREFIXES)
def test_every_target_of_an_installed_library_constructs(prefix):
    for name in _installed(prefix):
        _check_target(get_target(name))


@pytest.mark.parametrize("prefix", _PREFIXES)
def test_pair_override_is_validated_against_the_relation(prefix):
    for name in _installed(prefix):
        t = get_target(name)
        with pytest.raises(ParameterError, match="not neighbours"):
            get_target(name, {"data": t.data, "neighbor": t.data})


def test_opendp_claims_are_its_privacy_maps():
    pytest.importorskip("opendp")
    import opendp.prelude as dp

    dp.enable_features("contrib")
    t = get_target("opendp:laplace", {"scale": "2.0", "sensitivity": "1.0"})
    assert t.epsilon == dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=2.0).map(1.0)
    g = get_target("opendp:gaussian", {"scale": 2.0, "delta": 1e-6})
    rho = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=2.0).map(1.0)
    assert g.epsilon == pytest.approx(zcdp_to_approx(rho, 1e-6), rel=1e-12) and g.delta == 1e-6
    # OpenDP's own zCDP -> approx-DP conversion agrees with ours (both CKS 2020)
    meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=2.0)
    theirs = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), 1e-6).map(1.0)[0]
    assert g.epsilon == pytest.approx(theirs, rel=1e-6)
    s = get_target("opendp:sum")
    assert s.epsilon > 1.0 and s.epsilon < 1.0 + 1e-6  # float sum: OpenDP adds a rounding allowance


def test_opendp_string_params_and_bad_values():
    pytest.importorskip("opendp")
    assert get_target("opendp:geometric", {"scale": "3"}).epsilon == pytest.approx(1 / 3)
    with pytest.raises(ParameterError, match="scale=-1.0 must be > 0"):
        get_target("opendp:laplace", {"scale": "-1"})
    with pytest.raises(ParameterError, match="delta=2.0 must lie in"):
        get_target("opendp:gaussian", {"delta": 2.0})
    with pytest.raises(ParameterError, match="sensitivity=1.5 is not an integer"):
        get_target("opendp:geometric", {"sensitivity": 1.5})


def test_diffprivlib_claims_are_its_attributes_and_seeded():
    pytest.importorskip("diffprivlib")
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


def test_pydp_and_pipeline_dp_claims():
    pytest.importorskip("pydp")
    from pydp.algorithms.numerical_mechanisms import GaussianMechanism

    g = get_target("pydp:gaussian", {"epsilon": 0.5, "delta": 1e-6})
    m = GaussianMechanism(epsilon=0.5, delta=1e-6, sensitivity=1.0)
    assert (g.epsilon, g.delta) == (m.epsilon, m.delta) and not g.vectorized
    pytest.importorskip("pipeline_dp")
    s = get_target("pipeline-dp:sum", {"epsilon": 0.3})
    assert (s.epsilon, s.delta) == (0.3, 0.0) and not s.vectorized


@pytest.mark.slow
def test_opacus_claim_is_its_accountant():
    pytest.importorskip("opacus")
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
    pytest.importorskip("tmlt.core")
    t = get_target("tmlt.core:discrete_gaussian", {"sigma_squared": 4.0})
    assert t.epsilon == pytest.approx(zcdp_to_approx(1 / 8, 1e-6))
    assert get_target("tmlt.core:laplace", {"scale": 2.0}).epsilon == 0.5


# --------------------------------------------------------------------------- small audits

# mechanisms with exact (integer or grid) outputs: no floating-point leak is expected, so a correct
# implementation must not be flagged
_EXACT = ["opendp:laplace", "opendp:discrete_laplace", "opendp:geometric", "opendp:discrete_gaussian",
          "diffprivlib:geometric", "diffprivlib:discrete_gaussian", "pydp:laplace", "pipeline-dp:laplace",
          "tmlt.core:geometric", "tmlt.core:discrete_gaussian"]


@pytest.mark.statistical
@pytest.mark.parametrize("name", _EXACT)
def test_small_audit_does_not_flag_exact_mechanisms(name):
    """A correct mechanism is flagged only if the audit's certified bound exceeds the true ε, which
    happens with probability <= 5% (confidence 0.95) for a fixed seed; at this small budget
    (4000 samples a side) the bound is far below the claim, so the false-failure rate is well
    under 5% and the seed is fixed (seed=0)."""
    prefix = name.split(":")[0] + ":"
    module = next(m for m, p in LIBRARIES.items() if p == prefix)
    pytest.importorskip(module)
    t = get_target(name)
    res = t.audit(samples=4_000, seed=0, workers=1)
    assert isinstance(res, AuditResult)
    assert res.epsilon == t.epsilon and res.delta == t.delta
    assert res.passed, f"{name}: certified {res.epsilon_lower_bound} > claimed {t.epsilon} (false-failure rate < 5%): {res.witness_description}"


@pytest.mark.statistical
def test_small_audit_finds_diffprivlib_float_laplace_leak():
    """diffprivlib's Laplace adds float noise to the input: the outputs on 0.0 and 1.0 have different
    floating-point round-trip patterns (Mironov 2012). Seed 0, 20000 samples a side; a wrong
    failure (no violation certified) would need the leak to vanish, which did not happen in
    development runs (bound about 6.8 against ε = 1)."""
    pytest.importorskip("diffprivlib")
    res = get_target("diffprivlib:laplace").audit(samples=20_000, seed=0)
    assert not res.passed and res.epsilon_lower_bound > 1.0


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("name", _EXACT)
def test_false_alarm_at_larger_budget(name):
    """The exact mechanisms at 200000 samples a side: each would be flagged with probability <= 5%
    (confidence 0.95) if correct; fixed seed 0."""
    prefix = name.split(":")[0] + ":"
    module = next(m for m, p in LIBRARIES.items() if p == prefix)
    pytest.importorskip(module)
    t = get_target(name)
    res = t.audit(samples=200_000, seed=0)
    assert res.passed, f"{name}: certified {res.epsilon_lower_bound} > {t.epsilon} (false-failure rate <= 5%)"
    assert res.epsilon_lower_bound <= t.epsilon
