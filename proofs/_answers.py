"""The accountant's questions: the smallest ε a mechanism is PROVED at for a given δ, and the smallest δ
for a given ε, each with its certified bracket and the route that proved it.

The answer is the prover's own: a value is returned only when :func:`dpharness.prove` of the mechanism
with its claim replaced by that value gives PROVED. The search is seeded by the prover's routes read
off the structure's account (:func:`.parts._prove.epsilon_at`, :func:`delta_at`: pure ε, the zCDP conversion
(Canonne, Kamath & Steinke 2020, Prop. 12), advanced composition (Dwork & Roth 2014, Thm 3.20), the
privacy-loss distribution (Zhu, Dong & Wang 2022), the exact δ of partition selection), so that
usually two proofs settle it: one at the seed (PROVED) and one a relative ``precision`` below it (not
PROVED). The PLD composition is cached per leaf, so these proofs cost about one. A mechanism with a
hand-written proof is answered by the same search over claims, seeded by its claim.

The bracket's lower end is stated only where it is certified: the PLD's optimistic composition where
one neighbouring pair attains every leaf's worst pair (:func:`.parts._prove.certified_lower`), or a
claim the prover REFUTED (a confirmed counterexample: the true value lies above it). Never otherwise.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable

from dpharness.core import ApproxDP, Mechanism, PureDP
from dpharness.errors import UnsupportedError

from ._model import Proof, Verdict

if TYPE_CHECKING:
    from .parts._prove import RouteValue

__all__ = ["Answer", "smallest_epsilon", "smallest_delta", "delta_at"]


@dataclass(frozen=True)
class Answer:
    """The smallest proven ``quantity`` (``"epsilon"`` or ``"delta"``) of a mechanism at ``at`` (the
    given δ, or the given ε).

    ``value``: the smallest claim found that :func:`dpharness.prove` PROVES (``proof`` is that proof);
    ``lower``: a certified lower end of the mechanism's true value (None when the proof certifies none);
    ``bracket`` = (``lower``, ``value``); ``route``: the accounting that proved it; ``precision``: the
    relative gap to the largest claim checked and NOT proved (every claim below
    ``value·(1 − precision)`` is not PROVED either: the smallest PROVED claim lies within it; 0 for an
    exact answer such as δ = 0); ``proofs`` and ``seconds``: what the search cost."""

    quantity: str
    value: float
    lower: float | None
    at: float
    route: str
    precision: float
    proof: Proof
    proofs: int = 0
    seconds: float = 0.0

    @property
    def bracket(self) -> tuple[float | None, float]:
        return (self.lower, self.value)

    @property
    def mechanism(self) -> Mechanism:
        return self.proof.mechanism

    @property
    def digits(self) -> int:
        """Significant digits worth printing at this precision (4 to 10)."""
        if self.precision <= 0:
            return 10
        return max(4, min(10, math.ceil(-math.log10(self.precision)) + 2))

    def to_dict(self) -> dict:
        from dpharness._json import jsonable

        return {
            "mechanism": self.mechanism.name,
            "claim": self.mechanism.claim.describe(),
            "quantity": self.quantity,
            "at": jsonable(self.at),
            "value": jsonable(self.value),
            "lower": jsonable(self.lower),
            "upper": jsonable(self.value),
            "route": self.route,
            "precision": jsonable(self.precision),
            "verdict": self.proof.verdict.value,
            "proofs": self.proofs,
            "seconds": self.seconds,
        }

    def describe(self) -> str:
        """``ε(δ = 1e-05) ≤ 1.82908 (PLD ...), bracket [—, 1.82908], precision 1e-4``: the value rounded
        up, the lower end down (each printed number is itself a bound)."""
        from dpharness._display import fmt_lower, fmt_upper

        d = self.digits
        name, given = ("ε", "δ") if self.quantity == "epsilon" else ("δ", "ε")
        precision = "exact" if self.precision == 0 else f"precision {self.precision:.1e}"
        return (
            f"{name}({given} = {fmt_upper(self.at, 6) if given == 'δ' else fmt_lower(self.at, 6)}) ≤ "
            f"{fmt_upper(self.value, d)} by {self.route}; bracket [{fmt_lower(self.lower, d)}, "
            f"{fmt_upper(self.value, d)}]; {precision}"
        )

    def __repr__(self) -> str:
        return f"Answer({self.mechanism.name}: {self.describe()}; {self.proofs} proofs, {self.seconds:.2g} s)"

    def _repr_html_(self) -> str:
        from dpharness._display import fmt_lower, fmt_upper
        from dpharness._html import card

        d = self.digits
        name, given = ("ε", "δ") if self.quantity == "epsilon" else ("δ", "ε")
        return card(
            f"smallest proven {name} of {self.mechanism.name}",
            "PROVED",
            "good",
            [
                ("given", f"{given} = {self.at!r}"),
                (f"smallest proven {name}", f"{fmt_upper(self.value, d)} ({self.value!r})"),
                ("certified bracket", f"[{fmt_lower(self.lower, d)}, {fmt_upper(self.value, d)}]"),
                ("route", self.route),
                ("precision", "exact" if self.precision == 0 else f"{self.precision:.2e} (relative)"),
                ("cost", f"{self.proofs} proofs, {self.seconds:.3g} s"),
            ],
        )


# --------------------------------------------------------------------------- the routes, read off the account
# (epsilon_at and RouteValue live with the prover: an unproven claim's headline reads them too)


def _account(m: Any) -> Any:
    """The account the proof's walk derives for a parts mechanism (no proof built)."""
    from dpharness.mechanisms.parts import input_distance

    from ._kernel import ProofBuilder
    from .parts._walk import _Walk

    return _Walk(ProofBuilder(m)).walk("", m.steps, m.space, input_distance(m.relation, m.space))


