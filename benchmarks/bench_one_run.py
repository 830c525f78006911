"""One-run auditing (Steinke, Nasr & Jagielski 2023) of DP-SGD declared from parts and of Opacus training.

For each setup, ONE run with m canaries (each included with probability 1/2), the one-run ε lower
bound (95%, the default grid of guess counts under a union bound, δ = 1e-5) beside the claimed ε:
the correct noise, and the noise cut 10× while claiming the correct noise's ε (flagged when the
bound exceeds the claim). Then the many-run audit (``dpharness.audit``) at small T for comparison.

Setups:

* parts: ``dp.iterate(T, dp.poisson_sample(q) >> dp.map_records(grad, columns=d) >> dp.clip_norm(1)
  >> dp.compose(*(dp.column(j) >> dp.sum() >> dp.gaussian(σ) for j in range(d))), update=θ − 0.05·g,
  output="releases")``: logistic regression on records (x1, x2, slot_1..slot_m, y) in [−1, 1]^(m+3);
  canary i = 1 in slot i with label −1 (its clipped gradient is exactly the unit vector of slot i);
  white-box score (every round's release, the dpharness default for this shape); n = 100 base
  records. Claim: this d-column declaration releases a Gaussian with L2 sensitivity 1 per round
  (clip 1), so its privacy is that of one Poisson-subsampled Gaussian per round: the ε that
  dpharness PROVES for the 1-column DP-SGD with the same q, σ, T (its PLD, two decimals up), with
  dp_accounting's PLD and Opacus's RDP beside it.
* Opacus: :func:`dpharness.auditors.libraries.opacus.one_run_training` (PrivacyEngine, logistic
  regression, input-space canaries in their own input slot, black-box score: the final model's
  loss); claim: Opacus's RDP accountant.
* many-run at small T: the 1-column parts DP-SGD at T = 3 (``dpharness.audit`` with the proof's
  witness pair) and Opacus's one DP-SGD step target (``opacus:dpsgd_step``, T = 1, q = 1).

Run: ``python benchmarks/bench_one_run.py [--quick] [--out benchmarks/results/one_run.md]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import time
import warnings
from importlib import metadata

import numpy as np

import dpharness
from dpharness import AddRemove, ApproxDP, RealBox, parts as dp

DELTA = 1e-5
SEED = 2026


def _dirac_dpsgd(m: int, times: int, rate: float, sigma: float, eps: float, n: int = 100):
    d = 2 + m

    def grad(theta, r):
        x, y = r[:d], r[d]
        return (1 / (1 + np.exp(-float(theta @ x))) - y) * x

    noisy_sum = dp.compose(*[dp.column(j) >> dp.sum() >> dp.gaussian(sigma=sigma) for j in range(d)])
    mech = dp.mechanism(
        name="dirac_dpsgd",
        records=RealBox(-1, 1, d + 1),
        relation=AddRemove(),
        steps=dp.iterate(
            times,
            dp.poisson_sample(rate) >> dp.map_records(grad, columns=d) >> dp.clip_norm(1) >> noisy_sum,
            init=np.zeros(d),
            update=lambda th, g: th - 0.05 * np.asarray(g),
            output="releases",
        ),
        claim=ApproxDP(eps, DELTA),
    )
    rng = np.random.default_rng(SEED)
    data = np.zeros((n, d + 1))
    data[:, :2] = rng.uniform(-1, 1, (n, 2))
    data[:, d] = data[:, 0] + data[:, 1] > 0
    canaries = np.zeros((m, d + 1))
    canaries[np.arange(m), 2 + np.arange(m)] = 1.0
    canaries[:, d] = -1.0
    return mech, canaries, data


def _scalar_dpsgd(times: int, rate: float, sigma: float, eps: float):
    def grad(theta, r):
        x, y = r
        return (1 / (1 + np.exp(-theta[0] * x)) - y) * x

    return dp.mechanism(
        name="dpsgd",
        records=RealBox(-1, 1, 2),
        relation=AddRemove(),
        steps=dp.iterate(
            times,
            dp.poisson_sample(rate) >> dp.map_records(grad) >> dp.clip_norm(1) >> dp.sum() >> dp.gaussian(sigma=sigma),
            init=[0.0],
            update=lambda th, g: th - 0.05 * g,
        ),
        claim=ApproxDP(eps, DELTA),
    )


def _pld_epsilon(rate: float, sigma: float, times: int) -> float:
    from dp_accounting import dp_event, pld

    acc = pld.PLDAccountant()
    acc.compose(dp_event.PoissonSampledDpEvent(rate, dp_event.GaussianDpEvent(sigma)), times)
    return float(acc.get_epsilon(DELTA))


def _rdp_epsilon(rate: float, sigma: float, times: int) -> float:
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [(sigma, rate, times)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(acc.get_epsilon(DELTA))


def _proved_claim(rate: float, sigma: float, times: int) -> tuple[float, str]:
    """The smallest ε (two decimals) at or above dp_accounting's PLD value that dpharness proves for
    the 1-column DP-SGD with the same (q, σ, T)."""
    from dpharness.proofs import Verdict

    eps = math.ceil(_pld_epsilon(rate, sigma, times) * 100) / 100
    for _ in range(20):
        if dpharness.prove(_scalar_dpsgd(times, rate, sigma, eps)).verdict is Verdict.PROVED:
            return eps, f"PROVED by dpharness for the 1-column DP-SGD (q = {rate}, σ = {sigma}, T = {times})"
        eps = round(eps + 0.01, 2)
    raise RuntimeError("no claim proved within 0.2 of the PLD value")


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _one_run_row(label: str, target, claim: float, sigma: float, m: int, seed: int, **kw) -> str:
    t0 = time.perf_counter()
    res = dpharness.one_run_audit(target, rng=np.random.default_rng(seed), **kw)
    secs = time.perf_counter() - t0
    assert res.epsilon == claim
    verdict = "pass" if res.passed else "**FLAGGED**"
    row = _row(
        [
            label,
            m,
            "white-box" if res.white_box else "black-box",
            sigma,
            f"{claim:.3f}",
            f"{res.epsilon_lower_bound:.3f}",
            f"({res.k_plus}, {res.k_minus})",
            f"{res.correct}/{res.guesses}",
            res.included,
            verdict,
            f"{secs:.0f}",
        ]
    )
    print(row, flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="m = 100 and 200 only, T = 50 (a smoke run)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "one_run.md"))
    args = ap.parse_args()
    load0 = os.getloadavg()
    started = time.time()
    rate, sigma, times = 0.1, 2.0, (50 if args.quick else 100)
    ms = (100, 200) if args.quick else (100, 200, 500, 1000)
    header = [
        "setup",
        "m",
        "score",
        "σ used",
        "claimed ε",
        "one-run ε ≥ (95%)",
        "guesses (k+, k−)",
        "correct",
        "canaries in",
        "verdict",
        "s",
    ]
    lines = [_row(header), _row(["---"] * len(header))]

    claim, claim_source = _proved_claim(rate, sigma, times)
    refs = (
        f"dp_accounting PLD ε({DELTA:g}) = {_pld_epsilon(rate, sigma, times):.3f}, Opacus RDP = "
        f"{_rdp_epsilon(rate, sigma, times):.3f}"
    )
    print("parts claim", claim, claim_source, refs, flush=True)
    for m in ms:
        for s in (sigma, sigma / 10):
            if s == sigma and m not in (ms[0], ms[-1]):
                continue
            mech, canaries, data = _dirac_dpsgd(m, times, rate, s, claim)
            lines.append(
                _one_run_row(
                    f"parts DP-SGD, q = {rate}, T = {times}", mech, claim, s, m, SEED + m, canaries=canaries, data=data
                )
            )

    from dpharness.auditors.libraries.opacus import one_run_training

    opacus_claim = None
    for m in ms:
        n = 10 * m
        good = one_run_training(
            canaries=m, n=n, steps=times, sample_rate=rate, noise_multiplier=sigma, rng=np.random.default_rng(SEED)
        )
        opacus_claim = good.epsilon
        for s in (sigma, sigma / 10):
            if s == sigma and m not in (ms[0], ms[-1]):
                continue
            tgt = (
                good
                if s == sigma
                else dataclasses.replace(
                    one_run_training(
                        canaries=m,
                        n=n,
                        steps=times,
                        sample_rate=rate,
                        noise_multiplier=s,
                        rng=np.random.default_rng(SEED),
                    ),
                    epsilon=good.epsilon,
                )
            )
            lines.append(
                _one_run_row(f"Opacus training, q = {rate}, T = {times}, n = {n}", tgt, good.epsilon, s, m, SEED + m)
            )

    # many-run audits at small T
    many_header = [
        "setup",
        "T",
        "σ used",
        "claimed ε",
        "many-run ε ≥ (95%)",
        "verdict",
        "samples a side",
        "family",
        "s",
    ]
    many = [_row(many_header), _row(["---"] * len(many_header))]
    small_t = 3
    small_claim, _ = _proved_claim(rate, sigma, small_t)
    samples = 2000 if args.quick else 4000
    for s in (sigma, sigma / 10):
        t0 = time.perf_counter()
        res = dpharness.audit(_scalar_dpsgd(small_t, rate, s, small_claim), samples=samples, seed=SEED, progress=False)
        row = _row(
            [
                f"parts DP-SGD (1 column), q = {rate}",
                small_t,
                s,
                f"{small_claim:.3f}",
                f"{res.epsilon_lower_bound:.3f}",
                "pass" if res.passed else "**FLAGGED**",
                res.samples,
                res.extra.get("family"),
                f"{time.perf_counter() - t0:.0f}",
            ]
        )
        print(row, flush=True)
        many.append(row)
    from dpharness.auditors.libraries import get_target

    step_claim = get_target("opacus:dpsgd_step", {"noise_multiplier": sigma}).epsilon
    for s in (sigma, sigma / 10):
        t = get_target("opacus:dpsgd_step", {"noise_multiplier": s})
        t0 = time.perf_counter()
        res = dpharness.audit(
            t.fn,
            t.data,
            t.neighbor,
            epsilon=step_claim,
            delta=t.delta,
            vectorized=True,
            samples=samples,
            seed=SEED,
            progress=False,
            workers=1,
        )
        row = _row(
            [
                "Opacus one DP-SGD step (opacus:dpsgd_step), q = 1",
                1,
                s,
                f"{step_claim:.3f}",
                f"{res.epsilon_lower_bound:.3f}",
                "pass" if res.passed else "**FLAGGED**",
                res.samples,
                res.extra.get("family"),
                f"{time.perf_counter() - t0:.0f}",
            ]
        )
        print(row, flush=True)
        many.append(row)

    versions = ", ".join(f"{p} {metadata.version(p)}" for p in ("numpy", "scipy", "torch", "opacus", "dp-accounting"))
    text = f"""# One-run auditing (Steinke, Nasr & Jagielski 2023)

