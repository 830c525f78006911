"""The user guide's code is correct and the Results page quotes its sources (docs/guide/*.rst, docs/results.rst).

Fast (default run): every guide page is linked from the guide's index and every Python block
compiles; every declaration on the part families page is PROVED at its claim (the page says so); every
figure in a Results table appears in the ``benchmarks/results/`` file its section names.

Slow (``.ci/run``'s dev stage, ``readme``): every guide page's blocks run, in order, in one fresh
interpreter per page (``:caption: PATH`` blocks are written to PATH first, as in
tests/test_docs_examples.py; ``needs-MODULE`` blocks only where MODULE is installed)."""

from __future__ import annotations

import csv
import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import pytest

from test_docs_examples import _DIRECTIVE, DOCS  # the block syntax the tutorials use

GUIDE = os.path.join(DOCS, "guide")
PAGES = ("declaring", "parts", "auditing", "ci", "reports")
RESULTS = os.path.join(DOCS, "results.rst")
ROOT = os.path.dirname(DOCS)


def guide_blocks(page: str) -> list[tuple[str, dict[str, str]]]:
    """The page's Python blocks in order, read as tests/test_docs_examples.py reads a tutorial's:
    (code, options), options e.g. {"caption": "teamdp/__init__.py"}."""
    with open(os.path.join(GUIDE, f"{page}.rst"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if not _DIRECTIVE.match(lines[i]):
            i += 1
            continue
        i += 1
        options = {}
        while i < len(lines) and re.match(r"^\s+:(\w+):\s*(.*)$", lines[i]):
            key, value = re.match(r"^\s+:(\w+):\s*(.*)$", lines[i]).groups()
            options[key] = value.strip()
            i += 1
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith("   ")):
            body.append(lines[i])
            i += 1
        blocks.append((textwrap.dedent("\n".join(body)).strip("\n") + "\n", options))
    return blocks


@pytest.mark.parametrize("page", PAGES)
def test_guide_page_is_linked_and_its_blocks_compile(page):
    with open(os.path.join(GUIDE, "index.rst"), encoding="utf-8") as f:
        assert f"\n   {page}\n" in f.read()
    for n, (code, options) in enumerate(guide_blocks(page)):
        compile(code, f"guide/{page}.rst block {n}", "exec")
        assert set(options) <= {"caption", "class"}, options


def test_every_part_family_example_is_proved():
    from dpharness.core import Mechanism
    from dpharness.proofs import prove
    from dpharness.proofs._model import Verdict

    namespace: dict = {}
    for code, _ in guide_blocks("parts"):
        exec(compile(code, "guide/parts.rst", "exec"), namespace)
    mechanisms = {k: v for k, v in namespace.items() if isinstance(v, Mechanism)}
    assert len(mechanisms) >= 20, sorted(mechanisms)
    for name, m in mechanisms.items():
        proof = prove(m)
        assert proof.verdict is Verdict.PROVED, f"guide/parts.rst: {name} is {proof.verdict.value}: {proof.notes}"
    with open(os.path.join(GUIDE, "parts.rst"), encoding="utf-8") as f:
        text = f.read()
    for family in ("Transformations", "Noise", "Local randomizers", "Selection", "Threshold", "Sampling", "Grouping"):
        assert f"\n{family}\n" in text, family
    assert "\nCombinators\n" in text and "\nIteration and calibration\n" in text


def printed_pairs(page: str) -> list[tuple[str, str]]:
    """(Python block, the ``text`` block right after it) on a guide page: the block and what the page says it
    prints."""
    with open(os.path.join(GUIDE, f"{page}.rst"), encoding="utf-8") as f:
        text = f.read()
    pattern = re.compile(
        r"^\.\. code-block:: python[ \t]*\n\n((?:   [^\n]*\n|\n)+?)\.\. code-block:: text[ \t]*\n\n((?:   [^\n]*\n)+)",
        re.MULTILINE,
    )
    return [(textwrap.dedent(code), textwrap.dedent(out)) for code, out in pattern.findall(text)]


def test_the_grouping_budget_blocks_print_what_the_page_shows():
    """The group-by budget examples print exactly their ``text`` blocks (solved scales, headlines)."""
    import contextlib
    import io

    prelude, _ = guide_blocks("parts")[0]
    pairs = [(c, o) for c, o in printed_pairs("parts") if "partition_select(epsilon" in c or "by_hand" in c]
    assert len(pairs) == 2
    for code, shown in pairs:
        namespace: dict = {}
        exec(compile(prelude, "guide/parts.rst", "exec"), namespace)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "guide/parts.rst", "exec"), namespace)
        assert out.getvalue() == shown, f"guide/parts.rst prints:\n{out.getvalue()}\nbut shows:\n{shown}"


def _normalise(text: str) -> str:
    return text.replace("**", "").replace("`", "").replace("\\|", "|")


def test_results_tables_quote_their_files():
    with open(RESULTS, encoding="utf-8") as f:
        sections = re.split(r"\n(?=[^\n]+\n-{3,}\n)", f.read())
    checked = 0
    for section in sections[1:]:
        title = section.splitlines()[0]
        if ".. csv-table::" not in section:  # a section without figures ("Not on this page")
            continue
        sources = set(re.findall(r"benchmarks/results/[\w.]+", section))
        assert sources, f"Results section {title!r} names no benchmarks/results/ file"
        assert re.search(r"\| Command: ``python benchmarks/", section), f"{title!r} gives no command"
        assert re.search(r"\| Written: \d{4}-\d{2}-\d{2}", section), f"{title!r} gives no date"
        text = ""
        for s in sources:
            with open(os.path.join(ROOT, s), encoding="utf-8") as f:
                text += _normalise(f.read())
        for table in re.findall(r"\.\. csv-table::.*?\n((?:   [^\n]*\n|\n(?=   ))+)", section):
            lines = [line[3:] for line in table.splitlines() if line.startswith("   ") and not line.startswith("   :")]
            for row in csv.reader(lines, skipinitialspace=True):
                for cell in row:
                    assert cell in text, f"Results, {title!r}: {cell!r} is not in {sorted(sources)}"
                    checked += 1
    assert checked > 500, checked


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_guide_page_runs(page, tmp_path):
    """Runs the page in a fresh interpreter. Its audits have fixed seeds and no outcome of theirs is
    asserted here beyond running: the page's comments state seeded results that were run."""
    script = []
    for code, options in guide_blocks(page):
        needs = [c[len("needs-") :] for c in options.get("class", "").split() if c.startswith("needs-")]
        if any(importlib.util.find_spec(m) is None for m in needs):
            continue
        if "caption" in options:
            path = tmp_path / options["caption"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code, encoding="utf-8")
        else:
            script.append(code)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), DPHARNESS_CACHE_DIR=str(tmp_path / ".dpharness-cache"))
    out = subprocess.run(
        [sys.executable, "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"docs/guide/{page}.rst failed:\n{out.stdout}\n{out.stderr}"
