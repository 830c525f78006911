"""Local randomizers: noise measurements on ONE record of k categories (``input="record"``; local DP,
any two records are neighbours): k-ary randomized response, Warner's randomized response and basic
RAPPOR's bit flipping, each sampled exactly. Privacy maps proved once per family, symbolically in k and
the parameter, in :mod:`dpharness.proofs.parts.local`."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpharness.errors import ParameterError

from ._base import Measurement, Space, _frac, _plain, record_value, register

__all__ = [
    "LocalRandomizer",
    "LocalRandomizedResponse",
    "LocalWarner",
    "LocalRappor",
    "randomized_response",
    "warner",
    "rappor",
    "category_index",
    "category_values",
]

_MAX_CATEGORIES = 2**16


def _need_record(space: Space, what: str) -> None:
    if space.kind != "record":
        raise ParameterError(
            f"{what} randomizes one record, but the previous step gives {space.describe()}; declare "
            "dp.mechanism(input='record', records=Finite(values), relation=Substitute(), ...) with it as "
            "the first step."
        )


def category_index(space: Space, value: Any) -> int:
    """The index of the record ``value`` among the space's categories (exact equality of numbers)."""
    v = record_value(value)
    for i, c in enumerate(space.record_categories):
        if v == c:
            return i
    raise ParameterError(
        f"record={value!r} is not one of the {len(space.record_categories)} categories; pass a record of the domain."
    )


def category_values(space: Space) -> np.ndarray:
    """The categories as the array the samplers release: int64 when every category is an integer,
    else float64 (every category is an exact float, see :func:`input_space`)."""
    cats = space.record_categories
    return np.asarray(cats, dtype=np.int64 if all(isinstance(c, int) for c in cats) else float)


class LocalRandomizer(Measurement):
    """A noise measurement on ONE record of k categories (``input="record"``; local DP: any two
    distinct records are neighbours). Its exact law is read by :mod:`._law` and its family's
    privacy map is proved once, symbolically in k and the parameter, by :mod:`dpharness.proofs.parts.local`."""


@dataclass(frozen=True)
class LocalRandomizedResponse(LocalRandomizer):
    """k-ary randomized response (Warner 1965; Kairouz, Oh & Viswanath 2014) on one record of k
    categories: report the true category with probability ``e^L/(e^L + k − 1)``, else one of the
    other ``k − 1`` categories uniformly::

        P(y | x) = e^L/(e^L + k − 1)  if y = x,     1/(e^L + k − 1)  otherwise.

    Neighbours: any two records (local DP). Privacy map: ε = L (pure): the pmf ratio P(y|x)/P(y|x')
    is e^L, 1 or e^{−L}. Sampler: :func:`._exact.randomized_response` on the category's index (the
    lie probability ``(k − 1)/(e^L + k − 1)`` is exact at every L, e.g. 37 or 1000), mapped back to
    the category value. ``log_odds`` L >= 0 is read exactly (a float as its binary value)."""

    log_odds: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_odds", _plain("log_odds", self.log_odds))
        if _frac("log_odds", self.log_odds) < 0:
            raise ParameterError(
                f"log_odds={self.log_odds!r} must be >= 0; pass the log-odds of a truthful report (ε)."
            )

    @property
    def L(self) -> Fraction:
        return _frac("log_odds", self.log_odds)

    def describe(self) -> str:
        return f"randomized_response(log_odds={self.log_odds!r})"

    def out_width(self, space: Space) -> int:
        _need_record(space, self.describe())
        return 1

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from dpharness.mechanisms._exact import randomized_response as exact_rr

        idx = exact_rr(category_index(space, value), len(space.record_categories), self.L, size, rng)
        return category_values(space)[idx].reshape(size, 1)