def delta_at(prof: Any, m: Any, epsilon: float) -> RouteValue:
    """The smallest δ the routes that read the account certify at ``epsilon`` (and the PLD's certified
    lower end where one pair attains it): 0 when the pure ε is within it; the exact δ₀ of partition
    selection; the zCDP conversion; the exact discrete Gaussian profile; the PLD. 1 when none applies."""
    import sympy as sp

    from ._kernel import exact_sign
    from .parts import _prove as P

    eps = sp.Rational(Fraction(epsilon))
    if prof.delta != 0:
        if prof.eps is not None and exact_sign(eps - prof.eps) in (0, 1):
            return P.RouteValue(P._float_up(prof.delta), None, P.ROUTE_PARTITION)
        return P.RouteValue(math.inf, None, "none")
    if prof.eps is not None and exact_sign(eps - prof.eps) in (0, 1):
        return P.RouteValue(0.0, None, P.ROUTE_PURE)
    options: list[tuple[float, str]] = []
    rho = P._finite_rho(prof)
    if rho is not None:
        log_delta, _ = P._zcdp_log_delta(prof.rho, eps)
        options.append((P._exp_up(log_delta), P.ROUTE_ZCDP))
    if prof.gaussian_1d is not None:
        tau2, d_units = prof.gaussian_1d
        if tau2 <= P._MAX_ENCLOSURE_TAU2 and d_units <= P._MAX_ENCLOSURE_SHIFT:
            from .discrete_gaussian import delta_enclosure

            options.append((float(delta_enclosure(eps, d_units, tau2)[1]), P.ROUTE_GAUSSIAN))
        else:
            options.append((P._dg_delta_bounds(eps, d_units, tau2)[1], P.ROUTE_GAUSSIAN))
    lower = pair = None
    # one scalar measurement: the prover's exact profile decides (its PLD is never tighter), no PLD built
    upper, low, pair = P._pld_pair_of(prof, m, epsilon=epsilon) if prof.single is None else (None, None, None)
    if prof.rr_1d is not None:
        options.append((_rr_delta(prof.rr_1d, float(epsilon)), P.ROUTE_RR))
    if prof.laplace_1d is not None:
        options.append((_laplace_delta(prof.laplace_1d, float(epsilon)), P.ROUTE_LAPLACE))
    if upper is not None:
        options.append((upper.delta(float(epsilon)), P.ROUTE_PLD))
        if low is not None:
            lower = low.delta(float(epsilon))
    best = min(options, default=(math.inf, "none"))
    if lower is not None and not lower > 0:
        lower = None
    if lower is not None:
        lower = min(lower, best[0])
    return P.RouteValue(best[0], lower, best[1], pair if lower is not None else None)


