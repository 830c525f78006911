"""The privacy account of a node of a parts structure, and how combinators build one from their
children's (the algebra the walk in :mod:`dpharness.proofs.parts` applies; the walk adds the
obligations that justify each step).

Every node has one complete :class:`Account`; every combinator reads every field of every child and
returns a complete account, so no child can drop out of any theorem applied later:

* ``eps``: pure ε (exact), or None when the node is not pure DP;
* ``rho``: zCDP ρ (exact; every node here is ρ-zCDP; ε-DP gives ε²/2-zCDP, Bun & Steinke 2016 Prop. 1.4);
* ``units``: the node as a sequential composition of independent units, ``units[i]`` the pure ε of
  unit i (None: a unit that is not pure DP). What advanced composition (Dwork & Roth 2014 Thm 3.20)
  reads: k = the number of units, ε₀ = the largest. Complete by construction: a leaf is one unit,
  a composition concatenates its parts' units, and parallel composition under substitution, whose
  loss is one of two scenarios, reports units that dominate both (padding a composition with 0-DP
  units changes nothing);
* ``single``: the exact profile of a node that is exactly one noise leaf (``("laplace", K, scale, g)``,
  ``("gaussian", τ², D)``, ``("rr", k, L)``), else None; a combinator of two or more leaves drops it;
* ``pld``: the node's dominating pair as a product of scalar leaves' worst pairs, one entry per leaf
  (``("laplace", t, D)``, ``("gaussian", τ², D)``, ``("rr", k, L)``; a leaf whose shift is 0 adds
  nothing), for the privacy-loss-distribution accountant (:mod:`._pld`); None when some leaf has no
  such pair here (a vector leaf, RAPPOR) or a combinator has no single dominating pair (parallel
  under substitution: two scenarios). The product of dominating pairs dominates the composition
  (Zhu, Dong & Wang 2022, Thm 10);
* ``delta``: the δ of (ε, δ) leaves (partition selection, :mod:`dpharness.proofs.parts.grouping`), exact; 0 for every
  other node. Combinators add it (basic composition), multiply it (repeat), scale it by the rate
  (Poisson subsampling) or take the worse scenario (parallel under substitution); an account with
  δ > 0 is judged by basic composition only (its ``rho`` is ∞ and its ``pld`` None).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterator

import sympy as sp

__all__ = [
    "Account",
    "Bag",
    "leaf",
    "compose",
    "repeat",
    "poisson",
    "group",
    "parallel_add_remove",
    "parallel_substitute",
    "advanced_units",
]


class Bag:
    """A multiset in order of first appearance: each distinct value with its multiplicity. An account's
    units and PLD entries are bags, so ``repeat(10**9, part)`` is one entry counted 10^9 times (its size
    is the number of distinct units, never the number of repetitions). ``len`` is the total count;
    ``distinct`` and ``counts`` read it without expanding; iterating expands every copy (for small bags
    only). Equality is multiset equality, also against a tuple."""

    __slots__ = ("counts",)

    def __init__(self, values: Any = ()) -> None:
        merged: dict = {}
        for v in values:
            merged[v] = merged.get(v, 0) + 1
        self.counts: tuple = tuple(merged.items())

    @classmethod
    def of(cls, counts: Any) -> "Bag":
        """A bag from (value, multiplicity) pairs; equal values merge, zero multiplicities drop."""
        merged: dict = {}
        for v, n in counts:
            if n:
                merged[v] = merged.get(v, 0) + n
        bag = cls()
        bag.counts = tuple(merged.items())
        return bag

    @property
    def distinct(self) -> tuple:
        return tuple(v for v, _ in self.counts)

    def __len__(self) -> int:
        return builtins.sum(n for _, n in self.counts)

    def __bool__(self) -> bool:
        return bool(self.counts)

    def __iter__(self) -> Iterator:
        for v, n in self.counts:
            for _ in range(n):
                yield v

    def __add__(self, other: Any) -> "Bag":
        return Bag.of(self.counts + _bag(other).counts)

    def __mul__(self, times: int) -> "Bag":
        return Bag.of((v, n * times) for v, n in self.counts)

    __rmul__ = __mul__

    def map(self, fn: Callable) -> "Bag":
        return Bag.of((fn(v), n) for v, n in self.counts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Bag, tuple, list)):
            return NotImplemented
        return dict(self.counts) == dict(_bag(other).counts)

    def __hash__(self) -> int:
        return hash(frozenset(self.counts))

    def __repr__(self) -> str:
        return "Bag(" + ", ".join(f"{v!r}" + (f" × {n}" if n != 1 else "") for v, n in self.counts) + ")"


def _bag(values: Any) -> Bag:
    return values if isinstance(values, Bag) else Bag(values)


@dataclass(frozen=True)
class Account:
    """A node's complete privacy account (see the module docstring)."""

    eps: sp.Expr | None
    rho: sp.Expr
    units: Bag
    single: tuple | None = None
    pld: Bag | None = None
    delta: sp.Expr = sp.Integer(0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "units", _bag(self.units))
        if self.pld is not None:
            object.__setattr__(self, "pld", _bag(self.pld))
        if not self.units:
            raise ValueError("a privacy account has at least one unit")
        if self.eps is not None and any(u is None for u in self.units.distinct):
            raise ValueError("a pure-DP account has pure units only")

    @property
    def gaussian_1d(self) -> tuple | None:
        """(τ², D) when the node is exactly one scalar discrete Gaussian."""
        return self.single[1:] if self.single is not None and self.single[0] == "gaussian" else None

    @property
    def laplace_1d(self) -> tuple | None:
        """(K, scale, g) when the node is exactly one scalar grid Laplace."""
        return self.single[1:] if self.single is not None and self.single[0] == "laplace" else None

    @property
    def rr_1d(self) -> tuple | None:
        """(k, L) when the node is exactly one k-ary randomized response."""
        return self.single[1:] if self.single is not None and self.single[0] == "rr" else None


