"""Assertions for users' test suites: :func:`assert_private`."""

from __future__ import annotations

from typing import Any

__all__ = ["assert_private"]

_DEFAULTS = {"seed": 20261122, "samples": 200_000}


def _configure(*, seed: int, samples: int) -> None:
    _DEFAULTS["seed"] = seed
    _DEFAULTS["samples"] = samples


def assert_private(mechanism: Any, data: Any = None, neighbor: Any = None, *, epsilon: float | None = None,
                   delta: float = 0.0, samples: int | None = None, seed: int | None = None,
                   confidence: float = 0.95, **options: Any):
    """Audit ``mechanism`` on (data, neighbor) and fail with the certified bound, the witness event
    and the seed when a violation of (epsilon, delta) is certified. Returns the audit result."""
    from . import audit

    seed = _DEFAULTS["seed"] if seed is None else seed
    samples = _DEFAULTS["samples"] if samples is None else samples
    result = audit(mechanism, data, neighbor, epsilon=epsilon, delta=delta, samples=samples, seed=seed,
                   confidence=confidence, **options)
    if not result.passed:
        raise AssertionError(
            f"privacy violation certified: ε lower bound {result.epsilon_lower_bound:.4g} > claimed ε "
            f"{result.epsilon} at confidence {confidence}; witness: {result.witness_description}; "
            f"reproduce with seed={seed} (pytest --dp-seed={seed}), samples={samples}"
        )
    return result
