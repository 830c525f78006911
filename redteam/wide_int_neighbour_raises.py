"""Reproducer: a built-in whose records are unbounded reals refuses a 64-bit integer data set by
VALUE (an entry beyond 2**53), so of two neighbours in its domain one releases and the other raises.

ExponentialMechanism: u = [2**53, 0, 0, 0] and u' = [2**53 + 1, 0, 0, 0] are at L-inf distance 1
(neighbours under BoundedChange(1, "linf")), both in RealInterval(); sample(u) releases, sample(u')
raises ParameterError. report_noisy_max_exponential, snapping and
sparse_vector likewise (clamped_sum, a declared mechanism, refuses the int64 dtype whatever the values). The raise is an
output that tells the two inputs apart with certainty: no finite ε, while the proof says PROVED.
Declared (parts) mechanisms already refuse such arrays by dtype (InputSpec.any_data)."""

import numpy as np

from dpharness import registry

rng = np.random.default_rng(0)
T = 2**53
cases = {
    "exponential": (np.array([T, 0, 0, 0], dtype=np.int64), np.array([T + 1, 0, 0, 0], dtype=np.int64)),
    "report_noisy_max_exponential": (
        np.array([T, 0, 0, 0, 0], dtype=np.int64),
        np.array([T + 1, 0, 0, 0, 0], dtype=np.int64),
    ),
    "snapping": (np.array([T], dtype=np.int64), np.array([T + 1], dtype=np.int64)),
    "sparse_vector": (None, None),
}
for name, (d, n) in cases.items():
    m = registry.get(name)
    m = m() if isinstance(m, type) else m
    if d is None:
        d = np.zeros(m.input_spec.dim, dtype=np.int64)
        d[0] = T
        n = d.copy()
        n[0] = T + 1
    for label, x in (("data", d), ("neighbor", n)):
        try:
            m.sample(x, 3, rng)
            print(f"{name} {label}: released")
        except Exception as e:  # noqa: BLE001
            print(f"{name} {label}: raised {type(e).__name__}: {str(e)[:90]}")
