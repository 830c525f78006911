"""The one exception root of dpharness and its few children.

Every message names the offending argument as ``name=value`` and says what to do
(the Hypothesis style: ``InvalidArgument``)."""

from __future__ import annotations

__all__ = [
    "DPHarnessError",
    "ParameterError",
    "MechanismError",
    "UnsupportedError",
    "AuditTimeLimit",
    "AuditBudgetTooSmall",
]


class DPHarnessError(Exception):
    """Root of every error dpharness raises on purpose."""


class ParameterError(DPHarnessError, ValueError):
    """A parameter, a data set or a neighbour pair is invalid. Raised at the public boundary."""


class MechanismError(DPHarnessError, RuntimeError):
    """A mechanism under audit raised, or returned outputs of the wrong type, shape or value."""


class UnsupportedError(DPHarnessError, NotImplementedError):
    """The request is well formed but outside what this version can do (the message says what is)."""


class AuditTimeLimit(DPHarnessError, TimeoutError):
    """An audit's chunk of samples ran past the time its measured pace allows: a time limit (the check is
    not decided, TIMEOUT), not evidence that the mechanism is broken. The message says how many samples
    were drawn and what to change."""


class AuditBudgetTooSmall(AuditTimeLimit):
    """An audit given a time budget (``time_budget=``, the gate's default) could not fit even its minimum
    certification (:func:`dpharness.auditors.audit`): nothing was certified. ``needed``: the budget in
    seconds, by the pace measured here, that would fit it; ``samples``: that minimum, samples a side;
    ``clock_limited``: the budget would fit it, but not the clock time an enclosing time limit (the
    gate's ``--timeout``) leaves on this loaded machine (a larger budget would not help)."""

    def __init__(self, message: str, *, needed: float, samples: int, clock_limited: bool = False) -> None:
        super().__init__(message)
        self.needed = needed
        self.samples = samples
        self.clock_limited = clock_limited

    def __reduce__(self) -> tuple:  # pickled from worker processes with its fields
        return (_budget_too_small, (str(self), self.needed, self.samples, self.clock_limited))


def _budget_too_small(message: str, needed: float, samples: int, clock_limited: bool = False) -> AuditBudgetTooSmall:
    return AuditBudgetTooSmall(message, needed=needed, samples=samples, clock_limited=clock_limited)


def install_extra(extra: str) -> str:
    """How to install one of dpharness's optional extras, as the README installs dpharness (from its
    checkout, not from a package index, where the name may belong to someone else)."""
    return f"pip install -e '.[{extra}]' in the dpharness checkout"
