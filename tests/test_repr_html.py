"""Jupyter renders a proof, an audit result and a check (issue 17, notebooks): ``_repr_html_`` gives
the verdict, the bounds and the derivation, with every value escaped."""

from __future__ import annotations

from dpharness import AddRemove, PureDP, RealInterval, audit, check, parts as dp, prove


def _mechanism(scale=2, name="html_count"):
    return dp.mechanism(
        name=name,
        records=RealInterval(0, 1),
        relation=AddRemove(),
        steps=dp.count() >> dp.laplace(scale=scale),
        claim=PureDP(0.5),
    )


def test_a_proof_renders_its_verdict_bound_and_derivation():
    page = prove(_mechanism())._repr_html_()
    assert "PROVED" in page and "proof of html_count" in page and "derived bound" in page
    assert "<details><summary>derivation (" in page and "✓" in page
    assert "<script" not in page


def test_a_refuted_claim_renders_as_such():
    page = prove(_mechanism(scale=1.8))._repr_html_()
    assert "REFUTED" in page and "witness" in page


def test_an_audit_result_renders_its_bound_and_verdict():
    page = audit(_mechanism(), samples=20_000, seed=1)._repr_html_()
    assert "certified ε lower bound" in page and "passed" in page and "seed" in page


def test_a_check_renders_the_sandwich():
    page = check(_mechanism(), samples=20_000, seed=1)._repr_html_()
    assert "check of html_count" in page and "PASS" in page and "audit " in page and "&lt;= proven 0.5 &lt;=" in page


def test_values_are_escaped():
    from dpharness._html import card

    page = card("<b>x</b>", "<i>", "good", [("a<", "<script>alert(1)</script>")], [("s", ["<img src=x>"])])
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
