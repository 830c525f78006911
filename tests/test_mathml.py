"""Presentation MathML for report maths (dpharness.mathml): well-formed XML, escaped strings,
textual formulas parsed without evaluating any user-controlled name, and a lazy sympy import.
Deterministic."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import sympy as sp

from dpharness.errors import ParameterError
from dpharness.mathml import parse_formula, split_formula, to_mathml

NS = "{http://www.w3.org/1998/Math/MathML}"


def _parse(markup: str) -> ET.Element:
    root = ET.fromstring(markup)
    assert root.tag == f"{NS}math"
    return root


def _text(markup: str) -> str:
    return "".join(_parse(markup).itertext())


@pytest.mark.parametrize(
    "expr",
    [
        sp.Le(
            sp.Abs(sp.Symbol("y") - sp.Symbol("x'")) - sp.Abs(sp.Symbol("y") - sp.Symbol("x")),
            sp.Abs(sp.Symbol("x") - sp.Symbol("x'")),
        ),
        sp.Eq(sp.exp(-sp.Symbol("u") / 2) * sp.pi * sp.I, sp.oo),
        sp.And(sp.Eq(sp.Symbol("delta_total"), 0), sp.Eq(sp.Symbol("eps_total"), 1)),
        sp.Le(sp.Rational(1048576, 6291456), 1, evaluate=False),
        sp.true,
        sp.false,
        sp.Integer(3),
        sp.log(sp.Symbol("S'")) - sp.Symbol("beta") * sp.Symbol("Delta"),
    ],
)
def test_sympy_expressions_give_well_formed_block_math(expr):
    out = to_mathml(expr)
    root = _parse(out)
    assert root.get("display") == "block"
    assert "&ExponentialE;" not in out and "&pi;" not in out  # named entities XML does not know
    assert to_mathml(expr) == out  # deterministic


def test_relations_render_as_operators():
    out = to_mathml(sp.Le(sp.Symbol("a"), sp.Symbol("b")), display="inline")
    root = _parse(out)
    assert root.get("display") == "inline"
    assert [mo.text for mo in root.iter(f"{NS}mo")] == ["\u2264"]


def test_symbol_names_are_escaped():
    evil = sp.Symbol("<script>alert(1)</script>&amp;")
    out = to_mathml(sp.Le(evil, 1))
    assert "<script" not in out
    assert "<script>alert(1)</script>&amp;" in _text(out)  # shown literally, as text


def test_characters_xml_cannot_hold_are_replaced():
    for value in (sp.Symbol("a\x00b&#0;&#x1;&#xD800;&#x110000;&#xZZ;"), "a\x00b\x1b &#0; <= 1"):
        out = to_mathml(value)
        assert "\x00" not in out and "&#0;" not in out.replace("&amp;#0;", "")
        _parse(out)
    assert "\ufffd" in _text(to_mathml("a\x00b"))


def test_text_is_escaped_and_falls_back_to_mtext():
    for text in (
        "<script>alert(1)</script>",
        "a & b <mi>x</mi>",
        "triangle inequality",
        "x ∈ [0, 1] ⇒ x² ∈ [0, 1]",
        "]]><!--",
        "&ExponentialE; &#x3C;b&#x3E;",
    ):
        out = to_mathml(text)
        root = _parse(out)
        assert [child.tag for child in root] == [f"{NS}mtext"], text
        assert "<script" not in out and "<mi>x</mi>" not in out
        assert _text(out) == text


def test_textual_formulas_parse():
    parsed = parse_formula("|y-x'| - |y-x| <= |x-x'|")
    assert parsed is not None and parsed[1] == "<="
    x, y, x2 = sp.Symbol("x"), sp.Symbol("y"), sp.Symbol("x'")
    assert sp.simplify(parsed[0] - (sp.Abs(y - x2) - sp.Abs(y - x))) == 0
    assert parsed[2] == sp.Abs(x - x2)
    out = to_mathml("|y-x'| - |y-x| <= |x-x'|")
    assert f"{NS}mtext" not in [e.tag for e in _parse(out).iter()]
    assert "x'" in [mi.text for mi in _parse(out).iter(f"{NS}mi")]


def test_comparison_chains_and_juxtaposition():
    parsed = parse_formula("y <= x <= x'")
    assert parsed[1::2] == ("<=", "<=")
    assert [str(e) for e in parsed[0::2]] == ["y", "x", "x'"]
    assert parse_formula("|Δ + q_i − q'_i| <= 2Δ")[2] == 2 * sp.Symbol("Δ")
    assert parse_formula("x² <= 1")[0] == sp.Symbol("x") ** 2
    assert parse_formula("ceil(K) + n - 1") is not None


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo hacked')",
        "x.__class__",
        "lambda: 1",
        "open('f')",
        "so y <= x'",
        "f(x) <= 1",
        "||v||_1 <= 1",
        "|x <= 1|",
        "P(y|c)",
        "x <= ",
        "1 <= [x]",
        "'a' <= 'b'",
        "Σ_i d_i <= K",
        "x" * 500 + " <= 1",
    ],
)
def test_non_formulas_are_not_parsed(text):
    assert parse_formula(text) is None
    _parse(to_mathml(text))


def test_names_are_symbols_never_looked_up():
    """Identifiers become placeholders bound to Symbols: a name that is a Python builtin or a sympy
    function stays a symbol of that name."""
    parsed = parse_formula("os + id + E + S <= pi")
    assert parsed is not None
    names = sorted(s.name for e in parsed[0::2] for s in e.free_symbols)
    assert names == ["E", "S", "id", "os", "pi"]
    assert all(isinstance(s, sp.Symbol) for e in parsed[0::2] for s in e.free_symbols)


def test_split_formula():
    assert split_formula("triangle inequality |y-x'| - |y-x| <= |x-x'|") == (
        "triangle inequality",
        "|y-x'| - |y-x| <= |x-x'|",
    )
    assert split_formula("y <= x <= x'") == ("", "y <= x <= x'")
    assert split_formula("the pmf is a product over coordinates") == ("the pmf is a product over coordinates", None)
    # a function name is not prose: its argument is not split off as a formula
    assert split_formula("ln is increasing: S' <= T implies ln S' <= ln T")[1] is None


def test_an_object_the_printer_cannot_print_is_shown_as_text():
    class Odd(sp.Basic):
        def _mathml_presentation(self, printer):
            raise NotImplementedError("no MathML for this")

        def __str__(self):
            return "odd <thing>"

    assert _text(to_mathml(Odd())) == "odd <thing>"
    assert _text(to_mathml(object())).startswith("<object object")


def test_display_is_validated():
    with pytest.raises(ParameterError, match="display='inline-block'"):
        to_mathml("x", display="inline-block")


def test_other_values():
    from fractions import Fraction

    assert _text(to_mathml(Fraction(1, 3))) == "13"  # an mfrac of 1 and 3
    assert _text(to_mathml(True)) == "true"
    assert _text(to_mathml(0.1)) == "0.1"


def test_import_is_lazy():
    code = (
        "import sys, dpharness, dpharness.mathml, dpharness.derivation; "
        "assert 'sympy' not in sys.modules, 'sympy imported'; "
        "dpharness.mathml.to_mathml('x <= 1'); assert 'sympy' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


_d, _e, _x, _y, _loss, _xp = sp.symbols("delta_total eps_total x y loss x'")


@pytest.mark.parametrize(
    "expr",
    [
        sp.And(sp.Eq(_d, 0), sp.Eq(_e, 1)),
        sp.And(sp.Le(-1, _x * _y), sp.Le(_x * _y, 1)),
        sp.Eq(_loss, sp.Rational(9, 2)),
        sp.Eq(
            sp.log(sp.exp(-sp.Abs(_x - _y))) - sp.log(sp.exp(-sp.Abs(_xp - _y))),
            sp.Abs(_xp - _y) - sp.Abs(_x - _y),
            evaluate=False,
        ),
        sp.Ne(_x, _y),
    ],
)
def test_a_formula_as_sympy_printed_it_is_mathml(expr):
    """A proof step keeps its checked formula as ``str(formula)`` (the cache's JSON form): that text is
    rendered as maths, the same as the expression itself, never as raw sympy in ``<mtext>``."""
    markup = to_mathml(str(expr), display="inline")
    assert "<mtext>" not in markup, markup
    assert "Eq(" not in markup and "&amp;" not in markup
    _parse(markup)
    if isinstance(expr, sp.And):
        assert "&#x2227;" in markup  # ∧ between the conjuncts


@pytest.mark.parametrize("text", ["Eq(a, b, c)", "Eq(x, 1) & prose here", "(x <= 1", "Eq(__import__('os'), 1)"])
def test_printed_form_that_is_not_a_formula_stays_text(text):
    assert "<mtext>" in to_mathml(text)
