"""The library audit suite: audit every installed third-party library target with its default pair and claim.

For each target of :func:`dpharness.auditors.libraries.list_targets` whose library is installed,
``get_target(name).audit(samples=N, seed=0)`` (95% confidence) and one Markdown row: library,
version, mechanism, pair, relation, claim (ε, δ), certified lower bound, verdict (pass /
VIOLATION), samples a side, seconds. Targets whose library is missing are listed as not installed.

Slow targets (one library call, or one DP-SGD step, per sample) get fewer samples: the suite times
200 samples first and caps the audit at ``--budget`` seconds (estimated), at least ``--min-samples``
(10^4 by default); the table states the samples actually used.

Model and statistics targets (``target.inputs`` set) search their pairs over the declared records:
the pair column then shows the pair that certified the bound (or the first audited when none did)
and the candidate set the search screened (groups, sizes, relation).

Run: ``python benchmarks/bench_libraries.py [--samples N] [--budget S] [--min-samples M]
[--only PREFIX ...] [--out benchmarks/results/libraries.md] [--append]``.
"""

from __future__ import annotations

import argparse
import os
import re
import platform
import time
import warnings

import numpy as np

from dpharness.auditors.libraries import MissingExtra, get_target, list_targets


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _cell(text: str) -> str:
    """Text for a Markdown table cell (a bare ``|`` would end the cell)."""
    return str(text).replace("|", "\\|")


def _pair_cell(target, res) -> str:
    """The audited pair; for a searched target the pair that certified the bound (else the first
    audited) and the candidate set the search screened, read from the result's method sentence."""
    if target.inputs is None:
        return f"{_short(target.data)} vs {_short(target.neighbor)}"
    pairs = res.extra.get("pairs") or [(target.data, target.neighbor)]
    best = res.extra.get("best_pair")
    a, b = pairs[best if best is not None else 0]
    rows = lambda x: _short(getattr(x, "tolist", lambda: x)())  # noqa: E731
    found = re.search(r"screened (\d+) of (\d+) candidate pairs \((.*?)\) on \d+ samples", res.method)
    searched = (
        f"searched: {found.group(1)} of {found.group(2)} candidates ({found.group(3)}), {len(pairs)} audited"
        if found
        else "searched"
    )
    return f"{rows(a)} vs {rows(b)}; {searched}"


def _per_sample_seconds(target) -> float:
    rng = np.random.default_rng(12345)
    t0 = time.perf_counter()
    if target.vectorized:
        target.fn(target.data, 200, rng)
    else:
        for _ in range(200):
            target.fn(target.data)
    return (time.perf_counter() - t0) / 200


def run(
    samples: int, budget: float, only: list[str], min_samples: int = 10_000
) -> tuple[list[str], list[str], list[str]]:
    rows, missing, notes = [], [], []
    for info in list_targets():
        if only and not any(info.name.startswith(p) for p in only):
            continue
        try:
            target = get_target(info.name)
        except MissingExtra as exc:
            missing.append(f"{info.name}: {exc}")
            continue
        per = _per_sample_seconds(target)
        # two sides, training included; parallel certification is not counted (an upper estimate)
        n = samples if 2 * samples * per <= budget else max(min_samples, int(budget / (2 * per)))
        n = min(n, samples)
        print(f"{info.name}: {n} samples a side (about {per * 1e6:.1f} µs a sample)", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = target.audit(samples=n, seed=0)
        verdict = "pass" if res.passed else "**VIOLATION**"
        lb = "inf" if res.epsilon_lower_bound == float("inf") else f"{res.epsilon_lower_bound:.4f}"
        rows.append(
            f"| {target.library} | {target.version} | {info.name.split(':', 1)[1]} | "
            f"{_cell(_pair_cell(target, res))} | {_cell(target.relation)} | "
            f"({target.epsilon:.6g}, {target.delta:g}) | {lb} | {verdict} | {n:,} | {res.elapsed:.1f} |"
        )
        if not res.passed or res.epsilon_lower_bound > 0:
            notes.append(f"* {info.name}: {res.witness_description[:400]}")
        print(rows[-1], flush=True)
    return rows, missing, notes


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000, help="samples a side per target (default 10^6)")
    ap.add_argument("--budget", type=float, default=300.0, help="estimated seconds per target before capping samples")
    ap.add_argument("--min-samples", type=int, default=10_000, help="samples a side at least when capping by --budget")
    ap.add_argument("--only", nargs="*", default=[], help="target name prefixes to run (default: all)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "libraries.md"))
    ap.add_argument("--append", action="store_true", help="append a section to --out instead of rewriting it")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows, missing, notes = run(args.samples, args.budget, args.only, args.min_samples)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    head = (
        []
        if args.append
        else [
            "# Library audit suite",
            "",
            "Generated by `python benchmarks/bench_libraries.py` (seed 0, 95% confidence, default pair and claim of each "
            "target). Claim: read from the library (see each target's `claim_source`); zCDP claims converted at the "
            "target's default δ by `zcdp_to_approx`. Certified lower bound: `dpharness.auditors.audit` (floating-point "
            "structure events included). VIOLATION: the bound exceeds the claimed ε at the claimed δ.",
            "",
        ]
    )
    body = [
        f"Run: Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{load:.2f} at the end, {time.perf_counter() - t0:.0f} s in all; --samples {args.samples:,}, --budget "
        f"{args.budget:g} s, --min-samples {args.min_samples:,}{', --only ' + ' '.join(args.only) if args.only else ''}.",
        "",
        "| library | version | mechanism | pair (for searched targets: the pair that certified, and the candidates screened) | relation | claim (ε, δ) | certified ε lower bound | verdict | samples a side | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if notes:
        body += ["Witnesses:", "", *notes, ""]
    if missing:
        body += ["Not installed in this run:", "", *[f"* {m}" for m in missing], ""]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "a" if args.append else "w", encoding="utf-8") as fh:
        fh.write("\n".join(head + body) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
