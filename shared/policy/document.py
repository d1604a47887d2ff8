"""The policy document: ordered rules, rate and velocity limits, the capability lifetime.

Models are frozen and refuse unknown fields: a misspelt ``max_amount_minr`` silently ignored
would be a cap that does not exist. Checks between fields run at load time, so a rule that
cannot mean what it says (an approval block nobody can reach, a cap without a currency) is
refused before any intent is judged by it. The version is a hash of the parsed document, so
any change of meaning is a new version and a change of layout or comments is not.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from shared.tools.jcs import jcs
from shared.tools.paths import EACH, parse_path

Patterns = tuple[str, ...]
"""fnmatch globs, case-sensitive: ``wallet.*``, ``agent-?``, ``tenant/acme/*``, ``*``."""
CURRENCY = r"^[A-Z]{3}$"
JSON_SAFE = 2**53 - 1
"""Integers beyond this have no exact JSON form, so the version hash could not be taken."""
DAY = 86_400
VERSION_CHARS = 16


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ApprovalRule(_Frozen):
    """Who must approve, how many of them, and how long the request waits for them."""

    quorum: int = Field(default=1, ge=1, le=100)
    approvers: Patterns = Field(min_length=1, description="'*' = anyone but the requester.")
    ttl_seconds: int = Field(default=900, gt=0, le=30 * DAY)


class Rule(_Frozen):
    name: str = Field(min_length=1, max_length=100)
    principals: Patterns = Field(min_length=1)
    tenants: Patterns = Field(min_length=1)
    tools: Patterns = Field(min_length=1, description="Tool names, e.g. 'wallet.*'.")
    actions: Patterns | None = Field(default=None, description=(
        "The tool name's last dot segment: 'debit' for wallet.debit."))
    resource_path: str | None = Field(default=None, description=(
        "A canonical-argument path whose value must match one of `resources`."))
    resources: Patterns | None = None
    effect: Literal["allow", "deny", "require_approval"]
    max_amount_minor: int | None = Field(default=None, ge=0, le=JSON_SAFE, description=(
        "Cap on the call's amount (the tool's cost_from money argument), in minor units."))
    currency: str | None = Field(default=None, pattern=CURRENCY)
    over_cap: Literal["deny", "require_approval"] = "deny"
    approval: ApprovalRule | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        if (self.resource_path is None) != (self.resources is None):
            raise ValueError("resource_path and resources go together")
        if self.resource_path is not None and EACH in parse_path(self.resource_path):
            raise ValueError(f"resource_path {self.resource_path!r} must name one value, not a list")
        if (self.max_amount_minor is None) != (self.currency is None):
            raise ValueError("max_amount_minor and currency go together")
        if self.effect == "deny" and (self.max_amount_minor is not None or self.approval):
            raise ValueError("a deny rule has no cap and no approval")
        if self.may_require_approval and self.approval is None:
            raise ValueError("a rule that can require approval (effect require_approval, or "
                             "over_cap require_approval with a cap) needs an approval block")
        # An allow rule may still name approvers: for tools the registry marks
        # requires_approval (irreversible ones), which no rule can let out unapproved.
        return self

    @property
    def may_require_approval(self) -> bool:
        return self.effect == "require_approval" or (
            self.max_amount_minor is not None and self.over_cap == "require_approval")


class Limit(_Frozen):
    """At most ``max_calls`` allowed calls, and at most ``max_amount_minor`` moved in
    ``currency``, per principal (in any tenant) or per tenant, over the last window."""

    name: str = Field(min_length=1, max_length=100)
    scope: Literal["principal", "tenant"]
    tools: Patterns = Field(min_length=1)
    window_seconds: int = Field(gt=0, le=366 * DAY)
    max_calls: int | None = Field(default=None, ge=0, le=JSON_SAFE)
    max_amount_minor: int | None = Field(default=None, ge=0, le=JSON_SAFE)
    currency: str | None = Field(default=None, pattern=CURRENCY)

    @model_validator(mode="after")
    def _consistent(self) -> Limit:
        if self.max_calls is None and self.max_amount_minor is None:
            raise ValueError("a limit needs max_calls, max_amount_minor or both")
        if (self.max_amount_minor is None) != (self.currency is None):
            raise ValueError("max_amount_minor and currency go together")
        return self


class ResolutionRule(_Frozen):
    """Who may settle a call by hand when reconciliation could not (a RECONCILING or
    MANUAL_REVIEW intent), in which tenants, for which tools, to which outcomes. The call's own principal
    never may: the agent cannot vouch for its own effect."""

    name: str = Field(min_length=1, max_length=100)
    operators: Patterns = Field(min_length=1)
    tenants: Patterns = Field(min_length=1)
    tools: Patterns = Field(min_length=1)
    outcomes: tuple[Literal["succeeded", "failed"], ...] = Field(
        default=("succeeded", "failed"), min_length=1)


class Policy(_Frozen):
    capability_ttl_seconds: int = Field(default=300, gt=0, le=DAY)
    rules: tuple[Rule, ...] = Field(description="Evaluated in order; the first match decides.")
    limits: tuple[Limit, ...] = ()
    resolutions: tuple[ResolutionRule, ...] = Field(
        default=(), validation_alias=AliasChoices("resolutions", "repairs"), description=(
            "Who may resolve an intent by hand; none by default. Read from ``repairs`` too, "
            "its former name."))

    _version: str = PrivateAttr()

    @model_validator(mode="after")
    def _names_unique(self) -> Policy:
        for kind, names in (("rule", [r.name for r in self.rules]),
                            ("limit", [limit.name for limit in self.limits]),
                            ("resolution", [resolution.name for resolution in self.resolutions])):
            repeated = sorted({name for name in names if names.count(name) > 1})
            if repeated:
                raise ValueError(f"{kind} names repeat: {', '.join(repeated)}")
        return self

    def model_post_init(self, context: Any) -> None:
        document = self.model_dump(mode="json")
        # The versioned form keeps the section's former name: an unchanged file keeps its
        # version across the rename (decisions and capabilities name versions).
        document["repairs"] = document.pop("resolutions")
        self._version = hashlib.sha256(jcs(document)).hexdigest()[:VERSION_CHARS]

    @property
    def version(self) -> str:
        """Short SHA-256 of the canonical JSON of the parsed document (defaults filled in)."""
        return self._version

    def document(self) -> dict[str, Any]:
        """What the version hashes; stored with it in ``policy_versions`` for the audit."""
        return self.model_dump(mode="json")
