"""Maths in reports as presentation MathML, which browsers render natively (no scripts, offline).

:func:`to_mathml` takes a sympy expression (an obligation's ``formula``) or a short textual formula
(the maths the proofs write in their statements: ``|y-x'| - |y-x| <= |x-x'|``, ``y <= x <= x'``)
and returns one ``<math>`` element. sympy expressions go through sympy's presentation printer
(``sympy.printing.mathml``); text is tokenised here against a whitelist (numbers, short
identifiers such as ``x'``, ``q_i``, ``Δ``, a few named functions, arithmetic, ``|…|`` and
comparison chains), every identifier is replaced by a placeholder bound to a sympy Symbol, and only
that placeholder text reaches ``sympy.parsing.sympy_parser.parse_expr`` (``evaluate=False``), so no
user-controlled name is ever evaluated. Text that is not such a formula (prose, ``e^{βc}``, set
notation) is shown as escaped ``<mtext>``.

The output is always well-formed XML: sympy's printer writes its text nodes unescaped (so that its
own character references survive), so every text node is escaped here, and its few named
entities (``&ExponentialE;``...) become numeric character references.

sympy is imported on first use: ``import dpharness`` does not import this module's dependencies.
"""

from __future__ import annotations

import functools
import html
import re
import sys
from typing import Any

__all__ = ["to_mathml", "parse_formula", "split_formula", "xml_text"]

_MATHML_NS = "http://www.w3.org/1998/Math/MathML"
_MAX_TEXT = 400  # longer text is shown as text, never parsed

# named entities the sympy printer writes, as numeric references (XML knows only amp/lt/gt/quot/apos)
_ENTITIES = {
    "ExponentialE": "&#x2147;",
    "ImaginaryI": "&#x2148;",
    "InvisibleTimes": "&#x2062;",
    "dd": "&#x2146;",
    "int": "&#x222B;",
    "pi": "&#x3C0;",
    "infin": "&#x221E;",
    "ApplyFunction": "&#x2061;",
}
_CHARREF = re.compile(r"&(#[0-9]+|#x[0-9A-Fa-f]+|[A-Za-z][A-Za-z0-9]*);")


