"""One ToolCallProposal per tool call, from any of the four formats on ``agent.proposals``.

Input is a document that passed ``limits``. Several calls in one assistant turn become several
proposals, each named by its provider call id and never by its position: providers do not
promise an order, and the agent pairs results back by id (``tool_call_id``, ``tool_use_id``).
A message is taken or refused whole; a refusal is a ProposalRejection, answered on
``agent.results.<tenant>`` to ``reply_address(document)``.

What is not a client tool call is ignored: text, reasoning and thinking, and the tools the
provider runs itself (Anthropic ``server_tool_use``, OpenAI web search). OpenAI's custom tools
(``custom`` / ``custom_tool_call``, free-form text input) are client calls we cannot validate
against an argument schema, so they are refused rather than ignored: ignoring them would leave
the agent waiting for a result that never comes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shared.contracts.proposals import (
    INBOUND_PROPOSAL, AnthropicProposal, ChatFunctionCall, GenericProposal, OpenAIChatProposal,
    OpenAIResponsesProposal, ReasonCode, ResponsesCustomCall, ResponsesFunctionCall,
    ToolCallProposal, ToolUseBlock)
from services.proposal_intake.limits import DEFAULT_LIMITS, LimitViolation, Limits, parse_text, reply_address

_TRUNCATED_STOPS = frozenset({"max_tokens", "model_context_window_exceeded"})
"""Anthropic stop reasons after which the last tool_use block may be cut short."""


class ProposalRejection(Exception):
    def __init__(self, code: ReasonCode, message: str, call_ids: tuple[str, ...] = ()) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.call_ids = call_ids


@dataclass(frozen=True)
class _Call:
    call_id: str
    tool: str
    arguments: dict[str, Any] | str


def to_proposals(document: Any, limits: Limits = DEFAULT_LIMITS) -> tuple[ToolCallProposal, ...]:
    try:
        inbound = INBOUND_PROPOSAL.validate_python(document)
    except ValidationError as error:
        address = reply_address(document)
        raise _rejection_of(error, address.call_ids if address else ()) from None
    calls = _CALLS[type(inbound)](inbound)
    if not calls:
        raise ProposalRejection(ReasonCode.NO_TOOL_CALLS, "the message carries no tool call")
    if len(calls) > limits.max_calls:
        raise ProposalRejection(ReasonCode.TOO_MANY_CALLS, f"{len(calls)} tool calls in one "
                                f"message, at most {limits.max_calls}: send the rest in another",
                                tuple(call.call_id for call in calls))
    repeated = tuple(i for i, n in Counter(c.call_id for c in calls).items() if n > 1)
    if repeated:
        raise ProposalRejection(ReasonCode.DUPLICATE_CALL_ID, "call ids repeat", repeated)
    keys = _operation_keys(inbound, tuple(call.call_id for call in calls))
    return tuple(ToolCallProposal(
        run_id=inbound.run_id, principal_id=inbound.principal_id, tenant_id=inbound.tenant_id,
        provider=inbound.format, provider_call_id=call.call_id, tool_name=call.tool,
        tool_version=inbound.tool_version, arguments=_arguments(call, limits),
        caller_operation_key=keys.get(call.call_id), deadline_at=inbound.deadline_at,
        budget=inbound.budget) for call in calls)


def _generic(proposal: GenericProposal) -> list[_Call]:
    return [_Call(proposal.call_id, proposal.tool, proposal.arguments)]


def _openai_chat(proposal: OpenAIChatProposal) -> list[_Call]:
    calls = proposal.message.tool_calls or []
    _refuse_unsupported([c.id for c in calls if not isinstance(c, ChatFunctionCall)])
    return [_Call(c.id, c.function.name, c.function.arguments) for c in calls]


def _openai_responses(proposal: OpenAIResponsesProposal) -> list[_Call]:
    items = proposal.output if isinstance(proposal.output, list) else [proposal.output]
    _refuse_unsupported([i.call_id for i in items if isinstance(i, ResponsesCustomCall)])
    calls = [item for item in items if isinstance(item, ResponsesFunctionCall)]
    unfinished = tuple(c.call_id for c in calls if c.status not in (None, "completed"))
    if unfinished:
        raise ProposalRejection(ReasonCode.CALL_INCOMPLETE,
                                "function_call items must be completed", unfinished)
    return [_Call(c.call_id, c.name, c.arguments) for c in calls]


def _anthropic(proposal: AnthropicProposal) -> list[_Call]:
    content = proposal.message.content
    blocks = [b for b in content if isinstance(b, ToolUseBlock)] if isinstance(content, list) else []
    if blocks and proposal.message.stop_reason in _TRUNCATED_STOPS:
        raise ProposalRejection(ReasonCode.CALL_INCOMPLETE,
                                f"stop_reason {proposal.message.stop_reason}: input may be cut",
                                tuple(b.id for b in blocks))
    return [_Call(b.id, b.name, b.input) for b in blocks]


_CALLS = {GenericProposal: _generic, OpenAIChatProposal: _openai_chat,
          OpenAIResponsesProposal: _openai_responses, AnthropicProposal: _anthropic}


def _refuse_unsupported(call_ids: list[str]) -> None:
    if call_ids:
        raise ProposalRejection(ReasonCode.UNSUPPORTED_CALL_TYPE,
                                "only function tool calls are accepted", tuple(call_ids))


def _operation_keys(proposal: Any, call_ids: tuple[str, ...]) -> dict[str, str]:
    if proposal.operation_key is not None and proposal.operation_keys is not None:
        raise ProposalRejection(ReasonCode.OPERATION_KEY_AMBIGUOUS,
                                "give operation_key or operation_keys, not both", call_ids)
    if proposal.operation_key is not None:
        if len(call_ids) > 1:
            raise ProposalRejection(ReasonCode.OPERATION_KEY_AMBIGUOUS,
                                    f"one operation_key for {len(call_ids)} calls; "
                                    "name each call's key in operation_keys", call_ids)
        return {call_ids[0]: proposal.operation_key}
    keys = dict(proposal.operation_keys or {})
    unmatched = tuple(sorted(set(keys) - set(call_ids)))
    if unmatched:
        raise ProposalRejection(ReasonCode.OPERATION_KEY_UNMATCHED,
                                "operation_keys names calls the message does not carry", unmatched)
    return keys


def _arguments(call: _Call, limits: Limits) -> dict[str, Any]:
    """OpenAI arguments are model-generated JSON text: held to the limits of a whole record."""
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        value = parse_text(call.arguments, limits)
    except LimitViolation as violation:
        code = ReasonCode.ARGUMENTS_NOT_JSON if violation.code == ReasonCode.NOT_JSON else violation.code
        raise ProposalRejection(code, f"arguments: {violation.message}", (call.call_id,)) from None
    if not isinstance(value, dict):
        raise ProposalRejection(ReasonCode.ARGUMENTS_NOT_JSON, "arguments must be a JSON object",
                                (call.call_id,))
    return value


_CODE_BY_ERROR = {"extra_forbidden": ReasonCode.UNKNOWN_FIELD, "missing": ReasonCode.MISSING_FIELD}
_PRECEDENCE = (ReasonCode.UNKNOWN_FORMAT, ReasonCode.UNKNOWN_FIELD, ReasonCode.MISSING_FIELD,
               ReasonCode.INVALID_TENANT_ID, ReasonCode.INVALID_FIELD)


def _code_of(detail) -> ReasonCode:
    """Errors without a location are about the message as a whole: no format matched it. A
    tenant id that names no legal results topic has a code of its own (tenants.py)."""
    if not detail["loc"]:
        return ReasonCode.UNKNOWN_FORMAT
    if detail["loc"][-1] == "tenant_id" and detail["type"] != "missing":
        return ReasonCode.INVALID_TENANT_ID
    return _CODE_BY_ERROR.get(detail["type"], ReasonCode.INVALID_FIELD)


def _rejection_of(error: ValidationError, call_ids: tuple[str, ...]) -> ProposalRejection:
    details = error.errors(include_url=False, include_input=False, include_context=False)
    codes = {_code_of(d) for d in details}
    code = next(c for c in _PRECEDENCE if c in codes)
    lines = [f"{_where(d['loc'])}: {d['msg']}" for d in details[:5]]
    more = f" (+{len(details) - 5} more)" if len(details) > 5 else ""
    return ProposalRejection(code, "; ".join(lines) + more, call_ids)


def _where(loc: tuple[int | str, ...]) -> str:
    """The location inside the format (the first part names the format itself)."""
    return ".".join(str(part)[:40] for part in loc[1:]) or "(top level)"
