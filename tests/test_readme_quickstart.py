"""The README is a guide whose quick starts work as written.

Fast (default run): the README stays short, keeps the test command ``.ci/run`` calls byte for byte, never
tells users to install from a package index, carries no issue numbers, commit hashes, clock times or load
averages (nor do the docs' pages), links only to files that exist, and its Python blocks compile.

Slow (``.ci/run``'s dev stage, ``readme``): the quick starts run as written in a scratch project: the
Python file blocks are written, every ``dpharness`` command is run and its output and exit code compared
with what the README shows (``...`` elides), the Python blocks run in one fresh interpreter and the
story their comments tell is checked. Between the two gates of quick start 1 the noise is cut as its
prose says, then put back. ``pip`` lines are not run; the library audit runs where its library is
installed and otherwise must stop with the one-line "not installed" error (exit 2)."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from _readme import README, ROOT, Block, blocks, commands, output_matches, readme_text

CI_RUN = os.path.join(ROOT, ".ci", "run")
DOC_PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.rst"), recursive=True))
CUT, RESTORED = "dp.laplace(epsilon=1)", "dp.laplace(epsilon=0.5)"  # quick start 1: the budget doubled and put back


def _prose(text: str) -> str:
    """The text outside fenced blocks (and, for .rst, outside literal blocks is not separated: whole)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


# --------------------------------------------------------------------------- fast


def test_readme_is_a_short_guide():
    lines = readme_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the guide's budget is about 300"
    headings = [line for line in lines if line.startswith("## ")]
    for needed in ("Install", "The two commands", "Quick start 1", "Quick start 2", "Quick start 3", "CI"):
        assert any(h[3:].startswith(needed) for h in headings), (needed, headings)


def test_readme_keeps_the_test_command_ci_runs():
    with open(CI_RUN, encoding="utf-8") as f:
        ci = f.read().splitlines()
    marker = next(i for i, line in enumerate(ci) if line.startswith("# README"))
    command = ci[marker + 1]
    assert command == """pip install -e '.[test]' && python -m pytest -n 2 -m "not slow\"""", command
    assert command in readme_text().splitlines()


