"""Soundness over the whole registry, whatever is registered at test time.

* every correct catalog mechanism (``dpharness.catalog()``) is PROVED at its calibrated defaults;
* every gallery entry (``dpharness.catalog(gallery=True)``) is never PROVED, and a REFUTED verdict
  carries a witness whose pair is a valid neighbouring pair;
* mutation: tightening the claim by 10%, or cutting any calibrated noise parameter by 10%, flips
  PROVED to not PROVED, for every catalog mechanism.

Deterministic (the proofs are symbolic/SMT/exact); the whole module takes about 25 s on 1 core."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

import dpharness
from dpharness import ApproxDP, PureDP, RenyiDP
from dpharness.proofs import prove
from dpharness.proofs._model import Verdict

CATALOG = sorted(dpharness.catalog())
GALLERY = sorted(dpharness.catalog(gallery=True))

# noise parameters by name: "down" = the noise grows with the value (a cut multiplies it by 9/10),
# "up" = the privacy loss grows with the value (a 10% noise cut divides it by 9/10);
# Warner's p_truth: the noise is the lying probability 1 - p_truth; a variance σ² is cut as σ.
NOISE_DOWN = {"scale", "sigma", "rho_scale", "nu_scale", "value_scale", "lam", "lambda_", "noise_scale", "sigma2"}
NOISE_UP = {"beta", "log_odds"}


def _times(value: Any, factor: Fraction) -> Any:
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, (int, Fraction)):
        out = Fraction(value) * factor
        return int(out) if out.denominator == 1 else out
    return float(value) * float(factor)


def _noise_mutations(m) -> list[tuple[str, Any]]:
    out = []
    for name, value in m.noise_parameters().items():
        if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
            continue
        if name in NOISE_DOWN and value > 0:
            out.append((name, _times(value, Fraction(9, 10))))
        elif name in NOISE_UP and value > 0:
            out.append((name, _times(value, Fraction(10, 9))))
        elif name in ("sigma2", "variance") and value > 0:  # σ cut by 10%: σ² times 81/100
            out.append((name, _times(value, Fraction(81, 100))))
        elif name == "p_truth":
            out.append((name, 1 - _times(1 - Fraction(value), Fraction(9, 10))))
    return out


def _tightened(claim):
    if isinstance(claim, PureDP):
        return PureDP(_times(claim.epsilon, Fraction(9, 10)))
    if isinstance(claim, ApproxDP):
        return ApproxDP(_times(claim.epsilon, Fraction(9, 10)), claim.delta)
    if isinstance(claim, RenyiDP):
        return RenyiDP(claim.alpha, _times(claim.epsilon, Fraction(9, 10)))
    raise TypeError(claim)


def _base(name: str):
    """The calibrated instance a mutation starts from: the defaults, or, for a mechanism whose
    default calibration is a loose closed form, its tight calibration (``calibrated_analytic``),
    since cutting a loose calibration by 10% may still be correctly PROVED."""
    cls = dpharness.get(name)
    m = cls()
    if getattr(m, "calibration", None) == "classic" and hasattr(cls, "calibrated_analytic"):
        return cls.calibrated_analytic(m.claim.epsilon, m.claim.delta)
    return m


def test_registry_is_not_empty():
    assert CATALOG and GALLERY


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_mechanism_is_proved(name):
    """Every built-in is PROVED but those registered audit-only: the selections that draw numpy's float noise
    (report noisy max, sparse vector), UNPROVEN with one open obligation, that the code draws the continuous
    noise their derivation is about (proofs._common.float_noise_gap)."""
    from dpharness import registry

    p = prove(dpharness.get(name)())
    open_ = [s.statement for s in p.steps if not s.discharged]
    if registry.audit_only(name):
        assert p.verdict is Verdict.UNPROVEN and len(open_) == 1 and open_[0].startswith("the sampler draws the")
        return
    assert p.verdict is Verdict.PROVED, (name, open_, p.notes[-3:])
    assert not open_


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_entry_is_never_proved(name):
    m = dpharness.get(name)()
    p = prove(m)
    assert p.verdict is not Verdict.PROVED, name
    if p.verdict is Verdict.REFUTED:
        w = p.witness
        assert w is not None and (w.loss is None or w.loss > float(m.claim.epsilon))
        spec = m.input_spec
        spec.validate_pair(w.data, w.neighbor)  # a valid neighbouring pair (raises otherwise)


@pytest.mark.parametrize("name", CATALOG)
def test_tightening_the_claim_by_ten_percent_flips(name):
    m = _base(name)
    p = prove(m.replace(claim=_tightened(m.claim)))
    assert p.verdict is not Verdict.PROVED, name


@pytest.mark.parametrize("name", CATALOG)
def test_cutting_each_noise_parameter_by_ten_percent_flips(name):
    m = _base(name)
    muts = _noise_mutations(m)
    assert muts, f"{name}: no noise parameter recognised in {sorted(m.noise_parameters())}"
    for field, value in muts:
        p = prove(m.replace(**{field: value}))
        assert p.verdict is not Verdict.PROVED, (name, field, value)