@dataclass(frozen=True)
class LocalWarner(LocalRandomizer):
    """Warner's randomized response (S. L. Warner, "Randomized response", JASA 60(309), 1965) on one
    record of two categories: report the truth with probability p, else the other category::

        P(y | x) = p  if y = x,     1 − p  otherwise        (1/2 <= p < 1).

    Neighbours: the two records (local DP). Privacy map: ε = ln(p/(1 − p)) (pure): binary randomized
    response with log-odds ln(p/(1 − p)). Sampler: a lie is :func:`._exact.bernoulli` with the exact
    rational 1 − p (``p`` an int/Fraction, a float read as its binary value)."""

    p: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "p", _plain("p", self.p))
        q = _frac("p", self.p)
        if not Fraction(1, 2) <= q < 1:
            raise ParameterError(
                f"p={self.p!r} must be in [1/2, 1) (the probability of a truthful report: p = 1 is not "
                "private, p < 1/2 lies more often than not); pass e.g. p=0.75."
            )

    @property
    def p_exact(self) -> Fraction:
        return _frac("p", self.p)

    def describe(self) -> str:
        return f"warner(p={self.p!r})"

    def out_width(self, space: Space) -> int:
        _need_record(space, self.describe())
        if len(space.record_categories) != 2:
            raise ParameterError(
                f"{self.describe()} randomizes one of two categories, but records have "
                f"{len(space.record_categories)}; pass records=Finite((a, b)) or use "
                "dp.randomized_response(log_odds) for k categories."
            )
        return 1

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from dpharness.mechanisms._exact import bernoulli

        i = category_index(space, value)
        lie = bernoulli(1 - self.p_exact, size, rng)
        return category_values(space)[np.where(lie, 1 - i, i)].reshape(size, 1)


@dataclass(frozen=True)
class LocalRappor(LocalRandomizer):
    """Basic RAPPOR's permanent randomized response (Erlingsson, Pihur & Korolova 2014, "RAPPOR",
    CCS, §3; a one-hot encoding in place of the Bloom filter) on one record of k categories: the
    record is one-hot encoded into k bits b, and each bit is replaced by a fair coin with probability
    f, i.e. flipped independently with probability f/2::

        P(y | x) = Π_j (1 − f/2)^[y_j = b_j] (f/2)^[y_j ≠ b_j],     b = onehot(x),  0 < f <= 1.

    Output: a 0/1 vector of length k (int64). Neighbours: any two records; their encodings differ in
    exactly two bits, so ε = 2 ln((1 − f/2)/(f/2)) (pure). Sampler: k independent
    :func:`._exact.bernoulli` flips with the exact rational f/2 (``f`` a float read as its binary value)."""

    f: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "f", _plain("f", self.f))
        q = _frac("f", self.f)
        if not 0 < q <= 1:
            raise ParameterError(
                f"f={self.f!r} must be in (0, 1] (the probability that a bit is replaced by a fair "
                "coin); pass e.g. f=0.5."
            )

    @property
    def f_exact(self) -> Fraction:
        return _frac("f", self.f)

    def describe(self) -> str:
        return f"rappor(f={self.f!r})"

    def out_width(self, space: Space) -> int:
        _need_record(space, self.describe())
        return len(space.record_categories)

    def run(self, value: Any, space: Space, size: int, rng: np.random.Generator) -> np.ndarray:
        from dpharness.mechanisms._exact import bernoulli

        out = bernoulli(self.f_exact / 2, (size, len(space.record_categories)), rng).astype(np.int64)
        out[:, category_index(space, value)] ^= 1
        return out


register(LocalRandomizedResponse, LocalWarner, LocalRappor)


# --------------------------------------------------------------------------- public constructors


def randomized_response(log_odds: Any) -> LocalRandomizedResponse:
    """k-ary randomized response on one record (``input="record"``): the truth with probability
    e^L/(e^L + k − 1), else a uniform other category; ε = ``log_odds``."""
    return LocalRandomizedResponse(log_odds)


def warner(p: Any) -> LocalWarner:
    """Warner's randomized response on one record of two categories: the truth with probability
    ``p`` in [1/2, 1); ε = ln(p/(1 − p))."""
    return LocalWarner(p)


def rappor(f: Any) -> LocalRappor:
    """Basic RAPPOR on one record: its one-hot encoding with each bit flipped with probability f/2
    (``f`` in (0, 1]); ε = 2 ln((1 − f/2)/(f/2))."""
    return LocalRappor(f)


from dpharness.core import record_module as _record_module  # noqa: E402

_record_module(__name__)