def _rr_delta(rr: tuple, eps: float) -> float:
    """δ(ε) = (e^L − e^ε)/(e^L + k − 1) of k-ary randomized response (floats: a seed, not a proof)."""
    k, L = rr
    Lf = float(L)
    return max(0.0, (math.exp(Lf) - math.exp(eps)) / (math.exp(Lf) + k - 1)) if eps < Lf else 0.0


def _laplace_delta(lap: tuple, eps: float) -> float:
    """δ(ε) of one grid Laplace's dominating pair (:class:`._common.LaplaceProfile`, in floats: a seed)."""
    K, scale, g = lap
    u = float(Fraction(scale) / Fraction(g))
    if eps >= K / u:
        return 0.0
    t = math.ceil((K - u * eps) / 2) - 1
    r1 = 1 + math.exp(-1 / u)
    return max(0.0, 1 - math.exp(-(t + 1) / u) / r1 - math.exp(eps - (K - t) / u) / r1)


def _gaussian_delta(g1: tuple, eps: float) -> float:
    """δ(ε) of a Gaussian of variance τ² shifted by D (Balle & Wang 2018, Thm 8; floats): the discrete
    Gaussian's is close to it. A seed, not a proof."""
    tau2, d = g1
    mu = d / math.sqrt(float(tau2))
    phi = lambda x: math.erfc(-x / math.sqrt(2)) / 2  # noqa: E731
    with_exp = math.exp(eps) * phi(-mu / 2 - eps / mu) if eps < 700 else 0.0
    return max(0.0, phi(mu / 2 - eps / mu) - with_exp)


def _one_d_epsilon(prof: Any, delta: float, ceiling: float) -> float | None:
    """A seed for ε(δ) of one scalar measurement from its exact profile, inverted in floats."""
    from .parts import _prove as P

    if not math.isfinite(ceiling) or delta <= 0:
        return None
    if prof.rr_1d is not None:
        return P._invert(lambda e: _rr_delta(prof.rr_1d, e), delta, ceiling)
    if prof.laplace_1d is not None:
        return P._invert(lambda e: _laplace_delta(prof.laplace_1d, e), delta, ceiling)
    if prof.gaussian_1d is not None and not math.isfinite(P._gaussian_epsilon(prof.gaussian_1d, delta)):
        return P._invert(lambda e: _gaussian_delta(prof.gaussian_1d, e), delta, ceiling)
    return None


# --------------------------------------------------------------------------- the search over claims


def _parts_of(m: Mechanism) -> Any:
    """The parts declaration the walk reads (a catalog class built from parts: its declaration), or None."""
    from dpharness.mechanisms.parts import Composite, PartsMechanism

    if isinstance(m, Composite):
        return m.parts
    return m if type(m) is PartsMechanism else None


def _with_claim(m: Mechanism, claim: Any) -> Mechanism:
    """``m`` with its claim replaced (a parts declaration or a catalog class built from parts rebuilds its
    declaration with it); UnsupportedError when the class does not accept a replaced claim."""
    try:
        out = m.replace(claim=claim)
    except Exception as exc:  # noqa: BLE001 - any refusal: the class does not take a replaced claim
        raise UnsupportedError(
            f"mechanism={m.name!r}: its class {type(m).__qualname__} does not accept a replaced claim "
            f"({type(exc).__name__}: {exc}); the smallest proven value is found by proving it at other claims. "
            "Declare it from dpharness.parts, or make claim a field its constructor accepts."
        ) from None
    if type(out) is not type(m) or out.claim != claim:
        raise UnsupportedError(
            f"mechanism={m.name!r}: replacing its claim gave a {type(out).__qualname__} claiming "
            f"{out.claim.describe()}, not {claim.describe()}; the smallest proven value is found by proving it at "
            "other claims. Make claim a field its constructor keeps."
        )
    return out


