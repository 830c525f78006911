"""ε(δ) of Poisson-subsampled Gaussian / Laplace compositions: the certified PLD (as the prover composes it,
finer grids included) against dp_accounting's connect-the-dots PLD at a fine interval (uncertified)."""

import time
from fractions import Fraction

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from dpharness.proofs.parts import _prove

G = 2**20  # the prover's default granularity 2^-20: τ = σ·2^20, shift 2^20 grid steps


def ref(event, delta, interval):
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(event)
    return acc.get_epsilon(delta)


cases = [
    ("gaussian", 0.8, 0.1, 100, 1e-5),
    ("gaussian", 2.0, 0.5, 1000, 1e-6),
    ("gaussian", 1.0, 0.01, 5000, 1e-5),
    ("gaussian", 0.6, 1.0, 10, 1e-5),
    ("gaussian", 5.0, 0.9, 3000, 1e-8),
    ("laplace", 1.0, 0.05, 2000, 1e-5),
    ("laplace", 3.0, 0.5, 200, 1e-6),
]
for kind, s, q, T, delta in cases:
    t0 = time.time()
    if kind == "gaussian":
        entry = ("gaussian", Fraction(s * s) * G * G, G) + ((Fraction(q),) if q < 1 else ())
        ev = dp_event.GaussianDpEvent(s)
    else:
        entry = ("laplace", Fraction(s) * G, G) + ((Fraction(q),) if q < 1 else ())
        ev = dp_event.LaplaceDpEvent(s)
    if q < 1:
        ev = dp_event.PoissonSampledDpEvent(q, ev)
    ev = dp_event.SelfComposedDpEvent(ev, T)
    up = _prove._composed_items(((entry, T),), True)
    ours = up.epsilon(delta) if up is not None else float("nan")
    t1 = time.time()
    theirs = [ref(ev, delta, i) for i in (1e-3, 1e-4)]
    print(
        f"{kind} s={s} q={q} T={T} δ={delta}: ours {ours:.6f} ({t1 - t0:.1f}s), dp_accounting {theirs[0]:.6f} (1e-3) "
        f"{theirs[1]:.6f} (1e-4), ours/theirs − 1 = {ours / theirs[1] - 1:+.4%}",
        flush=True,
    )
