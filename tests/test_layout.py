"""The layout of the parts algebra (STYLE.md, "A family is a room"): ``dpharness.mechanisms.parts`` and
``dpharness.proofs.parts`` are packages with one module per family, each family's privacy map under the
same module name as its code, no family module importing another, and no import cycle.

Read from the sources with ``ast`` (every ``import`` statement, including those inside functions: a lazy
import is still a dependency), so the test sees what the code says, not what happens to be loaded."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

FAMILIES = ("transformations", "noise", "local", "selection", "threshold", "sampling", "grouping", "combinators")
MECH, PROOF = "dpharness.mechanisms.parts", "dpharness.proofs.parts"


def _modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (recursively) by dotted name, read from the installed sources."""
    pkg = importlib.import_module(package)
    out = {}
    for root in map(Path, getattr(pkg, "__path__", [])):
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("").parts
            name = ".".join((package, *rel))
            out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``name`` imports (``from pkg import mod`` counts ``pkg.mod`` when
    that is a module, else ``pkg``)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            base = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # ``import a.b.c`` depends on the deepest known module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """The import graph of every module of ``dpharness.mechanisms`` and ``dpharness.proofs``."""
    modules = {**_modules("dpharness.mechanisms"), **_modules("dpharness.proofs")}
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """An import cycle through a module reachable from ``start``, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    return visit(start)


def test_the_parts_packages_have_one_module_per_family_in_both_trees(graph):
    for family in FAMILIES:
        assert f"{MECH}.{family}" in graph, (
            f"{MECH} has no module {family!r}: the parts algebra is not a package per family"
        )
        assert f"{PROOF}.{family}" in graph, (
            f"{PROOF} has no module {family!r}: its privacy map must sit under the same name"
        )
    public = {
        n.rpartition(".")[2] for n in graph if n.startswith(MECH + ".") and not n.rpartition(".")[2].startswith("_")
    }
    proved = {
        n.rpartition(".")[2] for n in graph if n.startswith(PROOF + ".") and not n.rpartition(".")[2].startswith("_")
    }
    assert public == proved == set(FAMILIES), (
        "every family has its code and its proof under one name, and nothing else is public"
    )


@pytest.mark.parametrize("package", [MECH, PROOF])
def test_the_parts_packages_have_no_import_cycle(graph, package):
    assert package in graph, f"{package} is not a package of the parts algebra"
    for name in sorted(n for n in graph if n == package or n.startswith(package + ".")):
        cycle = _cycle(graph, name)
        assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_module_imports_no_other_family(graph, family):
    """A family's code imports only the base modules; its proof, the walk and its own family's code (and
    the interpreters of a whole structure, which are not families). Neither imports a package ``__init__``
    (which imports every family)."""
    families = {f"{tree}.{f}" for tree in (MECH, PROOF) for f in FAMILIES}
    assert f"{MECH}.{family}" in graph and f"{PROOF}.{family}" in graph, (
        f"the {family} family has no module in each tree"
    )
    code = graph[f"{MECH}.{family}"]
    assert not code & (families | {MECH, PROOF}), f"{MECH}.{family} imports {sorted(code & (families | {MECH, PROOF}))}"
    assert {m for m in code if m.startswith(MECH + ".")} <= {f"{MECH}._base", f"{MECH}._grid"}, (
        f"{MECH}.{family} imports {sorted(code)}; a family's code builds on the base modules only"
    )
    proof = graph[f"{PROOF}.{family}"]
    others = (proof & (families | {MECH, PROOF})) - {f"{MECH}.{family}"}
    assert not others, (
        f"{PROOF}.{family} imports {sorted(others)}; a family's proof uses the walk and its own code only"
    )


def test_the_interpreters_dispatch_without_importing_back():
    """The base modules import no family (the families fill their registries at import)."""
    mods = {**_modules("dpharness.mechanisms"), **_modules("dpharness.proofs")}
    known = set(mods)
    for base in (f"{MECH}._base", f"{MECH}._grid", f"{PROOF}._walk"):
        deps = _imports(base, mods[base], known)
        assert not {d for d in deps if d.startswith((MECH, PROOF)) and d not in (f"{MECH}._base", f"{MECH}._grid")}, (
            f"{base} imports {sorted(deps)}"
        )
