"""Proof/audit reports: one Markdown page and one self-contained HTML page per mechanism, plus an index.

A report puts the three numbers that sandwich the truth side by side — claimed ε, proven bound,
certified empirical lower bound — then the assumptions, the derivation table (step,
justification, checker, discharged), the witness, the audit's counts and confidence, the tool
versions and the SHA-256 of the mechanism's source (``Mechanism.source_hash``) so a stale report is
detectable. Plots (matplotlib, Agg): output histograms on D and D', the privacy-loss distribution
(log-ratio of the exact laws at outputs sampled on D, and on D' the other way round; of
histograms when no exact law is available), and the certified bound versus the number of samples with the claimed and proven lines.

Output is deterministic: fixed seeds, no timings or dates, PNG metadata stripped. The HTML opens
offline (inline CSS, plots as base64 PNG). Every page starts with a metadata comment
(``<!-- dpharness-report {...} -->``) that :func:`read_metadata` parses; the freshness test compares
its ``source_hash`` and ``parameters`` with the current mechanisms.

    dpharness report --out reports            # every built-in, plus reports/README.md and index.html
    dpharness report --out reports laplace    # one
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._json import jsonable
from ._run import PhaseTimeout, audit_target, audit_with_fallback, deadline, fmt, run_proof, tool_versions
from .core import Mechanism

__all__ = ["Report", "build", "write", "generate", "write_index", "read_metadata", "REPORT_SAMPLES",
           "CURVE_SIZES", "PLOT_SAMPLES"]

REPORT_SAMPLES = 1_000_000        # per side for the report's main audit (as the gate)
CURVE_SIZES = (1_000, 10_000, 100_000)  # extra audits (fixed pair) for the bound-versus-samples plot
PLOT_SAMPLES = 20_000             # outputs per side drawn for the histograms and the loss plot
LAW_SECONDS = 20.0                # time allowed to the exact laws in the loss plot (else: histograms)
FORMAT_VERSION = 1
_META_RE = re.compile(r"<!-- dpharness-report (\{.*?\}) -->", re.S)


@dataclass
class Report:
    """Everything a report page shows; ``meta`` is what the freshness test reads back."""

    mechanism: Mechanism
    proof: Any
    audit: Any
    meta: dict
    png: bytes | None
    curve: list = field(default_factory=list)
    plot_note: str = ""
    proof_error: str | None = None
    audit_error: str | None = None
    audit_note: str | None = None
    loss_source: str = ""
    pair: tuple | None = None


# --------------------------------------------------------------------------- building

def build(mechanism: Mechanism, *, proof: Any = None, audit: Any = None, samples: int = REPORT_SAMPLES,
          seed: int = 0, curve_sizes: tuple[int, ...] | None = None, plot_samples: int | None = None,
          timeout: float | None = None) -> Report:
    """Prove (unless ``proof`` is given), audit (unless ``audit`` is given), draw the plots.
    ``timeout``: seconds allowed to the proof, the audit and the plots each."""
    curve_sizes = CURVE_SIZES if curve_sizes is None else curve_sizes
    plot_samples = PLOT_SAMPLES if plot_samples is None else plot_samples
    proof_error = audit_error = None
    if proof is None:
        try:
            with deadline(timeout, f"the proof of {mechanism.name}"):
                proof = run_proof(mechanism)
        except Exception as exc:  # the page says so; it does not vanish
            proof_error = f"{type(exc).__name__}: {exc}"
    audit_note = None
    if audit is None:
        try:
            audit, audit_note = audit_with_fallback(mechanism, proof, samples=samples, seed=seed, timeout=timeout)
        except Exception as exc:
            audit_error = f"{type(exc).__name__}: {exc}"
    meta = {
        "format": FORMAT_VERSION,
        "name": mechanism.name,
        "class": f"{type(mechanism).__module__}.{type(mechanism).__qualname__}",
        "buggy": bool(mechanism.buggy),
        "parameters": jsonable(mechanism.noise_parameters()),
        "claim": mechanism.claim.describe(),
        "source_hash": mechanism.source_hash(),
        "samples": samples if audit is None else int(audit.samples),
        "seed": seed,
        "verdict": None if proof is None else proof.verdict.value,
        "proven_bound": None if proof is None else jsonable(proof.bound),
        "epsilon_lower_bound": None if audit is None else jsonable(audit.epsilon_lower_bound),
        "audit_passed": None if audit is None else bool(audit.passed),
        "versions": tool_versions(),
    }
    report = Report(mechanism, proof, audit, meta, None, proof_error=proof_error, audit_error=audit_error,
                    audit_note=audit_note)
    try:
        with deadline(timeout, f"the plots of {mechanism.name}"):
            report.png = _plots(report, seed=seed, curve_sizes=tuple(s for s in curve_sizes if s < meta["samples"]),
                                plot_samples=plot_samples)
    except (Exception, PhaseTimeout) as exc:
        report.plot_note = f"plots unavailable: {type(exc).__name__}: {exc}"
    return report


def _pair(report: Report) -> tuple[Any, Any]:
    for w in (getattr(report.audit, "witness", None), getattr(report.proof, "witness", None)):
        if w is not None and w.data is not None and w.neighbor is not None:
            try:
                report.mechanism.input_spec.validate_pair(w.data, w.neighbor)
                return w.data, w.neighbor
            except Exception:
                continue
    return report.mechanism.example_pair()


def _labels(x: np.ndarray, y: np.ndarray):
    """Outputs as categories (labels, counts on D, counts on D') when there are at most 40 distinct
    values/patterns, else the 30 most frequent when they are not numbers or cover half the samples;
    else None (plot a histogram)."""
    def keys(a):
        a = np.asarray(a)
        if a.ndim == 1:
            return a
        flat = a.reshape(len(a), -1)
        if flat.dtype.kind in "biu" and flat.size and flat.min() >= -1 and flat.max() <= 9:
            # bit/answer patterns: one character per coordinate ("-" for -1)
            return np.array(["".join("-" if v < 0 else str(v) for v in r.tolist()) for r in flat])
        return np.array([",".join(map(str, r.tolist())) for r in flat])

    numeric = np.asarray(x).dtype.kind in "biuf"
    kx, ky = keys(x), keys(y)
    values, counts = np.unique(np.concatenate([kx, ky]), return_counts=True)
    if len(values) > 40:
        order = np.argsort(-counts, kind="stable")[:30]
        if numeric and counts[order].sum() < 0.5 * counts.sum():
            return None  # no dominant patterns: a histogram of the first coordinate says more
        values = np.sort(values[order])
    cx = np.array([np.count_nonzero(kx == v) for v in values])
    cy = np.array([np.count_nonzero(ky == v) for v in values])
    return [str(v) for v in values], cx, cy


def _loss(report: Report, data, neighbor, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """Privacy losses in both directions: ln p_D(o)/p_D'(o) at outputs o sampled on D, and
    ln p_D'(o)/p_D(o) at outputs sampled on D'."""
    m = report.mechanism
    try:
        sx, sy = x[:5000], y[:5000]
        with deadline(LAW_SECONDS, "the exact laws"):
            law_d, law_n = m.law(data), m.law(neighbor)
            ax, bx = np.asarray(law_d.log_prob(sx), float), np.asarray(law_n.log_prob(sx), float)
            ay, by = np.asarray(law_n.log_prob(sy), float), np.asarray(law_d.log_prob(sy), float)
        with np.errstate(invalid="ignore"):
            lx, ly = ax - bx, ay - by
        lx[np.isnan(lx)] = 0.0  # both -inf: an output impossible on both sides (sampler rounding)
        ly[np.isnan(ly)] = 0.0
        return lx, ly, "the exact laws at sampled outputs"
    except (Exception, PhaseTimeout):
        pass
    flat_x = np.asarray(x, float).reshape(len(x), -1)[:, 0]
    flat_y = np.asarray(y, float).reshape(len(y), -1)[:, 0]
    edges = np.histogram_bin_edges(np.concatenate([flat_x, flat_y]), bins=40)
    hx, _ = np.histogram(flat_x, edges)
    hy, _ = np.histogram(flat_y, edges)
    ix = np.clip(np.searchsorted(edges, flat_x, side="right") - 1, 0, len(hx) - 1)
    iy = np.clip(np.searchsorted(edges, flat_y, side="right") - 1, 0, len(hx) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lx = np.log(hx[ix] / hy[ix]).astype(float)
        ly = np.log(hy[iy] / hx[iy]).astype(float)
    return lx, ly, "histograms (40 bins of the first coordinate; no exact law available)"


def _plots(report: Report, *, seed: int, curve_sizes: tuple[int, ...], plot_samples: int) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = report.mechanism
    data, neighbor = _pair(report)
    report.pair = (data, neighbor)
    rng = np.random.default_rng(seed)
    x = np.asarray(m.sample(data, plot_samples, rng))
    y = np.asarray(m.sample(neighbor, plot_samples, rng))
    loss_x, loss_y, report.loss_source = _loss(report, data, neighbor, x, y)

    claimed, _ = audit_target(m.claim)
    proven = None if report.proof is None else float(report.proof.bound)
    curve = []
    if report.audit is not None:
        from dpharness import auditors

        eps, delta = audit_target(m.claim)
        for n in curve_sizes:
            r = auditors.audit(m, data, neighbor, epsilon=eps, delta=delta, samples=n, seed=seed)
            curve.append((n, float(r.epsilon_lower_bound)))
        curve.append((int(report.audit.samples), float(report.audit.epsilon_lower_bound)))
    report.curve = curve

    plt.rcParams.update({"svg.hashsalt": "dpharness", "font.size": 9})
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), dpi=80)
    ax = axes[0]
    cats = _labels(x, y)
    if cats is not None:
        names, cx, cy = cats
        pos = np.arange(len(names))
        ax.bar(pos - 0.2, cx / len(x), width=0.4, label="D", color="#3b6ea5")
        ax.bar(pos + 0.2, cy / len(y), width=0.4, label="D'", color="#d9822b")
        step = max(1, len(names) // 12)
        ax.set_xticks(pos[::step], [n if len(n) <= 16 else n[:15] + "…" for n in names[::step]],
                      rotation=45, ha="right")
        ax.set_ylabel("frequency")
    else:
        fx = np.asarray(x, float).reshape(len(x), -1)[:, 0]
        fy = np.asarray(y, float).reshape(len(y), -1)[:, 0]
        both = np.concatenate([fx, fy])
        lo, hi = np.quantile(both, [0.002, 0.998])
        edges = np.linspace(lo, hi, 61) if hi > lo else 30
        ax.hist(fx, bins=edges, histtype="step", density=True, label="D", color="#3b6ea5")
        ax.hist(fy, bins=edges, histtype="step", density=True, label="D'", color="#d9822b")
        ax.set_ylabel("density")
        if np.asarray(x).ndim > 1:
            ax.set_xlabel("output coordinate 0")
    ax.set_title(f"outputs on D and D' ({plot_samples} samples each)")
    ax.legend()

    ax = axes[1]
    fin_x, fin_y = loss_x[np.isfinite(loss_x)], loss_y[np.isfinite(loss_y)]
    inf_x = int(np.count_nonzero(~np.isfinite(loss_x)))
    inf_y = int(np.count_nonzero(~np.isfinite(loss_y)))
    values = np.unique(np.round(np.concatenate([fin_x, fin_y]), 9))
    lab_x, lab_y = "o ~ M(D): ln p_D(o)/p_D'(o)", "o ~ M(D'): ln p_D'(o)/p_D(o)"
    if values.size and len(values) <= 40:
        width = max((values.max() - values.min()) / 80, 0.01)
        for fin, n, shift, color, lab in ((fin_x, len(loss_x), -width / 2, "#3b6ea5", lab_x),
                                          (fin_y, len(loss_y), width / 2, "#d9822b", lab_y)):
            v, c = np.unique(np.round(fin, 9), return_counts=True)
            ax.bar(v + shift, c / max(n, 1), width=width, color=color, label=lab)
    elif values.size:
        edges = np.linspace(values.min(), values.max(), 61) if values.max() > values.min() else 30
        ax.hist(fin_x, bins=edges, weights=np.full(fin_x.size, 1 / max(len(loss_x), 1)), color="#3b6ea5", label=lab_x)
        ax.hist(fin_y, bins=edges, weights=np.full(fin_y.size, 1 / max(len(loss_y), 1)), histtype="step",
                color="#d9822b", lw=1.5, label=lab_y)
    ax.axvline(claimed, color="black", ls="--", lw=1, label=f"claimed ε = {fmt(claimed)}")
    ax.axvline(-claimed, color="black", ls="--", lw=1)
    if proven is not None and math.isfinite(proven):
        ax.axvline(proven, color="green", ls=":", lw=1.5, label=f"proven bound {fmt(proven)}")
    title = "privacy-loss distribution"
    if inf_x or inf_y:
        title += f"\ninfinite loss: {inf_x}/{len(loss_x)} outputs on D, {inf_y}/{len(loss_y)} on D'"
    ax.set_title(title)
    ax.set_ylabel("fraction of outputs")
    ax.legend(fontsize=7)

    ax = axes[2]
    if curve:
        ns = np.array([c[0] for c in curve], float)
        lbs = np.array([c[1] for c in curve], float)
        top = max([claimed] + ([proven] if proven is not None and math.isfinite(proven) else [])
                  + [v for v in lbs if math.isfinite(v)]) * 1.3 + 0.05
        shown = np.where(np.isfinite(lbs), lbs, top)
        ax.plot(ns, shown, "o-", color="#3b6ea5", label="certified lower bound")
        for n_, v in zip(ns, lbs):
            if not math.isfinite(v):
                ax.annotate("∞", (n_, top), textcoords="offset points", xytext=(0, 4), ha="center")
        ax.axhline(claimed, color="black", ls="--", lw=1, label=f"claimed ε = {fmt(claimed)}")
        if proven is not None and math.isfinite(proven):
            ax.axhline(proven, color="green", ls=":", lw=1.5, label=f"proven bound {fmt(proven)}")
        ax.set_xscale("log")
        ax.set_ylim(0, top * 1.08)
        ax.set_xlabel("samples per side")
        ax.legend(fontsize=8)
    ax.set_title("certified ε lower bound versus samples")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


# --------------------------------------------------------------------------- rendering

def _first_paragraph(text: str | None) -> str:
    if not text:
        return ""
    para = text.strip().split("\n\n")[0]
    return " ".join(line.strip() for line in para.splitlines())


def _sections(r: Report) -> list[tuple[str, Any]]:
    """The page as (kind, payload) blocks shared by the Markdown and HTML renderers."""
    m, p, a = r.mechanism, r.proof, r.audit
    blocks: list[tuple[str, Any]] = []
    verdict = "ERROR" if p is None else p.verdict.value
    audit_word = "audit errored" if a is None else ("audit passed" if a.passed else "audit certified a VIOLATION")
    blocks.append(("h1", f"{m.name}"))
    blocks.append(("lead", f"Verdict: {verdict} · {audit_word}"))
    claimed, delta = audit_target(m.claim)
    conf = "" if a is None else f" ({a.confidence:g} confidence)"
    blocks.append(("table", (
        ["claimed ε", "proven bound", f"certified empirical lower bound{conf}"],
        [[fmt(claimed) + (f" (δ = {delta:g})" if delta else ""),
          "—" if p is None else fmt(p.bound) + (f" (δ ≤ {fmt(p.delta_bound)})" if p.delta_bound is not None else ""),
          "—" if a is None else fmt(a.epsilon_lower_bound)]])))
    info = [f"Mechanism: `{m.describe()}`", f"Claim: {m.claim.describe()}",
            f"Input: {m.input_spec.describe()}"]
    if m.source:
        info.append(f"Source: {m.source}")
    doc = _first_paragraph(type(m).__doc__)
    if doc:
        info.append(f"Description: {doc}")
    if m.buggy:
        info.append(f"Known bug (gallery): {m.bug} True ε as implemented: {fmt(m.true_epsilon)}.")
    blocks.append(("list", info))
    if r.proof_error:
        blocks.append(("h2", "Proof"))
        blocks.append(("para", f"The prover raised: {r.proof_error}"))
    if p is not None:
        blocks.append(("h2", "Assumptions"))
        blocks.append(("list", list(p.assumptions) or ["(none stated)"]))
        blocks.append(("h2", "Derivation"))
        blocks.append(("para", f"Derived bound: ε ≤ {fmt(p.bound)} = `{p.bound_expr}`"))
        rows = [[str(i), s.statement, f"`{s.formula}`", s.justification, s.checker, "yes" if s.discharged else "NO"]
                for i, s in enumerate(p.steps, 1)]
        if rows:
            blocks.append(("table", (["#", "step", "formula", "justification", "checker", "discharged"], rows)))
        else:
            blocks.append(("para", "No derivation steps."))
        if p.notes:
            blocks.append(("list", [f"Note: {n}" for n in p.notes]))
        blocks.append(("h2", "Witness"))
        w = p.witness
        if w is None:
            blocks.append(("para", "The proof gives no witness."))
        else:
            items = [f"D = `{jsonable(w.data)}`", f"D' = `{jsonable(w.neighbor)}`"]
            if w.output is not None:
                items.append(f"output = `{jsonable(w.output)}`")
            if w.event is not None:
                items.append(f"event: {w.event.description}")
            if w.loss is not None:
                items.append(f"privacy loss = {fmt(w.loss)}")
            if w.description:
                items.append(w.description)
            blocks.append(("list", items))
    blocks.append(("h2", "Audit"))
    if a is None:
        blocks.append(("para", f"The auditor raised: {r.audit_error}"))
    else:
        items = [f"Certified ε lower bound: {fmt(a.epsilon_lower_bound)} at confidence {a.confidence:g} "
                 f"against ε = {fmt(a.epsilon)}, δ = {a.delta:g}: " + ("passed" if a.passed else "VIOLATION certified"),
                 f"Witness: {a.witness_description}", f"Method: {a.method}",
                 f"Samples: {a.samples} per side; seed {a.seed}; events tested {a.events_tested}; pairs tested {a.pairs_tested}"]
        if a.delta_lower_bound is not None:
            items.append(f"Certified δ lower bound at ε = {fmt(a.epsilon)}: {fmt(a.delta_lower_bound)}")
        if r.audit_note:
            items.append(f"Note: {r.audit_note}")
        items.append(f"Reproduce: `dpharness audit {m.name} --samples {a.samples} --seed {a.seed}`")
        blocks.append(("list", items))
        if a.counts:
            keys = list(a.counts)
            blocks.append(("table", (keys, [[str(jsonable(a.counts[k])) for k in keys]])))
    blocks.append(("h2", "Plots"))
    if r.png is not None:
        blocks.append(("image", f"{m.name}.png"))
        pair = "" if r.pair is None else f" (D = `{jsonable(r.pair[0])}`, D' = `{jsonable(r.pair[1])}`)"
        cap = [f"Left: outputs on D and D'{pair}. Middle: privacy-loss distribution in both directions, from " + (r.loss_source or "—") + "."]
        if r.curve:
            cap.append("Right: certified lower bound at " + ", ".join(f"{n} samples: {fmt(v)}" for n, v in r.curve)
                       + " (same pair, same seed).")
        blocks.append(("para", " ".join(cap)))
    else:
        blocks.append(("para", r.plot_note or "No plots."))
    blocks.append(("h2", "Provenance"))
    v = r.meta["versions"]
    blocks.append(("list", [f"Mechanism source SHA-256: `{r.meta['source_hash']}` ({r.meta['class']})",
                            "Tools: " + ", ".join(f"{k} {v[k]}" for k in v),
                            f"Regenerate: `dpharness report --out reports {m.name}`"]))
    return blocks


def _md_escape_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(r: Report) -> str:
    out = [f"<!-- dpharness-report {json.dumps(r.meta, sort_keys=True, ensure_ascii=False)} -->", ""]
    for kind, payload in _sections(r):
        if kind == "h1":
            out += [f"# {payload}", ""]
        elif kind == "h2":
            out += [f"## {payload}", ""]
        elif kind == "lead":
            out += [f"**{payload}**", ""]
        elif kind == "para":
            out += [payload, ""]
        elif kind == "list":
            out += [f"- {item}" for item in payload] + [""]
        elif kind == "table":
            head, rows = payload
            out.append("| " + " | ".join(_md_escape_cell(h) for h in head) + " |")
            out.append("|" + "---|" * len(head))
            out += ["| " + " | ".join(_md_escape_cell(c) for c in row) + " |" for row in rows]
            out.append("")
        elif kind == "image":
            out += [f"![plots]({payload})", ""]
    return "\n".join(out)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:.2em} .lead{font-size:1.2em;font-weight:600}
.lead.ok{color:#1f7a1f} .lead.bad{color:#b00020}
table{border-collapse:collapse;margin:.6em 0} th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} code{background:#f6f6f6;padding:0 .2em;font-size:.92em;word-break:break-word}
img{max-width:100%} td.no{color:#b00020;font-weight:600}
""".strip()


def _html_inline(text: str) -> str:
    parts = text.split("`")
    return "".join(f"<code>{html.escape(s)}</code>" if i % 2 else html.escape(s) for i, s in enumerate(parts))


def render_html(r: Report) -> str:
    body = []
    good = r.proof is not None and r.audit is not None and (
        (r.proof.verdict.value == "PROVED" and r.audit.passed) if not r.mechanism.buggy
        else (r.proof.verdict.value != "PROVED" or not r.audit.passed))
    for kind, payload in _sections(r):
        if kind == "h1":
            body.append(f"<h1>{html.escape(payload)}</h1>")
        elif kind == "h2":
            body.append(f"<h2>{html.escape(payload)}</h2>")
        elif kind == "lead":
            body.append(f'<p class="lead {"ok" if good else "bad"}">{html.escape(payload)}</p>')
        elif kind == "para":
            body.append(f"<p>{_html_inline(payload)}</p>")
        elif kind == "list":
            body.append("<ul>" + "".join(f"<li>{_html_inline(i)}</li>" for i in payload) + "</ul>")
        elif kind == "table":
            head, rows = payload
            trs = ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
            for row in rows:
                trs.append("<tr>" + "".join(
                    f'<td class="no">{_html_inline(c)}</td>' if c == "NO" else f"<td>{_html_inline(c)}</td>"
                    for c in row) + "</tr>")
            body.append("<table>" + "".join(trs) + "</table>")
        elif kind == "image" and r.png is not None:
            data = base64.b64encode(r.png).decode("ascii")
            body.append(f'<img alt="plots" src="data:image/png;base64,{data}">')
    meta = json.dumps(r.meta, sort_keys=True, ensure_ascii=False).replace("--", "- -")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<!-- dpharness-report {meta} -->\n"
            f"<title>dpharness report: {html.escape(r.mechanism.name)}</title>\n<style>{_CSS}</style></head>\n"
            "<body>\n" + "\n".join(body) + '\n<p><a href="index.html">all reports</a></p>\n</body></html>\n')


