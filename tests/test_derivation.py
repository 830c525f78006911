"""The folded derivation tree (dpharness.derivation): no obligation lost or duplicated, repeated
cases folded, structure tags nested, strings escaped in HTML and Markdown, output deterministic.
Deterministic; the whole-catalog test proves every registered mechanism (slow)."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
import sympy as sp

import dpharness
from dpharness.derivation import Node, derivation_tree, render_tree_html, render_tree_markdown
from dpharness.errors import ParameterError
from dpharness.proofs import Obligation, Verdict, prove

TRIANGLE = "triangle inequality |y-x'| - |y-x| <= |x-x'|"


def _leaves(node: Node) -> list[Node]:
    if node.kind == "step":
        return [node]
    return [leaf for c in node.children for leaf in _leaves(c)]


def _walk(node: Node):
    yield node
    for c in node.children:
        yield from _walk(c)


def _check_counts(node: Node) -> None:
    """count/undischarged add up at every node."""
    for n in _walk(node):
        if n.kind == "step":
            assert n.count == 1 and n.undischarged == (0 if n.obligation.discharged else 1)
        else:
            assert n.count == sum(c.count for c in n.children)
            assert n.undischarged == sum(c.undischarged for c in n.children)
            assert sum(k for _, k in n.checkers) == n.count


def _same_obligations(tree: Node, steps) -> None:
    """Every obligation is exactly one leaf (by identity)."""
    leaves = [leaf.obligation for leaf in _leaves(tree)]
    assert sorted(map(id, leaves)) == sorted(map(id, steps))
    assert tree.count == len(steps)
    _check_counts(tree)


def _fake_proof(steps, name="demo", verdict=Verdict.PROVED):
    return SimpleNamespace(steps=tuple(steps), mechanism=SimpleNamespace(name=name), verdict=verdict)


def _ob(statement, discharged=True, checker="sympy+z3", formula=sp.true, justification="linear arithmetic"):
    return Obligation(statement, formula, justification, checker, discharged, "detail")


def _triangle_cases(n: int, fail: int | None = None) -> list[Obligation]:
    signs = list(itertools.product("+-", repeat=5))[:n]
    obs = [_ob(f"{TRIANGLE} [case signs {''.join(s)}]", discharged=(i != fail)) for i, s in enumerate(signs)]
    obs.append(_ob(f"{TRIANGLE}: the {n} cases are exhaustive", checker="lemma", justification="all sign patterns"))
    obs.append(
        _ob(
            "triangle inequality: conclusion",
            checker="lemma",
            justification="case split",
            formula=sp.Le(
                sp.Abs(sp.Symbol("y") - sp.Symbol("x'")) - sp.Abs(sp.Symbol("y") - sp.Symbol("x")),
                sp.Abs(sp.Symbol("x") - sp.Symbol("x'")),
            ),
        )
    )
    return obs


def test_22_cases_fold_into_one_node():
    steps = _triangle_cases(22)
    tree = derivation_tree(_fake_proof(steps))
    _same_obligations(tree, steps)
    assert len(tree.children) == 1
    lemma = tree.children[0]
    assert (lemma.kind, lemma.title, lemma.count) == ("lemma", "triangle inequality", 24)
    assert [c.kind for c in lemma.children] == ["cases", "step", "step"]
    fold = lemma.children[0]
    assert fold.count == 22 and fold.undischarged == 0 and fold.title == TRIANGLE
    assert [c.case for c in fold.children] == [f"signs {''.join(s)}" for s in itertools.product("+-", repeat=5)][:22]
    md = render_tree_markdown(tree)
    assert "22 cases of triangle inequality `|y-x'| - |y-x| <= |x-x'|`: all hold (sympy+z3 ×22)" in md
    assert len(md.splitlines()) < 10  # 24 obligations in a handful of lines
    html = render_tree_html(tree)
    assert "22 cases: all hold" in html


def test_an_undischarged_case_is_counted_and_shown_open():
    steps = _triangle_cases(8, fail=3)
    tree = derivation_tree(_fake_proof(steps, verdict=Verdict.UNPROVEN))
    _same_obligations(tree, steps)
    fold = tree.children[0].children[0]
    assert (fold.count, fold.undischarged) == (8, 1)
    assert tree.undischarged == 1
    html = render_tree_html(tree)
    root = ET.fromstring(html)
    bad = [d for d in root.iter("details") if "dp-bad" in d.get("class", "")]
    assert bad and all(d.get("open") == "" for d in bad)
    assert "1 NOT discharged" in html
    failed = "".join(list(itertools.product("+-", repeat=5))[3])
    assert f"`signs {failed}` **NOT discharged**" in render_tree_markdown(tree)


def test_numbered_instances_fold_and_name_their_index():
    steps = [_ob(f"ε_{i} >= 0 and δ_{i} >= 0") for i in range(6)]
    steps += [_ob("sequential composition: conclusion", checker="lemma")]
    tree = derivation_tree(_fake_proof(steps))
    _same_obligations(tree, steps)
    fold = tree.children[0]
    assert fold.kind == "cases" and fold.count == 6 and fold.title == "ε_k >= 0 and δ_k >= 0"
    assert [c.case for c in fold.children] == [f"k = {i}" for i in range(6)]


def test_path_tags_nest_in_order_of_first_appearance():
    steps = [
        _ob("[part 1 › count] count moves by 1"),
        _ob("[family: grid Laplace] normaliser"),
        _ob("[part 1] laplace(scale=6): ε = 1/6"),
        _ob("[part 2 › sum] sum moves by 1"),
        _ob("[part 2 › sum] stability of sum(): 1"),
        _ob("derived ε bound <= claimed ε"),
    ]
    tree = derivation_tree(_fake_proof(steps))
    _same_obligations(tree, steps)
    assert [(c.kind, c.title) for c in tree.children] == [
        ("group", "part 1"),
        ("step", "family: grid Laplace: normaliser"),
        ("group", "part 2"),
        ("step", "derived ε bound <= claimed ε"),
    ]
    part1 = tree.children[0]
    # a one-obligation tag is folded into its statement (not repeated when the statement starts with it)
    assert [c.title for c in part1.children] == ["count moves by 1", "laplace(scale=6): ε = 1/6"]
    part2 = tree.children[2]
    assert part2.children[0].kind == "group" and part2.children[0].title == "sum"
    assert part2.count == 2


def test_mechanism_and_statement_strings_are_escaped():
    evil = "<script>alert(1)</script>"
    steps = [
        _ob(f"[{evil} › <img src=x onerror=alert(2)>] {evil} moves by 1", formula=sp.Le(sp.Symbol(evil), 1)),
        _ob(f"[{evil} › <img src=x onerror=alert(2)>] second & <b>step</b>", formula="`code` & <i>"),
    ]
    tree = derivation_tree(_fake_proof(steps, name=evil))
    html = render_tree_html(tree, open_levels=3)
    assert "<script" not in html and "<img" not in html and "<b>" not in html and "<i>" not in html
    root = ET.fromstring(html)  # well-formed
    text = "".join(root.itertext())
    assert evil in text and "<img src=x onerror=alert(2)>" in text
    md = render_tree_markdown(tree)
    prose = re.sub(r"(`+).*?\1", "", md)  # code spans are literal text in Markdown
    assert "<script" not in prose and "<img" not in prose and "<b>" not in prose and "<i>" not in prose
    assert "&lt;script>alert(1)&lt;/script>" in prose


def test_a_proof_without_obligations():
    mech = dpharness.get("laplace")()
    tree = derivation_tree(dpharness.proofs.unproven(mech, "no proof: <script>"))
    assert (tree.count, tree.children) == (0, ())
    assert "no obligations" in render_tree_html(tree) and "no obligations" in render_tree_markdown(tree)
    assert "laplace: UNPROVEN" in render_tree_markdown(tree)


def test_bad_input():
    with pytest.raises(ParameterError, match="proof=42"):
        derivation_tree(42)
    with pytest.raises(ParameterError, match="node='x'"):
        render_tree_html("x")
    with pytest.raises(ParameterError, match="node='x'"):
        render_tree_markdown("x")
    with pytest.raises(ParameterError, match="open_levels=-1"):
        render_tree_html(derivation_tree(_fake_proof([_ob("a")])), open_levels=-1)


def _check_renders(name: str) -> Node:
    proof = prove(dpharness.get(name)())
    tree = derivation_tree(proof)
    _same_obligations(tree, proof.steps)
    html = render_tree_html(tree, open_levels=2)
    root = ET.fromstring(html)
    summaries = sum(1 for _ in root.iter("summary"))
    assert summaries == sum(1 for _ in _walk(tree))  # one <details> per node
    md = render_tree_markdown(tree)
    assert proof.verdict.value in md and proof.verdict.value in html
    # deterministic: a second proof renders to the same text
    again = derivation_tree(prove(dpharness.get(name)()))
    assert render_tree_html(again, open_levels=2) == html and render_tree_markdown(again) == md
    return tree


def test_laplace_derivation_folds():
    tree = _check_renders("laplace")
    assert tree.count == 23 and tree.undischarged == 0
    assert len(tree.children) <= 10
    folds = [n for n in _walk(tree) if n.kind == "cases"]
    assert [f.count for f in folds] == [6]
    lemmas = [n.title for n in _walk(tree) if n.kind == "lemma"]
    assert "triangle inequality" in lemmas
    html = render_tree_html(tree)
    assert html.count("<math ") >= 5  # maths as MathML: formulas in titles and checked formulas


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(dpharness.catalog(gallery=None)))
def test_every_catalog_proof_renders(name):
    _check_renders(name)
