"""Canonicalization rules: the domain work RFC 8785 cannot do.

RFC 8785 fixes key order, whitespace and number spelling. It cannot know that ``"100.00"`` and
``100`` are the same euros, that ``w-1`` means this tenant's wallet, that a tag list is a set,
or that two offsets name one instant. Each rule rewrites the value at its path so that every
spelling of one business intent becomes one value, and refuses what has no honest meaning.
"""

from __future__ import annotations

import unicodedata
from abc import abstractmethod
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.tools import paths
from shared.tools.currencies import exponent_of
from shared.tools.jcs import jcs
from shared.tools.money import parse_amount, to_minor_units
from shared.tools.rejections import Rejection, RejectionCode
from shared.tools.tenancy import scope_resource


class _Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str

    @field_validator("path")
    @classmethod
    def _parses(cls, path: str) -> str:
        paths.parse_path(path)
        return path

    @property
    def segments(self) -> tuple[str, ...]:
        return paths.parse_path(self.path)


class _ValueRule(_Rule):
    """A rule that rewrites each value its path matches, independently of its neighbours."""

    def apply(self, arguments: dict[str, Any], tenant_id: str) -> dict[str, Any]:
        return paths.transform(arguments, self.segments,
                               lambda value, where: self.rewrite(value, where, tenant_id))

    @abstractmethod
    def rewrite(self, value: Any, where: str, tenant_id: str) -> Any: ...


class MoneyRule(_Rule):
    """``path`` names the amount; ``currency_field`` its sibling holding the ISO 4217 code.
    Canonical form: the amount in integer minor units, the code in upper case.

    ``minimum_minor`` is the smallest amount accepted, in minor units: 1 unless the registry
    says otherwise, so a debit of ``"-40.00"`` is refused here rather than left to every
    downstream to notice (a less careful one would have credited it). A tool that really takes
    zero or negative amounts (an adjustment) declares its own floor."""

    kind: Literal["money"]
    currency_field: str = "currency"
    minimum_minor: int = 1

    @field_validator("path")
    @classmethod
    def _ends_in_a_field(cls, path: str) -> str:
        if paths.parse_path(path)[-1] == paths.EACH:
            raise ValueError("a money path must end in the amount's field name")
        return path

    def apply(self, arguments: dict[str, Any], tenant_id: str) -> dict[str, Any]:
        *parent, field = self.segments
        return paths.transform(arguments, tuple(parent), lambda v, where: self._on(v, field, where))

    def _on(self, parent: Any, field: str, where: str) -> Any:
        if not isinstance(parent, dict) or field not in parent:
            return parent
        currency = parent.get(self.currency_field)
        if not isinstance(currency, str):
            raise Rejection(RejectionCode.CURRENCY_UNKNOWN,
                            f"{where}.{self.currency_field}: an ISO 4217 currency code is required")
        code = currency.strip().upper()
        amount_at = f"{where}.{field}"
        minor = to_minor_units(parse_amount(parent[field], amount_at),
                               exponent_of(code, f"{where}.{self.currency_field}"), amount_at)
        if minor < self.minimum_minor:
            raise Rejection(RejectionCode.AMOUNT_BELOW_MINIMUM,
                            f"{amount_at}: {minor} minor units of {code}, the tool takes at "
                            f"least {self.minimum_minor}")
        return {**parent, field: minor, self.currency_field: code}


class TenantResourceRule(_ValueRule):
    """Canonical form ``tenant/<tenant>/<id>``; an id naming another tenant is refused."""

    kind: Literal["tenant_resource"]

    def rewrite(self, value: Any, where: str, tenant_id: str) -> Any:
        return scope_resource(value, tenant_id, where)


class SetRule(_ValueRule):
    """An unordered list: items sorted by their canonical JSON bytes, duplicates removed."""

    kind: Literal["set"]

    def rewrite(self, value: Any, where: str, tenant_id: str) -> Any:
        if not isinstance(value, list):
            raise Rejection(RejectionCode.ARGUMENTS_INVALID, f"{where}: expected an array")
        by_bytes = {jcs(item): item for item in value}
        return [by_bytes[key] for key in sorted(by_bytes)]


class TimestampRule(_ValueRule):
    """An ISO 8601 date-time with a zone → UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (microseconds:
    finer digits are cut by the parser); a naive one is refused, its instant is unknown."""

    kind: Literal["timestamp"]

    def rewrite(self, value: Any, where: str, tenant_id: str) -> Any:
        try:
            moment = datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            moment = None
        if moment is None:
            raise Rejection(RejectionCode.TIMESTAMP_INVALID, f"{where}: not an ISO 8601 date-time")
        if moment.tzinfo is None:
            raise Rejection(RejectionCode.TIMESTAMP_NAIVE, f"{where}: the date-time has no zone "
                            "offset; add 'Z' or '+hh:mm'")
        try:
            utc = moment.astimezone(UTC)
        except OverflowError:
            raise Rejection(RejectionCode.TIMESTAMP_INVALID, f"{where}: out of range in UTC") from None
        return utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


class StringRule(_ValueRule):
    """Unicode NFC, surrounding whitespace removed: what a person sees as the same text."""

    kind: Literal["string"]

    def rewrite(self, value: Any, where: str, tenant_id: str) -> Any:
        if not isinstance(value, str):
            raise Rejection(RejectionCode.ARGUMENTS_INVALID, f"{where}: expected a string")
        return unicodedata.normalize("NFC", value).strip()


Rule = Annotated[MoneyRule | TenantResourceRule | SetRule | TimestampRule | StringRule,
                 Field(discriminator="kind")]
