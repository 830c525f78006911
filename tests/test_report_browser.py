"""Reports as a reader sees them: pages rendered by headless Chromium (Debian's ``chromium``).

* a real report (``dpharness.report.build`` + ``write`` for ``laplace``, small audit) opens from a
  file:// URL, its rendered DOM carries the verdict, keeps every ``<math>`` element of the source,
  and a screenshot is a non-blank PNG;
* a standalone page with the folded derivation tree and MathML: the browser places the ``<math>``
  elements in the MathML namespace and lays them out (non-zero size), and the folds are
  ``<details>`` elements.

Skipped when chromium is not installed (``apt-get install -y chromium``). Slow: each Chromium
start takes seconds. Deterministic (fixed seed)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import dpharness

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)"),
]


def _chromium(tmp_path, *args: str) -> str:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    out = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _dom(tmp_path, page) -> str:
    return _chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", page.as_uri())


def _screenshot(tmp_path, page, png, height=1400) -> None:
    _chromium(tmp_path, f"--window-size=1200,{height}", f"--screenshot={png}", page.as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(str(png))
    assert pixels.shape[0] == height and pixels.shape[1] == 1200
    assert pixels.std() > 0.01, "blank screenshot"


def test_report_page_renders_with_verdict(tmp_path):
    from dpharness import report

    rep = report.build(dpharness.get("laplace")(), samples=20_000, curve_sizes=(), plot_samples=2_000, seed=0)
    paths = report.write(rep, str(tmp_path))
    page = tmp_path / "laplace.html"
    assert str(page) in paths
    source = page.read_text(encoding="utf-8")
    dom = _dom(tmp_path, page)
    verdict = rep.proof.verdict.value
    assert verdict == "PROVED"
    assert f"Verdict: {verdict}" in dom
    # the page carries MathML (the bound and the derivation tree), and every element survives parsing
    assert source.count("<math") > 0 and dom.count("<math") == source.count("<math")
    _screenshot(tmp_path, page, tmp_path / "laplace.png")


_PROBE = """<script>
const maths = [...document.querySelectorAll('math')];
const ns = maths.every(m => m.namespaceURI === 'http://www.w3.org/1998/Math/MathML');
const laidOut = maths.filter(m => m.getBoundingClientRect().width > 0).length;
document.getElementById('probe').textContent = `math=${maths.length} ns=${ns} laidout=${laidOut}`;
</script>"""


def test_derivation_tree_page_renders_mathml(tmp_path):
    from dpharness.derivation import TREE_CSS, derivation_tree, render_tree_html
    from dpharness.mathml import to_mathml

    proof = dpharness.prove(dpharness.get("laplace")())
    tree_html = render_tree_html(derivation_tree(proof), open_levels=9)
    body = (
        f"<h1>laplace: {proof.verdict.value}</h1><p>Derived bound: ε ≤ {to_mathml(proof.bound_expr, display='inline')}</p>"
        f"{tree_html}<p id='probe'></p>"
    )
    page = tmp_path / "tree.html"
    page.write_text(
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>derivation</title>"
        f"<style>body{{font-family:sans-serif;max-width:1100px;margin:1em auto}}{TREE_CSS}</style></head>"
        f"<body>{body}{_PROBE}</body></html>",
        encoding="utf-8",
    )
    dom = _dom(tmp_path, page)
    assert "laplace: PROVED" in dom
    n = body.count("<math ")
    assert n >= 5
    probe = re.search(r"math=(\d+) ns=(\w+) laidout=(\d+)", dom)
    assert probe is not None, "the probe did not run"
    assert probe.groups() == (str(n), "true", str(n)), probe.group(0)  # all in the MathML namespace, all laid out
    assert dom.count("<details") == tree_html.count("<details")
    assert "6 cases: all hold" in dom
    _screenshot(tmp_path, page, tmp_path / "tree.png", height=1600)
