"""The public inbound contract of topic ``agent.proposals`` and the proposal intake makes of it.

Our envelope parts forbid unknown fields: a misspelt ``operation_kye`` must be refused, not
dropped, because a lost operation key is a lost idempotency guarantee. Provider objects
(OpenAI messages and items, Anthropic messages and blocks) allow unknown fields: providers add
fields over time (``refusal``, ``annotations``, ``caller``, ...), and an agent that forwards its
SDK's object unchanged must not start failing when the SDK upgrades. Extra provider fields are
ignored; nothing from them reaches a proposal.
"""

from __future__ import annotations


from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (AwareDatetime, BaseModel, ConfigDict, Discriminator, Field, StrictInt,
                      StringConstraints, Tag, TypeAdapter, field_validator, model_validator)

from shared.contracts.tenants import TenantId
from intentledger_client.contracts import proposal_record_id as proposal_record_id  # agents' too

ID_MAX_CHARS = 200
UNPRINTABLE = (r"\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
               r"\u2060-\u206f\ufeff\ufff9-\ufffb")
"""What an id may not hold: control characters (C0, DEL, C1), line and paragraph separators,
and the invisible formatting characters (zero-width, bidirectional embeddings, overrides and
isolates, the BOM) that make two ids print alike or reorder a terminal line. An id travels into
HTTP headers, logs and operators' terminals: a newline in one broke a request header and an
attempt was never recorded."""
Id = Annotated[str, StringConstraints(min_length=1, max_length=ID_MAX_CHARS,
                                      pattern=f"^[^{UNPRINTABLE}]+$")]
ToolName = Annotated[str, StringConstraints(pattern=r"^[!-~]{1,128}$")]
"""Taken as the model gave it (``wallet_debit`` stays ``wallet_debit``): the registry decides."""
Version = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Format = Literal["generic", "openai.chat", "openai.responses", "anthropic"]


class ReasonCode(StrEnum):
    """Stable machine-readable reasons; agents branch on them, so never rename one."""

    TOO_LARGE = "too_large"
    NOT_UTF8 = "not_utf8"
    NOT_JSON = "not_json"
    TOO_DEEP = "too_deep"
    DUPLICATE_KEY = "duplicate_key"
    STRING_TOO_LONG = "string_too_long"
    ARRAY_TOO_LONG = "array_too_long"
    INTEGER_OUT_OF_RANGE = "integer_out_of_range"
    NUMBER_OUT_OF_RANGE = "number_out_of_range"
    NOT_FINITE = "not_finite"
    INVALID_STRING = "invalid_string"
    UNKNOWN_FORMAT = "unknown_format"
    UNKNOWN_FIELD = "unknown_field"
    MISSING_FIELD = "missing_field"
    INVALID_FIELD = "invalid_field"
    INVALID_TENANT_ID = "invalid_tenant_id"
    NO_TOOL_CALLS = "no_tool_calls"
    TOO_MANY_CALLS = "too_many_calls"
    DUPLICATE_CALL_ID = "duplicate_call_id"
    ARGUMENTS_NOT_JSON = "arguments_not_json"
    UNSUPPORTED_CALL_TYPE = "unsupported_call_type"
    CALL_INCOMPLETE = "call_incomplete"
    OPERATION_KEY_AMBIGUOUS = "operation_key_ambiguous"
    OPERATION_KEY_UNMATCHED = "operation_key_unmatched"


