"""Wall time of every catalog proof (correct mechanisms and the gallery), in one fresh process.

Run: ``python benchmarks/bench_proofs.py [--gallery] [--timeout S]``. Prints one row per registered
mechanism (default instance): verdict, derived bound, seconds; then the total against the target
of 30 s for all catalog proofs together. Lemma caches are cold at the start (one process), so the
first proofs pay for the generic derivations (triangle inequality, Gaussian profile) once.

A proof exceeding ``--timeout`` seconds (default 120) is interrupted and reported as TIMEOUT
(POSIX ``signal.alarm``)."""

from __future__ import annotations

import argparse
import signal
import time

TARGET_SECONDS = 30.0


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # pragma: no cover - timing dependent
    raise _Timeout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gallery", action="store_true", help="include the gallery of buggy variants")
    parser.add_argument("--timeout", type=int, default=120, help="seconds allowed per proof")
    args = parser.parse_args()

    t_import = time.perf_counter()
    from dpharness.proofs import prove
    from dpharness.registry import catalog

    names = catalog(gallery=None if args.gallery else False)
    t_import = time.perf_counter() - t_import

    signal.signal(signal.SIGALRM, _alarm)
    rows, total = [], 0.0
    for name, cls in names.items():
        start = time.perf_counter()
        signal.alarm(args.timeout)
        try:
            proof = prove(cls())
            verdict, bound = proof.verdict.value, f"{proof.bound:.6g}"
        except _Timeout:
            verdict, bound = "TIMEOUT", "-"
        except Exception as exc:  # noqa: BLE001 - a benchmark reports, it does not stop
            verdict, bound = f"ERROR {type(exc).__name__}", str(exc)[:40]
        finally:
            signal.alarm(0)
        took = time.perf_counter() - start
        total += took
        rows.append((name, "gallery" if cls.buggy else "catalog", verdict, bound, took))

    width = max(len(r[0]) for r in rows) if rows else 10
    print(f"{'mechanism':{width}}  {'kind':7}  {'verdict':9}  {'bound':>10}  {'seconds':>8}")
    for name, kind, verdict, bound, took in rows:
        print(f"{name:{width}}  {kind:7}  {verdict:9}  {bound:>10}  {took:8.2f}")
    catalog_total = sum(r[4] for r in rows if r[1] == "catalog")
    print(
        f"\nimport {t_import:.2f} s; catalog proofs {catalog_total:.2f} s (target <= {TARGET_SECONDS:.0f} s: "
        f"{'met' if catalog_total <= TARGET_SECONDS else 'MISSED'}); all listed {total:.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
