"""The audit's power: for each catalog mechanism, each team pipeline (benchmarks/team_pipeline/teamdp and
the issue-36 group-by) and each mechanism with its noise cut, the certified ε_lb of ``dpharness.audit`` at
its defaults (no pair given) against the proven (or claimed) ε, with the samples it used, the pair it
certified on (aimed by the structure or searched) and its seconds.

Run on an idle machine: ``python benchmarks/bench_audit_power.py [--names NAME ...] [--samples N]
[--workers 2] [--out benchmarks/results/audit_power.md]``. Run it on main for the "before" column and on
this branch for the "after" one (the script reads no result of another run).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

import dpharness
from dpharness import AddRemove, ApproxDP, RealBox
from dpharness import parts as dp
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


def _mechanisms(names: list[str] | None) -> dict:
    out = {}
    for name, cls in catalog(gallery=None).items():
        out[name] = cls() if isinstance(cls, type) else cls
    out["team_per_country_income"] = _issue_group_by()
    out["team_per_country_income_scales_div_3"] = _issue_group_by(3)
    try:
        import teamdp  # noqa: PLC0415 - the team's package, found beside this script

        out["teamdp_income_by_region"] = teamdp.regions
        out["teamdp_median_and_count"] = teamdp.median_and_count
        out["teamdp_dpsgd"] = teamdp.dpsgd
    except ImportError:
        pass
    return {k: v for k, v in out.items() if not names or k in names}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--names", nargs="*", default=None)
    ap.add_argument("--samples", type=float, default=1e6)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    load = os.getloadavg()
    rows = []
    for name, m in _mechanisms(args.names).items():
        proof = dpharness.prove(m)
        proven = proof.bound if proof.verdict.name == "PROVED" else None
        t0 = time.perf_counter()
        r = dpharness.audit(m, seed=0, samples=int(args.samples), workers=args.workers)
        seconds = time.perf_counter() - t0
        pairs = r.extra.get("pairs") or []
        best = r.extra.get("best_pair")
        shape = "—" if best is None or not pairs else f"{np.shape(pairs[best][0])} vs {np.shape(pairs[best][1])}"
        rows.append(
            f"| {name} | {proof.verdict.name} | {'—' if proven is None else f'{float(proven):.4g}'} | "
            f"{float(m.claim.epsilon) if hasattr(m.claim, 'epsilon') else '—'} | {r.epsilon_lower_bound:.4f} | "
            f"{'pass' if r.passed else 'VIOLATION'} | {r.samples:,} | {shape} | {seconds:.1f} |"
        )
        print(rows[-1], flush=True)
    text = "\n".join(
        [
            "# The audit's power at its defaults",
            "",
            f"Command: `python benchmarks/bench_audit_power.py --samples {args.samples:g} --workers {args.workers}`; "
            f"{datetime.date.today()}; {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; seed 0.",
            "",
            "| mechanism | proof | proven ε | claimed ε | audit ε_lb | audit | samples a side | certified pair "
            "(shapes) | seconds |",
            "|---|---|---|---|---|---|---|---|---|",
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
