"""The promises a tool makes to the ledger: how its intents are keyed, how it may be retried.

These are declarations, read by intake (keys), the dispatcher (retries, timeouts) and
reconciliation (what an UNKNOWN outcome may do). A tool that cannot keep a promise must not
make it: ``replay_same_key`` is only legal where the downstream deduplicates by our key for
long enough, which is why replay safety requires a retention window.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.tools.paths import EACH, parse_path

TOOL_NAME_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
TOOL_VERSION_PATTERN = r"^[0-9A-Za-z][0-9A-Za-z._-]*$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolRef(_Frozen):
    name: str = Field(pattern=TOOL_NAME_PATTERN, max_length=64)
    version: str = Field(pattern=TOOL_VERSION_PATTERN, max_length=32)


class CallerStated(_Frozen):
    """The caller names the intent (an ``Idempotency-Key``): retries reuse the caller's key."""

    scheme: Literal["caller_stated"]


class PerEntity(_Frozen):
    """One intent per entity: the same command on the same entity is the same intent."""

    scheme: Literal["per_entity"]
    fields: tuple[str, ...] = Field(min_length=1)

    @field_validator("fields")
    @classmethod
    def _plain_paths(cls, fields: tuple[str, ...]) -> tuple[str, ...]:
        for field in fields:
            if EACH in parse_path(field):
                raise ValueError(f"entity field {field!r} must name one value, not array items")
        if len(set(fields)) != len(fields):
            raise ValueError("entity fields repeat")
        return fields


class PerCommand(_Frozen):
    """The caller mints a nonce per command (a message id, a draft id) inside the arguments."""

    scheme: Literal["per_command"]
    nonce_field: str

    @field_validator("nonce_field")
    @classmethod
    def _plain_path(cls, field: str) -> str:
        if EACH in parse_path(field):
            raise ValueError(f"nonce field {field!r} must name one value, not array items")
        return field


class OncePerRun(_Frozen):
    """At most one such intent per run (a final report, a run summary)."""

    scheme: Literal["once_per_run"]


KeyScheme = Annotated[CallerStated | PerEntity | PerCommand | OncePerRun,
                      Field(discriminator="scheme")]

EffectClass = Literal["read_only", "idempotent", "compensatable", "irreversible"]
Reconciliation = Literal["lookup_by_key", "replay_same_key", "manual"]


class RetryContract(_Frozen):
    max_attempts: int = Field(ge=1, le=100)
    attempt_timeout_seconds: float = Field(gt=0, le=3600)
    replay_safe: bool = Field(description="The downstream deduplicates a resend under the same key.")
    key_retention_seconds: int | None = Field(
        default=None, gt=0, description="How long the downstream remembers our key; a resend "
        "after this window is a new effect, so the ledger never replays beyond it.")
    server_errors: Literal["not_applied", "unknown"] = Field(default="unknown", description=(
        "What an HTTP 5xx means: `not_applied` only where the tool guarantees a 5xx committed "
        "nothing; otherwise the outcome is unknown and is reconciled, never assumed failed."))

    @model_validator(mode="after")
    def _replay_needs_retention(self) -> RetryContract:
        if self.replay_safe and self.key_retention_seconds is None:
            raise ValueError("replay_safe needs key_retention_seconds: the downstream forgets keys")
        return self