`python benchmarks/bench_one_run.py{" --quick" if args.quick else ""}`: {platform.node()}, {os.cpu_count()} cores,
{platform.python_implementation()} {platform.python_version()}, load average {load0[0]:.1f} at the start and
{os.getloadavg()[0]:.1f} at the end (other sessions share the machine), {time.time() - started:.0f} s in all;
{versions}. Seeds: data {SEED}, one-run audit m: seed {SEED} + m; many-run audits seed {SEED}.

ONE run per row: m canaries, each included with probability 1/2; the bound is the largest ε the
observed correct guesses rule out at 95% (exact binomial tail with the δ = {DELTA:g} term of their
main theorem), the best of the default grid of guess counts (k+ = k− = ⌈f·m/2⌉, f in 0.02, 0.05,
0.1, 0.2, 0.5, 1) under a union bound. A row with σ cut 10× claims the correct σ's ε: FLAGGED means
the one-run bound exceeds that claim.

Claimed ε. Parts: {claim:.2f} ({claim_source}; {refs}); the d-column declaration audited is one
Gaussian with L2 sensitivity 1 per round (its records are clipped to L2 norm 1), so this is its
privacy too (dpharness's prover accounts the d column sums separately and proves only a much
larger ε for it). Opacus: its RDP accountant, {opacus_claim:.3f} (q = {rate}, σ = {sigma}, T = {times}).

{chr(10).join(lines)}

Many-run audit (`dpharness.audit`, 95%) at small T, for comparison (each sample a side is one full
training run of T rounds; the claim is the correct σ's):

{chr(10).join(many)}
"""
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
