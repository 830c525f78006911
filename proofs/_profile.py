"""The privacy profile ε(δ) of a mechanism declared from parts, as its proof accounts it (issue 15 §5).

This is one more interpreter of the parts structure (STYLE, example 14). It walks the structure as
the proof does (:class:`dpharness.proofs.parts._Walk`) and, for each δ, takes the smallest ε that
any of the proof's routes certifies:

* pure ε, when every part is pure;
* the zCDP conversion (Canonne, Kamath & Steinke 2020, Prop. 12), minimised over α;
* the privacy-loss distribution (PLD) of the leaves' worst pairs, with its certified upper bound;
  its lower end is given only where one neighbouring pair attains every leaf's worst pair at once
  (that pair is named): only there is it a lower bound on the mechanism's own ε(δ);
* a constant ε from δ₀ on, for a structure with an exact δ₀ (partition selection).

Every value is an upper bound on the true ε(δ), by the same arguments as the proof's. A profile
point is not a verdict: the verdict on the claim is :func:`dpharness.prove`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PrivacyProfile", "privacy_profile"]

DEFAULT_DELTAS = tuple(float(f"1e{k // 2}") * (1 if k % 2 == 0 else math.sqrt(10)) for k in range(-24, -1))


@dataclass(frozen=True)
class PrivacyProfile:
    """``points``: (δ, ε upper, ε lower or None) per δ, ascending in δ; ``method`` per point names the
    route that gave the upper value; ``pure``: the pure ε when every part is pure, else None;
    ``lower_pair``: the neighbouring pair that attains the lower ends (given only where one does)."""

    points: tuple
    methods: tuple
    pure: float | None
    lower_pair: str | None = None

    def epsilon(self, delta: float) -> float:
        """An upper bound on ε(``delta``): the upper ε at the largest profiled δ <= ``delta`` (ε(δ) is
        non-increasing in δ); ∞ below the smallest profiled δ."""
        best = math.inf
        for d, e, _ in self.points:
            if d <= delta:
                best = e
        return best


def _zcdp_eps(rho: float, delta: float) -> float:
    """min over α > 1 of αρ − (ln δ + ln(α − 1) − α ln(1 − 1/α))/(α − 1) (CKS 2020, Prop. 12 solved for ε)."""
    if rho == 0:
        return 0.0
    best = math.inf
    for a in np.concatenate([np.linspace(1.0001, 3, 300), np.geomspace(3, 1e9, 600)]):
        e = a * rho - (math.log(delta) + math.log(a - 1) - a * math.log1p(-1 / a)) / (a - 1)
        best = min(best, e)
    return max(best, 0.0)


def privacy_profile(mechanism: Any, deltas: tuple = DEFAULT_DELTAS) -> PrivacyProfile | None:
    """ε(δ) at each of ``deltas`` for a mechanism declared from parts (or a catalog class built from
    parts), or None when the structure has no account the profile can read (local randomizers,
    iterated or adaptive structures with no PLD)."""
    from dpharness.mechanisms.parts import PartsMechanism, input_distance

    from ._kernel import ProofBuilder
    from .parts import _prove as proof
    from .parts._walk import Profile, _Walk

    m = getattr(mechanism, "parts", mechanism)
    if not isinstance(m, PartsMechanism) or m.shape == "record":
        return None
    walk = _Walk(ProofBuilder(m))
    prof = walk.walk("", m.steps, m.space, input_distance(m.relation, m.space))
    assert isinstance(prof, Profile)  # a mechanism's steps are randomized: a profile, not (space, distance)
    delta0 = float(prof.delta)
    pure = None if prof.eps is None else float(prof.eps)
    rho = float(prof.rho) if prof.rho is not None and math.isfinite(float(prof.rho)) else None
    upper = lower = pair = None
    counted = proof._pld_leaves(prof) if delta0 == 0 else None
    if counted is not None:
        upper = proof._composed(counted, True)
        if upper is not None:
            lower, pair = proof.certified_lower(m, counted, upper, upper.epsilon(1e-6))
    points, methods = [], []
    for d in sorted(deltas):
        options = []
        if delta0 > 0:
            if d >= delta0 and pure is not None:
                options.append((pure, "ε with its exact δ₀"))
        else:
            if pure is not None:
                options.append((pure, "pure ε"))
            if rho is not None:
                options.append((_zcdp_eps(rho, d), "zCDP conversion"))
            if upper is not None:
                options.append((upper.epsilon(d), "PLD (certified upper)"))
        if not options:
            points.append((d, math.inf, None))
            methods.append("none")
            continue
        e, how = min(options)
        e = max(e, 0.0)  # δ(0) <= δ already: every ε >= 0 holds (a PLD's ε(δ) may read below 0 there)
        lo = max(lower.epsilon(d), 0.0) if lower is not None else None
        points.append((d, e, lo))
        methods.append(how)
    return PrivacyProfile(tuple(points), tuple(methods), pure, pair)
