"""Why a proposal is refused before anything is recorded or dispatched.

The codes are public: each becomes a ``ProposalRejected.reason`` on ``agent.results.<tenant>`` and agents
branch on it. Add codes freely; never rename, remove or reuse one (additive within a major
version, like every public schema).

==========================  ===================================================================
unknown_tool                no tool of that name in this deployment's registry
unknown_tool_version        the tool exists, but not in the requested version
arguments_invalid           not a JSON object, fails the tool's argument schema, or a value has
                            no canonical JSON form (for example a lone UTF-16 surrogate)
integer_out_of_range        an integer, or an amount in minor units, beyond ±(2^53−1): JSON
                            numbers cannot carry it exactly, so it must be sent as a string
number_not_finite           NaN or ±Infinity
amount_invalid              a money amount that is not a plain decimal number
amount_precision            more decimals than the currency's minor unit allows (never rounded)
amount_below_minimum        less than the tool's floor (``minimum_minor``; default 1 minor unit:
                            a money argument is positive unless the registry says otherwise)
currency_unknown            a currency missing from the ISO 4217 table, or none given
tenant_invalid              the proposal's tenant id does not match ``TENANT_ID_PATTERN``
tenant_mismatch             a resource id names another tenant than the proposal's
resource_id_invalid         a resource id that is empty or holds whitespace or control characters
timestamp_invalid           not an ISO 8601 date-time
timestamp_naive             an ISO 8601 date-time without a zone offset: its instant is unknown
operation_key_missing       the key scheme needs a value the proposal lacks (the caller's key,
                            the nonce, an entity field, the run id)
operation_key_invalid       a caller-stated key that is empty, longer than 255 characters or
                            not printable
==========================  ===================================================================
"""

from __future__ import annotations

from enum import StrEnum

from shared.errors import PermanentError

_MAX_MESSAGE = 300
"""Messages travel to agents on a public topic; they name paths and rules, never whole payloads."""


class RejectionCode(StrEnum):
    UNKNOWN_TOOL = "unknown_tool"
    UNKNOWN_TOOL_VERSION = "unknown_tool_version"
    ARGUMENTS_INVALID = "arguments_invalid"
    INTEGER_OUT_OF_RANGE = "integer_out_of_range"
    NUMBER_NOT_FINITE = "number_not_finite"
    AMOUNT_INVALID = "amount_invalid"
    AMOUNT_PRECISION = "amount_precision"
    AMOUNT_BELOW_MINIMUM = "amount_below_minimum"
    CURRENCY_UNKNOWN = "currency_unknown"
    TENANT_INVALID = "tenant_invalid"
    TENANT_MISMATCH = "tenant_mismatch"
    RESOURCE_ID_INVALID = "resource_id_invalid"
    TIMESTAMP_INVALID = "timestamp_invalid"
    TIMESTAMP_NAIVE = "timestamp_naive"
    OPERATION_KEY_MISSING = "operation_key_missing"
    OPERATION_KEY_INVALID = "operation_key_invalid"


class Rejection(PermanentError):
    """The proposal itself is wrong: resending the same proposal can never succeed."""

    def __init__(self, code: RejectionCode, message: str) -> None:
        if len(message) > _MAX_MESSAGE:
            message = message[:_MAX_MESSAGE - 1] + "…"
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
