"""Throughput of the vectorised seed samplers on one core (samples per second).

Run: ``python benchmarks/bench_samplers.py [--size N] [--repeat R]``. Prints one table row per
sampler (best of R runs of ``mechanism.sample(data, N, rng)``, the public validated call). The
scalar samplers (Laplace, discrete Laplace, randomized response, Warner, Gaussian) are required to
exceed 10 M samples/s; rows marked ``*`` are held to that target.

Pin to one core for a faithful figure, e.g. ``taskset -c 0 python benchmarks/bench_samplers.py``
(numpy's random generators are single-threaded anyway).

A second table times the exact noise samplers of :mod:`dpharness.mechanisms._exact` directly
(``discrete_laplace(t, N, rng)``, ``discrete_gaussian(σ², N, rng)``, ``randomized_response``) at
several scales; discrete Laplace is held to 10 M samples/s and discrete Gaussian to 5 M samples/s."""

from __future__ import annotations

import argparse
import time

from fractions import Fraction

import numpy as np

from dpharness.mechanisms import _exact
from dpharness.mechanisms.clamped import ClampedSum
from dpharness.mechanisms.discrete_laplace import DiscreteLaplace
from dpharness.mechanisms.exponential import ExponentialMechanism
from dpharness.mechanisms.gaussian import Gaussian
from dpharness.mechanisms.laplace import Laplace
from dpharness.mechanisms.median import ExponentialMedian
from dpharness.mechanisms.randomized_response import RandomizedResponse
from dpharness.mechanisms.rappor import Rappor
from dpharness.mechanisms.warner import WarnerRR

TARGET = 10e6

CASES = [
    # (label, mechanism, data, held to the target)
    ("laplace (grid 2^-20)", Laplace(), np.array([0.3]), True),
    ("discrete_laplace", DiscreteLaplace(), np.array([7]), True),
    ("randomized_response k=2", RandomizedResponse(), 1, True),
    ("randomized_response k=10", RandomizedResponse(k=10, log_odds=2), 3, True),
    ("warner_rr", WarnerRR(), 1, True),
    ("gaussian (grid 2^-20)", Gaussian(), np.array([0.3]), True),
    ("exponential (4 candidates)", ExponentialMechanism(), np.array([0.0, 1, 2, 3]), False),
    ("median bits=32, n=10^4", ExponentialMedian(bits=32), np.random.default_rng(0).integers(0, 2**32, 10_000), False),
    ("clamped_sum, n=10^3", ClampedSum(), np.random.default_rng(0).random(1000), False),
    ("rappor k=4 (per report)", Rappor(), 2, False),
]


EXACT_CASES = [
    # (label, sampler(size, rng), target in samples/s or None)
    ("discrete_laplace t=1", lambda n, r: _exact.discrete_laplace(1, n, r), 10e6),
    ("discrete_laplace t=2^20", lambda n, r: _exact.discrete_laplace(2**20, n, r), 10e6),
    ("discrete_laplace t=2^40", lambda n, r: _exact.discrete_laplace(2**40, n, r), 10e6),
    ("discrete_laplace t=2^60", lambda n, r: _exact.discrete_laplace(2**60, n, r), None),
    ("discrete_gaussian sigma=1", lambda n, r: _exact.discrete_gaussian(1, n, r), 5e6),
    ("discrete_gaussian sigma^2=14", lambda n, r: _exact.discrete_gaussian(14, n, r), 5e6),
    ("discrete_gaussian sigma=2^20", lambda n, r: _exact.discrete_gaussian(2**40, n, r), 5e6),
    ("randomized_response k=2 L=1", lambda n, r: _exact.randomized_response(0, 2, 1, n, r), 10e6),
    ("randomized_response k=10 L=2", lambda n, r: _exact.randomized_response(0, 10, 2, n, r), 10e6),
    ("randomized_response k=2 L=37", lambda n, r: _exact.randomized_response(0, 2, 37, n, r), 10e6),
    ("bernoulli_exp x=3/2", lambda n, r: _exact.bernoulli_exp(Fraction(3, 2), r, size=n), 10e6),
]


def bench_fn(fn, size: int, repeat: int) -> float:
    rng = np.random.default_rng(0)
    fn(1000, rng)  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(size, rng)
        best = min(best, time.perf_counter() - t0)
    return size / best


def bench(mech, data, size: int, repeat: int) -> float:
    rng = np.random.default_rng(0)
    mech.sample(data, 1000, rng)  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        mech.sample(data, size, rng)
        best = min(best, time.perf_counter() - t0)
    return size / best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000, help="samples per call (default 10^7)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per sampler, best kept (default 3)")
    args = parser.parse_args(argv)
    print(f"{'sampler':32s} {'M samples/s':>12s}  target")
    failed = []
    for label, mech, data, held in CASES:
        size = args.size if held else max(args.size // 10, 1000)
        rate = bench(mech, data, size, args.repeat)
        mark = ("*  ok" if rate >= TARGET else "*  BELOW 10 M/s") if held else ""
        if held and rate < TARGET:
            failed.append(label)
        print(f"{label:32s} {rate / 1e6:12.1f}  {mark}")
    print(f"\n{'exact sampler (one call)':32s} {'M samples/s':>12s}  target")
    for label, fn, target in EXACT_CASES:
        size = args.size if target else max(args.size // 10, 1000)
        rate = bench_fn(fn, size, args.repeat)
        mark = (
            ""
            if target is None
            else (f"{target / 1e6:.0f} M/s ok" if rate >= target else f"BELOW {target / 1e6:.0f} M/s")
        )
        if target is not None and rate < target:
            failed.append(label)
        print(f"{label:32s} {rate / 1e6:12.1f}  {mark}")
    if failed:
        print(f"below target: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