@pytest.mark.parametrize("path", [README] + DOC_PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_no_package_index_install_and_no_lab_notebook_residue(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    where = os.path.relpath(path, ROOT)
    # dpharness is not on PyPI: every install command names a checkout (., a path) or a built wheel.
    # Commands: a line's start (after "$ " or "run: "), or inline code in prose; not a message quoted mid-line.
    installs = re.findall(r"(?m)(?:^[ \t]*(?:\$ |-? ?run: )?|``?)pip install ([^\n#&;|`]*)", text)
    bad = [
        args for args in installs if re.search(r"(?<![\w./-])['\"]?dpharness(?:\[[\w,-]+\])?['\"]?(?![\w./*-])", args)
    ]
    assert not bad, f"{where} tells users to install dpharness from a package index: pip install {bad}"
    prose = _prose(text) if path.endswith(".md") else text
    for name, pattern in (
        ("an issue number", r"(?i)\bissues? #?\d+|(?<![\w&])#\d{1,4}\b"),
        ("a commit hash", r"(?<![\w.])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w.-])"),
        ("a clock time", r"\b\d{1,2}:\d{2}(?::\d{2})?\s*UTC\b|\bUTC\b"),
        ("a load average", r"(?i)load average"),
    ):
        found = re.findall(pattern, prose)
        assert not found, (
            f"{where} has {name} in its prose: {found[:5]} (they belong in commits and benchmarks/results/)"
        )


def test_readme_links_exist():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme_text()):
        if "://" in target:
            continue
        assert os.path.exists(os.path.join(ROOT, target)), f"README.md links to {target}, which does not exist"


def test_readme_blocks_parse():
    found = blocks()
    files = [b.path for b in found if b.path]
    assert files == ["pagestats/__init__.py"], files
    for b in found:
        if b.lang == "python":
            compile(b.code, f"README.md:{b.line}", "exec")
        if b.lang == "console":
            cmds = commands(b)
            assert cmds, f"README.md:{b.line}: a console block without a command"
            for c in cmds:
                assert c.line.split()[0] in ("dpharness", "pip", "echo"), (b.line, c.line)
    assert CUT in _prose(readme_text()) and RESTORED in readme_text()


def test_output_matching_reads_ellipses():
    assert output_matches(["a", "...", "d ... f"], "a\nb\nc\nd e f\n")
    assert output_matches(["...", "x"], "x\n")
    assert not output_matches(["a", "d"], "a\nb\nd\n")
    assert not output_matches(["a ... c"], "a b\nc\n")


# --------------------------------------------------------------------------- slow: run the quick starts

# What the Python blocks' comments say (the printed figures come from a seeded run; these are the facts).
CHECKS = """
assert not r.passed and r.epsilon_lower_bound > 1 and r.extra["family"] == "float structure", r
assert ideal.passed and ideal.epsilon_lower_bound <= 1, ideal
"""


def _run_console(block: Block, cwd, env) -> None:
    dpharness = os.path.join(os.path.dirname(sys.executable), "dpharness")
    last: int | None = None
    skip_echo = False
    for c in commands(block):
        where = f"README.md:{block.line}: $ {c.line}"
        if c.line.startswith("pip "):
            continue
        if c.line == "echo $?":
            if not skip_echo:
                assert last is not None and [str(last)] == c.expected, f"{where}: exit code {last}, shown {c.expected}"
            skip_echo = False
            continue
        argv = c.line.split()
        assert argv[0] == "dpharness", where
        out = subprocess.run(
            [dpharness, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        last = out.returncode
        library = re.match(r"(\w+):", argv[2]) if len(argv) > 2 and argv[1] == "audit" else None
        if library and importlib.util.find_spec(library.group(1)) is None:
            assert last == 2 and f"{library.group(1)} is not installed" in out.stderr, f"{where}\n{out.stderr}"
            skip_echo = True
            continue
        assert output_matches(c.expected, out.stdout), (
            f"{where}\nshown:\n"
            + "\n".join(c.expected)
            + (f"\nprinted (exit {last}):\n{out.stdout}\nstderr:\n{out.stderr}")
        )


@pytest.mark.slow
@pytest.mark.statistical
def test_readme_quick_starts_run_as_written(tmp_path):
    """Runs every quick start in a scratch project. Every audit has a fixed seed, so the outcome is
    deterministic; over the choice of seed, the gate's audit of the correct mechanism and the ideal
    callable's audit each fail with probability at most 5% (confidence 0.95), and for these seeds they
    pass: they were run."""
    env = dict(
        os.environ,
        DPHARNESS_CACHE_DIR=str(tmp_path / ".dpharness-cache"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    env.pop("PYTHONPATH", None)  # the scratch project is importable as the working directory, as for a user
    script = []
    for b in blocks():
        if b.path:
            target = tmp_path / b.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.code, encoding="utf-8")
        elif b.lang == "python":
            script.append(b.code)
        elif b.lang == "console":
            fails = any("FAIL" in line for c in commands(b) for line in c.expected)
            source = tmp_path / "pagestats" / "__init__.py"
            if fails:  # quick start 1: "spend twice the budget on the visit count"
                text = source.read_text(encoding="utf-8")
                assert RESTORED in text
                source.write_text(text.replace(RESTORED, CUT), encoding="utf-8")
            _run_console(b, tmp_path, env)
            if fails:  # "put dp.laplace(epsilon=0.5) back"
                source.write_text(source.read_text(encoding="utf-8").replace(CUT, RESTORED), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-c", "\n".join(script) + CHECKS], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, f"README.md's Python blocks failed:\n{out.stdout}\n{out.stderr}"
    assert "False True float structure" in out.stdout, out.stdout
    assert (tmp_path / "dp-reports" / "visits_per_page.html").exists()
