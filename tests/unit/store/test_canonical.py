"""RFC 8785: the fast canonical encoder agrees with the reference implementation."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from steward.store.verifier import canonical_json, es6_number

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_json_matches_the_rfc8785_reference(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(("x", "text"), [
    (0.0, "0"), (-0.0, "0"), (600.0, "600"), (1.5, "1.5"), (1e21, "1e+21"), (1e20, "100000000000000000000"),
    (1e-7, "1e-7"), (0.000001, "0.000001"), (123.456, "123.456"), (2**60 * 1.0, "1152921504606847000"),
    (-3.25e-10, "-3.25e-10"), (5e-324, "5e-324"),
])
def test_numbers_print_as_ecmascript_does(x: float, text: str) -> None:
    assert es6_number(x) == text