_MAX_STEPS = 48


def _search(
    prove_at: Callable[[float], Proof],
    seed: float,
    precision: float,
    hint: Callable[[Proof], float | None],
    floor: float,
    ceiling: float,
    what: str,
    max_up: int = _MAX_STEPS,
) -> tuple[float, Proof, float | None, Proof | None]:
    """The smallest v in [floor, ceiling) with ``prove_at(v)`` PROVED (monotone in v), to relative
    ``precision``: (hi, its proof, lo, its proof) with lo the largest v checked and not PROVED (None:
    hi is ``floor``, nothing below). Upward from ``seed`` until PROVED; the proof's own figure (``hint``:
    a pure ε, the δ a route computed) tried when below; downward until not PROVED; then bisection."""
    tested: dict[float, Proof] = {}

    def proved(v: float) -> bool:
        if v not in tested:
            tested[v] = prove_at(v)
        return tested[v].verdict is Verdict.PROVED

    lo: float | None = None
    v, step = min(max(seed, floor), math.nextafter(ceiling, -math.inf)), precision / 64
    for _ in range(max_up):
        if proved(v):
            break
        lo = v
        if v >= math.nextafter(ceiling, -math.inf):
            v = math.inf
            break
        v = min(v * (1 + step) if v > 0 else max(step, 1e-300), math.nextafter(ceiling, -math.inf))
        step *= 8
    else:
        v = math.inf
    if not math.isfinite(v):
        last = tested[max(tested)]
        why = "; ".join(n for n in last.notes if not n.startswith(("pseudocode", "postcondition")))[:600]
        raise UnsupportedError(f"no {what} is PROVED (the proof at {max(tested)!r} is {last.verdict.value}: {why})")
    hi = v
    exact = False
    h = hint(tested[hi])
    if h is not None and h == hi:
        exact = True  # the route's own figure: try the float just below it
    elif h is not None and math.isfinite(h) and floor <= h < hi and (lo is None or h > lo):
        c = h
        for _ in range(3):  # the figure, or a float step or two above it (rounding of an exact value)
            if c >= hi:
                break
            if proved(c):
                hi, exact = c, True
                break
            lo = c if lo is None or c > lo else lo
            c = math.nextafter(c, math.inf)
    # downward until a claim is not PROVED: first the float just below an exact figure
    if exact and (lo is None or lo < math.nextafter(hi, -math.inf)) and math.nextafter(hi, -math.inf) >= floor:
        c = math.nextafter(hi, -math.inf)
        if proved(c):
            hi = c
        else:
            lo = c
    step = precision / 64
    while lo is None:
        if hi <= floor:
            return hi, tested[hi], None, None
        c = floor if step >= 0.75 else max(hi * (1 - step * (1 - 1e-9)), floor)  # a hair inside the step
        step = min(step * 8, 0.75)
        if proved(c):
            hi = c
        else:
            lo = c
    # bisection (geometric where both ends are positive)
    while hi - lo > precision * hi:
        mid = math.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2
        if not lo < mid < hi:
            break
        if proved(mid):
            hi = mid
        else:
            lo = mid
    return hi, tested[hi], lo, tested[lo]


def _finish(
    quantity: str,
    at: float,
    found: tuple[float, Proof, float | None, Proof | None],
    route_lower: float | None,
    count: int,
    t0: float,
    m: Mechanism,
    refutations_count: bool,
) -> Answer:
    """The answer from the search's ends. A claim REFUTED just below the value is a certified lower end
    (a confirmed counterexample: the true value is above it) where ``refutations_count``: for the parts
    prover, whose (ε, δ) refutations evaluate δ on a pair, and for pure claims; not for a hand-written
    proof's refutation of an (ε, δ) claim, which may rest on a pointwise loss alone."""
    hi, proof, lo, lo_proof = found
    lower = route_lower
    if refutations_count and lo is not None and lo_proof is not None and lo_proof.verdict is Verdict.REFUTED:
        lower = lo if lower is None else max(lower, lo)
    if lower is not None:
        lower = min(lower, hi)
    route = proof.route or f"the proof of {type(m).__qualname__}"
    return Answer(
        quantity=quantity,
        value=hi,
        lower=lower,
        at=at,
        route=route,
        precision=0.0 if lo is None else (hi - lo) / hi,
        proof=proof,
        proofs=count,
        seconds=time.perf_counter() - t0,
    )