def leaf(
    eps: sp.Expr | None,
    rho: sp.Expr,
    single: tuple | None = None,
    pld: tuple | None = None,
    delta: sp.Expr = sp.Integer(0),
) -> Account:
    """One noise measurement: one unit; ``pld`` its worst pair (a one-entry tuple, or empty when its
    shift is 0), None when it has none here; ``delta`` > 0 for an (ε, δ) leaf (partition selection:
    then ``rho`` is ∞ and ``pld`` None: only basic composition counts it)."""
    return Account(eps, rho, Bag((eps,)), single, None if pld is None else Bag(pld), delta)


def compose(children: list[Account]) -> Account:
    """Sequential composition on the same input with independent randomness: ε and ρ add, units
    concatenate; one part keeps its own account (including its exact single-leaf profile)."""
    if len(children) == 1:
        return children[0]
    eps = None if any(c.eps is None for c in children) else sp.Add(*[c.eps for c in children])
    rho = sp.Add(*[c.rho for c in children])
    plds = [c.pld for c in children if c.pld is not None]
    pld = Bag.of(x for b in plds for x in b.counts) if len(plds) == len(children) else None
    delta = sp.Add(*[c.delta for c in children])  # basic composition: δ adds (Dwork & Roth 2014 Thm 3.16)
    return Account(eps, rho, Bag.of(u for c in children for u in c.units.counts), None, pld, delta)


def repeat(part: Account, times: int) -> Account:
    """``times`` independent copies on the same input: the composition of ``times`` copies (ε and ρ
    multiply, units and PLD entries repeat); one copy keeps its own account."""
    if times == 1:
        return part
    eps = None if part.eps is None else part.eps * times
    pld = None if part.pld is None else part.pld * times
    return Account(eps, part.rho * times, part.units * times, None, pld, part.delta * times)


def poisson(inner: Account, rate: Fraction) -> Account:
    """Poisson subsampling at ``rate`` before ``inner``, under add/remove neighbours.

    * ε: ln(1 + rate·(e^ε − 1)) (Balle, Barthe & Gaboardi 2018, Poisson subsampling under add/remove);
    * ρ: unchanged, an upper bound: e^{(α−1)D_α} is jointly convex, the subsampled outputs on two
      neighbours are mixtures with the same weights of pairs each at most the inner divergence, and
      mixing a distribution with the second argument of the pair only lowers it;
    * one unit (the amplified ε);
    * PLD: one subsampled scalar leaf ``(kind, scale, D, rate)`` when the inner node is exactly one
      scalar Laplace or Gaussian leaf (its dominating pair, Zhu, Dong & Wang 2022, Thm 11); a rate
      applied twice multiplies (Poisson of Poisson is Poisson); no leaf (shift 0) stays none; else None.
    """
    if rate == 1:  # every record kept: the inner mechanism itself
        return inner
    q = sp.Rational(rate.numerator, rate.denominator)
    eps = None if inner.eps is None else sp.log(1 + q * (sp.exp(inner.eps) - 1))
    pld: tuple | None = None
    if inner.pld is not None and not inner.pld:
        pld = ()
    elif inner.pld is not None and len(inner.pld) == 1 and inner.pld.distinct[0][0] in ("laplace", "gaussian"):
        kind, scale, shift, *rest = inner.pld.distinct[0]
        pld = ((kind, scale, shift, (rest[0] if rest else 1) * rate),)
    # (ε, δ) -> (ln(1 + q(e^ε − 1)), qδ) under Poisson subsampling, add/remove (Li, Qardaji & Su 2012;
    # Balle, Barthe & Gaboardi 2018)
    return Account(eps, inner.rho, Bag((eps,)), None, None if pld is None else Bag(pld), q * inner.delta)


