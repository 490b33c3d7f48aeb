"""Kubernetes quantities: parsing, canonical formatting, arithmetic and the pydantic type."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ironpool.api.quantity import Quantity, parse_quantity
from pydantic import BaseModel

# input -> (canonical string, Value(), MilliValue()), as Go's resource.Quantity gives them.
TABLE = [
    ("16Gi", "16Gi", 16 * 2**30, 16 * 2**30 * 1000),
    ("1024Mi", "1Gi", 2**30, 2**30 * 1000),
    ("1000m", "1", 1, 1000),
    ("500m", "500m", 1, 500),
    ("4", "4", 4, 4000),
    ("0", "0", 0, 0),
    ("1000", "1k", 1000, 1_000_000),
    ("1200", "1200", 1200, 1_200_000),
    ("1.5", "1500m", 2, 1500),
    ("0.1", "100m", 1, 100),
    ("1e3", "1e3", 1000, 1_000_000),
    ("12e6", "12e6", 12_000_000, 12_000_000_000),
    ("1E", "1E", 10**18, 10**21),
    ("1k", "1k", 1000, 1_000_000),
    ("1M", "1M", 10**6, 10**9),
    ("0.5Ki", "512", 512, 512_000),
    ("1536Mi", "1536Mi", 1536 * 2**20, 1536 * 2**20 * 1000),
    ("1.5Gi", "1536Mi", 1536 * 2**20, 1536 * 2**20 * 1000),
    ("100Mi", "100Mi", 100 * 2**20, 100 * 2**20 * 1000),
    ("2048", "2048", 2048, 2_048_000),
    ("1024Ki", "1Mi", 2**20, 2**20 * 1000),
    ("-1Gi", "-1Gi", -(2**30), -(2**30) * 1000),
    ("1n", "1n", 1, 1),
    ("0.0000000001", "1n", 1, 1),  # rounded up to nano, as ParseQuantity does
    ("+5", "5", 5, 5000),
    (".5", "500m", 1, 500),
    ("2.5u", "2500n", 1, 1),
]


@pytest.mark.parametrize(("text", "canonical", "value", "milli"), TABLE)
def test_parse_and_format(text: str, canonical: str, value: int, milli: int) -> None:
    q = parse_quantity(text)
    assert str(q) == canonical
    assert q.value() == value
    assert q.milli_value() == milli
    # The canonical form parses back to the same quantity and the same string.
    assert parse_quantity(canonical) == q
    assert str(parse_quantity(canonical)) == canonical


@pytest.mark.parametrize(
    ("number", "canonical"), [(4, "4"), (4.0, "4"), (0.25, "250m"), (2048, "2048"), (1000, "1k")]
)
def test_numbers(number: float, canonical: str) -> None:
    assert str(parse_quantity(number)) == canonical


@pytest.mark.parametrize(
    "bad",
    ["", " ", "abc", "1.2.3", "Gi", "1Gb", "1 Gi", "1ki", "--1", "1e", "0x10", True, None, [1], float("inf")],
)
def test_rejects_garbage(bad: object) -> None:
    with pytest.raises(ValueError) as exc:
        parse_quantity(bad)
    assert str(exc.value)


def test_arithmetic_and_comparison() -> None:
    a, b = parse_quantity("1Gi"), parse_quantity("512Mi")
    assert str(a + b) == "1536Mi"
    assert str(a - b) == "512Mi"
    assert str(b * 2) == "1Gi"
    assert a > b and b < a and a >= a and b <= b
    assert parse_quantity("1000m") == parse_quantity("1") == 1
    assert hash(parse_quantity("1Gi")) == hash(parse_quantity("1073741824"))
    assert sum([parse_quantity("1"), parse_quantity("500m")], Quantity(0)) == Fraction(3, 2)
    assert str(-parse_quantity("2")) == "-2"
    assert parse_quantity("0").is_zero() and not parse_quantity("0")
    assert parse_quantity("3").sign() == 1 and parse_quantity("-3").sign() == -1
    # The left operand keeps its format, as in Go.
    assert str(parse_quantity("1") + parse_quantity("1Ki")) == "1025"
    assert str(parse_quantity("1Ki") + parse_quantity("1Ki")) == "2Ki"


class _M(BaseModel):
    q: Quantity
    rl: dict[str, Quantity] = {}


def test_pydantic_type() -> None:
    m = _M.model_validate({"q": 4, "rl": {"memory": "1024Mi", "cpu": "1000m"}})
    assert m.q == 4
    assert m.model_dump(mode="json") == {"q": "4", "rl": {"memory": "1Gi", "cpu": "1"}}
    assert _M.model_validate_json('{"q": "16Gi"}').model_dump_json() == '{"q":"16Gi","rl":{}}'
    with pytest.raises(ValueError, match="quantities must match"):
        _M.model_validate({"q": "lots"})
    schema = _M.model_json_schema()
    assert schema["properties"]["q"]["x-kubernetes-int-or-string"] is True


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@given(
    mantissa=st.integers(min_value=-(10**12), max_value=10**12),
    decimals=st.integers(min_value=0, max_value=3),
    suffix=st.sampled_from([*_SUFFIXES, "e3", "e-3", "e6"]),
)
def test_roundtrip_hypothesis(mantissa: int, decimals: int, suffix: str) -> None:
    digits = str(abs(mantissa)).rjust(decimals + 1, "0")
    text = ("-" if mantissa < 0 else "") + (
        digits[:-decimals] + "." + digits[-decimals:] if decimals else digits
    )
    q = parse_quantity(text + suffix)
    canonical = str(q)
    again = parse_quantity(canonical)
    assert again == q
    assert str(again) == canonical  # canonical form is a fixed point


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_integers_exact(n: int) -> None:
    q = parse_quantity(n)
    assert q.value() == n
    assert parse_quantity(str(q)).value() == n