def _counting(fn: Callable[[float], Proof]) -> tuple[Callable[[float], Proof], list[int]]:
    count = [0]

    def wrapped(v: float) -> Proof:
        count[0] += 1
        return fn(v)

    return wrapped, count


def smallest_epsilon(m: Mechanism, delta: float, precision: float, prove: Callable[[Mechanism], Proof]) -> Answer:
    """The smallest ε that ``prove`` (:func:`dpharness.prove`) PROVES at ``delta`` (δ = 0: pure ε-DP);
    arguments already validated."""
    from .parts import _prove as P

    t0 = time.perf_counter()
    parts = _parts_of(m)
    seed, route_lower = None, None
    if parts is not None:
        prof = _account(parts)
        # one scalar measurement: the prover's exact profile decides (its PLD is never tighter), no PLD built
        at = P.epsilon_at(prof, parts, delta, pld=prof.single is None)
        seed, route_lower = at.upper, at.lower
        one_d = _one_d_epsilon(prof, delta, at.upper)
        if one_d is not None:
            seed = min(seed, one_d)
    if seed is None:
        seed = float(m.claim.epsilon) if isinstance(m.claim, (PureDP, ApproxDP)) else 1.0
    _with_claim(m, PureDP(1) if delta == 0 else ApproxDP(1, delta))  # refuses early, with the reason

    def claim(v: float) -> Any:
        return PureDP(v) if delta == 0 else ApproxDP(v, delta)

    prove_at, count = _counting(lambda v: prove(_with_claim(m, claim(v))))

    def hint(p: Proof) -> float | None:  # the derived ε of a pure route or advanced composition
        return float(p.bound) if p.bound is not None and math.isfinite(p.bound) else None

    floor = math.ulp(0.0) if delta == 0 else 0.0  # a pure claim needs ε > 0
    # a parts structure no route accounts at this δ: one proof, for its reason
    up = _MAX_STEPS if parts is None or math.isfinite(seed) else 1
    if not math.isfinite(seed):
        seed = float(m.claim.epsilon) if isinstance(m.claim, (PureDP, ApproxDP)) else 1.0
    found = _search(prove_at, seed, precision, hint, floor, math.inf, f"ε at δ = {delta!r}", up)
    return _finish("epsilon", delta, found, route_lower, count[0], t0, m, parts is not None or delta == 0)


def smallest_delta(m: Mechanism, epsilon: float, precision: float, prove: Callable[[Mechanism], Proof]) -> Answer:
    """The smallest δ that ``prove`` (:func:`dpharness.prove`) PROVES at ``epsilon``; arguments already
    validated."""

    t0 = time.perf_counter()
    parts = _parts_of(m)
    seed: float | None = None
    route_lower: float | None = None
    up = _MAX_STEPS
    if parts is not None:
        at = delta_at(_account(parts), parts, epsilon)
        seed, route_lower = at.upper, at.lower
        up = _MAX_STEPS if seed < 1 else 1
    if seed is None or seed >= 1:
        seed = float(m.claim.delta) if isinstance(m.claim, ApproxDP) and m.claim.delta > 0 else 1e-6
    _with_claim(m, ApproxDP(epsilon, 0.5))  # refuses early, with the reason
    prove_at, count = _counting(lambda v: prove(_with_claim(m, ApproxDP(epsilon, v))))

    def hint(p: Proof) -> float | None:  # the δ the proving route computed at this ε
        return float(p.delta_bound) if p.delta_bound is not None and math.isfinite(p.delta_bound) else None

    found = _search(prove_at, seed, precision, hint, 0.0, 1.0, f"δ < 1 at ε = {epsilon!r}", up)
    return _finish("delta", epsilon, found, route_lower, count[0], t0, m, parts is not None)
