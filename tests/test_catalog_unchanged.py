"""Speed never buys a change in what is proved or audited: every catalog and gallery mechanism's proof
verdict and bound, and its audit's certified lower bound at a fixed seed (20 000 samples a side, one
worker), equal the reference recorded before the executor was vectorised
(``tests/data/catalog_reference.json``, written by the code of the commit before that work with the
script in this module's ``_reference`` and checked equal on the vectorised code). A mechanism added
later is checked only for having a verdict; update the file deliberately when a change is meant to move
a value, and say why in the commit."""

from __future__ import annotations

import json
import os

import pytest

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "catalog_reference.json")


def _reference(name, cls):
    from dpharness.pipeline import run_audit
    from dpharness.proofs import prove

    m = cls()
    p = prove(m)
    r, _ = run_audit(m, p, samples=20_000, seed=0, workers=1)
    return {
        "verdict": p.verdict.name,
        "bound": repr(float(p.bound)),
        "audit_lower_bound": repr(float(r.epsilon_lower_bound)),
        "audit_passed": bool(r.passed),
    }


with open(REFERENCE) as f:
    _WANT = json.load(f)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_WANT))
def test_catalog_and_gallery_proofs_and_audits_are_unchanged(name):
    from dpharness.registry import catalog

    got = _reference(name, catalog(gallery=None)[name])
    assert got == _WANT[name]
