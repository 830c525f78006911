"""Numbers printed so that what is printed stays true (dpharness._display): an upper bound rounds up, a
lower end down; a short float is printed as itself (it reads back as the same float)."""

from __future__ import annotations

import math

from hypothesis import given, strategies as st

from dpharness._display import fmt_lower, fmt_upper


def test_a_short_claim_is_printed_as_itself_never_rounded_below():
    """The issue's case: a claim of 1.8291 PROVED must not read "ε ≤ 1.829", a value that fails."""
    assert fmt_upper(1.8291) in ("1.8291", "1.83")
    assert fmt_upper(1.829) == "1.829"
    assert fmt_upper(6.0) == "6" and fmt_upper(1e-5) == "1e-05" and fmt_upper(100.0) == "100"


def test_long_values_round_outward_at_four_digits():
    assert fmt_upper(13.388590734227600) == "13.39" and fmt_lower(13.388590734227600) == "13.38"
    assert fmt_upper(1.8290762715239037) == "1.83" and fmt_lower(1.8290762715239037) == "1.829"
    assert fmt_upper(2503.0448252270476) == "2504" and fmt_lower(2503.0448252270476) == "2503"
    assert fmt_upper(9.99999999) == "10" and fmt_lower(9.99999999) == "9.999"
    assert fmt_upper(-1 / 3) == "-0.3333" and fmt_lower(-1 / 3) == "-0.3334"


def test_special_values():
    assert fmt_upper(math.inf) == "∞" and fmt_lower(-math.inf) == "-∞"
    assert fmt_upper(math.nan) == "n/a" and fmt_upper(None) == "—" and fmt_upper(0.0) == "0"


@given(st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False), st.integers(2, 8))
def test_the_printed_number_read_back_is_a_bound(x, digits):
    assert float(fmt_upper(x, digits)) >= x
    assert float(fmt_lower(x, digits)) <= x
