"""One tool, in one version, as declared in the deployment's registry file.

Everything a proposal is checked against before it becomes an intent lives here, and the
checks between fields run at load time: a registry that promises something the tool cannot
keep (a compensatable tool with no compensation, an irreversible one without approval, a key
built from a field the arguments may lack) is refused before any proposal is read.
"""

from __future__ import annotations

from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from shared.tools import paths
from shared.tools.contracts import (TOOL_NAME_PATTERN, TOOL_VERSION_PATTERN, EffectClass, KeyScheme,
                                    PerCommand, PerEntity, Reconciliation, RetryContract, ToolRef)
from shared.tools.rejections import Rejection, RejectionCode
from shared.tools.rules import MoneyRule, Rule

KAFKA_TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"


class ToolSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=TOOL_NAME_PATTERN, max_length=64)
    version: str = Field(pattern=TOOL_VERSION_PATTERN, max_length=32)
    description: str = Field(min_length=1)
    arguments_schema: dict[str, Any]
    canonical: tuple[Rule, ...] = ()
    key: KeyScheme
    effect: EffectClass
    compensating_tool: ToolRef | None = None
    requires_approval: bool = False
    result_schema: dict[str, Any]
    result_max_bytes: int = Field(gt=0)
    retry: RetryContract
    reconciliation: Reconciliation
    topic: str = Field(pattern=KAFKA_TOPIC_PATTERN, description=(
        "Where the Kafka effect adapter sends this tool's effect and lookup requests."))
    adapter: Literal["kafka", "http"] = Field(default="kafka", description=(
        "How the dispatcher reaches the tool: effect requests on `topic`, or HTTP at `http_url`."))
    http_url: str | None = Field(default=None, pattern=r"^https?://", description=(
        "Base URL of the tool's HTTP API (POST {url}/effects, GET {url}/effects/{key})."))
    compensation_arguments: dict[str, str] = Field(default_factory=dict, description=(
        "The compensating call's canonical arguments, each read from this call's canonical "
        "`arguments.<path>` or its validated `result.<path>`."))
    cost_from: str | None = Field(default=None, description=(
        "Path of a money argument whose amount is what one call costs, counted against a run's "
        "cost budget. Tools without it cost nothing."))
    audit_url: str | None = Field(default=None, pattern=r"^https?://", description=(
        "Base URL of the downstream's audit API (shared/contracts/audit.py): the settled-call "
        "audit asks it which effects it holds. Tools without it are not audited."))
    ledger_key_retention_seconds: int | None = Field(default=None, gt=0, description=(
        "How long the ledger keeps an intent's record after its first proposal. Past it the "
        "record is reduced to a tombstone of its operation key: a proposal under the key is "
        "refused `operation_key_expired`, never executed again. Unset: kept for ever."))
    max_in_flight: int | None = Field(default=None, gt=0, description=(
        "At most this many of the tool's attempts sent and not yet answered. A send beyond it "
        "waits in the dispatcher, in line, before its attempt (and its attempt deadline) "
        "starts, instead of in the downstream's queue, where its deadline would run. Set it "
        "below what the downstream answers within one attempt timeout. Unset: unbounded."))
    aliases: tuple[str, ...] = Field(default=(), description=(
        "Other names an agent may use for this tool. OpenAI function names cannot contain "
        "dots, so a model prompted with `wallet_debit` proposes `wallet.debit` through an alias "
        "declared here: nothing guesses a mapping."))

    _arguments: Draft202012Validator = PrivateAttr()

    @field_validator("arguments_schema", "result_schema")
    @classmethod
    def _is_draft_2020_12(cls, schema: dict[str, Any]) -> dict[str, Any]:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            raise ValueError(f"not a valid JSON Schema (Draft 2020-12): {error.message}") from None
        return schema

    @model_validator(mode="after")
    def _consistent(self) -> ToolSpec:
        if self.arguments_schema.get("type") != "object":
            raise ValueError("arguments_schema must describe an object (type: object)")
        if (self.effect == "compensatable") != (self.compensating_tool is not None):
            raise ValueError("a compensating_tool is required for, and only for, effect compensatable")
        if self.effect == "irreversible" and not self.requires_approval:
            raise ValueError("an irreversible tool must declare requires_approval: true")
        if (self.adapter == "http") != (self.http_url is not None):
            raise ValueError("http_url is required for, and only for, adapter http")
        if self.compensating_tool is None and self.compensation_arguments:
            raise ValueError("compensation_arguments without a compensating_tool")
        for target, source in self.compensation_arguments.items():
            if not source.startswith(("arguments.", "result.")):
                raise ValueError(f"compensation argument {target!r}: {source!r} must start with "
                                 "'arguments.' or 'result.'")
        if self.reconciliation == "replay_same_key" and not self.retry.replay_safe:
            raise ValueError("reconciliation replay_same_key needs retry.replay_safe: true")
        self._check_rule_paths()
        self._check_key_fields()
        if self.cost_from is not None and (self.cost_rule() is None
                                           or paths.EACH in self.cost_rule().segments):
            raise ValueError(f"cost_from {self.cost_from!r} must name the path of a money rule "
                             "outside any list")
        return self

    def cost_rule(self) -> MoneyRule | None:
        return next((rule for rule in self.canonical
                     if isinstance(rule, MoneyRule) and rule.path == self.cost_from), None)

    def cost_of(self, canonical: dict[str, Any]) -> tuple[int, str] | None:
        """(amount in minor units, currency) of one call, read from its canonical arguments: its
        magnitude, so that caps, velocity limits and run budgets never compare or add an amount
        below zero (a tool whose registry floor admits negative amounts costs what it moves)."""
        rule = self.cost_rule()
        if rule is None:
            return None
        *parent, field = rule.segments
        holder = paths.value_at(canonical, tuple(parent))
        if not isinstance(holder, dict) or field not in holder:
            return None  # an optional amount left out costs nothing
        return abs(holder[field]), holder[rule.currency_field]

    def _check_rule_paths(self) -> None:
        seen: set[str] = set()
        for rule in self.canonical:
            if rule.path in seen:
                raise ValueError(f"two canonical rules for path {rule.path!r}")
            seen.add(rule.path)
            if paths.schema_at(self.arguments_schema, rule.segments) is None:
                raise ValueError(f"canonical rule path {rule.path!r} is not in arguments_schema")
            if isinstance(rule, MoneyRule):
                sibling = (*rule.segments[:-1], rule.currency_field)
                if paths.schema_at(self.arguments_schema, sibling) is None:
                    raise ValueError(f"money rule {rule.path!r}: currency field "
                                     f"{rule.currency_field!r} is not in arguments_schema")

    def _check_key_fields(self) -> None:
        if isinstance(self.key, PerEntity):
            fields = self.key.fields
        elif isinstance(self.key, PerCommand):
            fields = (self.key.nonce_field,)
        else:
            return
        for field in fields:
            if not paths.required_at(self.arguments_schema, paths.parse_path(field)):
                raise ValueError(f"key field {field!r} must be a required property in "
                                 "arguments_schema: a key cannot be built from an absent value")

    def model_post_init(self, context: Any) -> None:
        self._arguments = Draft202012Validator(self.arguments_schema)

    def validate_arguments(self, arguments: object) -> None:
        if not isinstance(arguments, dict):
            raise Rejection(RejectionCode.ARGUMENTS_INVALID, "arguments must be a JSON object")
        error = best_match(self._arguments.iter_errors(arguments))
        if error is not None:
            raise Rejection(RejectionCode.ARGUMENTS_INVALID, f"{error.json_path}: {error.message}")
