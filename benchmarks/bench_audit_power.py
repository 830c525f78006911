"""The audit's power at the gate's defaults: for each catalog (ε, δ) mechanism, each team pipeline
(benchmarks/team_pipeline/teamdp), the README-style 250-key group-by, the same with every noise scale
divided by 3, the team's DP-SGD with σ = 0.3, an above-threshold and a median (each also with its noise
divided by 3), and the group-by library target, the certified ε_lb of
``dpharness.check`` (the gate's line: its time budget per mechanism, samples sized from the measured
cost, no pair given) against the proven (or claimed) ε, with the samples it used and its seconds.

Run on an idle machine: ``python benchmarks/bench_audit_power.py [--names NAME ...] [--library PREFIX ...]
[--out benchmarks/results/audit_power.md]`` (``--library all`` adds every library target installed in the
environment, each audited as the gate audits it: its own samples and pair search).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import dpharness
from dpharness import AddRemove, ApproxDP, PureDP, RealBox, RealInterval
from dpharness import parts as dp
from dpharness.pipeline import GATE_SAMPLES, GATE_TIME_BUDGET
from dpharness.registry import catalog

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "team_pipeline"))


def _issue_group_by(div: float = 1.0):
    """The issue's README-style 250-key group-by (threshold 41, scale 3; count and clamped income sum)."""
    return dp.mechanism(
        name="team_per_country_income" if div == 1 else "team_per_country_income_cut",
        records=RealBox(0, 1000, 2),
        relation=AddRemove(),
        steps=dp.group_by(
            by=1,
            keys=list(range(250)),
            select=dp.partition_select(threshold=41, scale=3 / div),
            part=dp.compose(
                dp.count() >> dp.laplace(6 / div),
                dp.column(0) >> dp.clamp(0, 200) >> dp.sum() >> dp.laplace(400 / div),
            ),
        ),
        claim=ApproxDP(1, 1e-6),
    )


def _sparse_vector(div: float = 1.0):
    """Above threshold over three nested counts (records above 20, 50, 80 in [0, 100]) at threshold 10,
    noise scales 2 and 4 (monotone queries: ε = 0.75) claiming 1; ``div`` divides both scales."""
    import numpy as np

    queries = [
        dp.query(lambda d, t=t: float(np.sum(np.asarray(d).reshape(-1) > t)), sensitivity=1, increasing=True)
        for t in (20, 50, 80)
    ]
    return dp.mechanism(
        name="sparse_vector" if div == 1 else "sparse_vector_cut",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.above_threshold(10, queries=queries, scale=2 / div, query_scale=4 / div),
        claim=PureDP(1),
    )


def _median(div: float = 1.0):
    """The median over candidates 0, 5, ..., 100 at scale 2 (ε = 1/2) claiming 1; ``div`` divides the scale."""
    return dp.mechanism(
        name="median_of_21" if div == 1 else "median_of_21_cut",
        records=RealInterval(0, 100),
        relation=AddRemove(),
        steps=dp.clamp(0, 100) >> dp.quantile(0.5, candidates=range(0, 101, 5), scale=2 / div),
        claim=PureDP(1),
    )


def _dpsgd_cut():
    """The team's 1 000-round DP-SGD with σ = 0.3 instead of 1, claiming (1.8291, 1e-5)."""
    import teamdp  # noqa: PLC0415 - the team's package, found beside this script

    return teamdp.dpsgd_of(0.3, ApproxDP(1.8291, 1e-5), name="dpsgd_sigma_0_3")


def _mechanisms(names: list[str] | None) -> dict:
    out = {}
    for name, cls in catalog(gallery=None).items():
        m = cls() if isinstance(cls, type) else cls
        if not isinstance(m.claim, PureDP):
            out[name] = m
    import teamdp  # noqa: PLC0415 - the team's package, found beside this script

    out["teamdp income_by_region"] = teamdp.regions
    out["teamdp median_and_count"] = teamdp.median_and_count
    out["teamdp dpsgd"] = teamdp.dpsgd
    out["group-by (issue's, 250 keys)"] = _issue_group_by()
    out["group-by, every scale / 3"] = _issue_group_by(3)
    out["teamdp dpsgd, σ = 0.3"] = _dpsgd_cut()
    out["above-threshold, 3 nested counts"] = _sparse_vector()
    out["above-threshold, noise / 3"] = _sparse_vector(3)
    out["median of 21 candidates"] = _median()
    out["median, scale / 3"] = _median(3)
    out.update(_library_targets(["pipeline-dp:group-count"], exact=True))
    return {k: v for k, v in out.items() if not names or k in names}


def _library_targets(prefixes: list[str], exact: bool = False) -> dict:
    """The library targets named by ``prefixes`` (every target when one is "all"; the names themselves when
    ``exact``) whose library is installed here, as mechanisms the gate checks at its defaults (a target's
    own samples and pair search); those not installed are skipped with a line on the standard error."""
    from dpharness.auditors.libraries import MissingExtra, get_target, list_targets

    out = {}
    for info in list_targets():
        wanted = info.name in prefixes if exact else any(p == "all" or info.name.startswith(p) for p in prefixes)
        if not wanted:
            continue
        try:
            out[info.name] = get_target(info.name).mechanism()
        except (MissingExtra, ImportError) as exc:
            print(f"{info.name}: not installed here ({exc})", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--names", nargs="*", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--library",
        nargs="*",
        default=[],
        metavar="PREFIX",
        help="also every installed library target whose name starts with a PREFIX ('all': every one)",
    )
    args = ap.parse_args(argv)
    load = os.getloadavg()
    rows = []
    mechanisms = _mechanisms(args.names)
    if args.library:
        mechanisms.update(_library_targets(args.library))
    for name, m in mechanisms.items():
        t0 = time.perf_counter()
        c = dpharness.check(m)
        seconds = time.perf_counter() - t0
        proof = c.proof
        proven = proof.bound if proof is not None and proof.verdict == "PROVED" else None
        r = c.audit
        claimed = getattr(m.claim, "epsilon", None)
        if r is None:
            rows.append(
                f"| {name} | {proof.verdict if proof else '—'} | — | {claimed} | no audit: {c.audit_error or c.error} | | | {seconds:.0f} |"
            )
        else:
            verdict = "pass" if r.passed else "VIOLATION"
            if c.audit_partial:
                verdict += " (PARTIAL)"
            rows.append(
                f"| {name} | {proof.verdict if proof else '—'} | {'—' if proven is None else f'{float(proven):.4g}'} | "
                f"{claimed:g} | {r.epsilon_lower_bound:.4f} | {verdict} | {r.samples:,} | {seconds:.0f} |"
            )
        print(rows[-1], flush=True)
    text = "\n".join(
        [
            "# The audit's power at the gate's defaults",
            "",
            f"Command: `python benchmarks/bench_audit_power.py`; {datetime.date.today()}; {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}; load average {load[0]:.2f} {load[1]:.2f} "
            f"{load[2]:.2f} at the start; `dpharness.check(m)` at its defaults (seed 0, time budget "
            f"{GATE_TIME_BUDGET:g} s a mechanism, samples sized from the measured cost up to {GATE_SAMPLES:,}).",
            "",
            "| mechanism | proof | proven ε | claimed ε | audit ε_lb | audit | samples a side | seconds |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
