"""A proof's derivation as a folded tree, for reports.

:func:`derivation_tree` turns ``proof.steps`` (the obligations, in order) into a :class:`Node` tree:

* **structure** -- obligations are grouped by their leading ``[...]`` tags: the path of a parts
  proof (``[part 1 › count]`` nests as *part 1* > *count*), a shared family lemma
  (``[family: grid Laplace]``), or a hand proof's own tags (``[generic term j]``); groups appear
  where their first obligation does, obligations keep their order inside a group;
* **lemmas** -- a lemma library conclusion ``NAME: conclusion`` gathers the obligations just before
  it whose statements start like NAME (its side conditions) into one *lemma* node;
* **folding** -- obligations of one group that are the same lemma modulo the case (same statement
  and justification once ``[case ...]``/``, case ...:`` and numbers are set aside: the six orderings
  of the triangle inequality, ``ε_i >= 0`` for i = 0..5) collapse into one *cases* node,
  "6 cases of ...: all hold", whose children are the cases.

No obligation is dropped or merged: every leaf is one obligation and ``node.count`` is the number
of obligations at or below a node (the root's is ``len(proof.steps)``).

:func:`render_tree_html` gives nested ``<details>/<summary>`` (folds open and close without scripts;
a node holding an undischarged obligation starts open) with maths as MathML (:mod:`dpharness.mathml`);
:func:`render_tree_markdown` a nested list. Both escape every string from the proof and the
mechanism, and both are deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .errors import ParameterError
from .mathml import split_formula, to_mathml, xml_text

__all__ = ["Node", "derivation_tree", "render_tree_html", "render_tree_markdown", "TREE_CSS"]

# how each checker discharged an obligation, in the words a reader needs
_CHECKER_WORDS = {
    "sympy": "sympy",
    "z3": "z3",
    "sympy+z3": "sympy, z3 second check",
    "exact": "exact evaluation",
    "lemma": "lemma (its side conditions)",
    "structural": "argued (structural step)",
}

TREE_CSS = """
.dp-tree{margin:.4em 0;line-height:1.45}
.dp-tree ul{list-style:none;margin:.1em 0 .1em 1.1em;padding:0 0 0 .6em;border-left:1px solid #ddd}
.dp-tree details>summary{cursor:pointer}
.dp-tree .dp-kind{font-size:.8em;text-transform:uppercase;letter-spacing:.04em;color:#666;margin-right:.3em}
.dp-tree .dp-title{font-weight:400}
.dp-tree .dp-group>summary .dp-title,.dp-tree .dp-lemma>summary .dp-title,.dp-tree .dp-proof>summary .dp-title{font-weight:600}
.dp-tree .dp-status{color:#1f7a1f;font-size:.92em;margin-left:.4em}
.dp-tree .dp-bad>summary .dp-status,.dp-tree .dp-bad>.dp-status{color:#b00020;font-weight:600}
.dp-tree .dp-body{margin:.2em 0 .4em 1.2em;color:#333;font-size:.95em}
.dp-tree .dp-detail{color:#666;font-size:.88em;word-break:break-word}
.dp-tree math{font-size:1.08em}
.dp-tree summary math[display=inline]{margin:0 .25em}
""".strip()


@dataclass(frozen=True)
class Node:
    """One node of the derivation tree.

    ``kind``: ``"proof"`` (the root), ``"group"`` (a path/tag of the structure), ``"lemma"`` (a
    library lemma: side conditions and conclusion), ``"cases"`` (one lemma over its cases, folded) or
    ``"step"`` (one obligation: ``obligation``; ``case`` its case hypothesis when it has one).
    ``title``: what the node is about, tags removed. ``count``/``undischarged``: obligations at or
    below the node and how many of them are not discharged; ``checkers``: (checker, count) pairs in
    order of first appearance."""

    kind: str
    title: str
    children: tuple["Node", ...] = ()
    obligation: Any = None
    case: str | None = None
    count: int = 0
    undischarged: int = 0
    checkers: tuple[tuple[str, int], ...] = field(default=())

    @property
    def holds(self) -> bool:
        return self.count > 0 and self.undischarged == 0


def _node(kind: str, title: str, children: list[Node], **kw: Any) -> Node:
    count = sum(c.count for c in children)
    bad = sum(c.undischarged for c in children)
    tally: dict[str, int] = {}
    for c in children:
        for name, n in c.checkers:
            tally[name] = tally.get(name, 0) + n
    return Node(kind, title, tuple(children), count=count, undischarged=bad, checkers=tuple(tally.items()), **kw)


def _leaf(ob: Any, title: str, case: str | None) -> Node:
    return Node(
        "step",
        title,
        (),
        obligation=ob,
        case=case,
        count=1,
        undischarged=0 if ob.discharged else 1,
        checkers=((str(ob.checker), 1),),
    )


# --------------------------------------------------------------------------- statements

_INLINE_CASE = re.compile(r"^(?P<pre>[^\[\]:]*?),\s*case\s+(?P<case>[^:\[\]]+):\s*(?P<post>.*)$", re.S)
_NUMBER = re.compile(r"-?\d+")


def _bracket_end(text: str, start: int) -> int:
    """Index of the ``]`` closing the ``[`` at ``start`` (nested brackets counted), or -1."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _parse_statement(statement: str) -> tuple[tuple[str, ...], str | None, str]:
    """(path, case, text): the leading ``[...]`` tags as path components (split on " › "), the case
    hypothesis (``[case ...]`` leading or trailing, or ``..., case X: ...``), and the rest."""
    text = statement.strip()
    path: list[str] = []
    cases: list[str] = []
    while text.startswith("["):
        end = _bracket_end(text, 0)
        if end < 0:
            break
        tag = text[1:end].strip()
        text = text[end + 1 :].strip()
        if tag.startswith("case "):
            cases.append(tag[5:].strip())
        elif tag:
            path += [p.strip() for p in tag.split(" › ") if p.strip()]
    if text.endswith("]"):
        start = text.rfind("[case ")
        if start > 0 and _bracket_end(text, start) == len(text) - 1:
            cases.append(text[start + 6 : -1].strip())
            text = text[:start].rstrip()
    if not cases:
        m = _INLINE_CASE.match(text)
        if m:
            cases.append(m.group("case").strip())
            text = f"{m.group('pre').rstrip()}: {m.group('post')}"
    return tuple(path), ("; ".join(cases) or None), text


def _template(text: str) -> str:
    return _NUMBER.sub("#", text)


# --------------------------------------------------------------------------- building


class _Group:
    def __init__(self, title: str) -> None:
        self.title = title
        self.entries: list[Any] = []  # _Group or (obligation, case, text), in order of first appearance
        self.sub: dict[str, _Group] = {}

    def child(self, title: str) -> "_Group":
        if title not in self.sub:
            g = _Group(title)
            self.sub[title] = g
            self.entries.append(g)
        return self.sub[title]


def derivation_tree(proof: Any) -> Node:
    """The folded derivation tree of ``proof`` (the value ``dpharness.prove`` returns); see the
    module docstring. The root's ``count`` is ``len(proof.steps)``."""
    steps = getattr(proof, "steps", None)
    if steps is None or not all(hasattr(o, "statement") and hasattr(o, "discharged") for o in steps):
        raise ParameterError(f"proof={proof!r} is not a Proof; pass the value dpharness.prove(mechanism) returns.")
    root = _Group("")
    for ob in steps:
        path, case, text = _parse_statement(str(ob.statement))
        g = root
        for part in path:
            g = g.child(part)
        g.entries.append((ob, case, text))
    mech = getattr(getattr(proof, "mechanism", None), "name", None)
    verdict = getattr(getattr(proof, "verdict", None), "value", None)
    title = "derivation" + (f" of {mech}" if mech else "") + (f": {verdict}" if verdict else "")
    return _node("proof", title, _build(root))


def _build(group: _Group) -> list[Node]:
    # fold: obligations of this group with the same statement and justification modulo case/numbers
    keys: dict[int, tuple[str, str]] = {}
    members: dict[tuple[str, str], list[int]] = {}
    for i, e in enumerate(group.entries):
        if isinstance(e, tuple):
            ob, case, text = e
            key = (_template(text), _template(str(ob.justification)))
            keys[i] = key
            members.setdefault(key, []).append(i)
    nodes: list[Node] = []
    for i, e in enumerate(group.entries):
        if isinstance(e, _Group):
            built = _build(e)
            if len(built) == 1 and built[0].kind == "step" and not e.sub:
                only = built[0]  # a tag holding one obligation: no group of its own
                title = only.title if only.title.startswith(e.title) else f"{e.title}: {only.title}"
                nodes.append(
                    Node(only.kind, title, (), only.obligation, only.case, only.count, only.undischarged, only.checkers)
                )
            else:
                nodes.append(_node("group", e.title, built))
            continue
        idx = members[keys[i]]
        if len(idx) == 1:
            ob, case, text = e
            nodes.append(_leaf(ob, text, case))
        elif idx[0] == i:
            nodes.append(_fold([group.entries[j] for j in idx]))
    return _gather_lemmas(nodes)


def _fold(entries: list[tuple]) -> Node:
    """One ``cases`` node over obligations identical modulo their case and numbers: the numbers that
    differ between them become letters in the title, and a case without a hypothesis is named by them."""
    texts = [t for _, _, t in entries]
    pieces = [_NUMBER.split(t) for t in texts]
    numbers = [_NUMBER.findall(t) for t in texts]
    varying: dict[tuple, str] = {}
    taken = set(re.findall(r"\b[a-z]\b", " ".join(texts)))
    letters = [c for c in "kjmlrpq" if c not in taken] or ["#"]
    title_parts = [pieces[0][0]]
    for pos in range(len(numbers[0])):
        column = tuple(n[pos] for n in numbers)
        if len(set(column)) == 1:
            title_parts.append(column[0])
        else:
            if column not in varying:
                varying[column] = letters[min(len(varying), len(letters) - 1)]
            title_parts.append(varying[column])
        title_parts.append(pieces[0][pos + 1])
    labels = [[f"{letter} = {column[k]}" for column, letter in varying.items()] for k in range(len(entries))]
    title = "".join(title_parts)
    children = []
    for (ob, case, text), lab in zip(entries, labels):
        case_label = "; ".join(x for x in [case] + lab if x) or None
        # a case whose statement is the fold's title is shown by its hypothesis alone
        children.append(_leaf(ob, "" if (case_label and text == title) else text, case_label))
    return _node("cases", title, children)


def _stem(name: str) -> str:
    words = name.lower().split()
    return " ".join(words[:2])


def _gather_lemmas(nodes: list[Node]) -> list[Node]:
    """``NAME: conclusion`` with the run of nodes just before it whose titles start like NAME."""
    out: list[Node] = []
    for n in nodes:
        if n.kind == "step" and n.title.endswith(": conclusion") and n.obligation is not None:
            name = n.title[: -len(": conclusion")].strip()
            stem = _stem(name)
            side: list[Node] = []
            while stem and out and out[-1].kind in ("step", "cases") and out[-1].title.lower().startswith(stem):
                side.insert(0, out.pop())
            if side:
                out.append(_node("lemma", name, side + [n]))
                continue
        out.append(n)
    return out


# --------------------------------------------------------------------------- status words


def _checker_words(checkers: tuple[tuple[str, int], ...]) -> str:
    """The checkers' tally, most used first: ``sympy+z3 ×8, exact ×3, z3``."""
    ordered = sorted(checkers, key=lambda cn: (-cn[1], cn[0]))
    return ", ".join(f"{c} ×{n}" if n > 1 else c for c, n in ordered)


def _status(node: Node) -> str:
    if node.kind == "step":
        ob = node.obligation
        how = _CHECKER_WORDS.get(str(ob.checker), str(ob.checker))
        return f"discharged: {how}" if ob.discharged else f"NOT discharged ({how})"
    if node.kind == "cases":
        head = f"{node.count} {'cases' if _has_cases(node) else 'identical obligations'}"
        return (
            f"{head}: all hold ({_checker_words(node.checkers)})"
            if node.undischarged == 0
            else f"{head}: {node.undischarged} NOT discharged"
        )
    if node.count == 0:
        return "no obligations"
    noun = "obligation" if node.count == 1 else "obligations"
    if node.undischarged:
        return f"{node.count} {noun}: {node.undischarged} NOT discharged"
    return f"{node.count} {noun}, all discharged ({_checker_words(node.checkers)})"


def _has_cases(node: Node) -> bool:
    return any(c.case for c in node.children)


def _shows_formula(ob: Any) -> bool:
    """Whether the obligation's checked formula adds to its statement (not True, not the statement)."""
    f = ob.formula
    if f is True or f is False or str(f) in ("True", "False", ""):
        return False
    return not (isinstance(f, str) and f.strip() in str(ob.statement))


# --------------------------------------------------------------------------- HTML

_Z3_DETAIL = "; z3:"


def _shown_detail(ob: Any) -> str:
    """The checkers' words on an obligation: all of them when it is not discharged; when it is, only
    the words of the checker(s) that discharged it (the kernel writes ``"<sympy's>; z3: <z3's>"``),
    never the other one's failure to decide."""
    detail = str(getattr(ob, "detail", "") or "")
    if not ob.discharged or _Z3_DETAIL not in detail:
        return detail
    cut = detail.rindex(_Z3_DETAIL)
    sympy_words, z3_words = detail[:cut].strip(), detail[cut + 2 :].strip()
    checker = str(getattr(ob, "checker", ""))
    if checker == "z3":
        return z3_words
    if checker == "sympy":
        return sympy_words
    return detail


def _esc(text: Any) -> str:
    return xml_text(str(text))


def _title_html(title: str) -> str:
    """The title's prose escaped, and its trailing formula (when it parses) as inline MathML."""
    prose, formula = split_formula(title)
    if formula is None:
        return f'<span class="dp-title">{_esc(title)}</span>'
    head = f'<span class="dp-title">{_esc(prose)}</span>' if prose else ""
    return head + to_mathml(formula, display="inline")


def _case_html(case: str) -> str:
    prose, formula = split_formula(case)
    if formula is not None and not prose:
        return to_mathml(formula, display="inline")
    return _esc(case)


def _node_html(node: Node, levels: int) -> str:
    cls = "dp-node dp-" + node.kind + ("" if node.undischarged == 0 else " dp-bad")
    opened = ' open=""' if node.undischarged or levels > 0 else ""
    status = f'<span class="dp-status">{_esc(_status(node))}</span>'
    if node.kind == "step":
        ob = node.obligation
        head = f'<span class="dp-kind">case</span>{_case_html(node.case)}' if node.case else ""
        title = _title_html(node.title) if node.title else ""
        body = []
        if _shows_formula(ob):
            body.append(f"<div>checked: {to_mathml(ob.formula, display='inline')}</div>")
        body.append(f"<div>justification: {_esc(ob.justification)}</div>")
        detail = _shown_detail(ob)
        if detail:
            body.append(f'<div class="dp-detail">{_esc(detail)}</div>')
        summary = (head + " " if head else "") + title + status
        return (
            f'<li><details class="{cls}"{opened}><summary>{summary}</summary>'
            f'<div class="dp-body">{"".join(body)}</div></details></li>'
        )
    kind = {"cases": "cases", "lemma": "lemma", "group": "", "proof": ""}[node.kind]
    label = f'<span class="dp-kind">{kind}</span>' if kind else ""
    summary = label + _title_html(node.title) + status
    children = "".join(_node_html(c, levels - 1) for c in node.children)
    return f'<li><details class="{cls}"{opened}><summary>{summary}</summary><ul>{children}</ul></details></li>'


def render_tree_html(node: Node, *, open_levels: int = 0) -> str:
    """The tree as nested ``<details>/<summary>`` inside ``<div class="dp-tree">`` (style it with
    :data:`TREE_CSS`). The root starts open, and so do ``open_levels`` levels below it and every node
    holding an undischarged obligation; the rest open on a click (no scripts)."""
    if not isinstance(node, Node):
        raise ParameterError(f"node={node!r} is not a derivation Node; build one with derivation_tree(proof).")
    if isinstance(open_levels, bool) or not isinstance(open_levels, int) or open_levels < 0:
        raise ParameterError(f"open_levels={open_levels!r} must be a nonnegative integer (0: only the root open).")
    if node.kind != "proof":
        return f'<div class="dp-tree"><ul>{_node_html(node, open_levels)}</ul></div>'
    cls = "dp-node dp-proof" + ("" if node.undischarged == 0 else " dp-bad")
    children = "".join(_node_html(c, open_levels) for c in node.children)
    return (
        f'<div class="dp-tree"><details class="{cls}" open=""><summary><span class="dp-title">{_esc(node.title)}'
        f'</span><span class="dp-status">{_esc(_status(node))}</span></summary><ul>{children}</ul></details></div>'
    )


# --------------------------------------------------------------------------- Markdown

_MD_SPECIAL = re.compile(r"[\\`*_\[\]]|<(?=[A-Za-z/!?])|&(?=#?[A-Za-z0-9]+;)|^[>#+-]")


def _md(text: Any) -> str:
    """Markdown text: what could open a tag or an entity as HTML escapes, Markdown syntax
    (emphasis, code, links, a block marker at the start) backslash-escaped; the rest as written."""
    s = str(text).replace("\n", " ").strip()
    return _MD_SPECIAL.sub(lambda m: {"<": "&lt;", "&": "&amp;"}.get(m.group(0), "\\" + m.group(0)), s)


def _md_code(text: Any) -> str:
    s = str(text).replace("\n", " ")
    run = max((len(r) for r in re.findall(r"`+", s)), default=0)
    fence = "`" * (run + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _md_title(title: str) -> str:
    prose, formula = split_formula(title)
    if formula is None:
        return _md(title)
    return (_md(prose) + " " if prose else "") + _md_code(formula)


def _md_lines(node: Node, depth: int) -> list[str]:
    pad = "  " * depth
    if node.kind == "step":
        ob = node.obligation
        case = f"case {_md_code(node.case)}" + (": " if node.title else "") if node.case else ""
        line = f"{pad}- {case}{_md_title(node.title) if node.title else ''} — {_md(_status(node))}"
        if _shows_formula(ob):
            line += f"; checked {_md_code(ob.formula)}"
        return [line]
    kind = {"cases": "", "lemma": "lemma ", "group": "", "proof": ""}[node.kind]
    if node.kind == "cases":
        noun = "cases of" if _has_cases(node) else "identical obligations:"
        lines = [
            f"{pad}- {node.count} {noun} {_md_title(node.title)}: "
            + ("all hold" if node.undischarged == 0 else f"{node.undischarged} NOT discharged")
            + f" ({_md(_checker_words(node.checkers))})"
        ]
        if _has_cases(node):
            cases = []
            for c in node.children:
                label = _md_code(c.case) if c.case else _md_title(c.title)
                cases.append(label if c.obligation.discharged else f"{label} **NOT discharged**")
            lines.append(f"{pad}  - cases: " + "; ".join(cases))
        return lines
    lines = [f"{pad}- {kind}**{_md(node.title)}** — {_md(_status(node))}"]
    for c in node.children:
        lines += _md_lines(c, depth + 1)
    return lines


def render_tree_markdown(node: Node) -> str:
    """The tree as a nested Markdown list (a fold lists its cases on one line)."""
    if not isinstance(node, Node):
        raise ParameterError(f"node={node!r} is not a derivation Node; build one with derivation_tree(proof).")
    if node.kind != "proof":
        return "\n".join(_md_lines(node, 0)) + "\n"
    lines = [f"**{_md(node.title)}** — {_md(_status(node))}", ""]
    for c in node.children:
        lines += _md_lines(c, 0)
    return "\n".join(lines) + "\n"
