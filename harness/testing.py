"""Assertions for users' test suites: :func:`assert_private`.

>>> from dpharness import parts as dp, PureDP, AddRemove, IntegerRange
>>> from dpharness.testing import assert_private
>>> count = dp.mechanism(name="count", records=IntegerRange(0, 9), relation=AddRemove(),
...                      steps=dp.count() >> dp.discrete_laplace(1), claim=PureDP(1))
>>> assert_private(count, [1, 2, 3], [1, 2], epsilon=1.0)   # doctest: +SKIP

Any vectorised sampler ``fn(data, size, rng)`` works too. The natural float version,
``len(data) + rng.laplace(0, 1.0, size)``, FAILS: its float outputs leak through their low-order
bits (Mironov 2012), and the failure message says so and how to fix it.

Under pytest (the ``dpharness`` plugin is installed with the package) the seed comes from
``--dp-seed`` (default 20261122, or ``$DP_SEED``) and the sample budget from ``--dp-samples``; the
seed is printed in the report header and in every failure, so a failure reproduces exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .auditors import AuditResult

__all__ = ["assert_private", "PrivacyViolation"]

DEFAULT_SEED = 20261122
DEFAULT_SAMPLES = 200_000
_DEFAULTS = {"seed": DEFAULT_SEED, "samples": DEFAULT_SAMPLES}


class PrivacyViolation(AssertionError):
    """Raised by :func:`assert_private` when a violation of the claim is certified; ``.result`` is the AuditResult."""

    def __init__(self, message: str, result: Any):
        super().__init__(message)
        self.result = result


def _configure(*, seed: int, samples: int) -> None:
    """Set the session defaults (called by the pytest plugin from ``--dp-seed``/``--dp-samples``)."""
    _DEFAULTS["seed"] = seed
    _DEFAULTS["samples"] = samples


def assert_private(
    mechanism: Any,
    data: Any = None,
    neighbor: Any = None,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
    samples: int | None = None,
    seed: int | None = None,
    confidence: float = 0.95,
    **options: Any,
) -> AuditResult:
    """Audit ``mechanism`` (a catalog Mechanism or a callable ``fn(data, size, rng)``; see
    :func:`dpharness.audit`) on ``(data, neighbor)`` and raise :class:`PrivacyViolation` (an
    AssertionError) when a violation of ``(epsilon, delta)`` is certified at ``confidence``. The
    message carries the certified bound, the witness event, the counts and the seed to reproduce.
    Returns the :class:`~dpharness.auditors._model.AuditResult` otherwise.

    The judgement is the gate's pass rule (:func:`dpharness.pipeline.pass_rule`) with the audit alone
    deciding (policy ``audit-only``): a proof is not asked for here.

    The audit is sequential, as the gate's of a proved mechanism (pass ``sequential=False`` for a
    single look at all samples, as ``dpharness audit`` and the gate's audit-only checks certify):
    it stops at the first look where the verdict is certain, so a clear violation fails fast.

    The audit runs on every core the process may use, as the gate's and ``dpharness audit``'s
    (``workers`` defaults to them; pass ``workers=1`` to stay in this process); the result does not
    depend on it.

    An audit that could not have certified a violation of the claim (its ceiling at ``samples`` is not
    above ``epsilon``) or that a time limit cut short is not a pass: :class:`~dpharness.errors.ParameterError`
    naming ``samples``, as the gate reports it PARTIAL.

    A pass is not a proof: it means no violation was certified with this budget. With a correct
    mechanism a failure happens with probability at most 1 − ``confidence``."""
    __tracebackhide__ = True  # pytest: show the caller's line, not this function's source
    from . import audit
    from ._run import exact_noise, float_hint, fmt
    from .errors import ParameterError
    from .pipeline import Policy, _blind, _cut, pass_rule

    seed = _DEFAULTS["seed"] if seed is None else seed
    samples = _DEFAULTS["samples"] if samples is None else samples
    options.setdefault("sequential", True)
    result = audit(
        mechanism,
        data,
        neighbor,
        epsilon=epsilon,
        delta=delta,
        samples=samples,
        seed=seed,
        confidence=confidence,
        **options,
    )
    blind = _blind(result) or _cut(result, options.get("timeout"))
    if blind is not None:  # a pass that checked nothing (or less than asked): the gate's PARTIAL, not a pass
        name = getattr(mechanism, "name", None) or getattr(mechanism, "__qualname__", None) or repr(mechanism)
        raise ParameterError(
            f"samples={samples}: the audit of {name} is not a pass, it did not audit in full ({blind}); "
            "pass more samples= (or --dp-samples)."
        )
    if not pass_rule(buggy=False, policy=Policy.AUDIT_ONLY, audit_passed=bool(result.passed), crashed=False).passed:
        name = getattr(mechanism, "name", None) or getattr(mechanism, "__qualname__", None) or repr(mechanism)
        counts = ", ".join(f"{k}={v}" for k, v in result.counts.items()) if result.counts else "—"
        claim = f"ε = {fmt(result.epsilon)}" + (f", δ = {fmt(result.delta, 6)}" if result.delta else "")
        lines = [
            f"privacy violation certified for {name}: ε ≥ {fmt(result.epsilon_lower_bound)} "
            f"(certified lower bound at confidence {fmt(result.confidence, 6)}) > claimed {claim}",
            f"  witness: {result.witness_description}",
            f"  counts: {counts}",
            f"  method: {result.method}",
            f"  reproduce with seed={result.seed}, samples={result.samples}"
            + "".join(f", {k}={v!r}" for k, v in (result.extra or {}).get("reproduce", {}).items())
            + f" (pytest --dp-seed={result.seed} --dp-samples={result.samples})",
            f"  a correct mechanism fails this check with probability at most {fmt(1 - result.confidence, 3)}",
        ]
        hint = float_hint(result, exact_noise=exact_noise(mechanism))
        if hint:
            lines.insert(2, f"  {hint}")
        if result.delta_lower_bound is not None:
            lines.insert(2, f"  certified δ lower bound at ε = {fmt(result.epsilon)}: {fmt(result.delta_lower_bound)}")
        raise PrivacyViolation("\n".join(lines), result)
    return result
