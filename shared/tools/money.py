"""Money as integer minor units: ``100``, ``100.0`` and ``"100.00"`` EUR are all 10000.

Conversion is exact integer arithmetic on the decimal digits, never a float multiplication and
never rounding: an amount with more decimals than its currency allows is refused, because
rounding would authorize and hash an amount the agent did not ask for.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from shared.tools.rejections import Rejection, RejectionCode

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer every JSON parser reads exactly (RFC 8785 refuses anything beyond)."""

_DECIMAL_TEXT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_SAFE_DIGITS = len(str(MAX_SAFE_INTEGER))


def parse_amount(raw: object, where: str) -> Decimal:
    """The decimal an agent meant; floats by their shortest repr, which is the JSON text sent
    (a literal with more than 17 significant digits was already rounded by the JSON parser:
    agents that need exact amounts send strings)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise Rejection(RejectionCode.AMOUNT_INVALID, f"{where}: an amount must be a number or "
                        "a decimal string")
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise Rejection(RejectionCode.NUMBER_NOT_FINITE, f"{where}: amount is not finite")
        return Decimal(repr(raw))
    if isinstance(raw, int):
        return Decimal(raw)
    text = raw.strip()
    if not _DECIMAL_TEXT.fullmatch(text):
        raise Rejection(RejectionCode.AMOUNT_INVALID, f"{where}: {raw[:40]!r} is not a plain "
                        "decimal number such as '100.00'")
    return Decimal(text)


def to_minor_units(amount: Decimal, exponent: int, where: str) -> int:
    sign, digits, power = amount.as_tuple()
    shift = power + exponent
    if shift < 0:
        if any(digits[shift:]):
            raise Rejection(RejectionCode.AMOUNT_PRECISION, f"{where}: {amount} has more than "
                            f"{exponent} decimals for its currency; amounts are never rounded")
        digits, shift = digits[:shift] or (0,), 0
    if len(digits) + shift > _SAFE_DIGITS:
        raise _out_of_range(where)
    minor = int("".join(map(str, digits))) * 10**shift
    if minor > MAX_SAFE_INTEGER:
        raise _out_of_range(where)
    return -minor if sign else minor


def _out_of_range(where: str) -> Rejection:
    return Rejection(RejectionCode.INTEGER_OUT_OF_RANGE,
                     f"{where}: amount in minor units exceeds ±(2^53−1)")
