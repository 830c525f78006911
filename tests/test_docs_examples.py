"""The tutorials' Python code runs, and still tells the story the page tells (docs/tutorials/*.rst).

Each page's ``.. code-block:: python`` blocks are taken in order. A block with ``:caption: PATH``
is a file of the reader's project: it is written to PATH in a scratch directory. The others are
run there, in order, in one fresh interpreter per page (so the page's ``register`` calls never
reach this process's registry), followed by the page's checks below: the verdicts and pass/fail
outcomes the page's prose relies on (the exact figures it prints are not compared: they were
pasted from a real run and move when the auditor's event choice does). A block with
``:class: needs-MODULE`` runs only where MODULE is installed (the library targets).

The fast test (default run) checks that every block compiles and that every page is linked from
docs/index.rst; running the pages takes 10-40 s each, so it is ``slow`` and .ci/run runs it in the
dev stage (``tutorials``), as it executes the quickstart notebook."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import pytest

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
PAGES = ("gate", "audit", "proofs")

_DIRECTIVE = re.compile(r"^\.\. code-block:: python[ \t]*$", re.MULTILINE)


def python_blocks(page: str) -> list[tuple[str, dict[str, str]]]:
    """The page's Python blocks in order: (code, options), options e.g. {"caption": "teamstats/__init__.py"}."""
    with open(os.path.join(DOCS, "tutorials", f"{page}.rst"), encoding="utf-8") as f:
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


# What each page's prose says about the names its blocks define.
CHECKS = {
    "gate": """
import subprocess, sys
out = subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"],
                     capture_output=True, text=True)
assert out.returncode == 1, out.stdout + out.stderr
assert "1 failed, 1 passed" in out.stdout, out.stdout
assert "PrivacyViolation" in out.stdout and "test_float_count_is_private" in out.stdout, out.stdout
""",
    "audit": """
assert not r.passed and r.epsilon_lower_bound > 1 and r.extra["family"] == "float structure"
assert again.epsilon_lower_bound == r.epsilon_lower_bound and again.counts == r.counts
assert ideal.passed and ideal.epsilon_lower_bound <= 1
assert not bug.passed and bug.extra["family"] != "float structure"
assert not bug_ideal.passed
""",
    "proofs": """
assert proof.holds and all(o.discharged for o in proof.steps)
assert refuted.verdict.value == "REFUTED" and refuted.witness is not None
assert pld.verdict.value == "PROVED" and "privacy-loss distribution" in pld.steps[-1].statement
assert too_low.verdict.value == "REFUTED" and too_low.witness.event is not None
assert c.passed and c.sandwich.ordered and c.sandwich.lower <= c.sandwich.proven <= c.sandwich.claimed
""",
}


@pytest.mark.parametrize("page", PAGES)
def test_tutorial_blocks_compile_and_page_is_linked(page):
    blocks = python_blocks(page)
    assert blocks, f"docs/tutorials/{page}.rst has no python code blocks"
    for n, (code, options) in enumerate(blocks):
        compile(code, f"{page}.rst block {n}", "exec")
        assert set(options) <= {"caption", "class"}, options
    with open(os.path.join(DOCS, "index.rst"), encoding="utf-8") as f:
        assert f"tutorials/{page}" in f.read()


def test_block_parser_reads_captions_and_classes():
    blocks = python_blocks("gate")
    captions = [o.get("caption") for _, o in blocks if "caption" in o]
    assert captions == ["teamstats/__init__.py", "tests/test_privacy.py"]
    assert any("needs-diffprivlib" in o.get("class", "") for _, o in python_blocks("audit"))


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("page", PAGES)
def test_tutorial_runs(page, tmp_path):
    """Runs the page in a fresh interpreter and checks its story. Every audit in it has a fixed seed,
    so the outcome is deterministic; over the choice of seed, each audit of a correct mechanism that
    must pass (gate: 1, audit: 2, proofs: 1) fails with probability at most 5% (confidence 0.95),
    i.e. the page's false-failure rate is at most 5% (gate, proofs) or 10% (audit) for a seed drawn
    at random, and for these seeds it is 0: they were run."""
    script = []
    for code, options in python_blocks(page):
        needs = [c[len("needs-") :] for c in options.get("class", "").split() if c.startswith("needs-")]
        if any(importlib.util.find_spec(m) is None for m in needs):
            continue
        if "caption" in options:
            path = tmp_path / options["caption"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code, encoding="utf-8")
        else:
            script.append(code)
    script.append(CHECKS[page])
    env = dict(os.environ, PYTHONPATH=str(tmp_path), DPHARNESS_CACHE_DIR=str(tmp_path / ".dpharness-cache"))
    out = subprocess.run(
        [sys.executable, "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"docs/tutorials/{page}.rst failed:\n{out.stdout}\n{out.stderr}"