def fixed_sample(inner: Account, rate: Fraction) -> Account:
    """Sampling ``m`` of ``n`` records without replacement (``rate`` = m/n) before ``inner``, under
    substitution neighbours on data sets of n records.

    * ε: ln(1 + rate·(e^ε − 1)) (Balle, Barthe & Gaboardi 2018, Thm 9: sampling without replacement,
      substitution relation);
    * (ε, δ): δ → rate·δ (the same theorem);
    * ρ: unchanged, an upper bound: the outputs on two neighbours are mixtures, with the same weights
      (the uniform m-subset of indices), of pairs that are identical (the substituted record not drawn)
      or substitution neighbours of size m, and the Rényi divergence is jointly quasi-convex;
    * one unit (the amplified ε); no PLD (the dominating pairs of this sampling are not built here)."""
    if rate == 1:
        return inner
    q = sp.Rational(rate.numerator, rate.denominator)
    eps = None if inner.eps is None else sp.log(1 + q * (sp.exp(inner.eps) - 1))
    return Account(eps, inner.rho, Bag((eps,)), None, None, q * inner.delta)


def group(account: Account, k: int, shifts_scale: bool) -> Account:
    """The account for neighbours at distance k (k records added/removed, or substituted), from the
    account at distance 1: pure ε → kε and every unit's ε → kε (group privacy, Dwork & Roth 2014,
    Thm 2.2); an (ε, δ) account → (kε, k·e^{(k−1)ε}·δ); ρ → k²ρ (Bun & Steinke 2016, Prop. 1.9); PLD entries: a scalar leaf's centres move by at
    most k times their distance-1 bound along a path of k neighbours (the triangle inequality), so its
    worst pair is the shift by k·D — only when ``shifts_scale`` (no parallel partitions, no subsampling:
    there one leaf's pair at distance k is not a single shift) and only for Laplace / Gaussian leaves;
    otherwise no PLD. The single-leaf exact profile is dropped."""
    if k == 1:
        return account
    units = account.units.map(lambda u: None if u is None else u * k)
    if account.delta != 0:  # (ε, δ) -> (kε, k·e^{(k−1)ε}·δ) (Dwork & Roth 2014, Thm 2.2 and its (ε, δ) form)
        if account.eps is None:  # a part that is not pure DP beside the (ε, δ) one: no group bound here
            return Account(None, account.rho * k * k, units, None, None, sp.Integer(1))
        delta = k * sp.exp((k - 1) * account.eps) * account.delta
        return Account(account.eps * k, account.rho * k * k, units, None, None, delta)
    eps = None if account.eps is None else account.eps * k
    pld = None
    if (
        shifts_scale
        and account.pld is not None
        and all(e[0] in ("laplace", "gaussian") and len(e) == 3 for e in account.pld.distinct)
    ):
        pld = account.pld.map(lambda e: (e[0], e[1], e[2] * k))
    return Account(eps, account.rho * k * k, units, None, pld)


def parallel_add_remove(part: Account) -> Account:
    """Parallel composition over disjoint partitions under add/remove: one record touches one
    partition, so the loss is that partition's part's (seen under add/remove): its account, without
    the single-leaf profile (the output has one coordinate per partition)."""
    return Account(part.eps, part.rho, part.units, None, part.pld, part.delta)


def parallel_substitute(inside: Account, across: Account) -> Account:
    """Parallel composition under substitution: the record changes inside one partition (that part
    under substitution: ``inside``) or moves between two (two parts, each under add/remove:
    ``across`` twice). The account dominates both scenarios; its units are as many as the larger
    scenario has, each the largest unit of either; no PLD (no single pair dominates both scenarios here)."""
    eps = None if (inside.eps is None or across.eps is None) else sp.Max(inside.eps, 2 * across.eps)
    rho = sp.Max(inside.rho, 2 * across.rho)
    k = max(len(inside.units), 2 * len(across.units))
    every = inside.units.distinct + across.units.distinct
    top = None if any(u is None for u in every) else sp.Max(*every)
    return Account(eps, rho, Bag.of([(top, k)]), None, None, sp.Max(inside.delta, 2 * across.delta))


def advanced_units(account: Account) -> tuple[int, sp.Expr] | None:
    """(k, ε₀) for advanced composition: every unit counted, ε₀ the largest; None when a unit is not
    pure DP or there is only one unit (advanced composition of one mechanism gains nothing)."""
    if len(account.units) < 2 or any(u is None for u in account.units.distinct):
        return None
    return len(account.units), sp.Max(*account.units.distinct)