def write(report: Report, out_dir: str) -> list[str]:
    """Write NAME.md, NAME.html and NAME.png (when plotted) into ``out_dir``; return the paths."""
    os.makedirs(out_dir, exist_ok=True)
    name = report.mechanism.name
    paths = []
    png_path = os.path.join(out_dir, f"{name}.png")
    if report.png is not None:
        with open(png_path, "wb") as fh:
            fh.write(report.png)
        paths.append(png_path)
    elif os.path.exists(png_path):
        os.remove(png_path)
    for ext, text in (("md", render_markdown(report)), ("html", render_html(report))):
        path = os.path.join(out_dir, f"{name}.{ext}")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        paths.append(path)
    return paths


def generate(name: str, *, out: str, samples: int = REPORT_SAMPLES, seed: int = 0,
             timeout: float | None = None) -> dict:
    """Build and write the report of the registered mechanism ``name`` at its defaults (worker entry)."""
    from .registry import get

    try:
        report = build(get(name)(), samples=samples, seed=seed, timeout=timeout)
        files = write(report, out)
        return {"name": name, "ok": report.proof is not None and report.audit is not None, "files": files,
                "error": report.proof_error or report.audit_error}
    except Exception as exc:
        return {"name": name, "ok": False, "files": [], "error": f"{type(exc).__name__}: {exc}"}


