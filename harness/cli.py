"""The ``dpharness`` command line (console script ``dpharness = dpharness.cli:main``).

Commands::

    dpharness list                                     one line per registered mechanism
    dpharness prove NAME [--set KEY=VALUE]... [--claim-epsilon E] [--claim-delta D]
    dpharness audit NAME [same options] [--samples N] [--seed S] [--ideal-numerics]
    dpharness gate [--module PKG]... [--gallery] [--junit FILE] [--report DIR] [--samples N] [--jobs J]
    dpharness report [--out DIR] [NAME...]
    dpharness epsilon NAME [--delta D] [--precision P]  the smallest ε proven at δ = D (default: the claim's δ)
    dpharness delta NAME [--epsilon E] [--precision P]  the smallest δ proven at ε = E (default: the claim's ε)

``--json`` (before or after the command) prints machine-readable output. ``--set`` overrides a
noise parameter and keeps the claim: ``dpharness prove laplace --set scale=0.9`` checks the
ε = 1 claim against the smaller scale (and fails), it never re-calibrates.

Exit codes: 0 the claim holds / the gate passed; 1 a violation, a claim not proved, or a gate
failure (a check a time limit stopped is TIMEOUT, "not decided": not a finding and not cached, but
not a pass either, so the gate exits 1 until a run decides it); 2 a usage or input error (the message says what to fix); 130 interrupted (Ctrl-C: the gate
stops its workers, keeps the checks that had finished in its cache and says how many there were).

Thin and cheap to import: everything heavy is imported inside the command that needs it."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from typing import Any, Sequence

from .pipeline import DEFAULT_SEED, GATE_SAMPLES, GATE_TIME_BUDGET  # the gate's defaults, which check shares

__all__ = ["main", "GATE_SAMPLES", "AUDIT_SAMPLES", "DEFAULT_SEED"]

GATE_TIMEOUT = 900.0  # seconds per phase (proof, audit) and mechanism: a limit for hangs by the clock, set for a
# loaded 2-core CI runner: the default time budget (120 s, counted as on an idle machine) takes 4-5 times longer
# by the clock beside 6 busy processes, and an audit is cut (PARTIAL) where its draws' estimate leaves less than
# a wide margin of the limit (the slowest built-in check takes ~36 s on 2 idle cores)
AUDIT_SAMPLES = 1_000_000  # per side for `dpharness audit`

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: exit 2 with the usage line
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive_int(text: str) -> int:
    """A positive whole number, also in scientific notation when it is exactly one (``1e12``, ``2.5e6``)."""
    from decimal import Decimal, InvalidOperation

    try:
        value = int(text)
    except ValueError:
        try:
            exact = Decimal(text.strip())
        except InvalidOperation:
            exact = None
        if exact is None or not exact.is_finite() or exact != exact.to_integral_value():
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer; pass a positive whole number (1000000 or 1e6)"
            ) from None
        value = int(exact)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


def _samples(text: str) -> int:
    """A number of samples a side: :func:`_positive_int`, within the audit's range (20 to 2**50), refused here
    for every command (each audit would refuse it: a gate of errors, not a usage error)."""
    from ._validate import MAX_SAMPLES, MIN_SAMPLES

    value = _positive_int(text)
    if value < MIN_SAMPLES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is fewer than {MIN_SAMPLES} samples a side, the fewest an audit certifies on; pass more"
        )
    if value > MAX_SAMPLES:
        raise argparse.ArgumentTypeError(f"{text!r} is more than {MAX_SAMPLES} (2**50) samples a side; pass fewer")
    return value


def _processes(text: str) -> int:
    """A number of local worker processes: :func:`_positive_int`, at most four per CPU (at least 8)."""
    from .auditors._runner import max_workers

    value = _positive_int(text)
    if value > max_workers():
        raise argparse.ArgumentTypeError(
            f"{text!r} is more than {max_workers()} worker processes (four per CPU here); pass fewer"
        )
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer seed") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _number(text: str):
    from ._run import parse_number
    from .errors import ParameterError

    try:
        return parse_number("value", text)
    except ParameterError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; pass e.g. 1, 1/2 or 0.5") from None


def _probability_below_one(text: str) -> float:
    """``--delta``: a number in [0, 1) (0: pure ε-DP)."""
    value = float(_number(text))
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must lie in [0, 1) (0 asks for pure ε-DP); pass e.g. 1e-5")
    return value


def _nonnegative(text: str) -> float:
    """``--epsilon``: a finite number >= 0."""
    value = float(_number(text))
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0; pass e.g. 2")
    return value


def _precision(text: str) -> float:
    value = float(_number(text))
    if not 1e-12 <= value <= 0.1:
        raise argparse.ArgumentTypeError(f"{text!r} must lie in [1e-12, 0.1] (relative); pass e.g. 1e-4")
    return value


def _build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)  # a parent of _Parser subparsers
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print machine-readable JSON instead of text"
    )
    parser = _Parser(
        prog="dpharness",
        parents=[common],
        description="Prove and audit differential-privacy mechanisms.",
        epilog="exit codes: 0 the claim holds / the gate passed; 1 a violation, a claim not proved "
        "or a gate failure; 2 a usage or input error; 130 interrupted (Ctrl-C). `--set` keeps the claim.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    modules = _Parser(add_help=False)  # a parent of _Parser subparsers
    modules.add_argument(
        "--module",
        dest="modules",
        action="append",
        default=[],
        metavar="PKG",
        help="import PKG first so its registered mechanisms are available (repeatable)",
    )
    sub.add_parser("list", parents=[common, modules], help="list registered mechanisms (name, claim, relation, buggy)")

    mech = _Parser(add_help=False)  # a parent of _Parser subparsers
    mech.add_argument("name", metavar="NAME", help="registered mechanism name (see `dpharness list`)")
    mech.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a noise parameter (int, fraction like 1/2, or float); the claim is kept",
    )
    mech.add_argument("--claim-epsilon", type=_number, default=None, metavar="E", help="claim ε = E instead")
    mech.add_argument("--claim-delta", type=_number, default=None, metavar="D", help="claim δ = D instead")

    sub.add_parser(
        "prove", parents=[common, mech, modules], help="derive the worst-case privacy loss and judge the claim"
    )
    audit = sub.add_parser("audit", parents=[common, mech, modules], help="certified empirical lower bound on ε")
    audit.add_argument(
        "--samples",
        type=_samples,
        default=None,
        help=f"samples per side (default {AUDIT_SAMPLES}, or the samples= a --module registered for this name)",
    )
    audit.add_argument("--seed", type=_seed, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    audit.add_argument(
        "--ideal-numerics",
        action="store_true",
        help="ignore floating-point structure (audit the ideal-reals mechanism)",
    )
    audit.add_argument(
        "--sequential",
        action="store_true",
        help="certify in looks and stop once the verdict is certain (as the gate does): faster on clear "
        "violations and loose claims, a slightly lower bound otherwise",
    )
    audit.add_argument(
        "--time-budget",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="size the samples from the mechanism's measured pace so the audit fits SECONDS, counted as on an "
        "idle machine (--samples then caps them); the result states the samples used",
    )
    audit.add_argument(
        "--search-samples",
        type=_positive_int,
        default=None,
        metavar="N",
        help="samples in all for the pair search (default: the training samples a side, at most 10^5; under "
        "--time-budget at most what a quarter of it fits); a budgeted audit's reproduce line states it",
    )
    audit.add_argument(
        "--pair",
        nargs=2,
        default=None,
        metavar=("DATA", "NEIGHBOR"),
        help="audit this neighbouring pair (two JSON values, e.g. '[[1.0, 2.0]]' '[]') instead of searching for "
        "one; a gate's audit whose search ran out of time states the pair it audited this way",
    )
    audit.add_argument(
        "--every-round",
        action="store_true",
        help="audit every round of an iterated or repeated mechanism at --samples (default: its first rounds, "
        "PARTIAL; --time-budget audits every round it fits)",
    )
    audit.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run sampling and counting on a dask.distributed cluster: tcp://HOST:PORT, or `local` "
        "to start a LocalCluster (needs the dask extra: pip install -e '.[dask]' in the dpharness checkout)",
    )
    audit.add_argument(
        "--workers",
        type=_processes,
        default=None,
        metavar="N",
        help="worker processes (local pool or LocalCluster; default: the CPU count)",
    )
    named = _Parser(add_help=False)  # a parent of _Parser subparsers
    named.add_argument("name", metavar="NAME", help="registered mechanism name (see `dpharness list`)")
    named.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a noise parameter (int, fraction like 1/2, or float)",
    )
    named.add_argument(
        "--precision",
        type=_precision,
        default=1e-4,
        metavar="P",
        help="relative: the smallest PROVED value lies within [value·(1 − P), value] (default 1e-4)",
    )
    named.set_defaults(claim_epsilon=None, claim_delta=None)
    accountant = sub.add_parser(
        "epsilon",
        parents=[common, named, modules],
        help="the smallest ε proven at a δ, with its certified bracket and the route that proved it",
    )
    accountant.add_argument(
        "--delta",
        type=_probability_below_one,
        default=None,
        metavar="D",
        help="δ in [0, 1) (0: pure ε-DP; default: the claim's δ)",
    )
    accountant = sub.add_parser(
        "delta",
        parents=[common, named, modules],
        help="the smallest δ proven at an ε, with its certified bracket and the route that proved it",
    )
    accountant.add_argument(
        "--epsilon", type=_nonnegative, default=None, metavar="E", help="ε >= 0 (default: the claim's ε)"
    )
    sub.add_parser(
        "targets",
        parents=[common],
        help="list the third-party library targets `dpharness audit LIBRARY:MECHANISM` accepts",
    )

    gate = sub.add_parser("gate", parents=[common], help="prove and audit every registered mechanism (CI)")
    gate.add_argument(
        "names", nargs="*", metavar="NAME", help="gate only these mechanisms (default: every registered one)"
    )
    gate.add_argument(
        "--no-cache",
        action="store_true",
        help="prove and audit every mechanism again, ignoring results cached for unchanged inputs",
    )
    gate.add_argument(
        "--cache-dir",
        default=os.environ.get("DPHARNESS_CACHE_DIR", ".dpharness-cache"),
        metavar="DIR",
        help="where results are cached, keyed by everything that decides them "
        "(default $DPHARNESS_CACHE_DIR or .dpharness-cache)",
    )
    gate.add_argument(
        "--own", action="store_true", help="gate only the mechanisms the --module packages register (not the built-ins)"
    )
    gate.add_argument(
        "--module",
        dest="modules",
        action="append",
        default=[],
        metavar="PKG",
        help="import PKG so its @register mechanisms are gated too (repeatable)",
    )
    gate.add_argument(
        "--target",
        dest="targets",
        action="append",
        default=[],
        metavar="LIBRARY:MECHANISM",
        help="gate a third-party library's mechanism at its own claim, audited only (repeatable; see "
        "`dpharness targets`); with --target the built-ins are gated only if named",
    )
    gate.add_argument(
        "--gallery", action="store_true", help="gate the gallery of known bugs instead: fail if any bug slips through"
    )
    gate.add_argument("--junit", metavar="FILE", default=None, help="write a JUnit XML report to FILE")
    gate.add_argument("--report", metavar="DIR", default=None, help="write Markdown/HTML reports to DIR")
    gate.add_argument(
        "--samples", type=_samples, default=GATE_SAMPLES, help=f"samples per side (default {GATE_SAMPLES})"
    )
    gate.add_argument("--seed", type=_seed, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    gate.add_argument(
        "--jobs",
        type=_processes,
        default=None,
        help="worker processes (default: number of CPUs; 1 runs in this process)",
    )
    gate.add_argument(
        "--time-budget",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help=f"seconds for each mechanism's audit, at most --timeout (default {GATE_TIME_BUDGET:g}, or --timeout "
        "when that is less), counted as on an idle machine (a loaded one runs the same audit, longer by the "
        "clock, within --timeout): its samples are sized from the measured cost of a sample, --samples (or a registered samples=) caps them, every round of an iterated "
        "mechanism is audited when its minimum certification fits; each line states the samples used",
    )
    gate.add_argument(
        "--timeout",
        type=_seconds,
        default=GATE_TIMEOUT,
        help=f"seconds allowed per phase (proof, audit) per mechanism (default {GATE_TIMEOUT:g}); "
        "with --jobs > 1 a worker still running after its phases' time plus a grace is killed",
    )

    report = sub.add_parser("report", parents=[common, modules], help="write proof/audit reports (Markdown + HTML)")
    report.add_argument("names", nargs="*", metavar="NAME", help="mechanisms (default: every built-in)")
    report.add_argument(
        "--own",
        action="store_true",
        help="report only the mechanisms the --module packages register (not the built-ins)",
    )
    report.add_argument("--out", default="reports", metavar="DIR", help="output directory (default reports)")
    report.add_argument("--samples", type=_samples, default=None, help="samples per side for the audit")
    report.add_argument("--seed", type=_seed, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    report.add_argument("--jobs", type=_processes, default=None, help="worker processes (default: CPUs)")
    report.add_argument(
        "--timeout",
        type=_seconds,
        default=2 * GATE_TIMEOUT,
        help=f"seconds allowed per phase per mechanism (default {2 * GATE_TIMEOUT:g})",
    )
    return parser


# --------------------------------------------------------------------------- output helpers


def _emit_json(payload: Any) -> None:
    from ._json import jsonable

    json.dump(jsonable(payload), sys.stdout, indent=2, sort_keys=False, ensure_ascii=False)
    sys.stdout.write("\n")


def _shorten_numbers(message: str) -> str:
    """``message`` with every run of more than 30 digits (a huge Fraction's numerator, say) cut to its
    first digits and its length: ``6400912345…(966 digits)``."""
    import re

    return re.sub(r"\d{31,}", lambda m: f"{m.group()[:10]}…({len(m.group())} digits)", message)


def _err(message: str) -> None:
    sys.stderr.write(f"dpharness: error: {_shorten_numbers(message)}\n")


# --------------------------------------------------------------------------- commands


def _cmd_list(args) -> int:
    from .registry import catalog

    rows = []
    from .registry import audit_only

    for name, cls in catalog(gallery=None).items():
        row = {"name": name, "buggy": bool(cls.buggy), "source": cls.source, "audit_only": audit_only(name)}
        try:
            m = cls()
            row.update(
                claim=m.claim.describe(),
                relation=m.input_spec.relation.describe(),
                input=m.input_spec.shape,
                parameters=m.noise_parameters(),
            )
        except Exception as exc:  # a broken registration must not hide the others
            row.update(claim="?", relation="?", error=f"{type(exc).__name__}: {exc}")
        if cls.buggy:
            row.update(bug=cls.bug, true_epsilon=cls.true_epsilon)
        rows.append(row)
    if args.json:
        _emit_json(rows)
        return EXIT_OK
    if not rows:
        print("no mechanisms registered")
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    cwidth = max(len(r["claim"]) for r in rows)
    for r in rows:
        tail = "  buggy" if r["buggy"] else ""
        if r["audit_only"]:
            tail += "  audit-only (no proof asked for)"
        if "error" in r:
            tail += f"  (cannot instantiate: {r['error']})"
        print(f"{r['name']:<{width}}  {r['claim']:<{cwidth}}  {r['relation']}{tail}")
    return EXIT_OK


def _mechanism(args):
    """The mechanism ``args`` name, with its ``--set`` overrides; an override its constructor accepts but
    its sampler refuses (a ParameterError on one draw of the example pair) is a usage error here, before
    any proof or audit runs."""
    from ._run import build_mechanism
    from .errors import ParameterError

    mechanism = build_mechanism(args.name, args.sets, args.claim_epsilon, args.claim_delta)
    if args.sets:
        import numpy as np

        try:
            data, _ = mechanism.example_pair()
            mechanism.sample(data, 1, np.random.default_rng(0))
        except ParameterError as exc:
            sets = " ".join(f"--set {item}" for item in args.sets)
            raise ParameterError(f"{sets}: {args.name} accepts it, but its sampler refuses it: {exc}") from None
        except Exception:  # noqa: BLE001 - any other failure is the run's to report
            pass
    return mechanism


def _print_proof(proof) -> None:
    m = proof.mechanism
    print(m.describe())
    bound = proof.headline  # rounded outward: the printed bound is itself a bound; never a δ above 1
    if proof.bound is not None and math.isfinite(float(proof.bound)) and proof.derived is None:
        bound += f"   ({proof.bound_expr})"
    print(f"verdict: {proof.verdict.value}   {bound}")
    if proof.assumptions:
        print("assumptions:")
        for a in proof.assumptions:
            print(f"  - {a}")
    if proof.steps:
        print("derivation:")
        for i, s in enumerate(proof.steps, 1):
            mark = "✓" if s.discharged else "✗"
            print(f"  {i:>2}. [{mark} {s.checker}] {s.statement}  ({s.justification})")
            if s.detail and not s.discharged:
                print(f"      {_failed_obligation(s.statement, s.detail)}")
    if proof.witness is not None:
        from .pipeline import describe_witness

        print(f"witness: {describe_witness(proof.witness)}")
    for note in proof.notes:
        print(f"note: {note}")


def _failed_obligation(statement: str, detail: str) -> str:
    """What a not-discharged obligation's checker found, in words: the kernel's ``sign of G is S``
    (G = right side − left side of the inequality) becomes e.g. ``derived ε bound exceeds the claim by 1/18``."""
    import re

    m = re.fullmatch(r"sign of (.+) is (-1|0|1|None)(?: \(NOT DISCHARGED\))?", detail.strip(), flags=re.S)
    if m is None:
        return detail
    gap, sign = m.groups()
    claim = re.fullmatch(r"derived (\S+) bound <= claimed \1", statement.strip())
    if sign == "None":
        return f"NOT DISCHARGED: the sign of {gap} could not be decided (undecided is a failure)"
    if sign == "-1":
        try:
            import sympy

            excess = str(-sympy.sympify(gap))
        except Exception:  # noqa: BLE001 - keep the kernel's text
            excess = f"-({gap})"
        if claim:
            return f"NOT DISCHARGED: derived {claim.group(1)} bound exceeds the claim by {excess}"
        return f"NOT DISCHARGED: the left side exceeds the right side by {excess}"
    return f"NOT DISCHARGED: the two sides differ by {gap} (sign {sign}), which the inequality does not allow"


def _cmd_prove(args) -> int:
    mechanism = _mechanism(args)
    from .pipeline import run_proof

    proof = run_proof(mechanism)
    if args.json:
        _emit_json(proof.to_dict())
    else:
        _print_proof(proof)
    return EXIT_OK if proof.verdict.value == "PROVED" else EXIT_FAIL


def _cmd_accountant(args) -> int:
    """``dpharness epsilon NAME --delta D`` / ``dpharness delta NAME --epsilon E``: the smallest proven
    value, its certified bracket and the route that proved it (:func:`dpharness.epsilon`)."""
    import dpharness

    mechanism = _mechanism(args)
    if args.command == "epsilon":
        answer = dpharness.epsilon(mechanism, delta=args.delta, precision=args.precision)
    else:
        answer = dpharness.delta(mechanism, epsilon=args.epsilon, precision=args.precision)
    if args.json:
        _emit_json(answer.to_dict())
        return EXIT_OK
    from ._display import fmt_lower, fmt_upper

    name, given = ("ε", "δ") if answer.quantity == "epsilon" else ("δ", "ε")
    digits = answer.digits
    at = f"{given} = {fmt_upper(answer.at, 6) if given == 'δ' else fmt_lower(answer.at, 6)}"
    value = fmt_upper(answer.value, digits)
    print(mechanism.describe())
    print(f"{name}({at}) ≤ {value}   proven by {answer.route}")
    if answer.lower is not None:
        print(f"certified bracket: {name}({at}) ∈ [{fmt_lower(answer.lower, digits)}, {value}]")
    else:
        print(f"certified bracket: {name}({at}) ∈ [—, {value}]   (the proof certifies no lower end)")
    if answer.precision == 0:
        print(f"precision: exact (no smaller {name} is proven); {answer.proofs} proofs, {answer.seconds:.2g} s")
    else:
        print(
            f"precision: every claim below {name} = {fmt_lower(answer.value * (1 - answer.precision), digits)} is not "
            f"PROVED ({answer.precision:.1e} relative); {answer.proofs} proofs, {answer.seconds:.2g} s"
        )
    print(f"exact value: {answer.value!r}")
    return EXIT_OK


def _print_audit(mechanism, result, args=None, proof=None) -> None:
    from ._run import audit_target, exact_noise

    print(mechanism.describe())
    bound = None if proof is None or proof.bound is None else float(proof.bound)
    _print_audit_result(
        result,
        mechanism.name,
        args,
        hint_about=dict(exact_noise=exact_noise(mechanism), proven=bound, claimed=audit_target(mechanism.claim)[0]),
    )


def _result_flags(args) -> str:
    """The options of ``args`` that change an audit's result (``--set``, the claim, ``--ideal-numerics``, ``--pair``),
    as they are to be pasted into the reproduce command; ``--samples``/``--seed``/``--sequential`` are
    written from the result itself. ``--scheduler``/``--workers`` do not change it (same seed, same result)."""
    import shlex

    if args is None:
        return ""
    flags = "".join(f" --set {shlex.quote(item)}" for item in getattr(args, "sets", None) or ())
    for option, value in (
        ("--claim-epsilon", getattr(args, "claim_epsilon", None)),
        ("--claim-delta", getattr(args, "claim_delta", None)),
    ):
        if value is not None:
            flags += f" {option} {value}"
    if getattr(args, "ideal_numerics", False):
        flags += " --ideal-numerics"
    if getattr(args, "pair", None):
        flags += " --pair " + " ".join(shlex.quote(text) for text in args.pair)
    return flags


def _print_audit_result(result, name: str, args=None, hint_about: dict | None = None) -> None:
    """The audit's verdict, witness, the float hint, counts, method and how to reproduce it
    (``dpharness audit NAME``, with the ``--module`` that registered it and every option of ``args``
    that changes the result)."""
    from ._display import fmt_lower, fmt_upper
    from ._run import float_hint, fmt, reproduce_flags
    from .registry import rerun_flags

    status = "passed (no violation certified)" if result.passed else "VIOLATION certified"
    delta = f", δ = {fmt_upper(result.delta, 6)}" if result.delta else ""
    print(  # a certified lower bound rounds down, a claim up: each printed number stays a bound
        f"audit: certified ε lower bound {fmt_lower(result.epsilon_lower_bound)} at confidence "
        f"{fmt(result.confidence, 6)} against claimed ε = {fmt_upper(result.epsilon)}{delta}: {status}"
    )
    if result.delta_lower_bound is not None:
        print(f"certified δ lower bound at ε = {fmt_upper(result.epsilon)}: {fmt_lower(result.delta_lower_bound)}")
    print(f"witness: {result.witness_description}")
    hint = float_hint(result, **(hint_about or {}))
    if hint:
        print(hint)
    if result.counts:
        c = result.counts
        print("counts: " + ", ".join(f"{k}={v}" for k, v in c.items()))
    print(f"method: {result.method}")
    print(
        f"samples={result.samples} per side, seed={result.seed} "
        f"(reproduce: dpharness audit{rerun_flags([name])} {name}{_result_flags(args)}{reproduce_flags(result)})"
    )


def _pair(mechanism, args) -> tuple:
    """``--pair DATA NEIGHBOR`` read as a neighbouring pair of ``mechanism`` (None, None: search)."""
    if getattr(args, "pair", None) is None:
        return None, None
    from ._run import pair_from_text

    return pair_from_text(mechanism, args.pair)


def _proof_for_witness(mechanism):
    """The proof whose witness the audit tries first; None when no prover can take the mechanism."""
    from .pipeline import run_proof
    from .errors import UnsupportedError

    try:
        return run_proof(mechanism)
    except (UnsupportedError, ImportError):
        return None


def _cmd_targets(args) -> int:
    from .auditors.libraries import list_targets

    from importlib import metadata

    infos = list_targets()
    installed: dict[str, bool] = {}
    for t in infos:  # by distribution metadata: nothing is imported
        if t.library not in installed:
            try:
                metadata.version(t.library)
                installed[t.library] = True
            except metadata.PackageNotFoundError:
                installed[t.library] = False
    if getattr(args, "json", False):
        _emit_json(
            [
                {
                    "name": t.name,
                    "library": t.library,
                    "description": t.description,
                    "parameters": [[k, v] for k, v in t.parameters],
                    "installed": installed[t.library],
                }
                for t in infos
            ]
        )
        return EXIT_OK
    for t in infos:
        params = ", ".join(f"{k}={v}" for k, v in t.parameters)
        mark = "installed    " if installed[t.library] else "not installed"
        print(f"{t.name:32s} {mark}  {t.description}" + (f" [{params}]" if params else ""))
    print(
        "\naudit one with: dpharness audit LIBRARY:MECHANISM --set KEY=VALUE ... "
        "(the library's own claim and neighbour relation are used; install its extra: pip install -e '.[LIBRARY]' in the dpharness checkout)"
    )
    return EXIT_OK


def _cmd_audit_library(args) -> int:
    """``dpharness audit LIBRARY:MECHANISM``: a third-party library's mechanism at its own claim."""
    from ._run import fmt, parse_sets
    from .auditors.libraries import get_target
    from .errors import ParameterError

    if args.claim_epsilon is not None or args.claim_delta is not None:
        raise ParameterError(
            f"--claim-epsilon/--claim-delta: a library target {args.name!r} is audited against the "
            "claim its library states; drop the option (or audit your own callable from Python)."
        )
    from . import registry
    from ._run import load_modules
    from .pipeline import run_audit

    sets = dict(parse_sets(args.sets))
    if args.name in load_modules(args.modules):  # a --module registered this target: its parameters and samples
        own = registry.get(args.name).target
        target = get_target(args.name, {**own.params, **sets}) if sets else own
        registered = registry.audit_settings(args.name).samples
        args.samples = args.samples or registered or AUDIT_SAMPLES
    else:
        target = get_target(args.name, sets)
        args.samples = args.samples or AUDIT_SAMPLES
    # the audit every command runs for a library target (the report's and the gate's too)
    mechanism = target.mechanism()
    data, neighbor = _pair(mechanism, args)
    result, _scope = run_audit(
        mechanism,
        data=data,
        neighbor=neighbor,
        samples=args.samples,
        seed=args.seed,
        ideal_numerics=args.ideal_numerics,
        cluster=args.scheduler,
        workers=args.workers,
        sequential=args.sequential,
        time_budget=args.time_budget,
        search_samples=args.search_samples,
        every_round=args.every_round,
    )
    if args.json:
        payload = result.to_dict()
        payload.update(
            target=target.name,
            library=target.library,
            version=target.version,
            relation=target.relation,
            claim_source=target.claim_source,
        )
        _emit_json(payload)
    else:
        print(f"{target.name}: {target.library} {target.version}")
        print(f"neighbours: {target.relation}")
        print(f"claim: ε = {fmt(target.epsilon)}, δ = {fmt(target.delta, 6)} ({target.claim_source})")
        _print_audit_result(result, target.name, args)
    return EXIT_OK if result.passed else EXIT_FAIL


def _cmd_audit(args) -> int:
    if ":" in args.name:
        return _cmd_audit_library(args)
    import gc

    args.samples = args.samples or AUDIT_SAMPLES
    mechanism = _mechanism(args)
    from .pipeline import run_audit

    # the modules, the mechanism and its proof live until the command ends: frozen (after the imports,
    # then after the proof), the collections the proof and the audit trigger (hundreds) no longer walk
    # them (0.2 s of CPU in a laplace audit of 10^7 a side); the price, cyclic garbage left by the proof
    # is kept until the command ends
    gc.freeze()
    if args.samples >= _ESTIMATE_ABOVE:
        _print_estimate([mechanism], args.samples)
    data, neighbor = _pair(mechanism, args)
    proof = _proof_for_witness(mechanism)
    gc.freeze()
    result, scope = run_audit(
        mechanism,
        proof,
        data=data,
        neighbor=neighbor,
        samples=args.samples,
        seed=args.seed,
        ideal_numerics=args.ideal_numerics,
        cluster=args.scheduler,
        workers=args.workers,
        sequential=args.sequential,
        time_budget=args.time_budget,
        search_samples=args.search_samples,
        every_round=args.every_round,
    )
    if args.json:
        payload = result.to_dict()
        payload["mechanism"] = mechanism.name
        payload["parameters"] = mechanism.noise_parameters()
        payload["claim"] = mechanism.claim.describe()
        payload["audit_note"] = scope.note
        payload["audit_partial"] = scope.partial
        _emit_json(payload)
    else:
        _print_audit(mechanism, result, args, proof)
        if scope.note:
            print(f"note: {scope.note}")
        if scope.partial and result.passed:
            print(
                f"PARTIAL: the audit ran a shorter version of {mechanism.name} ({scope.partial}); its bound is a "
                "lower bound for the claimed mechanism too, but finding no violation says nothing about the rounds "
                "it did not run"
            )
    return EXIT_OK if result.passed else EXIT_FAIL


_ESTIMATE_ABOVE = 20_000_000  # samples a side from which `audit` first prints an estimate of the run
_AUDIT_OVERHEAD = 2.0  # audit wall time / the pilot's projection of the sampling (measured, see below)


def _estimate_seconds(mechanism, samples: int) -> float:
    """Rough seconds of one audit at ``samples`` a side: a 10^5-sample pilot of the sampler on the example
    pair, both sides, times the audit's overhead for event search and counting (measured 2026-11-26 on
    2 idle cores with the default 2 workers: the catalog Laplace, RAPPOR and clamped mean at 3·10^7 a
    side took 11.5, 8.2 and 18.0 s of wall against the pilot's projection of 7.9, 5.1 and 12.5 s, so
    1.45-1.6x; the pilot's per-sample time includes its call's fixed cost, which the audit's chunks of
    10^6 do not pay, so the projection already covers much of the event search)."""
    import numpy as np

    pilot = 100_000
    data, _ = mechanism.example_pair()
    # a first small call loads the sampler's code (numba's cached loops of the exact samplers: 0.3-0.6 s,
    # which timed with the pilot made the estimate of a 5·10^7 audit of 6 s read 600 s)
    mechanism.sample(data, 16, np.random.default_rng(0))
    t0 = time.perf_counter()
    mechanism.sample(data, pilot, np.random.default_rng(0))
    return (time.perf_counter() - t0) / pilot * samples * 2 * _AUDIT_OVERHEAD


def _print_estimate(mechanisms: list, samples: int, *, jobs: int = 1) -> None:
    """Print on stderr a rough estimate of auditing ``mechanisms`` at ``samples`` a side on ``jobs``
    workers (see :func:`_estimate_seconds`; a mechanism whose pilot fails is left out); memory is
    bounded by streaming in chunks."""
    total, left_out = 0.0, 0
    for m in mechanisms:
        try:
            total += _estimate_seconds(m, samples)
        except Exception:  # noqa: BLE001 - the run itself reports the mechanism's error
            left_out += 1
    seconds = total / max(1, min(jobs, len(mechanisms)))
    what = "" if len(mechanisms) == 1 else f" of {len(mechanisms)} mechanisms on {min(jobs, len(mechanisms))} worker(s)"
    skipped = f"; {left_out} mechanism(s) could not be piloted and are not counted" if left_out else ""
    sys.stderr.write(
        f"dpharness: rough estimate for {samples:,} samples a side{what}: about {seconds:,.0f} s "
        f"(a 100,000-sample pilot of each sampler, times {_AUDIT_OVERHEAD:g} for event search and "
        f"counting{skipped}); memory does not grow with --samples (samples stream in chunks; "
        "the catalog Laplace peaked at 0.9 GiB at 10^8 and at 10^12 a side). Interrupt with Ctrl-C and lower --samples if that is too long.\n"
    )
    sys.stderr.flush()


def _buildable(names: list[str]) -> list:
    """The registered mechanisms ``names`` built at their defaults (those that fail to build are left to
    the run, which reports them)."""
    from . import registry

    out = []
    for n in names:
        try:
            out.append(registry.get(n)())
        except Exception:  # noqa: BLE001
            continue
    return out


def _gate_task(
    name: str,
    *,
    samples: int,
    seed: int,
    modules: tuple[str, ...],
    timeout: float | None,
    report_dir: str | None,
    audit_workers: int | None = None,
    time_budget: float | None = None,
):
    """Check ``name`` and, with ``report_dir``, write its report (the gate's worker task). ``audit_workers``:
    1 when the gate already runs a check per core (nested pools would only add process start-ups)."""
    from dataclasses import replace

    from .pipeline import check

    try:
        result = check(
            name,
            samples=samples,
            seed=seed,
            modules=modules,
            timeout=timeout,
            workers=audit_workers,
            time_budget=time_budget,
        )
    finally:
        if audit_workers != 1:  # an audit's own pool, started in this gate worker, ends with its task
            from dpharness.auditors._runner import shutdown_pool

            shutdown_pool()
    if report_dir is None or result.mechanism is None:
        return result
    from . import report

    t0 = time.perf_counter()
    try:
        report.write(
            report.build(result.mechanism, check=result, samples=samples, seed=seed, timeout=timeout), report_dir
        )
    except Exception as exc:  # the check stands; the missing page fails it
        result = replace(result, error=result.error or f"the report failed: {type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - t0
    return replace(result, timings=replace(result.timings, report=seconds, total=result.timings.total + seconds))


def _progress_tag(result) -> str:
    if result.error:
        return "ERROR"
    if not result.decided:
        return f"{result.status} (not decided)"
    if result.buggy:
        return "bug caught" if result.passed else "BUG SLIPPED THROUGH"
    return "ok" if result.passed else "FAIL"


def _gate_line(c, samples: int | None = None) -> str:
    """The gate's line of a check (:meth:`dpharness.pipeline.Check.line`)."""
    return c.line(samples)


def _check_writable(option: str, directory: str) -> None:
    """Fail before any work when ``directory`` cannot be created or written."""
    import tempfile

    from .errors import ParameterError

    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise ParameterError(
            f"{option} {directory}: cannot write there ({exc.strerror or exc}); pass a writable directory."
        ) from None


def _cache_is_empty(directory: str) -> bool:
    from . import _cache

    return _cache.is_empty(directory)


def _prestart_pool(jobs: int | None) -> None:
    from . import _pool

    _pool.prestart(jobs)


def _check_target(option: str, name: str) -> None:
    """A library target's name, resolved (registered audit-only at its defaults); a ParameterError naming
    ``option`` when it is not one, MissingExtra when its library is not installed."""
    from . import registry
    from .errors import ParameterError

    if not registry.is_target_name(name):
        raise ParameterError(
            f"{option} {name}: not a library target (LIBRARY:MECHANISM); run `dpharness targets` to see them, "
            "or pass a registered mechanism's name without the option."
        )
    try:
        registry.get(name)
    except ParameterError as exc:
        raise ParameterError(f"{option} {name}: {exc}") from None


def _cmd_gate(args) -> int:
    from . import registry
    from ._run import load_modules
    from .errors import ParameterError

    if args.report:
        _check_writable("--report", args.report)
    if args.junit:
        _check_writable("--junit", os.path.dirname(os.path.abspath(args.junit)))
        if os.path.isdir(args.junit):
            raise ParameterError(f"--junit {args.junit}: is a directory; pass a file path such as gate.xml.")
    if args.time_budget is None:  # the default budget, within the audit's time limit
        args.time_budget = min(GATE_TIME_BUDGET, args.timeout)
    elif args.time_budget > args.timeout:
        raise ParameterError(
            f"--time-budget={args.time_budget:g} exceeds --timeout={args.timeout:g}: each audit would reach its time "
            "limit before its budget; pass --time-budget at most --timeout, or raise --timeout."
        )
    own = load_modules(args.modules)
    if args.own and not args.modules:
        raise ParameterError("--own gates the mechanisms of the --module packages; pass --module PKG as well.")
    # a cold run (every check is going to run): start the workers' fork server now, so that its imports
    # overlap building the mechanisms and their cache keys here (a hint: results are the same)
    cold = bool(args.no_cache or args.report or _cache_is_empty(args.cache_dir))
    if cold and not args.names:
        _prestart_pool(args.jobs)
    for target in args.targets:  # before any work: an unknown target or a missing library is exit 2
        _check_target("--target", target)
    if args.names or args.targets:
        for name in args.names:
            registry.get(name)  # unknown names: ParameterError (with a suggestion) before any work
        mine = [n for n in own if bool(registry.get(n).buggy) == bool(args.gallery)] if args.own else []
        names = list(dict.fromkeys([*args.names, *mine, *args.targets]))
        if cold:
            _prestart_pool(args.jobs)
    elif args.own:
        names = [n for n in own if bool(registry.get(n).buggy) == bool(args.gallery)]
    else:
        names = list(registry.catalog(gallery=bool(args.gallery)))
    if not names:
        _err(
            f"no {'gallery ' if args.gallery else ''}mechanisms are registered; "
            "install dpharness with its mechanisms or pass --module PKG."
        )
        return EXIT_USAGE
    start = time.perf_counter()
    keys: dict[str, str] = {}
    cached: dict = {}
    use_cache = not args.no_cache and not args.report
    if use_cache:
        from . import _cache

        try:
            _check_writable("--cache-dir", args.cache_dir)
            signing = _cache.signing_key(args.cache_dir)  # kept outside the cache dir; entries are verified
        except ParameterError as exc:  # a read-only checkout (or no usable key) still gates, uncached, and says so
            use_cache = False
            sys.stderr.write(f"dpharness: warning: {exc} Running without the cache.\n")
    if use_cache:
        env = _cache.environment_digest()
        for name in names:
            try:
                settings = registry.audit_settings(name)
                keys[name] = _cache.key(
                    registry.get(name)(),
                    name=name,
                    audit_only=registry.audit_only(name),
                    environment=env,
                    samples=settings.samples if settings.samples is not None else args.samples,
                    seed=args.seed,
                    timeout=settings.timeout if settings.timeout is not None else args.timeout,
                    time_budget=args.time_budget,
                )
            except Exception:  # a mechanism that cannot even be built runs (and reports its error)
                continue
        cached = _cache.load_all(args.cache_dir, keys, signing)  # an entry that fails its HMAC: warned, re-run
    todo = [n for n in names if n not in cached]
    fresh = []
    interrupted = None
    if todo and args.samples >= _ESTIMATE_ABOVE:
        _print_estimate(_buildable(todo), args.samples, jobs=args.jobs or os.cpu_count() or 1)
    if todo:
        from . import _cache, _pool
        from .pipeline import Check, hard_limit

        # longest first by the durations of earlier runs (a hint: results are the same in any order)
        todo = _cache.longest_first(todo, _cache.durations(args.cache_dir))

        try:
            fresh = _pool.run(
                _gate_task,
                todo,
                jobs=args.jobs,
                limit=hard_limit(_longest_timeout(todo, args.timeout), 3 if args.report else 2),
                lost=Check.failed,
                stopped=Check.stopped,
                label=_progress_tag,
                desc="gate",
                kwargs={
                    "samples": args.samples,
                    "seed": args.seed,
                    "modules": tuple(args.modules),
                    "timeout": args.timeout,
                    "report_dir": args.report,
                    "time_budget": args.time_budget,
                    "audit_workers": 1 if len(todo) > 1 and (args.jobs or os.cpu_count() or 1) > 1 else None,
                },
            )
        except _pool.Interrupted as exc:  # Ctrl-C: keep what finished, say so in one line, exit 130
            interrupted = exc
            fresh = exc.finished
    if use_cache:
        for res in fresh:
            if res.name in keys and res.decided:  # a check a time limit stopped is decided by the next run
                _cache.store(args.cache_dir, keys[res.name], res, signing)
    if fresh:
        _cache.record_durations(
            args.cache_dir,
            {r.name: r.timings.total for r in fresh if r.timings is not None and r.timings.total is not None},
        )
    if interrupted is not None:
        kept = (
            f" ({sum(1 for r in fresh if r.error is None and r.name in keys)} stored in the cache)" if use_cache else ""
        )
        sys.stderr.write(
            f"dpharness: interrupted: {len(cached) + len(fresh)} of {len(names)} checks finished{kept}; "
            "the others were stopped and the gate decided nothing.\n"
        )
        return EXIT_INTERRUPTED
    by_name = {**cached, **{r.name: r for r in fresh}}
    results = [by_name[n] for n in names]
    elapsed = time.perf_counter() - start
    passed = all(r.passed for r in results)
    if args.report:
        from . import report

        report.write_index(args.report)
    if args.junit:
        _write_junit(args.junit, results, gallery=args.gallery, elapsed=elapsed)
    if args.json:
        _emit_json(
            {
                "passed": passed,
                "mode": "gallery" if args.gallery else "catalog",
                "elapsed": elapsed,
                "samples": args.samples,
                "time_budget": args.time_budget,
                "seed": args.seed,
                "mechanisms": [r.to_json() for r in results],
            }
        )
    else:
        for r in results:
            print(_gate_line(r, args.samples))
        failed = [r.name for r in results if not r.passed and r.decided]
        undecided = [r.name for r in results if not r.decided and r.audit_partial is None]
        partial = [r.name for r in results if not r.decided and r.audit_partial is not None]
        what = "gallery bugs caught" if args.gallery else "mechanisms proved and audited"
        from .pipeline import Policy

        n_passed = sum(1 for r in results if r.passed)
        audited_only = sum(1 for r in results if r.passed and r.policy is Policy.AUDIT_ONLY)
        if audited_only and not args.gallery:  # a pass on its audit alone is not a proof: say how many
            what = (
                f"mechanisms passed ({n_passed - audited_only} proved and audited, "
                f"{audited_only} audited only: no proof, opted in with proof='audit-only')"
            )
        reused = f"; {len(cached)} unchanged, from the cache (--no-cache re-runs them)" if cached else ""
        print(
            f"{n_passed}/{len(results)} {what} in {elapsed:.1f}s "
            f"(samples={args.samples} per side, seed={args.seed}{reused})"
        )
        if failed:
            print(("slipped through or errored: " if args.gallery else "failed: ") + ", ".join(failed))
        if partial:
            print(
                f"not audited in full (PARTIAL): {', '.join(partial)} -- the audit ran fewer rounds or samples than "
                "the claimed mechanism has (see each line): not a pass"
            )
        if undecided:
            print(
                f"not decided (TIMEOUT): {', '.join(undecided)} -- a time limit (--timeout {args.timeout:g} s per "
                "phase) stopped them: not evidence of a privacy bug, and not a pass (the gate fails until they are "
                "decided; they are not cached: re-run on a quieter machine or raise --timeout)"
            )
    return EXIT_OK if passed else EXIT_FAIL


def _longest_timeout(names: list, default: float) -> float:
    """The longest per-phase time limit of ``names`` (a mechanism registered with its own ``timeout``
    keeps it; the worker's hard limit follows the longest)."""
    from . import registry

    own = [registry.audit_settings(n).timeout for n in names]
    return max([default] + [t for t in own if t is not None])


def _write_junit(path: str, results: list, *, gallery: bool, elapsed: float) -> None:
    """One <testcase> per Check: proof and audit as properties and system-out, <failure> when the pass
    rule fails it, <error> on a crash (or a worker killed at its hard limit)."""
    import xml.etree.ElementTree as ET

    from ._run import fmt

    classname = "dpharness.gallery" if gallery else "dpharness.gate"
    suite = ET.Element(
        "testsuite",
        name=classname,
        tests=str(len(results)),
        failures=str(sum(1 for r in results if not r.passed and not r.error and r.decided)),
        errors=str(sum(1 for r in results if r.error or not r.decided)),
        time=f"{elapsed:.3f}",
    )
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=classname, name=r.name, time=f"{r.timings.total:.3f}")
        props = ET.SubElement(case, "properties")
        details = [_gate_line(r)]
        p, a = r.proof, r.audit
        if p is not None:
            for key, value in (
                ("verdict", p.verdict),
                ("bound", p.bound),
                ("bound_expr", p.bound_expr),
                ("claim", p.claim),
            ):
                ET.SubElement(props, "property", name=f"proof.{key}", value=str(value))
            details.append(f"proof: {p.verdict}, bound {fmt(p.bound)} = {p.bound_expr}, claim {p.claim}")
            details += [f"  assumption: {x}" for x in p.assumptions]
            details += [
                f"  step [{'ok' if s.discharged else 'NOT DISCHARGED'} {s.checker}] {s.statement} ({s.justification})"
                for s in p.steps
            ]
            if p.witness:
                details.append(f"  witness: {p.witness}")
            details += [f"  note: {n}" for n in p.notes]
        if r.proof_error:
            details.append(f"proof not finished: {r.proof_error}")
        if r.audit_error:
            details.append(f"audit not finished: {r.audit_error}")
        if r.audit_note:
            details.append(f"audit note: {r.audit_note}")
        if a is not None:
            for key in ("epsilon_lower_bound", "passed", "epsilon", "delta", "confidence", "samples", "seed"):
                ET.SubElement(props, "property", name=f"audit.{key}", value=str(getattr(a, key)))
            details.append(
                f"audit: ε_lb={fmt(a.epsilon_lower_bound)} claim ε={fmt(a.epsilon)} δ={fmt(a.delta, 6)} "
                f"passed={a.passed} confidence={fmt(a.confidence, 6)} samples={a.samples} seed={a.seed}"
            )
            details.append(f"  witness: {a.witness_description}; counts: {a.counts}; method: {a.method}")
        if r.error:
            ET.SubElement(case, "error", message=r.error.splitlines()[0]).text = r.error
        elif not r.decided and r.audit_partial:  # audited less than the claimed mechanism: not a verdict
            message = f"not decided (PARTIAL): the audit saw less than the claimed mechanism ({r.audit_partial})"
            ET.SubElement(case, "error", message=message).text = "\n".join(details)
        elif not r.decided:  # a time limit, not a finding: JUnit's "error" (could not be run to a verdict)
            ET.SubElement(case, "error", message=f"not decided (TIMEOUT): {r.time_limit}").text = "\n".join(details)
        elif not r.passed:
            ET.SubElement(case, "failure", message=_failure_message(r, gallery=gallery)).text = "\n".join(details)
        ET.SubElement(case, "system-out").text = "\n".join(details)
    for element in suite.iter():  # user text (an exception's message) may hold characters XML 1.0 forbids
        element.text = None if element.text is None else _xml_text(element.text)
        for name, value in element.attrib.items():
            element.attrib[name] = _xml_text(value)
    tree = ET.ElementTree(suite)
    ET.indent(tree)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)