_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` escaped for XML/HTML character data, characters XML cannot hold (NUL, other C0
    controls, lone surrogates) replaced by U+FFFD."""
    return html.escape(_XML_INVALID.sub("\ufffd", str(text)), quote=True)


def _valid_charref(ref: str) -> bool:
    try:
        cp = int(ref[2:], 16) if ref[1] in "xX" else int(ref[1:])
    except ValueError:
        return False
    return cp in (0x9, 0xA, 0xD) or 0x20 <= cp <= 0xD7FF or 0xE000 <= cp <= 0xFFFD or 0x10000 <= cp <= 0x10FFFF


def _escape_text(data: str) -> str:
    """Escape a text node for XML, keeping numeric character references to characters XML allows
    and turning the printer's named entities into numeric ones; any other ``&`` is escaped."""
    out, pos = [], 0
    for m in _CHARREF.finditer(data):
        out.append(xml_text(data[pos : m.start()]))
        ref = m.group(1)
        if ref.startswith("#") and _valid_charref(ref):
            out.append(m.group(0))
        elif ref in _ENTITIES:
            out.append(_ENTITIES[ref])
        else:
            out.append(xml_text(m.group(0)))
        pos = m.end()
    out.append(xml_text(data[pos:]))
    return "".join(out)


@functools.lru_cache(maxsize=1)
def _printer_class() -> type:
    from xml.dom.minidom import Text

    from sympy.printing.mathml import MathMLPresentationPrinter

    class _EscapedText(Text):
        def writexml(self, writer, indent="", addindent="", newl=""):
            if self.data:
                writer.write(f"{indent}{_escape_text(self.data)}{newl}")

    class _SafePresentationPrinter(MathMLPresentationPrinter):
        """sympy's presentation printer with every text node escaped (sympy writes them raw)."""

        def __init__(self, settings=None):
            super().__init__(settings)

            def create_text(data):
                node = _EscapedText()
                node.data = data
                node.ownerDocument = self.dom
                return node

            self.dom.createTextNode = create_text

        def _print_BooleanTrue(self, e):
            mi = self.dom.createElement("mi")
            mi.setAttribute("mathvariant", "normal")
            mi.appendChild(self.dom.createTextNode("true"))
            return mi

        def _print_BooleanFalse(self, e):
            mi = self.dom.createElement("mi")
            mi.setAttribute("mathvariant", "normal")
            mi.appendChild(self.dom.createTextNode("false"))
            return mi

    return _SafePresentationPrinter


def _sympy_body(expr: Any) -> str:
    try:
        return _printer_class()({"order": "none"}).doprint(expr)
    except Exception:  # an object sympy's printer does not know: shown as its text, never dropped
        return _mtext(str(expr))


def _wrap(body: str, display: str) -> str:
    return f'<math xmlns="{_MATHML_NS}" display="{display}">{body}</math>'


def _mtext(text: str) -> str:
    return f"<mtext>{xml_text(text)}</mtext>"


def to_mathml(expr_or_text: Any, *, display: str = "block") -> str:
    """One ``<math display=...>`` element (presentation MathML) for a sympy expression or a short
    textual formula; text that does not parse as a formula is shown as escaped ``<mtext>``.

    ``display`` is ``"block"`` (its own line) or ``"inline"`` (in running text)."""
    if display not in ("block", "inline"):
        from .errors import ParameterError

        raise ParameterError(f"display={display!r} is not a MathML display mode; use 'block' or 'inline'.")
    if isinstance(expr_or_text, str):
        body = _text_body(expr_or_text)
    elif _is_sympy(expr_or_text):
        body = _sympy_body(expr_or_text)
    elif isinstance(expr_or_text, bool):
        body = _sympy_body(_sympify_bool(expr_or_text))
    elif isinstance(expr_or_text, int) or type(expr_or_text).__name__ == "Fraction":
        import sympy as sp

        body = _sympy_body(sp.Rational(expr_or_text))
    elif isinstance(expr_or_text, float):
        body = f"<mn>{xml_text(repr(expr_or_text))}</mn>"
    else:
        body = _mtext(str(expr_or_text))
    return _wrap(body, display)


def _is_sympy(x: Any) -> bool:
    sp = sys.modules.get("sympy")  # no sympy imported: x cannot be a sympy object
    return sp is not None and isinstance(x, sp.Basic)


def _sympify_bool(b: bool):
    import sympy as sp

    return sp.true if b else sp.false


# --------------------------------------------------------------------------- textual formulas

_L = r"[^\W\d_\u00b2\u00b3\u00b9]"  # a letter (Latin, Greek...), not a superscript digit
_TOKEN = re.compile(
    rf"""
    (?P<ws>\s+)
  | (?P<num>[0-9]+(?:\.[0-9]+)?)
  | (?P<name>{_L}(?:{_L}|[0-9])*'*(?:_(?:{_L}|[0-9])+'*)?[0-9]*)
  | (?P<rel><=|>=|!=|==|≤|≥|≠|<|>|=)
  | (?P<op>\*\*|[-+*/^(){{}},|²³])
""",
    re.X,
)
_FUNCTION_ALIASES = {"ln": "log", "ceil": "ceiling", "max": "Max", "min": "Min"}
_FUNCTIONS = (
    "Abs",
    "exp",
    "log",
    "ln",
    "sqrt",
    "ceil",
    "ceiling",
    "floor",
    "max",
    "min",
    "Max",
    "Min",
    "tanh",
    "erf",
    "erfc",
    "gamma",
    "factorial",
)
_REL_MO = {
    "<=": "&#x2264;",
    "≤": "&#x2264;",
    ">=": "&#x2265;",
    "≥": "&#x2265;",
    "!=": "&#x2260;",
    "≠": "&#x2260;",
    "==": "=",
    "=": "=",
    "<": "&lt;",
    ">": "&gt;",
}
# an identifier that reads as a mathematical symbol: one or two letters (Latin or Greek) or a Greek
# letter's name, primes, an optional subscript and trailing digits (x, x', q_i, Δ_g, y0, tau2) --
# never a prose word (nor a short one: "so", "is"), nor a big operator (Σ, Π)
_GREEK = (
    "alpha beta gamma delta epsilon eps zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau "
    "upsilon phi chi psi omega"
).split()
_SYMBOLIC = re.compile(
    r"^(?:[A-Za-z\u0370-\u03ff]{1,2}|(?:%s))'*(?:_[A-Za-z0-9\u0370-\u03ff]{1,8}'*)?[0-9]*$"
    % "|".join(_GREEK + [g.capitalize() for g in _GREEK])
)
_WORDS = frozenset("an as at be by do if in is it no of on or so to up we".split()) | {"Σ", "Π", "ln"}


class _NotAFormula(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _NotAFormula(f"unexpected character {text[pos]!r}")
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        if kind != "ws":
            out.append((kind, m.group()))
    return out


def _expression_source(tokens: list[tuple[str, str]], names: dict[str, str], any_names: bool = False) -> str:
    """Python source for one side of a comparison, from whitelisted tokens only: identifiers become
    placeholders (``names``: placeholder -> original), ``|a|`` becomes ``Abs(a)``, ``^`` ``**``,
    ``{}`` brackets, and juxtaposition after a number or a closing bracket becomes ``*``. Two names
    side by side, or a name before a bracket, are refused (prose, or an ambiguous application)."""
    src: list[str] = []
    bars = 0
    role = None  # role of the previous token: "operand" | "open" | "operator" | None
    after_name = False  # the previous token was a symbol
    for i, (kind, tok) in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        opens = kind == "op" and tok in "({"
        if kind in ("num", "name") or opens:
            if role == "operand":
                if after_name:
                    raise _NotAFormula("a name followed by a name, number or bracket")
                src.append("*")  # 2Δ, (a)(b), |a| b
        after_name = False
        if kind == "op" and tok == "|":
            if role in (None, "operator", "open"):
                if nxt == ("op", "|"):
                    raise _NotAFormula("|| (a norm) is not read as two absolute values")
                src.append("Abs(")
                bars += 1
                role = "open"
            else:
                if bars == 0:
                    raise _NotAFormula("unbalanced |")
                src.append(")")
                bars -= 1
                role = "operand"
        elif kind == "num":
            src.append(tok)
            role = "operand"
        elif kind == "name" and tok in _FUNCTIONS and nxt == ("op", "("):
            src.append(_FUNCTION_ALIASES.get(tok, tok))
            role = "operator"  # a call: no implicit product before its bracket
        elif kind == "name":
            if not any_names and (not _SYMBOLIC.match(tok) or tok.split("_")[0] in _WORDS):
                raise _NotAFormula(f"{tok!r} is a word, not a symbol")
            ph = next((p for p, n in names.items() if n == tok), None)
            if ph is None:
                ph = f"s{len(names)}x"
                names[ph] = tok
            src.append(ph)
            role, after_name = "operand", True
        elif opens:
            src.append("(")
            role = "open"
        elif kind == "op" and tok in ")}":
            src.append(")")
            role = "operand"
        elif kind == "op" and tok in "²³":
            if role != "operand":
                raise _NotAFormula("a power without a base")
            src.append("**2" if tok == "²" else "**3")
        elif kind == "op" and tok == ",":
            src.append(",")
            role = "open"
        elif kind == "op":
            src.append("**" if tok == "^" else tok)
            role = "operator"
        else:
            raise _NotAFormula(f"unexpected token {tok!r}")
    if bars:
        raise _NotAFormula("unbalanced |")
    return " ".join(src)


@functools.lru_cache(maxsize=4096)
def parse_formula(text: str, *, any_names: bool = False) -> tuple | None:
    """A textual formula as sympy: a tuple ``(side, rel, side, rel, ...)`` of sympy expressions
    and the comparison operators between them (a chain ``y <= x <= x'`` has two), or None when
    the text is not a formula built from the whitelisted tokens (see the module docstring).

    ``any_names``: accept every identifier (``loss``), not only the short symbolic ones; for text
    that sympy printed, which holds no prose."""
    if not isinstance(text, str) or not text.strip() or len(text) > _MAX_TEXT:
        return None
    try:
        toks = _tokens(text.replace("−", "-").replace("·", "*").replace("×", "*"))
    except _NotAFormula:
        return None
    if not toks:
        return None
    sides: list[list[tuple[str, str]]] = [[]]
    rels: list[str] = []
    depth = 0
    for kind, tok in toks:
        if kind == "op" and tok == "(":
            depth += 1
        elif kind == "op" and tok == ")":
            depth -= 1
            if depth < 0:
                return None
        if kind == "rel":
            if depth:
                return None
            rels.append(tok)
            sides.append([])
        else:
            sides[-1].append((kind, tok))
    if depth or any(not s for s in sides):
        return None
    names: dict[str, str] = {}
    try:
        sources = [_expression_source(s, names, any_names) for s in sides]
    except _NotAFormula:
        return None
    exprs = []
    for src in sources:
        e = _parse_source(src, names)
        if e is None:
            return None
        exprs.append(e)
    out: list = [exprs[0]]
    for rel, e in zip(rels, exprs[1:]):
        out += [rel, e]
    return tuple(out)


def _parse_source(src: str, names: dict[str, str]):
    import sympy as sp
    from sympy.parsing.sympy_parser import auto_number, parse_expr

    local = {ph: sp.Symbol(name) for ph, name in names.items()}
    glob = {
        "Add": sp.Add,
        "Mul": sp.Mul,
        "Pow": sp.Pow,
        "Integer": sp.Integer,
        "Float": sp.Float,
        "Rational": sp.Rational,
        "Abs": sp.Abs,
        "exp": sp.exp,
        "log": sp.log,
        "sqrt": sp.sqrt,
        "ceiling": sp.ceiling,
        "floor": sp.floor,
        "Max": sp.Max,
        "Min": sp.Min,
        "tanh": sp.tanh,
        "erf": sp.erf,
        "erfc": sp.erfc,
        "gamma": sp.gamma,
        "factorial": sp.factorial,
        "__builtins__": {},
    }
    try:
        e = parse_expr(src, local_dict=local, global_dict=glob, transformations=(auto_number,), evaluate=False)
    except Exception:  # SyntaxError, TypeError (a symbol called), sympy's own errors: not a formula
        return None
    return e if isinstance(e, sp.Expr) else None


def _text_body(text: str) -> str:
    parsed = parse_formula(text)
    if parsed is None:
        printed = _printed_body(text)
        return _mtext(text) if printed is None else printed
    return _parsed_body(parsed)


def _parsed_body(parsed: tuple) -> str:
    parts = [_sympy_body(parsed[0])]
    for rel, e in zip(parsed[1::2], parsed[2::2]):
        parts.append(f"<mo>{_REL_MO[rel]}</mo>")
        parts.append(_sympy_body(e))
    return "<mrow>" + "".join(parts) + "</mrow>"


def _split_top(text: str, sep: str) -> list[str] | None:
    """``text`` split on ``sep`` outside brackets; None when the brackets do not balance."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and text.startswith(sep, i):
            out.append(text[start:i])
            i = start = i + len(sep)
            continue
        i += 1
    if depth:
        return None
    out.append(text[start:])
    return out


_PRINTED_REL = re.compile(r"(Eq|Ne)\((.*)\)", re.S)


def _printed_relational(text: str) -> tuple | None:
    """One relational as sympy prints it (``Eq(a, b)``, ``Ne(a, b)``, ``(a <= b)``), parsed."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _split_top(text[1:-1], "\0") is not None:
        text = text[1:-1].strip()
    m = _PRINTED_REL.fullmatch(text)
    if m is not None:
        args = _split_top(m.group(2), ", ")
        if args is None or len(args) != 2:
            return None
        text = f"{args[0]} {'=' if m.group(1) == 'Eq' else '!='} {args[1]}"
    parsed = parse_formula(text, any_names=True)
    return parsed if parsed is not None and len(parsed) > 1 else None


def _printed_body(text: str) -> str | None:
    """MathML for a checked formula as sympy printed it (a proof step keeps ``str(formula)``):
    a relational or a conjunction ``a & b`` of them; None for anything else."""
    if not isinstance(text, str) or len(text) > _MAX_TEXT or not text.strip():
        return None
    conjuncts = _split_top(text, " & ")
    if conjuncts is None:
        return None
    parts = []
    for c in conjuncts:
        parsed = _printed_relational(c)
        if parsed is None:
            return None
        parts.append(_parsed_body(parsed))
    return parts[0] if len(parts) == 1 else "<mrow>" + "<mo>&#x2227;</mo>".join(parts) + "</mrow>"


def split_formula(text: str) -> tuple[str, str | None]:
    """``(prose, formula)``: the longest trailing run of words of ``text`` that parses as a
    comparison (``"triangle inequality |y-x'| - |y-x| <= |x-x'|"`` ->
    ``("triangle inequality", "|y-x'| - |y-x| <= |x-x'|")``); ``(text, None)`` when none does."""
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        return text, None
    starts = [0] + [
        m.end()
        for m in re.finditer(r"(?<=\S)(?:: |\s+)", text)
        if text[: m.start()].split()[-1].rstrip(":,") not in _FUNCTIONS
    ]
    for start in sorted(set(starts)):
        tail = text[start:].strip()
        if not tail:
            break
        parsed = parse_formula(tail)
        if parsed is not None and len(parsed) > 1:
            return text[:start].rstrip(), tail
    return text, None
