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

A report is built from a :class:`~dpharness.pipeline.Check` (the gate's, or one :func:`build` runs) and
rendered by the jinja2 templates in ``dpharness/templates`` (HTML autoescaped).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ._display import fmt_lower, fmt_upper
from ._json import jsonable
from ._run import audit_target, float_hint, fmt, reproduce_flags, tool_versions
from .pipeline import Check, PhaseTimeout, deadline, run_audit
from .pipeline import check as run_check
from .core import Mechanism
from .errors import DPHarnessError, MechanismError
from .derivation import TREE_CSS, derivation_tree, render_tree_html, render_tree_markdown
from .mathml import to_mathml
from .registry import rerun_flags

__all__ = [
    "Report",
    "Written",
    "build",
    "write",
    "generate",
    "write_index",
    "read_metadata",
    "render_markdown",
    "render_html",
    "REPORT_SAMPLES",
    "CURVE_SIZES",
    "PLOT_SAMPLES",
]

REPORT_SAMPLES = 1_000_000  # per side for the report's main audit (as the gate)
CURVE_SIZES = (1_000, 10_000, 100_000)  # extra audits (fixed pair) for the bound-versus-samples plot
PLOT_SAMPLES = 20_000  # outputs per side drawn for the histograms and the loss plot
LAW_SECONDS = 20.0  # time allowed to the exact laws in the loss plot (else: histograms)
FORMAT_VERSION = 1
_META_RE = re.compile(r"<!-- dpharness-report (\{.*?\}) -->", re.S)


@dataclass
class Report:
    """Everything a report page shows: the :class:`Check` (proof, audit, messages), the plots and
    ``meta``, what the freshness test reads back."""

    mechanism: Mechanism
    check: Check
    meta: dict
    png: bytes | None
    curve: list = field(default_factory=list)
    plot_note: str = ""
    loss_source: str = ""
    pair: tuple | None = None
    tradeoff: Any = None  # the audit's TradeoffBound (None: no certified points recorded)
    tradeoff_reference: str = ""  # the mechanism's own curve plotted beside the claim's, in words
    profile: Any = None  # the privacy profile ε(δ) the proof accounts, for (ε, δ) claims on parts structures

    @property
    def proof(self) -> Any:
        """The live Proof (None when the prover crashed or ran out of time)."""
        return self.check.proof_object

    @property
    def audit(self) -> Any:
        return self.check.audit


# --------------------------------------------------------------------------- building


def build(
    mechanism: Mechanism,
    *,
    check: Check | None = None,
    samples: int = REPORT_SAMPLES,
    seed: int = 0,
    curve_sizes: tuple[int, ...] | None = None,
    plot_samples: int | None = None,
    timeout: float | None = None,
) -> Report:
    """The report of ``mechanism``: from ``check`` when given (it must come from this process, with
    its live proof; the gate's check audits a proved mechanism sequentially, and the page's reproduce
    command says so; an audit with no proof beside it is one look there too),
    else from the check pipeline run here, whose audit is the one ``dpharness audit`` runs (every
    certification sample, one look: the same samples and seed give the same bound); then the plots.
    ``timeout``: seconds allowed to the proof, the audit and the plots each."""
    curve_sizes = CURVE_SIZES if curve_sizes is None else curve_sizes
    plot_samples = PLOT_SAMPLES if plot_samples is None else plot_samples
    if check is None:
        # no time budget: a page's bound is dpharness audit's at the page's samples and seed on any machine
        check = run_check(mechanism, samples=samples, seed=seed, timeout=timeout, sequential=False, time_budget=None)
    proof, audit = check.proof_object, check.audit
    meta = {
        "format": FORMAT_VERSION,
        "name": mechanism.name,
        "kind": _kind(mechanism),
        "class": f"{type(mechanism).__module__}.{type(mechanism).__qualname__}",
        "buggy": bool(mechanism.buggy),
        "parameters": jsonable(mechanism.noise_parameters()),
        "claim": mechanism.claim.describe(),
        "source_hash": mechanism.source_hash(),
        "samples": samples if audit is None else int(audit.samples),
        "seed": seed,
        "verdict": None if proof is None else proof.verdict.value,
        "proven_bound": None if proof is None else jsonable(proof.bound),
        "proven_at_audit_delta": None if proof is None else _proven_at_audit_delta(mechanism.claim, proof.bound),
        "epsilon_lower_bound": None if audit is None else jsonable(audit.epsilon_lower_bound),
        "audit_passed": None if audit is None else bool(audit.passed),
        "versions": tool_versions(),
    }
    report = Report(mechanism, check, meta, None)
    try:
        with deadline(timeout, f"the plots of {mechanism.name}"):
            report.png = _plots(
                report,
                seed=seed,
                curve_sizes=tuple(s for s in curve_sizes if s < meta["samples"]),
                plot_samples=plot_samples,
            )
    except (Exception, PhaseTimeout) as exc:
        report.plot_note = f"plots unavailable: {type(exc).__name__}: {_one_line(str(exc))}"
    return report


def _plot_sample(m: Mechanism, side: str, data: Any, n: int, rng: np.random.Generator) -> Any:
    """``n`` outputs of ``m`` on one side of the plotted pair. The mechanism's own exception is named by
    its type only, as the auditor names it: its message may contain the data, and a page is committed
    and published (it also carried newlines and markup into the Markdown page verbatim)."""
    try:
        return m.sample(data, n, rng)
    except DPHarnessError:
        raise
    except Exception as exc:  # noqa: BLE001 - the mechanism's own code
        raise MechanismError(
            f"mechanism {m.name!r} raised {type(exc).__name__} when sampled on the {side} side of the plotted "
            "pair (the exception's message is not repeated here: it may contain the data; call the mechanism "
            "on these inputs to see it)"
        ) from None


def _kind(mechanism: Mechanism) -> str:
    """The index group of ``mechanism``: ``library`` (a library target), ``gallery`` (a known bug),
    ``catalog`` (a built-in) or ``team`` (anything else: a project's own, registered or not)."""
    from . import registry
    from .auditors.libraries import TargetMechanism

    if isinstance(mechanism, TargetMechanism):
        return "library"
    if mechanism.buggy:
        return "gallery"
    try:
        registered = registry.get(mechanism.name)
    except Exception:  # noqa: BLE001 - not registered: a value the caller built
        return "team"
    kind = registry.kind(mechanism.name)
    if kind == "catalog" and not (registered is type(mechanism) or _is_value_of(registered, mechanism)):
        return "team"  # a value reported under a built-in's name is not the built-in
    return kind


def _is_value_of(entry: Any, mechanism: Mechanism) -> bool:
    try:
        return isinstance(entry, type) and isinstance(mechanism, entry) or entry() == mechanism
    except Exception:  # noqa: BLE001
        return False


def file_stem(name: str) -> str:
    """The file name (without extension) of ``name``'s report pages: the name, with a library target's
    ``:`` written ``--`` (``diffprivlib--laplace.md``: a colon is no file name on Windows, and a
    relative link ``diffprivlib:laplace.md`` reads as a URL scheme)."""
    return name.replace(":", "--")


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
    if np.asarray(x).dtype.kind not in "biuf":  # outputs that are not numbers: their empirical frequencies
        kx, ky = [str(o) for o in x], [str(o) for o in y]
        fx, fy = Counter(kx), Counter(ky)
        with np.errstate(divide="ignore"):
            lx = np.log(np.array([fx[k] for k in kx], float) / np.array([fy[k] for k in kx], float))
            ly = np.log(np.array([fy[k] for k in ky], float) / np.array([fx[k] for k in ky], float))
        return lx, ly, "empirical frequencies of the sampled outputs (no exact law available)"
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
    x, y = (
        np.asarray(_plot_sample(m, side, d, plot_samples, rng)) for side, d in (("data", data), ("neighbor", neighbor))
    )
    loss_x, loss_y, report.loss_source = _loss(report, data, neighbor, x, y)
    if x.dtype == object:  # outputs that are values (e.g. a group-by's mapping of keys): plotted as labels
        x, y = np.array([str(o) for o in x], dtype=object), np.array([str(o) for o in y], dtype=object)

    claimed, _ = audit_target(m.claim)
    proven = None if report.proof is None else float(report.proof.bound)
    bound_label = "proven bound" if _bound_is_proven(report.meta) else "derived bound (not proven)"
    curve = []
    if report.audit is not None:
        # each point is the report's own audit (the same pairs or pair search, the same sequential or
        # single look, the same seed) at fewer samples a side, ending with the audit itself
        sequential = "sequential" in (report.audit.extra or {})
        for n in curve_sizes:
            r, _scope = run_audit(m, report.proof, samples=n, seed=seed, sequential=sequential)
            curve.append((n, float(r.epsilon_lower_bound)))
        curve.append((int(report.audit.samples), float(report.audit.epsilon_lower_bound)))
    report.curve = curve

    plt.rcParams.update(
        {
            "svg.hashsalt": "dpharness",
            "font.size": 12,
            "axes.titlesize": 13,
            "axes.labelsize": 12,
            "xtick.labelsize": 11,
            "ytick.labelsize": 11,
            "legend.fontsize": 11,
            "legend.framealpha": 0.85,
            "lines.linewidth": 1.8,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.formatter.useoffset": False,
        }
    )
    report.profile = _privacy_profile(m)
    rows = 5 if report.profile is not None else 4
    fig = plt.figure(figsize=(10, 4 * rows), dpi=100)  # stacked: legible at 1000 px, shown unscaled
    grid = fig.add_gridspec(rows, 2)
    axes = [fig.add_subplot(grid[i, :]) for i in range(3)] + [fig.add_subplot(grid[3, 0]), fig.add_subplot(grid[3, 1])]
    ax = axes[0]
    cats = _labels(x, y)
    if cats is not None:
        names, cx, cy = cats
        pos = np.arange(len(names))
        ax.bar(pos - 0.2, cx / len(x), width=0.4, label="D", color="#3b6ea5")
        ax.bar(pos + 0.2, cy / len(y), width=0.4, label="D'", color="#d9822b")
        step = max(1, len(names) // 12)
        ax.set_xticks(
            pos[::step], [n if len(n) <= 16 else n[:15] + "…" for n in names[::step]], rotation=45, ha="right"
        )
        ax.set_ylabel("frequency")
    else:
        fx = np.asarray(x, float).reshape(len(x), -1)[:, 0]
        fy = np.asarray(y, float).reshape(len(y), -1)[:, 0]
        both = np.concatenate([fx, fy])
        lo, hi = np.quantile(both, [0.002, 0.998])
        edges: list[float] | int = np.linspace(lo, hi, 61).tolist() if hi > lo else 30  # matplotlib's bins
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
        for fin, n, shift, color, lab in (
            (fin_x, len(loss_x), -width / 2, "#3b6ea5", lab_x),
            (fin_y, len(loss_y), width / 2, "#d9822b", lab_y),
        ):
            v, c = np.unique(np.round(fin, 9), return_counts=True)
            ax.bar(v + shift, c / max(n, 1), width=width, color=color, label=lab)
    elif values.size:
        edges = np.linspace(values.min(), values.max(), 61).tolist() if values.max() > values.min() else 30
        ax.hist(fin_x, bins=edges, weights=np.full(fin_x.size, 1 / max(len(loss_x), 1)), color="#3b6ea5", label=lab_x)
        ax.hist(
            fin_y,
            bins=edges,
            weights=np.full(fin_y.size, 1 / max(len(loss_y), 1)),
            histtype="step",
            color="#d9822b",
            lw=1.5,
            label=lab_y,
        )
    ax.axvline(claimed, color="black", ls="--", lw=1, label=f"claimed ε = {fmt(claimed)}")
    ax.axvline(-claimed, color="black", ls="--", lw=1)
    if proven is not None and math.isfinite(proven):
        ax.axvline(proven, color="green", ls=":", lw=1.5, label=f"{bound_label} {fmt(proven)}")
    title = "privacy-loss distribution"
    if inf_x or inf_y:
        title += f"\ninfinite loss: {inf_x}/{len(loss_x)} outputs on D, {inf_y}/{len(loss_y)} on D'"
    ax.set_title(title)
    ax.set_ylabel("fraction of outputs")
    ax.legend()

    ax = axes[2]
    if curve:
        ns = np.array([c[0] for c in curve], float)
        lbs = np.array([c[1] for c in curve], float)
        top = (
            max(
                [claimed]
                + ([proven] if proven is not None and math.isfinite(proven) else [])
                + [v for v in lbs if math.isfinite(v)]
            )
            * 1.3
            + 0.05
        )
        shown = np.where(np.isfinite(lbs), lbs, top)
        ax.plot(ns, shown, "o-", color="#3b6ea5", label="certified lower bound")
        for n_, v in zip(ns, lbs):
            if not math.isfinite(v):
                ax.annotate("∞", (n_, top), textcoords="offset points", xytext=(0, 4), ha="center")
        ax.axhline(claimed, color="black", ls="--", lw=1, label=f"claimed ε = {fmt(claimed)}")
        if proven is not None and math.isfinite(proven):
            ax.axhline(proven, color="green", ls=":", lw=1.5, label=f"{bound_label} {fmt(proven)}")
        ax.set_xscale("log")
        ax.set_ylim(0, top * 1.08)
        ax.set_xlabel("samples per side")
        ax.legend()
    ax.set_title("certified ε lower bound versus samples")

    _tradeoff_panel(report, axes[3], axes[4])
    if report.profile is not None:
        _profile_panel(report.profile, m.claim, fig.add_subplot(grid[4, :]))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _privacy_profile(m: Mechanism) -> Any:
    """The privacy profile the proof accounts (:mod:`dpharness.proofs._profile`) for an (ε, δ) claim on a
    structure declared from parts, else None."""
    from .core import ApproxDP

    if not isinstance(m.claim, ApproxDP):
        return None
    from .proofs._profile import privacy_profile

    return privacy_profile(m)


def _profile_panel(profile: Any, claim: Any, ax: Any) -> None:
    """ε(δ) as the proof accounts it (the smallest of its routes at each δ), the certified lower end where
    the PLD gives one, and the claim (ε, δ) marked."""
    pts = [(d, e, lo) for d, e, lo in profile.points if math.isfinite(e)]
    if not pts:
        ax.set_title("privacy profile: no finite ε at the profiled δ")
        return
    ds = np.array([p[0] for p in pts])
    ax.plot(ds, [p[1] for p in pts], "o-", color="#3b6ea5", ms=3, label="proven ε(δ) (upper)")
    lows = [(d, lo) for d, _, lo in pts if lo is not None]
    if lows:
        ax.plot(
            [d for d, _ in lows],
            [lo for _, lo in lows],
            "--",
            color="#7a9cc6",
            label="certified lower end (PLD), attained on one neighbouring pair",
        )
    ax.plot(
        [float(claim.delta)],
        [float(claim.epsilon)],
        "*",
        color="black",
        ms=14,
        label=f"claim (ε, δ) = ({fmt(float(claim.epsilon))}, {float(claim.delta):.3g})",
    )
    ax.set_xscale("log")
    ax.set_xlabel("δ")
    ax.set_ylabel("ε")
    ax.set_title("privacy profile as proved: the claim holds on or above the curve")
    ax.legend()


def _reference_curve(m: Mechanism) -> tuple[str, Any] | None:
    """The trade-off curve of the mechanism's own law for its worst neighbouring pair, when its type
    says which (exactly these types: a subclass may override the sampler or the law), else None.
    Laplace (one coordinate): the exact curve of the discrete Laplace on its grid, shifted by the
    effective sensitivity. Gaussian (one coordinate): G_μ at μ = (sensitivity in grid steps)·g/σ,
    the continuous Gaussian's curve (Dong, Roth & Su 2022), a reference for the discrete one."""
    from .auditors import tradeoff as _t
    from .mechanisms.parts.noise import grid_distance
    from .mechanisms.gaussian import Gaussian
    from .mechanisms.laplace import Laplace

    if type(m) is Laplace and m.dim == 1:
        steps, s = Fraction(m.effective_sensitivity) / Fraction(m.grid), float(m.grid) / float(m.scale)
        if steps.denominator == 1:
            k = int(steps)
            g = Fraction(m.grid)
            grid = (
                f"2^{g.denominator.bit_length() - 1}"
                if g.numerator == 1 and g.denominator & (g.denominator - 1) == 0
                else f"{m.grid:g}"
            )
            grid = grid.replace("2^", "2^-") if g < 1 else grid
            return (
                f"discrete Laplace, exact (shift {fmt(float(m.effective_sensitivity))}, scale {fmt(float(m.scale))}, "
                f"grid {grid})",
                lambda a: _t.discrete_laplace_curve(a, k, s),
            )
    if type(m) is Gaussian and m.dim == 1:
        mu = float(grid_distance(m.sensitivity, m.granularity, 1)) / float(m.sigma)
        return f"Gaussian G_μ, μ = Δ/σ = {fmt(mu)} (continuous law)", lambda a: _t.gaussian_curve(a, mu)
    return None


def _tradeoff_panel(report: Report, ax: Any, ax_log: Any) -> None:
    """The certified trade-off points of every audited pair, the envelope of the best pair for μ, the
    claim's f_{ε,δ} and (when known) the mechanism's own curve; on ``ax_log`` the same as power
    1 − β against α on log axes, both orders of each point (the corners, where tail events certify,
    are unreadable on linear axes)."""
    from .auditors import tradeoff as _t

    a = report.audit
    t = None if a is None else a.tradeoff()
    report.tradeoff = t
    grid = np.linspace(0.0, 1.0, 1001)
    claimed = _t.epsilon_delta_curve(grid, a.epsilon, a.delta) if a is not None else None
    ax.plot([0, 1], [1, 0], color="#999999", lw=0.8, ls="-", label="no privacy loss: 1 − α")
    if claimed is not None:
        ax.plot(
            grid,
            claimed,
            color="black",
            ls="--",
            lw=1.2,
            label=f"claim f_ε,δ (ε = {fmt(a.epsilon)}" + (f", δ = {fmt(a.delta, 6)})" if a.delta else ")"),
        )
    ref = _reference_curve(report.mechanism)
    report.tradeoff_reference = "" if ref is None else ref[0]
    if ref is not None:
        ax.plot(grid, ref[1](grid), color="green", ls=":", lw=1.8, label=f"mechanism: {ref[0]}")
    if t is not None:
        pair = int(t.pair[t.mu_index]) if t.mu_index >= 0 else int(t.pair[0])
        pa, pb = t.points()  # every pair's points: each is certified for its own pair's curve
        ea, eb = t.envelope(pair)
        several = a.pairs_tested > 1
        ax.plot(
            ea,
            eb,
            color="#3b6ea5",
            lw=1.5,
            label="certified envelope" + (f" of pair {pair}" if several else "") + ": the true curve lies below",
        )
        bad = pb < _t.epsilon_delta_curve(pa, a.epsilon, a.delta)
        ax.plot(
            pa[~bad],
            pb[~bad],
            "o",
            color="#3b6ea5",
            ms=5,
            label="certified points (α, β)" + (" of every audited pair" if several else ""),
        )
        if np.any(bad):
            ax.plot(pa[bad], pb[bad], "o", color="#cf222e", ms=6, label="certified points below the claim")
        if t.mu > 0:
            ax.plot(
                grid,
                _t.gaussian_curve(grid, t.mu),
                color="#d9822b",
                lw=1,
                ls="-.",
                label=f"G_μ at the certified μ lower bound {fmt_lower(t.mu)}",
            )
        ax.set_title(f"certified trade-off T(M(D), M(D')), confidence {fmt(a.confidence, 6)}")
    else:
        ax.set_title("trade-off curve (no certified points recorded)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("type I error α")
    ax.set_ylabel("type II error β")
    ax.legend(loc="upper right", fontsize=8)

    # log axes: power 1 − β against α, both orders (the claims plotted are symmetric)
    lo = 1e-6
    if t is not None:
        pa = np.concatenate([t.points()[0], t.points(order="neighbor, data")[0]])
        pb = np.concatenate([t.points()[1], t.points(order="neighbor, data")[1]])
        power = 1.0 - pb
        keep = (pa > 0) & (power > 0)
        if np.any(keep):
            lo = min(lo, float(np.min(pa[keep])) / 3)
        bad = pb < _t.epsilon_delta_curve(pa, a.epsilon, a.delta)
        ax_log.plot(pa[keep & ~bad], power[keep & ~bad], "o", color="#3b6ea5", ms=4, label="certified points")
        if np.any(keep & bad):
            ax_log.plot(pa[keep & bad], power[keep & bad], "o", color="#cf222e", ms=5, label="above the claim")
    xs = np.logspace(math.log10(lo), 0, 400)
    if claimed is not None:
        ax_log.plot(
            xs,
            1 - _t.epsilon_delta_curve(xs, a.epsilon, a.delta),
            color="black",
            ls="--",
            lw=1.2,
            label="claim: 1 − f_ε,δ",
        )
    if ref is not None:
        ax_log.plot(xs, 1 - ref[1](xs), color="green", ls=":", lw=1.8, label="mechanism")
    ax_log.plot(xs, xs, color="#999999", lw=0.8, label="no privacy loss")
    ax_log.set_xscale("log")
    ax_log.set_yscale("log")
    ax_log.set_xlim(lo, 1)
    ax_log.set_ylim(lo, 1.05)
    ax_log.set_xlabel("type I error α")
    ax_log.set_ylabel("power 1 − β")
    ax_log.set_title("the same, power on log axes (both orders)")
    ax_log.legend(loc="lower right", fontsize=8)


def _tradeoff_words(r: Report) -> str | None:
    """One audit item on the certified trade-off curve (None when the audit recorded no points)."""
    a = r.audit
    t = None if a is None else a.tradeoff()
    if t is None:
        return None
    from .auditors import tradeoff as _t

    below = 0
    for p in np.unique(t.pair):
        below += int(np.count_nonzero(t.below(lambda x: _t.epsilon_delta_curve(x, a.epsilon, a.delta), int(p))))
    return (
        f"Certified trade-off curve: {len(t.alpha)} point(s) (α, β) with T(α) <= β, from the same counts and "
        f"intervals as the ε bound; μ-GDP lower bound {fmt_lower(t.mu)}; ε lower bound from the curve at δ = "
        f"{fmt(t.delta, 6)}: {fmt_lower(t.epsilon)}; points below the claimed curve f_ε,δ: {below}"
    )


# --------------------------------------------------------------------------- rendering

# a Sphinx cross-reference (":func:`mechanism`", ":class:`~dpharness.Check`", ":meth:`title <a.b>`")
_SPHINX_ROLE = re.compile(r":(?:[A-Za-z]+:)?[A-Za-z]+:`(?:~?([^`<>]*?)\s*(?:<[^`>]*>)?)`")


def _plain_roles(text: str) -> str:
    """Sphinx roles and reST double backticks as Markdown code: ":func:`x`" -> "`x`", "``y``" -> "`y`"
    (``~a.b`` shows ``b``, ``title <target>`` shows ``title``)."""

    def code(m: re.Match) -> str:
        shown = m.group(1).strip()
        if m.group(0).find("~") >= 0:
            shown = shown.rsplit(".", 1)[-1]
        return f"`{shown}`"

    return re.sub(r"``([^`]+)``", r"`\1`", _SPHINX_ROLE.sub(code, text))


def _first_paragraph(text: str | None) -> str:
    """A docstring's first paragraph on one line, its Sphinx roles shown as code."""
    if not text:
        return ""
    para = text.strip().split("\n\n")[0]
    return _plain_roles(" ".join(line.strip() for line in para.splitlines()))


@dataclass(frozen=True)
class _ProofPage:
    bound: str
    bound_expr: str
    bound_mathml: Any
    assumptions: list
    steps: tuple
    tree_html: Any
    tree_md: str
    notes: list
    witness: list | None


@dataclass(frozen=True)
class _AuditPage:
    items: list
    count_head: list
    count_row: list


@dataclass(frozen=True)
class _Page:
    """What the templates show, as display strings (numbers through ``fmt``; text between backticks
    is code)."""

    name: str
    lead: str
    ok: bool
    meta: dict
    sandwich_head: list
    sandwich_rows: list
    info: list
    proof_error: str | None
    proof: _ProofPage | None
    audit: _AuditPage | None
    audit_missing: str
    image: str | None
    png_base64: str
    caption: str
    plot_note: str
    provenance: list

    @property
    def meta_json(self) -> str:
        return json.dumps(self.meta, sort_keys=True, ensure_ascii=False)

    @property
    def meta_comment(self) -> Any:
        from markupsafe import Markup

        return Markup(self.meta_json.replace("--", "- -"))  # inside an HTML comment


def _one_line(text: str) -> str:
    """``text`` on one line, whole: line breaks and other control characters become spaces (a note is one
    paragraph of a page; a break could start a forged heading or verdict line in the Markdown)."""
    return "".join(" " if (c < " " or c == "\x7f") else c for c in text)


def _first_line(text: str | None) -> str | None:
    """The first line of an error text, its control characters as escapes (user text: an exception's
    message); None for None."""
    from .pipeline import _printable

    return None if text is None else _printable((text.splitlines() or [""])[0])


def _witness_pair_words(proof: Any, audit: Any) -> str | None:
    """Whether the proof's witness pair is among the pairs the audit certified on, in words."""
    w = None if proof is None else proof.witness
    if w is None or w.data is None or w.neighbor is None:
        return None
    pairs = (audit.extra or {}).get("pairs")
    key = json.dumps([jsonable(w.data), jsonable(w.neighbor)], sort_keys=True)
    if not pairs:
        return None
    keys = [json.dumps([jsonable(d), jsonable(n)], sort_keys=True) for d, n in pairs]
    best = (audit.extra or {}).get("best_pair")
    if key in keys:
        i = keys.index(key)
        tail = (
            ""
            if best is None
            else (
                " — and it is the pair the certified event came from"
                if best == i
                else f"; the certified event came from pair {best}, which the audit found stronger"
            )
        )
        return (
            f"The proof's witness pair is audited: it is pair {i} of the {len(keys)} pairs the union bound "
            f"covers{tail}."
        )
    return (
        f"The proof's witness pair (D = `{jsonable(w.data)}`, D' = `{jsonable(w.neighbor)}`) is not among the "
        f"{len(keys)} audited pairs: it is not a valid neighbouring pair of the mechanism's input spec."
    )


def _proven_at_audit_delta(claim: Any, bound: Any) -> list | None:
    """For a Rényi claim, ``[ε, δ]``: the proven Rényi bound converted to (ε, δ) at the δ the audit holds
    the claim to (:func:`dpharness._run.audit_target`), the units of the certified lower bound beside it;
    None for other claims (their proven bound is already in those units)."""
    from .core import RenyiDP
    from .pipeline import proven_in_audit_units

    if not isinstance(claim, RenyiDP) or bound is None or not math.isfinite(float(bound)):
        return None
    return [proven_in_audit_units(claim, float(bound)), audit_target(claim)[1]]


def _bound_is_proven(meta: dict) -> bool:
    """A derivation's bound is proven when every obligation was discharged: PROVED (the claim holds) or
    REFUTED (the bound holds and exceeds the claim); an UNPROVEN derivation's bound is not."""
    return meta.get("verdict") in ("PROVED", "REFUTED")


def _proven_text(meta: dict, bound: Any) -> str:
    """The proven bound as the pages show it: a Rényi bound with its (ε, δ) conversion at the audit's δ;
    an UNPROVEN derivation's figure marked as derived, not proven (an obligation was not discharged)."""
    at = meta.get("proven_at_audit_delta")
    text = fmt_upper(bound)
    if at is not None:
        text = f"{text} (Rényi; ε ≤ {fmt_upper(at[0])} at δ = {fmt_upper(at[1], 6)}, the audit's units)"
    if bound is not None and not _bound_is_proven(meta):
        text = f"{text} (derived, not proven)"
    return text


def _page(r: Report, out_dir: str = "reports") -> _Page:
    m, c, p, a = r.mechanism, r.check, r.proof, r.audit
    verdict = "ERROR" if p is None else p.verdict.value
    # an UNPROVEN claim leads with what failed, its cause and fix: the gate line's words (Proof.derived)
    derived = c.proof.derived if verdict == "UNPROVEN" and c.proof is not None else None
    if p is not None and r.meta.get("kind") == "library" and verdict == "UNPROVEN":
        verdict = "no proof (a library's mechanism, audited only)"
    audit_word = "audit errored" if a is None else ("audit passed" if a.passed else "audit certified a VIOLATION")
    claimed, delta = audit_target(m.claim)
    conf = "" if a is None else f" ({fmt(a.confidence, 6)} confidence)"
    target = getattr(m, "target", None) if r.meta.get("kind") == "library" else None
    info = [f"Mechanism: `{m.describe()}`", f"Claim: {m.claim.describe()}"]
    if target is None:  # a library target's input is the library's own: its relation is said below
        info.append(f"Input: {m.input_spec.describe()}")
    if m.source:
        info.append(f"Source: {m.source}")
    doc = getattr(m, "description", "") if target is not None else _first_paragraph(type(m).__doc__)
    if doc:
        info.append(f"Description: {doc}")
    if m.buggy:
        info.append(f"Known bug (gallery): {m.bug} True ε as implemented: {fmt(m.true_epsilon)}.")
    if target is not None:  # a library target: what is audited, under which relation, whose claim
        info += [
            f"Library: {target.library} {target.version} (target `{target.name}`)",
            f"Neighbours: {target.relation}",
            f"Claim source: {target.claim_source}",
        ]
    proof_page = None
    if p is not None:
        w = p.witness
        witness = None
        if w is not None:
            witness = [f"D = `{jsonable(w.data)}`", f"D' = `{jsonable(w.neighbor)}`"]
            if w.output is not None:
                witness.append(f"output = `{jsonable(w.output)}`")
            if w.event is not None:
                witness.append(f"event: {w.event.description}")
            if w.loss is not None:
                witness.append(f"privacy loss = {fmt(w.loss)}")
            if w.description:
                witness.append(w.description)
        from markupsafe import Markup

        tree = derivation_tree(c.proof)
        assert c.proof is not None  # the summary of the live proof p, set with it
        proof_page = _ProofPage(
            bound=fmt_upper(p.bound),
            bound_expr=str(p.bound_expr),
            bound_mathml=Markup(to_mathml(p.bound_expr, display="inline")),
            assumptions=list(p.assumptions) or ["(none stated)"],
            steps=c.proof.steps,
            tree_html=Markup(render_tree_html(tree, open_levels=1)),
            tree_md=render_tree_markdown(tree),
            notes=[f"Note: {n}" for n in p.notes],
            witness=witness,
        )
    audit_page = None
    if a is not None:
        items = [
            f"Certified ε lower bound: {fmt_lower(a.epsilon_lower_bound)} at confidence {fmt(a.confidence, 6)} "
            f"against ε = {fmt_upper(a.epsilon)}, δ = {fmt_upper(a.delta, 6)}: "
            + ("passed" if a.passed else "VIOLATION certified"),
            f"Witness: {a.witness_description}",
            f"Method: {a.method}",
            f"Samples: {a.samples} per side; seed {a.seed}; events tested {a.events_tested}; pairs tested {a.pairs_tested}",
        ]
        said = _witness_pair_words(p, a)
        if said:
            items.append(said)
        if a.delta_lower_bound is not None:
            items.append(f"Certified δ lower bound at ε = {fmt_upper(a.epsilon)}: {fmt_lower(a.delta_lower_bound)}")
        said = _tradeoff_words(r)
        if said:
            items.append(said)
        if c.audit_note:
            items.append(f"Note: {c.audit_note}")
        items += [f"Note: {n}" for n in (a.extra or {}).get("notes", ()) if str(n).startswith("not reproducible")]
        hint = float_hint(a, exact_noise=c.exact_noise, proven=c.sandwich.proven, claimed=c.sandwich.claimed)
        if hint:
            items.append(hint[0].upper() + hint[1:])
        items.append(f"Reproduce: `dpharness audit{rerun_flags([m.name])} {m.name}{reproduce_flags(a)}`")
        keys = list(a.counts or {})
        audit_page = _AuditPage(items, keys, [str(jsonable(a.counts[k])) for k in keys])
    caption = ""
    if r.png is not None:
        pair = "" if r.pair is None else f" (D = `{jsonable(r.pair[0])}`, D' = `{jsonable(r.pair[1])}`)"
        cap = [
            f"Top: outputs on D and D'{pair}. Second: privacy-loss distribution in both directions, from "
            + (r.loss_source or "—")
            + "."
        ]
        if r.curve:
            cap.append(_curve_caption(r))
        if r.tradeoff is not None:
            cap.append(
                "Bottom left: the certified trade-off points (type I error α, type II error β of the audit's "
                "events as tests, upper confidence bounds) and their convex envelope, which the true trade-off "
                "curve lies below, against the claim's f_ε,δ"
                + (f" and the mechanism's own curve ({r.tradeoff_reference})" if r.tradeoff_reference else "")
                + "; a point below the claim certifies a violation. Bottom right: the same points in both "
                "orders of their pair as power 1 − β against α on log axes, where tail events show."
            )
        if r.profile is not None:
            at = r.profile.epsilon(float(r.mechanism.claim.delta))
            how = dict(zip([d for d, _, _ in r.profile.points], r.profile.methods))
            cap.append(
                "Last row: the privacy profile ε(δ) the proof accounts (at each δ the smallest ε of its routes: "
                + ", ".join(sorted(set(r.profile.methods) - {"none"}))
                + "), the PLD's certified lower end where "
                + (
                    f"one neighbouring pair attains it ({r.profile.lower_pair})"
                    if r.profile.lower_pair
                    else "one neighbouring pair attains it (none here)"
                )
                + f", and the claim marked; at the claimed δ the profile gives ε <= {fmt(at)}"
                + (f" ({how[float(r.mechanism.claim.delta)]})" if float(r.mechanism.claim.delta) in how else "")
                + "."
            )
        caption = " ".join(cap)
    v = r.meta["versions"]
    return _Page(
        name=m.name,
        lead=f"Verdict: {verdict}{f' ({derived})' if derived else ''} · {audit_word}",
        ok=c.passed,
        meta=r.meta,
        sandwich_head=["claimed ε", "proven bound", f"certified empirical lower bound{conf}"],
        sandwich_rows=[
            [
                fmt_upper(claimed) + (f" (δ = {fmt_upper(delta, 6)})" if delta else ""),
                "—"
                if p is None
                else _proven_text(r.meta, p.bound)
                + (f" (δ ≤ {fmt_upper(p.delta_bound)})" if p.delta_bound is not None and p.delta_bound <= 1 else ""),
                "—" if a is None else fmt_lower(a.epsilon_lower_bound),
            ]
        ],
        info=info,
        proof_error=_first_line(c.proof_error or (c.error if p is None else None)),
        proof=proof_page,
        audit=audit_page,
        audit_missing=f"The auditor raised: {_first_line(c.audit_error or c.error)}",
        image=None if r.png is None else f"{file_stem(m.name)}.png",
        png_base64="" if r.png is None else base64.b64encode(r.png).decode("ascii"),
        caption=caption,
        plot_note=r.plot_note or "No plots.",
        provenance=[
            f"Mechanism source SHA-256: `{r.meta['source_hash']}` ({r.meta['class']})",
            "Tools: " + ", ".join(f"{k} {v[k]}" for k in v),
            f"Regenerate: `dpharness report{rerun_flags([m.name])} --out {out_dir} {m.name}`",
        ],
    )


def _curve_caption(r: Report) -> str:
    """The caption of the bound-against-samples panel: the points, how each was computed, and why the
    curve need not rise (said where it falls)."""
    points = ", ".join(f"{n} samples: {fmt_lower(v)}" for n, v in r.curve)
    sequential = r.audit is not None and "sequential" in (r.audit.extra or {})
    text = (
        f"Third: certified ε lower bound against samples a side ({points}). Each point is a whole audit of "
        "its own, run as the report's audit is (same seed, same pair search"
        + (", certifying in looks as the gate does" if sequential else ", one look at every certification sample")
        + "), at that many samples: its events are chosen on its own training samples and certified on its "
        "own fresh samples, so each bound holds at the stated confidence by itself, but the points are not "
        "nested prefixes of one run and the curve need not rise: a larger audit may choose other events, "
        "and an upper chance fluctuation at a small size is not repeated at a larger one."
    )
    if sequential:
        text += (
            " A sequential audit also stops at the first look where every chosen event is certified within "
            "the claim, so a larger budget may end on fewer certification samples than it was given."
        )
    falls = [
        (a, b)
        for a, b in zip(r.curve, r.curve[1:])
        if math.isfinite(a[1]) and math.isfinite(b[1]) and fmt_lower(b[1]) != fmt_lower(a[1]) and b[1] < a[1]
    ]
    if falls:
        text += " Here it falls: " + "; ".join(
            f"from {fmt_lower(a[1])} at {a[0]} to {fmt_lower(b[1])} at {b[0]} samples" for a, b in falls
        )
        text += (
            " (each is a valid lower bound at its own confidence; their maximum is not one, as it would need "
            "a union bound over the audits: the headline is the last point, the audit at every sample)."
        )
    return text


def _md_escape_text(text: Any) -> str:
    """A line of error text in the Markdown page: ``<`` as ``&lt;``, so a message holding markup
    (``<script>``) is shown, not rendered as the HTML Markdown passes through."""
    return str(text).replace("<", "&lt;")


def _md_escape_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:.2em} .lead{font-size:1.2em;font-weight:600}
.lead.ok{color:#1f7a1f} .lead.bad{color:#b00020}
table{border-collapse:collapse;margin:.6em 0} th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} code{background:#f6f6f6;padding:0 .2em;font-size:.92em;word-break:break-word}
img{max-width:100%} td.no{color:#b00020;font-weight:600}
""".strip()

_ENVIRONMENTS: dict[str, Any] = {}
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _environment(kind: str) -> Any:
    """The jinja2 environment for ``"md"`` or ``"html"`` templates (package data dpharness/templates).
    HTML is autoescaped, every value through ``html.escape`` (``finalize``) so pages keep one entity
    style; ``inline`` renders `backticked` text as <code>. Markdown is not escaped; ``md_cell``
    escapes a table cell."""
    if kind not in _ENVIRONMENTS:
        import jinja2
        from markupsafe import Markup

        def escape(value: Any) -> Any:
            return value if isinstance(value, Markup) else Markup(html.escape(str(value)))

        def inline(text: Any) -> Any:
            # `code` or ``code`` (a run of backticks closes the same run), as in Markdown
            out, pos = [], 0
            text = str(text)
            for match in _CODE_SPAN.finditer(text):
                out.append(html.escape(text[pos : match.start()]))
                out.append(f"<code>{html.escape(match.group(2).strip())}</code>")
                pos = match.end()
            out.append(html.escape(text[pos:]))
            return Markup("".join(out))

        html_kind = kind == "html"
        env = jinja2.Environment(
            loader=jinja2.PackageLoader("dpharness", "templates"),
            autoescape=html_kind,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            undefined=jinja2.StrictUndefined,
            finalize=escape if html_kind else None,
        )
        env.filters["md_cell"] = _md_escape_cell
        env.filters["md_text"] = _md_escape_text
        env.filters["inline"] = inline
        env.globals["css"] = Markup(_CSS + "\n" + TREE_CSS)
        _ENVIRONMENTS[kind] = env
    return _ENVIRONMENTS[kind]


def render_markdown(r: Report, out_dir: str = "reports") -> str:
    """The Markdown page; ``out_dir`` is where it is written (its "Regenerate" command names it)."""
    return _environment("md").get_template("report.md.j2").render(page=_page(r, out_dir))


def render_html(r: Report, out_dir: str = "reports") -> str:
    """The HTML page; ``out_dir`` as for :func:`render_markdown`."""
    return _environment("html").get_template("report.html.j2").render(page=_page(r, out_dir))


def write(report: Report, out_dir: str) -> list[str]:
    """Write NAME.md, NAME.html and NAME.png (when plotted) into ``out_dir``; return the paths."""
    os.makedirs(out_dir, exist_ok=True)
    name = file_stem(report.mechanism.name)
    paths = []
    png_path = os.path.join(out_dir, f"{name}.png")
    if report.png is not None:
        with open(png_path, "wb") as fh:
            fh.write(report.png)
        paths.append(png_path)
    elif os.path.exists(png_path):
        os.remove(png_path)
    for ext, text in (("md", render_markdown(report, out_dir)), ("html", render_html(report, out_dir))):
        path = os.path.join(out_dir, f"{name}.{ext}")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        paths.append(path)
    return paths


@dataclass(frozen=True)
class Written:
    """What :func:`generate` wrote for one mechanism: the files, or the error that stopped it."""

    name: str
    files: tuple[str, ...]
    error: str | None


def generate(
    name: str,
    *,
    out: str,
    samples: int = REPORT_SAMPLES,
    seed: int = 0,
    timeout: float | None = None,
    modules: tuple[str, ...] = (),
) -> Written:
    """Build and write the report of the registered mechanism ``name`` at its defaults (worker entry).
    ``modules``: a project's modules to import first (their ``register`` calls run in this worker).
    ``error``: the first line of a crash or time-out of the check (the page is written and says so)."""
    from ._run import load_modules
    from .registry import get

    try:
        if modules:
            load_modules(modules)
        report = build(get(name)(), samples=samples, seed=seed, timeout=timeout)
        files = write(report, out)
        c = report.check
        return Written(name, tuple(files), _first_line(c.error or c.proof_error or c.audit_error))
    except Exception as exc:
        return Written(name, (), f"{type(exc).__name__}: {exc}")


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

    def kind(meta: dict) -> str:  # pages written before the kind was recorded: built-ins only
        return meta.get("kind") or ("gallery" if meta["buggy"] else "catalog")

    def row(meta):
        audit = {None: "error", True: "passed", False: "VIOLATION"}[meta.get("audit_passed")]
        return file_stem(meta["name"]), [
            meta["name"],
            meta["claim"],
            "no proof (audited only)"
            if kind(meta) == "library" and meta.get("verdict") == "UNPROVEN"
            else meta.get("verdict") or "error",
            _proven_text(meta, meta.get("proven_bound")),
            fmt_lower(meta.get("epsilon_lower_bound")),
            audit,
        ]

    groups = [
        (title, [m for m in metas if kind(m) == key])
        for key, title in (
            ("catalog", "Catalog (correct built-in mechanisms: expected PROVED and audit passed)"),
            ("team", "Team (the project's own mechanisms: expected PROVED, or opted in audit-only and audit passed)"),
            ("library", "Library targets (third-party libraries' mechanisms, audited only: expected audit passed)"),
            ("gallery", "Gallery (known bugs: expected not PROVED or a VIOLATION)"),
        )
    ]
    flags = rerun_flags(meta["name"] for meta in metas)
    context = {
        "where": f"{flags.strip()} --out {os.path.normpath(out_dir)}".strip(),
        "head": head,
        "groups": [(title, [row(meta) for meta in group]) for title, group in groups if group],
    }
    paths = []
    for suffix, fname in (("md", "README.md"), ("html", "index.html")):
        path = os.path.join(out_dir, fname)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(_environment(suffix).get_template(f"index.{suffix}.j2").render(**context))
        paths.append(path)
    return paths
