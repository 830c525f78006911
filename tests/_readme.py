"""The README's fenced code blocks, read the way tests/test_readme_quickstart.py and
tests/test_ci_integrations.py run them.

* ```` ```python ```` whose first line is ``# PATH.py`` is a file of the reader's project (written to PATH);
  any other Python block is run, in order, in one fresh interpreter.
* ```` ```console ```` holds commands (``$ ...``), each followed by the output it prints: a line ``...``
  stands for any number of lines, ``...`` inside a line for any text; ``$ echo $?`` is followed by the
  exit code of the command before it.
* ```` ```yaml ```` blocks are the CI snippets (the workflow and the pre-commit configuration)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")

_FENCE = re.compile(r"^```(\w*)[ \t]*$")
_FILE = re.compile(r"^# ([\w./-]+\.py)$")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence

    @property
    def path(self) -> str | None:
        """The project file a Python block is (its first line ``# PATH.py``), else None."""
        first = self.code.splitlines()[0] if self.code else ""
        m = _FILE.match(first) if self.lang == "python" else None
        return m.group(1) if m else None


@dataclass
class Command:
    line: str  # the command after "$ "
    expected: list[str] = field(default_factory=list)


def readme_text() -> str:
    with open(README, encoding="utf-8") as f:
        return f.read()


def blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of the README, in order."""
    lines = (readme_text() if text is None else text).splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang, body = i + 1, m.group(1), []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        out.append(Block(lang, "\n".join(body) + "\n", start))
        i += 1
    return out


def commands(block: Block) -> list[Command]:
    """The ``$`` commands of a console block, each with the output lines shown after it."""
    out: list[Command] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            out.append(Command(line[2:].strip()))
        elif out:
            out[-1].expected.append(line.rstrip())
    return out


def output_matches(expected: list[str], actual: str) -> bool:
    """Whether ``actual`` is what ``expected`` shows: a line ``...`` is any number of lines, ``...``
    inside a line any text; trailing spaces are ignored."""
    pattern = ""
    for line in expected:
        if line.strip() == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += ".*?".join(re.escape(part) for part in line.split("...")) + r"\n"
    text = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return re.fullmatch(pattern, text) is not None


def yaml_block(marker: str) -> str:
    """The YAML block whose first line is the comment ``# MARKER``."""
    for b in blocks():
        if b.lang == "yaml" and b.code.splitlines()[0].strip() == f"# {marker}":
            return b.code
    raise AssertionError(f"README.md has no yaml block starting with '# {marker}'")