class _Ours(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Theirs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class Budget(_Ours):
    max_calls: Annotated[StrictInt, Field(ge=1, le=100_000)] | None = None
    max_attempts: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    cost_limit_minor: Annotated[StrictInt, Field(ge=0, le=2**53 - 1)] | None = None
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")] | None = None

    @model_validator(mode="after")
    def _cost_names_its_currency(self) -> Budget:
        if (self.cost_limit_minor is None) != (self.currency is None):
            raise ValueError("cost_limit_minor and currency (ISO 4217) are given together")
        return self


class _Envelope(_Ours):
    run_id: Id
    principal_id: Id
    tenant_id: TenantId
    operation_key: Id | None = Field(default=None, description="Caller-stated, single-call messages.")
    operation_keys: dict[Id, Id] | None = Field(default=None, description="Provider call id → key.")
    deadline_at: AwareDatetime | None = None
    budget: Budget | None = None
    tool_version: Version | None = None

    @field_validator("deadline_at", mode="before")
    @classmethod
    def _only_rfc3339_text(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError("deadline_at is an RFC 3339 string with an offset")
        return value

    @field_validator("deadline_at")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        try:
            return value.astimezone(UTC) if value else None
        except OverflowError:  # e.g. 9999-12-31T23:59:59-01:00 is past the last UTC datetime
            raise ValueError("deadline_at is out of range") from None


def _other_type(*known: str) -> Any:
    """In the JSON Schema, 'other' must exclude the known types, or oneOf matches twice."""
    return Field(json_schema_extra={"not": {"enum": list(known)}})


def _by_type(*known: str) -> Discriminator:
    """Route provider objects by ``type``; a type we do not act on is kept as 'other'."""
    def tag(value: Any) -> str | None:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return (kind if kind in known else "other") if isinstance(kind, str) else None
    return Discriminator(tag, custom_error_type="provider_type",
                         custom_error_message="expected an object with a string 'type'")


class GenericProposal(_Envelope):
    format: Literal["generic"]
    tool: ToolName
    call_id: Id
    arguments: dict[str, Any]


class ChatFunction(_Theirs):
    name: ToolName
    arguments: str = Field(description="JSON text, as generated by the model: may be invalid.")


class ChatFunctionCall(_Theirs):
    type: Literal["function"]
    id: Id
    function: ChatFunction


class ChatOtherCall(_Theirs):
    type: str = _other_type("function")
    id: Id


ChatToolCall = Annotated[Annotated[ChatFunctionCall, Tag("function")]
                         | Annotated[ChatOtherCall, Tag("other")], _by_type("function")]


class ChatAssistantMessage(_Theirs):
    role: Literal["assistant"]
    tool_calls: list[ChatToolCall] | None = None


class OpenAIChatProposal(_Envelope):
    format: Literal["openai.chat"]
    message: ChatAssistantMessage


class ResponsesFunctionCall(_Theirs):
    type: Literal["function_call"]
    call_id: Id
    name: ToolName
    arguments: str
    status: str | None = None


class ResponsesCustomCall(_Theirs):
    type: Literal["custom_tool_call"]
    call_id: Id


class ResponsesOtherItem(_Theirs):
    type: str = _other_type("function_call", "custom_tool_call")


ResponsesItem = Annotated[Annotated[ResponsesFunctionCall, Tag("function_call")]
                          | Annotated[ResponsesCustomCall, Tag("custom_tool_call")]
                          | Annotated[ResponsesOtherItem, Tag("other")],
                          _by_type("function_call", "custom_tool_call")]


class OpenAIResponsesProposal(_Envelope):
    format: Literal["openai.responses"]
    output: ResponsesItem | list[ResponsesItem]


class ToolUseBlock(_Theirs):
    type: Literal["tool_use"]
    id: Id
    name: ToolName
    input: dict[str, Any]


class OtherBlock(_Theirs):
    type: str = _other_type("tool_use")


AnthropicBlock = Annotated[Annotated[ToolUseBlock, Tag("tool_use")]
                           | Annotated[OtherBlock, Tag("other")], _by_type("tool_use")]


class AnthropicMessage(_Theirs):
    role: Literal["assistant"]
    content: list[AnthropicBlock] | str
    stop_reason: str | None = None


class AnthropicProposal(_Envelope):
    format: Literal["anthropic"]
    message: AnthropicMessage


InboundProposal = Annotated[GenericProposal | OpenAIChatProposal | OpenAIResponsesProposal
                            | AnthropicProposal, Field(discriminator="format")]
INBOUND_PROPOSAL = TypeAdapter(InboundProposal)


class ToolCallProposal(_Ours):
    """One tool call of one message; the provider call id correlates, it never names intent."""

    run_id: Id
    principal_id: Id
    tenant_id: TenantId
    provider: Format
    provider_call_id: Id
    tool_name: ToolName
    tool_version: Version | None
    arguments: dict[str, Any]
    caller_operation_key: Id | None
    deadline_at: AwareDatetime | None
    budget: Budget | None
