"""Sample efficiency against the black-box limit: samples a side to certify 0.95 of the true ε, and
the audit's CPU time as a multiple of the mechanism's own sampling time.

For each DP-Sniper benchmark mechanism (:mod:`bench_dpsniper`'s cases: Laplace, noisy histograms,
report noisy max, SVT, RAPPOR, LaplaceParallel; claimed ε = 0.1, 90% confidence, two certified
events, the mathematical mechanism audited with ``ideal_numerics=True``):

* **samples needed**: the smallest budget on a doubling grid (10^5 · 2^k a side, training included)
  at which the certified bound reaches ``--fraction`` (default 0.95) of the true ε on the pair, for
  each of ``--seeds`` seeds; the table gives the largest over seeds (every seed reached the target
  at that budget) and the ratio to DP-Sniper's 2·10^8 a side;
* **samples to match DP-Sniper's published bound** (its own certified value at 2·10^8 a side),
  on the same grid, for seed 0;
* **CPU multiple**: at the seed-0 budget that reached the target, the audit's CPU time (this
  process and its workers; one worker, so nothing overlaps) divided by the CPU time the mechanism
  itself takes to draw the same number of outputs (both sides, training and certification, in
  chunks of the auditor's size), measured in the same process;
* **oracle samples needed** (no audit, from each pair's exact law, :func:`oracle_family`): the
  samples a side at which the *oracle* — the best event of a family known in advance, certified
  alone (m = 1) on all n samples with the auditor's statistics (one-sided Clopper-Pearson bounds of
  :mod:`dpharness.auditors.stats` at the same confidence, ε_lb = ln(p1_lo / p0_hi)) — reaches the
  same target when its counts are the expected ones, floor(n·p1) on the numerator side and
  ceil(n·p0) on the other; the event maximises that bound at each n over the whole family
  (half-lines for one-dimensional continuous outputs, every union of atoms for discrete ones,
  thresholds on the likelihood-ratio statistic for LaplaceParallel), first on the doubling grid,
  then exactly by bisection; **ours / oracle** compares the measured grid budget with it.

Run: ``python benchmarks/bench_efficiency.py [--only NAME ...] [--seeds 3] [--max 2e8]``; writes
``benchmarks/results/efficiency.md``. The grid stops at ``--max`` samples a side ("> max": not reached).
``--oracle`` prints the oracle's table only (seconds, no audit).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import resource
import sys
from dataclasses import dataclass

import numpy as np
from scipy import integrate, stats
from scipy import special as _special

sys.path.insert(0, os.path.dirname(__file__))

from bench_dpsniper import _RAPPOR_BITS, CASES, CONFIDENCE, EPS, MAX_EVENTS, _svt_patterns  # noqa: E402

from dpharness.auditors import audit  # noqa: E402
from dpharness.auditors.stats import (  # noqa: E402
    bonferroni_level,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
)

DPSNIPER_SAMPLES = 200_000_000
_DRAW_CHUNK = 1 << 17


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _audit(case, samples: int, seed: int):
    return audit(
        case.fn,
        case.data,
        case.neighbor,
        epsilon=EPS,
        samples=samples,
        seed=seed,
        confidence=CONFIDENCE,
        ideal_numerics=True,
        progress=False,
        max_events=MAX_EVENTS,
        workers=1,
    )


def _grid(start: int, stop: int):
    n = start
    while n <= stop:
        yield n
        n *= 2


def samples_needed(case, target: float, seed: int, *, start: int, stop: int):
    """(smallest grid budget whose certified bound >= target, that audit) or (None, last audit)."""
    r = None
    for n in _grid(start, stop):
        r = _audit(case, n, seed)
        if r.epsilon_lower_bound >= target:
            return n, r
    return None, r


def draw_cpu(case, samples: int) -> float:
    """CPU seconds the mechanism takes to draw ``samples`` outputs on each side of the pair."""
    rng = np.random.default_rng(12345)
    t0 = _cpu()
    for x in (case.data, case.neighbor):
        left = samples
        while left > 0:
            k = min(_DRAW_CHUNK, left)
            case.fn(x, k, rng)
            left -= k
    return _cpu() - t0


# --------------------------------------------------------------------------- the oracle
#
# The oracle knows the best event in advance: it certifies one (event, direction) candidate with all
# n samples a side (no training), at the same confidence and with the auditor's own statistics
# (dpharness.auditors.stats: one-sided Clopper-Pearson bounds, Bonferroni over m = 1, so each bound
# has tail mass (1 - confidence) / 2). Its bound at n is read at the *expected* counts:
# k1 = floor(n·p1) hits on the numerator side, k0 = ceil(n·p0) on the denominator side (n·p within
# 1e-9 of a whole number counts as that number: float error), and the event is the one maximising that bound at n,
# searched over the whole event family below (every event is a candidate, so the choice depends on
# n: a more extreme event has a larger ratio but fewer hits).

_COUNT_TOL = 1e-9
_QUANTILES = np.geomspace(1e-13, 0.5, 12_001)  # half-line thresholds: ~950 per decade of tail mass
_SVT_LAW = {  # svt1 / svt4's noise scales (bench_dpsniper), for its exact pattern law
    "SVT1": dict(rho_scale=2 / EPS, nu_scale=2 * 2 / EPS, t=0.5),
    "SVT4": dict(rho_scale=4 / EPS, nu_scale=4 / (3 * EPS), t=1.0),
}
_PARALLEL_BINS = 100  # LaplaceParallel: the likelihood-ratio statistic is rounded to 1/100 per coordinate


@dataclass(frozen=True)
class OracleFamily:
    """One pair's oracle event family reduced to its Pareto frontier: candidate i is an event (with
    its direction) of probability ``p1[i]`` on the numerator side and ``p0[i]`` on the other, and no
    event of the family has both a larger p1 and a smaller p0 (the bound is non-decreasing in p1 and
    non-increasing in p0, so the frontier holds the best event at every n). ``what[i]`` describes it."""

    name: str
    law: str
    family: str
    p1: np.ndarray
    p0: np.ndarray
    what: tuple


@dataclass(frozen=True)
class OracleBound:
    """The oracle's certified bound at n samples a side: its best event, the expected counts used
    (k1 = floor(n·p1), k0 = ceil(n·p0)) and the :func:`epsilon_lower_bound` result on them."""

    n: int
    epsilon: float
    event: str
    p1: float
    p0: float
    hits1: int
    hits0: int


def _frontier(p1, p0, what) -> tuple[np.ndarray, np.ndarray, tuple]:
    """The candidates no other candidate beats on both p1 (larger) and p0 (smaller), p1 > p0 only."""
    p1, p0 = np.clip(np.asarray(p1, float), 0.0, 1.0), np.clip(np.asarray(p0, float), 0.0, 1.0)
    keep = p1 > p0
    idx = np.flatnonzero(keep)
    order = idx[np.lexsort((-p1[idx], p0[idx]))]  # p0 ascending, then p1 descending
    best = np.maximum.accumulate(p1[order])
    prev = np.concatenate([[-np.inf], best[:-1]])
    sel = order[p1[order] > prev]
    return p1[sel], p0[sel], tuple(what[i] for i in sel)


def _halflines(name, law, cdf_a, cdf_b, sf_a, sf_b, ppf_a, ppf_b, quantiles=_QUANTILES) -> OracleFamily:
    """Threshold events {y <= t} and {y > t}, both directions, for two continuous laws given by their
    CDFs (side a = the audited data, b = the neighbour); thresholds at the ``quantiles`` of either side
    and their complements (default ~950 per decade of tail mass, down to 1e-13)."""
    u = np.concatenate([quantiles, 1 - quantiles])
    t = np.unique(np.concatenate([ppf_a(u), ppf_b(u)]))
    t = t[np.isfinite(t)]
    fa, fb = cdf_a(t), cdf_b(t)
    sa, sb = sf_a(t), sf_b(t)
    p1 = np.concatenate([fa, fb, sa, sb])
    p0 = np.concatenate([fb, fa, sb, sa])
    what = tuple(
        [f"y <= {x:.6g} (data over neighbour)" for x in t]
        + [f"y <= {x:.6g} (neighbour over data)" for x in t]
        + [f"y > {x:.6g} (data over neighbour)" for x in t]
        + [f"y > {x:.6g} (neighbour over data)" for x in t]
    )
    return OracleFamily(name, law, "half-lines {y <= t}, {y > t}, both directions", *_frontier(p1, p0, what))


def _atom_sets(name, law, pa, pb, labels, family, sizes=None) -> OracleFamily:
    """Every union of atoms, both directions. Atoms may come in classes of exchangeable atoms
    (``sizes[k]`` atoms each of probability pa[k], pb[k]); an event is then a count per class."""
    pa, pb = np.asarray(pa, float), np.asarray(pb, float)
    sizes = np.ones(len(pa), int) if sizes is None else np.asarray(sizes, int)
    grids = np.meshgrid(*[np.arange(s + 1) for s in sizes], indexing="ij")
    counts = np.stack([g.ravel() for g in grids], axis=1)[1:]  # drop the empty event
    qa, qb = counts @ pa, counts @ pb

    def describe(c):
        return " ∪ ".join(
            (labels[k] if sizes[k] == 1 else f"{c[k]} of the {sizes[k]} atoms {labels[k]}")
            for k in range(len(c))
            if c[k]
        )

    n = len(counts)
    p1 = np.concatenate([qa, qb])
    p0 = np.concatenate([qb, qa])
    a1, b1, keep = _frontier(p1, p0, tuple(range(2 * n)))
    what = tuple(f"{describe(counts[i % n])} ({'data' if i < n else 'neighbour'} over the other)" for i in keep)
    return OracleFamily(name, law, family, a1, b1, what)


def _laplace_halflines(name, xa, xb, scale, law, quantiles=_QUANTILES) -> OracleFamily:
    a, b = stats.laplace(xa, scale), stats.laplace(xb, scale)
    return _halflines(name, law, a.cdf, b.cdf, a.sf, b.sf, a.ppf, b.ppf, quantiles)


def _rnm1_law(x, scale) -> np.ndarray:
    """P(argmax_i (x_i + Lap(scale)) = i) = ∫ f(y − x_i) Π_{j≠i} F(y − x_j) dy, by adaptive quadrature
    with the kinks at the x_j as break points (relative error ~1e-13)."""
    x = np.asarray(x, float)
    lap = stats.laplace(0.0, scale)
    pts = np.unique(x)
    out = np.empty(len(x))
    for i in range(len(x)):

        def dens(y, i=i):
            return lap.pdf(y - x[i]) * np.prod([lap.cdf(y - x[j]) for j in range(len(x)) if j != i])

        edges = [-np.inf, *pts, np.inf]
        out[i] = sum(
            integrate.quad(dens, lo, hi, epsabs=0, epsrel=1e-13, limit=200)[0] for lo, hi in zip(edges, edges[1:])
        )
    return out


def _parallel_law(x, *, coords=20, scale=1 / 0.005, bins=_PARALLEL_BINS) -> np.ndarray:
    """Exact law of T = Σ_i round(bins·g(y_i)) for y_i = x + Lap(scale) independent, g(y) = |y| − |y − 1|
    clipped to [−1, 1] (ln of the pair 1 vs 0's likelihood ratio is Σ g(y_i)/scale): each coordinate's
    law on −bins..bins from Laplace CDF differences, convolved ``coords`` times (exact sums)."""
    lap = stats.laplace(x, scale)
    j = np.arange(-bins, bins + 1)
    lo = np.clip((1 + (j - 0.5) / bins) / 2, 0.0, 1.0)
    hi = np.clip((1 + (j + 0.5) / bins) / 2, 0.0, 1.0)
    one = lap.cdf(hi) - lap.cdf(lo)  # y in (0, 1): g = 2y - 1
    one[0] += lap.cdf(0.0)  # y <= 0: g = -1
    one[-1] += lap.sf(1.0)  # y >= 1: g = +1
    law = np.ones(1)
    for _ in range(coords):
        law = np.convolve(law, one)
    return law  # index k: T = k - coords·bins


def oracle_family(case) -> OracleFamily:
    """The oracle's event family and the exact law of ``case``'s pair (bench_dpsniper's definitions)."""
    name = case.name
    if name == "Laplace":
        return _laplace_halflines(name, 1.0, 2.0, 1 / EPS, "closed form: y = x + Lap(1/ε), pair 1 vs 2")
    if name == "NoisyHist1":
        return _laplace_halflines(
            name,
            0.0,
            1.0,
            1 / EPS,
            "closed form on coordinate 0 (0 vs 1 + Lap(1/ε)); the other coordinates "
            "have one law on both sides and leave the likelihood ratio unchanged",
        )
    if name == "NoisyHist2":
        return _laplace_halflines(
            name,
            0.0,
            1.0,
            EPS,
            "closed form on coordinate 0 (0 vs 1 + Lap(ε)); the other coordinates have one law on both sides",
        )
    if name == "ReportNoisyMax3":
        lap = stats.laplace(0.0, 2 / EPS)
        k = len(case.data)
        xa, xb = float(case.data[0]), float(case.neighbor[0])
        return _halflines(
            name,
            f"closed form: P(max ≤ t) = F(t − x)^{k}, F the Lap(2/ε) CDF, x = {xa:g} vs {xb:g}",
            lambda t: lap.cdf(t - xa) ** k,
            lambda t: lap.cdf(t - xb) ** k,
            lambda t: -np.expm1(k * np.log(lap.cdf(t - xa))),
            lambda t: -np.expm1(k * np.log(lap.cdf(t - xb))),
            lambda u: xa + lap.ppf(u ** (1 / k)),
            lambda u: xb + lap.ppf(u ** (1 / k)),
        )
    if name == "ReportNoisyMax1":
        pa, pb = _rnm1_law(case.data, 2 / EPS), _rnm1_law(case.neighbor, 2 / EPS)
        return _atom_sets(
            name,
            "quadrature of ∫ f(y − x_i) Π_{j≠i} F(y − x_j) dy (relative error ~1e-13; sums to 1 within 1e-12)",
            pa,
            pb,
            [f"{{{i}}}" for i in range(len(pa))],
            "every set of the 5 output atoms, both directions",
        )
    if name in _SVT_LAW:
        fine = np.linspace(-1000, 1000, 400_001)
        pa = _svt_patterns(case.data, grid=fine, **_SVT_LAW[name])
        pb = _svt_patterns(case.neighbor, grid=fine, **_SVT_LAW[name])
        pa, pb = pa / pa.sum(), pb / pb.sum()  # the trapezoid totals are 1 + O(1e-9)
        k = len(case.data)
        labels = [f"⊥^{i}⊤" for i in range(k)] + [f"⊥^{k}"]
        return _atom_sets(
            name,
            "bench_dpsniper._svt_patterns (trapezoid over ρ on [−1000, 1000], step 0.005, normalised; changes by < 1e-5 from step 0.05; adaptive quadrature agrees within 1e-9 on the best atoms, 10^7 draws a side within sampling error)",
            pa,
            pb,
            labels,
            f"every set of the {k + 1} answer patterns, both directions",
        )
    if name == "RAPPOR":
        f, p, q = 0.75, 0.45, 0.55  # rappor()'s defaults
        hi = q * (1 - f / 2) + p * (f / 2)  # P(report 1 | Bloom bit 1)
        lo = q * (f / 2) + p * (1 - f / 2)  # P(report 1 | Bloom bit 0)
        # p + q = 1 makes lo = 1 - hi: a differing bit agrees with the data's Bloom filter w.p. hi under
        # the data and 1 - hi under the neighbour, so an atom's law depends only on how many agree
        assert math.isclose(hi + lo, 1.0, rel_tol=0, abs_tol=1e-15)
        d = 2 * len(_RAPPOR_BITS[0])  # bits set in one Bloom filter only
        j = np.arange(d + 1)  # of them, the bits that agree with the data's filter
        pa = hi**j * (1 - hi) ** (d - j)
        pb = (1 - hi) ** j * hi ** (d - j)
        sizes = [math.comb(d, int(i)) for i in j]
        return _atom_sets(
            name,
            f"closed form: the {d} bits set in one Bloom filter only are independent, P(1) = {hi:g} or {lo:g}; "
            "the other 14 bits have one law on both sides",
            pa,
            pb,
            [f"agreeing with the data on {int(i)} of {d} bits" for i in j],
            f"every set of the 2^{d} patterns of the {d} differing bits (atoms with equal counts are exchangeable: "
            "an event is a number of atoms per class), both directions",
            sizes,
        )
    if name == "LaplaceParallel":
        k = _PARALLEL_BINS
        la, lb = _parallel_law(float(case.data)), _parallel_law(float(case.neighbor))
        coords = (len(la) - 1) // (2 * k)
        s = (np.arange(len(la)) - coords * k) / k
        ca, cb = np.cumsum(la), np.cumsum(lb)
        ta = np.concatenate([[1.0], 1 - ca[:-1]])  # P(T >= s_i)
        tb = np.concatenate([[1.0], 1 - cb[:-1]])
        p1 = np.concatenate([ta, tb, ca, cb])
        p0 = np.concatenate([tb, ta, cb, ca])
        what = tuple(
            [f"Σg >= {v:g} (data over neighbour)" for v in s]
            + [f"Σg >= {v:g} (neighbour over data)" for v in s]
            + [f"Σg <= {v:g} (data over neighbour)" for v in s]
            + [f"Σg <= {v:g} (neighbour over data)" for v in s]
        )
        return OracleFamily(
            name,
            f"exact law of Σ_i round({k}·g(y_i))/{k}, g(y) = abs(y) − abs(y − 1) clipped to [−1, 1] (Σg/200 is the log likelihood ratio), "
            "by convolving the 20 coordinates' laws",
            "thresholds on the (rounded) likelihood-ratio statistic Σg, both directions",
            *_frontier(p1, p0, what),
        )
    raise ValueError(f"case={name!r} has no oracle law; add one to oracle_family.")


def _inverts(k1, k0, n, lo, hi, level) -> np.ndarray:
    """Whether the Clopper-Pearson bounds are what they claim: the binomial tail at each bound is the
    level (checked forward with ``betainc``, relative error < 1e-6). scipy 1.17's ``betaincinv`` /
    ``betainccinv`` (Boost ``ibeta_inv``) are wrong at first argument exactly 1000 with a large second
    one (k1 = 1000 for n >~ 6·10^7, k0 = 999 for n >~ 3·10^6): those candidates are dropped."""
    with np.errstate(invalid="ignore", divide="ignore"):
        t1 = np.where(k1 > 0, _special.betainc(np.maximum(k1, 1), n - k1 + 1, lo), level)
        t0 = np.where(k0 < n, _special.betaincc(k0 + 1, np.maximum(n - k0, 1), hi), level)
    return (np.abs(t1 / level - 1) < 1e-6) & (np.abs(t0 / level - 1) < 1e-6)


def auditor_certification(samples: int) -> int:
    """Certification samples a side out of ``samples`` in the audits measured here (audit's default
    train_fraction = 0.1, at least min(samples // 2, 2000) and at most 4·10^6 training samples: the
    rule in dpharness.auditors._audit)."""
    return samples - int(min(max(round(samples * 0.1), min(samples // 2, 2_000)), 4_000_000))


def oracle_bound(
    fam: OracleFamily, n: int, confidence: float = CONFIDENCE, *, candidates: int = 1, split: bool = False
) -> OracleBound:
    """The oracle's certified bound at n samples a side: max over the family's events of
    ln(p1_lo / p0_hi) at the expected counts k1 = floor(n·p1), k0 = ceil(n·p0), each bound a one-sided
    Clopper-Pearson bound at tail mass (1 − confidence)/(2·candidates) (:func:`bonferroni_level`; the
    oracle proper has candidates = 1); the best event's value is recomputed by
    :func:`epsilon_lower_bound` on its two counts. ``split=True`` certifies on
    :func:`auditor_certification` (n) samples only (the auditor's overheads with a perfect event)."""
    m = auditor_certification(n) if split else n
    level = bonferroni_level(confidence, candidates)
    k1 = np.floor(fam.p1 * m + _COUNT_TOL).astype(np.int64)
    k0 = np.minimum(np.ceil(fam.p0 * m - _COUNT_TOL), m).astype(np.int64)
    ok = k1 > 0
    if not np.any(ok):
        return OracleBound(n, 0.0, "none", 0.0, 0.0, 0, 0)
    lo = clopper_pearson_lower(k1[ok], m, level)
    hi = clopper_pearson_upper(k0[ok], m, level)
    per = np.where(_inverts(k1[ok], k0[ok], m, lo, hi, level), np.log(lo) - np.log(hi), -np.inf)
    i = int(np.flatnonzero(ok)[int(np.argmax(per))])
    eb = epsilon_lower_bound(int(k1[i]), m, int(k0[i]), m, confidence=confidence, candidates=candidates)
    return OracleBound(n, eb.epsilon, fam.what[i], float(fam.p1[i]), float(fam.p0[i]), int(k1[i]), int(k0[i]))


def oracle_samples(fam: OracleFamily, target: float, *, start: int, stop: int, **kw):
    """(first doubling-grid point start·2^k whose oracle bound >= target, its OracleBound, the smallest n
    reaching the target by bisection between the grid point before and that one); (None, last, None)
    when the grid passes ``stop``. The bisection assumes the bound is monotone in n between the two grid
    points (it is up to the one-hit steps of the rounded counts). ``kw``: :func:`oracle_bound`'s."""
    prev, r = 0, None
    for n in _grid(start, stop):
        r = oracle_bound(fam, n, **kw)
        if r.epsilon >= target:
            lo, hi = prev, n  # bound(lo) < target <= bound(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if oracle_bound(fam, mid, **kw).epsilon >= target:
                    hi = mid
                else:
                    lo = mid
            return n, r, hi
        prev = n
    return None, r, None


ORACLE_STOP = 10**13  # the oracle's grid goes on past the audits' --max (LaplaceParallel needs ~10^12)


@dataclass(frozen=True)
class OracleRow:
    """One mechanism's oracle figures: grid and exact samples a side for the target, the best event
    there, and the same with the auditor's overheads (m = MAX_EVENTS candidates, its training split)."""

    case: object
    family: OracleFamily
    target: float
    grid: int | None
    exact: int | None
    best: OracleBound
    split_grid: int | None
    split_exact: int | None


def oracle_row(case, fraction: float = 0.95, start: int = 100_000) -> OracleRow:
    fam = oracle_family(case)
    target = fraction * case.true_eps
    g, best, e = oracle_samples(fam, target, start=start, stop=ORACLE_STOP)
    sg, _, se = oracle_samples(fam, target, start=start, stop=ORACLE_STOP, candidates=MAX_EVENTS, split=True)
    return OracleRow(case, fam, target, g, e, best, sg, se)


def oracle_table(rows: list[OracleRow]) -> list[str]:
    """The oracle's table (markdown lines): law, family, samples needed, the best event there."""
    lines = [
        "| mechanism | exact law used | event family searched | oracle samples needed (grid) | exact smallest n "
        "(bisection) | best event at the grid n: p1 / p0 | oracle bound there | with the auditor's m = 2 and "
        "training split (grid / exact) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b = r.best
        lines.append(
            f"| {r.case.name} | {r.family.law} | {r.family.family} | {_fmt(r.grid)} | {_fmt(r.exact)} | "
            f"{b.event}: {b.p1:.6g} / {b.p0:.6g} | {b.epsilon:.4g} | {_fmt(r.split_grid)} / {_fmt(r.split_exact)} |"
        )
    return lines


def _fmt(n) -> str:
    return "—" if n is None else f"{n:,}"


def ratio_text(measured: int | None, row: OracleRow, stop: int) -> str:
    """ours / oracle: measured grid n over the oracle's exact n. The measured n is the first doubling-grid
    point that reached the target, so the audit's own smallest n lies in (n/2, n] and the ratio in
    (n/2, n] / exact; "> stop / exact" when the grid never reached it."""
    if row.exact is None:
        return "—"
    if measured is None:
        return f"> {stop / row.exact:.2g}"
    hi = measured / row.exact
    return f"{hi:.2f} (in {hi / 2:.2f}–{hi:.2f})"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--fraction", type=float, default=0.95)
    ap.add_argument("--start", type=float, default=1e5)
    ap.add_argument("--max", type=float, default=2e8)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "efficiency.md"))
    ap.add_argument(
        "--oracle", action="store_true", help="print the oracle's table only (exact laws, no audit; seconds)"
    )
    args = ap.parse_args(argv)
    start, stop = int(args.start), int(args.max)
    selected = [c for c in CASES if not args.only or c.name in args.only]
    if args.oracle:
        print("\n".join(oracle_table([oracle_row(c, args.fraction, start) for c in selected])))
        return
    rows = []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        target = args.fraction * case.true_eps
        needed = []
        cpu_ratio = cpu_audit = cpu_draw = None
        for seed in range(args.seeds):
            n, r = samples_needed(case, target, seed, start=start, stop=stop)
            needed.append(n)
            if seed == 0 and n is not None:
                t0 = _cpu()
                _audit(case, n, 0)
                cpu_audit = _cpu() - t0
                cpu_draw = draw_cpu(case, n)
                cpu_ratio = cpu_audit / cpu_draw
        match, _ = samples_needed(case, case.dpsniper, 0, start=start, stop=stop)
        worst = None if any(n is None for n in needed) else max(needed)
        rows.append(
            (case, target, needed, worst, match, cpu_audit, cpu_draw, cpu_ratio, oracle_row(case, args.fraction, start))
        )
        print(
            f"{case.name:16s} target {target:.4f}: needed {needed} -> {worst}; DP-Sniper's bound at {match}; "
            f"CPU audit {cpu_audit} s / draw {cpu_draw} s = {cpu_ratio}",
            flush=True,
        )
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]

    def fmt_n(n):
        return f"> {stop:,}" if n is None else f"{n:,}"

    def fewer(n):
        return "—" if n is None else f"{DPSNIPER_SAMPLES / n:.0f}×"

    lines = [
        "# Sample efficiency against the black-box limit (claimed ε = 0.1)",
        "",
        f"Generated by `python benchmarks/bench_efficiency.py` ({platform.machine()}, {os.cpu_count()} cores, "
        f"load average {' '.join(load)} at the end; seeds 0..{args.seeds - 1}; doubling grid from {start:,} to "
        f"{stop:,} samples a side, training included). Certified at {CONFIDENCE:.0%} confidence with "
        f"max_events={MAX_EVENTS}, ideal numerics, on bench_dpsniper's pairs. DP-Sniper certifies with 2·10^8 "
        "samples a side (plus training).",
        "",
        f"| mechanism | true ε | target ({args.fraction:g}·true) | samples needed (per seed) | needed (all seeds) | "
        "fewer than DP-Sniper | samples to match DP-Sniper's bound | audit CPU s | draw CPU s | CPU multiple | "
        "oracle samples needed | ours / oracle |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case, target, needed, worst, match, ca, cd, ratio, orow in rows:
        per = ", ".join(fmt_n(n) for n in needed)
        lines.append(
            f"| {case.name} | {case.true_eps:.4g} | {target:.4g} | {per} | {fmt_n(worst)} | {fewer(worst)} | "
            f"{fmt_n(match)} ({case.dpsniper}) | {'—' if ca is None else f'{ca:.2f}'} | "
            f"{'—' if cd is None else f'{cd:.2f}'} | {'—' if ratio is None else f'{ratio:.2f}×'} | "
            f"{_fmt(orow.grid)} (exact {_fmt(orow.exact)}) | {ratio_text(worst, orow, stop)} |"
        )
    lines += [
        "",
        "CPU multiple: the audit's CPU time with one worker (training, event proposal and ranking, certification "
        "counts, statistics) over the CPU time of drawing the same outputs with the mechanism alone. Target: ≤ 1.5×.",
        "",
        "Oracle: the best event of the family known in advance, certified alone (m = 1) on all n samples a side with "
        "the auditor's Clopper-Pearson bounds at the same confidence, read at the expected counts floor(n·p1), "
        "ceil(n·p0) (`--oracle`; target for ours / oracle: ≤ 1.5):",
        "",
        *oracle_table([r[-1] for r in rows]),
    ]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