_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold (NUL, ESC and the other C0 controls but tab and
    line breaks; lone surrogates) written as visible escapes (``\\x1b``): ElementTree writes them raw,
    and one made the whole JUnit file unparseable."""
    return _XML_FORBIDDEN.sub(lambda m: repr(m.group())[1:-1], text)


def _failure_message(r, *, gallery: bool) -> str:
    """Why the pass rule failed ``r`` (a Check without a crash)."""
    from ._display import fmt_lower, fmt_upper
    from ._run import float_hint
    from .pipeline import Policy, proof_phrase

    if gallery:
        return "known bug slipped through: the proof did not refute it and the audit did not flag it"
    why = []
    if r.proof is None:
        why.append(f"proof not finished: {r.proof_error}")
    elif r.policy is Policy.NO_PROOF:
        why.append("no proof, and not opted in with register(m, proof='audit-only')")
    elif r.policy is not Policy.AUDIT_ONLY and r.proof.verdict != "PROVED":
        why.append(proof_phrase(r.proof.verdict, r.sandwich.proven, r.sandwich.claimed, r.claim, r.proof.derived))
    if r.audit is None:
        why.append(f"audit not finished: {r.audit_error}")
    elif not r.audit.passed:
        why.append(f"audit certified ε ≥ {fmt_lower(r.audit.epsilon_lower_bound)} > {fmt_upper(r.audit.epsilon)}")
        hint = float_hint(r.audit, exact_noise=r.exact_noise, proven=r.sandwich.proven, claimed=r.sandwich.claimed)
        if hint:
            why.append(hint)
    return "; ".join(why)


def _cmd_report(args) -> int:
    from . import registry, report
    from .errors import ParameterError

    _check_writable("--out", args.out)

    if args.own and not args.modules:
        raise ParameterError("--own reports the mechanisms of the --module packages; pass --module PKG as well.")
    if args.names:
        names = list(dict.fromkeys(args.names))
    elif args.own:
        from ._run import load_modules

        names = load_modules(args.modules)  # the names they registered (remembered from the first import)
    else:
        names = list(registry.catalog(gallery=None))
    for name in names:
        registry.get(name)  # unknown names: ParameterError before any work
    if not names:
        _err("no mechanisms are registered; nothing to report.")
        return EXIT_USAGE
    from dataclasses import asdict

    from . import _pool
    from .pipeline import hard_limit

    # worker processes import the project's modules again: their mechanisms are registered there too
    kwargs = {"out": args.out, "seed": args.seed, "timeout": args.timeout, "modules": tuple(args.modules)}
    if args.samples is not None:
        kwargs["samples"] = args.samples
        if args.samples >= _ESTIMATE_ABOVE:
            _print_estimate(_buildable(names), args.samples, jobs=args.jobs or os.cpu_count() or 1)
    results = _pool.run(
        report.generate,
        names,
        jobs=args.jobs,
        limit=hard_limit(args.timeout, 3),
        lost=lambda name, message, seconds: report.Written(name, (), message),
        label=lambda r: "error" if r.error else "written",
        kwargs=kwargs,
        desc="reports",
    )
    report.write_index(args.out)
    errors = [r for r in results if r.error]
    if args.json:
        _emit_json({"out": args.out, "reports": [asdict(r) for r in results]})
    else:
        for r in results:
            print(f"{r.name}: " + (f"error: {r.error.splitlines()[0]}" if r.error else ", ".join(r.files)))
        print(f"index: {os.path.join(args.out, 'README.md')}, {os.path.join(args.out, 'index.html')}")
    return EXIT_FAIL if errors else EXIT_OK


# what to lower when a command runs out of memory: only options the command has
_MEMORY_ADVICE = {
    "prove": "pass smaller size parameters with --set (e.g. dim or bins) and retry.",
    "audit": "lower --samples (or --workers, or the size parameters given with --set) and retry.",
    "gate": "lower --samples (or --jobs) and retry.",
    "report": "lower --samples (or --jobs) and retry.",
}

_COMMANDS = {
    "list": _cmd_list,
    "prove": _cmd_prove,
    "epsilon": _cmd_accountant,
    "delta": _cmd_accountant,
    "audit": _cmd_audit,
    "gate": _cmd_gate,
    "report": _cmd_report,
    "targets": _cmd_targets,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 holds/passed, 1 violation/not proved, 2 usage error)."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "json"):
        args.json = False
    from .errors import AuditBudgetTooSmall, AuditTimeLimit, MechanismError, ParameterError, UnsupportedError

    if argv is None and args.command in ("audit", "gate", "report"):
        from ._run import limit_memory

        limit_memory(0.8)  # a runaway audit raises MemoryError rather than waking the OOM killer

    try:
        if args.command != "gate" and getattr(args, "modules", None):
            from ._run import load_modules

            load_modules(args.modules)
        return _COMMANDS[args.command](args)
    except ParameterError as exc:
        _err(str(exc))
        return EXIT_USAGE
    except UnsupportedError as exc:
        _err(f"{exc} (unsupported)")
        return EXIT_USAGE
    except ImportError as exc:  # a library target's or the cluster's optional extra is missing
        from .auditors.libraries import MissingExtra

        if not isinstance(exc, MissingExtra):
            raise
        _err(str(exc))
        return EXIT_USAGE
    except MechanismError as exc:
        _err(f"the mechanism failed: {exc}")
        return EXIT_FAIL
    except AuditBudgetTooSmall as exc:  # --time-budget fits not even the minimum certification: the input
        _err(str(exc))
        return EXIT_USAGE
    except AuditTimeLimit as exc:  # not decided (the gate's TIMEOUT): one line, not a traceback
        _err(f"not decided: {exc}")
        return EXIT_FAIL
    except MemoryError:
        _err("ran out of memory; " + _MEMORY_ADVICE.get(args.command, "retry with less other work running."))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `dpharness ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAIL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