# --------------------------------------------------------------------------- index and metadata

def read_metadata(path: str) -> dict:
    """The metadata comment of a report page (Markdown or HTML)."""
    with open(path, encoding="utf-8") as fh:
        head = fh.read(20000)
    match = _META_RE.search(head)
    if match is None:
        raise ValueError(f"{path} has no dpharness-report metadata comment; regenerate it with `dpharness report`.")
    return json.loads(match.group(1))


def write_index(out_dir: str) -> list[str]:
    """Write ``README.md`` and ``index.html`` listing every report page in ``out_dir``."""
    metas = []
    for fname in sorted(os.listdir(out_dir)):
        if fname.endswith(".md") and fname != "README.md":
            try:
                metas.append(read_metadata(os.path.join(out_dir, fname)))
            except (ValueError, json.JSONDecodeError):
                continue
    head = ["mechanism", "claim", "proof", "proven bound", "certified lower bound", "audit"]

    def row(meta):
        audit = {None: "error", True: "passed", False: "VIOLATION"}[meta.get("audit_passed")]
        return [meta["name"], meta["claim"], meta.get("verdict") or "error", fmt(meta.get("proven_bound")),
                fmt(meta.get("epsilon_lower_bound")), audit]

    groups = [("Catalog (correct mechanisms: expected PROVED and audit passed)", [m for m in metas if not m["buggy"]]),
              ("Gallery (known bugs: expected not PROVED or a VIOLATION)", [m for m in metas if m["buggy"]])]
    where = os.path.basename(os.path.normpath(out_dir)) or out_dir
    md = ["# dpharness reports", "",
          f"Generated by `dpharness report --out {where}`; each page records the source hash, parameters and claim",
          "of the mechanism it is about, so a stale page is detectable.", ""]
    body = ["<h1>dpharness reports</h1>",
            f"<p>Generated by <code>dpharness report --out {html.escape(where)}</code>; each page records the source "
            "hash, parameters and claim of its mechanism, so a stale page is detectable.</p>"]
    for title, group in groups:
        if not group:
            continue
        md += [f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        body += [f"<h2>{html.escape(title)}</h2>", "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
        for meta in group:
            cells = row(meta)
            md.append("| " + " | ".join([f"[{cells[0]}]({cells[0]}.md)"] + [_md_escape_cell(c) for c in cells[1:]]) + " |")
            body.append("<tr>" + f'<td><a href="{html.escape(cells[0])}.html">{html.escape(cells[0])}</a></td>'
                        + "".join(f"<td>{html.escape(c)}</td>" for c in cells[1:]) + "</tr>")
        md.append("")
        body.append("</table>")
    md_path = os.path.join(out_dir, "README.md")
    html_path = os.path.join(out_dir, "index.html")
    with open(md_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(md))
    with open(html_path, "w", encoding="utf-8") as fh:
        fh.write("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dpharness reports</title>"
                 f"<style>{_CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")
    return [md_path, html_path]
