"""Kubernetes resource quantities (``"4"``, ``"500m"``, ``"16Gi"``, ``"1e3"``), parsed exactly.

The value is held as a :class:`fractions.Fraction`, so no precision is lost; the string form is
canonicalised the way Go's ``resource.Quantity`` does it (``"1024Mi"`` -> ``"1Gi"``,
``"1000m"`` -> ``"1"``, ``"1000"`` -> ``"1k"``), keeping the *format* (decimal SI, binary SI or
decimal exponent) the quantity was written in.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pydantic is needed only when a model is built: a client parses quantities without it
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import core_schema

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_DECIMAL_BY_EXP: dict[int, str] = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_BINARY_BY_EXP: dict[int, str] = {v: k for k, v in _BINARY_SUFFIXES.items()}

# <signedNumber><suffix>; the suffix alternatives are tried longest first so "Ei" wins over "E".
_QUANTITY_RE = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]|)$"
)
_JSON_SCHEMA_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# Go keeps at most this many decimal exponent digits; far beyond anything a resource needs.
_MAX_EXPONENT = 10_000


def _ceil_to_nano(value: Fraction) -> Fraction:
    """Round up (towards +inf) to a multiple of 1e-9, as ParseQuantity does."""
    if value.denominator == 1 or (10**9) % value.denominator == 0:
        return value
    return Fraction(math.ceil(value * 10**9), 10**9)


class Quantity:
    """An immutable, exact Kubernetes quantity.

    Equality, ordering and hashing use the numeric value only (``Quantity("1Gi") ==
    Quantity("1073741824")``); the format only affects :meth:`__str__`.
    """

    __slots__ = ("_format", "_str", "_value")

    _value: Fraction
    _format: Format
    _str: str | None

    def __init__(self, value: Fraction | Decimal | int | float | str = 0, fmt: Format = "DecimalSI") -> None:
        if isinstance(value, str | float):
            # A float goes through its shortest decimal form: 0.1 means 0.1, not its binary value.
            parsed = parse_quantity(value)
            self._value, self._format, self._str = parsed._value, parsed._format, parsed._str
            return
        self._value = _ceil_to_nano(Fraction(value))
        self._format = fmt
        self._str = None

    # -- accessors -------------------------------------------------------------------------
    @property
    def fraction(self) -> Fraction:
        """The exact value."""
        return self._value

    @property
    def format(self) -> Format:
        return self._format

    def value(self) -> int:
        """The value rounded up to an integer (Go's ``Quantity.Value()``)."""
        return math.ceil(self._value)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (Go's ``Quantity.MilliValue()``)."""
        return math.ceil(self._value * 1000)

    def is_zero(self) -> bool:
        return self._value == 0

    def sign(self) -> int:
        return (self._value > 0) - (self._value < 0)

    # -- arithmetic (the left operand's format wins, as in Go) ----------------------------------
    @staticmethod
    def _coerce(other: object) -> Fraction | None:
        if isinstance(other, Quantity):
            return other._value
        if isinstance(other, int | Fraction):
            return Fraction(other)
        return None

    def __add__(self, other: object) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return Quantity(self._value + o, self._format)

    __radd__ = __add__

    def __sub__(self, other: object) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return Quantity(self._value - o, self._format)

    def __rsub__(self, other: object) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return Quantity(o - self._value, self._format)

    def __mul__(self, other: object) -> Quantity:
        if isinstance(other, Quantity) or not isinstance(other, int | Fraction):
            return NotImplemented
        return Quantity(self._value * other, self._format)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity(-self._value, self._format)

    def __abs__(self) -> Quantity:
        return Quantity(abs(self._value), self._format)

    def __bool__(self) -> bool:
        return self._value != 0

    # -- comparison ----------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._value == o

    def __hash__(self) -> int:
        return hash(self._value)

    def __lt__(self, other: object) -> bool:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._value < o

    def __le__(self, other: object) -> bool:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._value <= o

    def __gt__(self, other: object) -> bool:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._value > o

    def __ge__(self, other: object) -> bool:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._value >= o

    # -- formatting ------------------------------------------------------------------------------
    def __str__(self) -> str:
        s = self._str
        if s is None:
            s = _canonical(self._value, self._format)
            self._str = s
        return s

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    # -- pydantic integration -----------------------------------------------------------------------
    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            _validate_for_pydantic,
            serialization=core_schema.plain_serializer_function_ser_schema(
                _serialize_for_pydantic, when_used="always"
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": _JSON_SCHEMA_PATTERN,
            "x-kubernetes-int-or-string": True,
        }


def _validate_for_pydantic(v: Any) -> Quantity:
    return parse_quantity(v)


def _serialize_for_pydantic(v: Any) -> Any:
    return str(v) if isinstance(v, Quantity) else v


def _canonical(value: Fraction, fmt: Format) -> str:
    if value == 0:
        return "0"
    if fmt == "BinarySI":
        if -1024 < value < 1024 or value.denominator != 1:
            # Go shows small or fractional binary quantities as decimal to avoid rounding.
            fmt = "DecimalSI"
        else:
            n = value.numerator
            exp = 0
            while exp < 6 and n % 1024 == 0:
                n //= 1024
                exp += 1
            return f"{n}{_BINARY_BY_EXP.get(exp, '')}"
    # Decimal: mantissa * 10^exponent with an integral mantissa and exponent a multiple of 3,
    # mantissa stripped of trailing zeros first (Go's AsCanonicalBytes).
    num, den = value.numerator, value.denominator
    exponent = 0
    # den divides 10^9 (values are nano-rounded), so scale up until integral.
    while den != 1:
        num *= 10
        exponent -= 1
        g = math.gcd(num, den)
        num //= g
        den //= g
    while num % 10 == 0:
        num //= 10
        exponent += 1
    rem = exponent % 3
    if rem:
        num *= 10**rem
        exponent -= rem
    if fmt == "DecimalSI":
        suffix = _DECIMAL_BY_EXP.get(exponent)
        if suffix is not None:
            return f"{num}{suffix}"
    if exponent == 0:
        return str(num)
    return f"{num}e{exponent}"


@lru_cache(maxsize=4096)
def _parse_str(s: str) -> Quantity:
    m = _QUANTITY_RE.match(s)
    if m is None:
        raise ValueError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {s!r}"
        )
    num_s, suffix = m.group("num"), m.group("suffix")
    number = Fraction(num_s)
    fmt: Format
    if suffix in _BINARY_SUFFIXES:
        value = number * (1024 ** _BINARY_SUFFIXES[suffix])
        fmt = "BinarySI"
    elif suffix in _DECIMAL_SUFFIXES:
        value = number * Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
        fmt = "DecimalSI"
    else:
        exp = int(suffix[1:])
        if abs(exp) > _MAX_EXPONENT:
            raise ValueError(f"quantity {s!r} is out of range")
        value = number * Fraction(10) ** exp
        fmt = "DecimalExponent"
    return Quantity(value, fmt)


def parse_quantity(x: Any) -> Quantity:
    """Parse a quantity from a string, int or :class:`Quantity`; raise ``ValueError`` otherwise."""
    if isinstance(x, Quantity):
        return x
    if isinstance(x, str):
        s = x.strip()
        if not s:
            raise ValueError("quantity must not be empty")
        return _parse_str(s)
    if isinstance(x, bool):
        raise ValueError(f"quantity must be a string or a number, got a boolean ({x!r})")
    if isinstance(x, int):
        return Quantity(x, "DecimalSI")
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"quantity must be finite, got {x!r}")
        # repr() gives the shortest string that round-trips, so 0.1 means 0.1, not its binary.
        return _parse_str(repr(x).replace("e+", "e"))
    raise ValueError(f"quantity must be a string or a number, got {type(x).__name__}")


ResourceList = dict[str, Quantity]
"""A map of resource name (``cpu``, ``memory``, ``class/machine.x``) to quantity."""
