"""Operation keys: the name of one business intent across attempts, restarts and replays.

Shape: ``<tenant>:<scheme>:<sha256 hex>`` — printable ASCII, at most 143 characters. The
digest covers the RFC 8785 form of ``[scheme, tenant, tool name, *parts]``, a JSON array, so no
choice of separator characters in the parts can make two intents collide, and the tenant both
prefixes and is hashed in, so two tenants never share a key.

Decisions (change only with a migration of stored keys: a changed derivation turns every
in-flight retry into a new intent):

- The tool **version is not in the key**. A retry proposed under a newer registry version must
  meet the original intent and be compared by argumentsHash (a mismatch is refused), never
  become a second effect.
- The tool **name is in the key** for every scheme, so one caller key (say, an order id) can
  name the reservation and the debit of one order without the two conflicting.
- The tool's declared scheme decides. A caller key sent for a tool that derives its key is not
  used: an entity or nonce the tool names is the intent, and a per-call caller key must not
  split it into several.
- ``per_entity`` and ``per_command`` read canonical values, so ``w-1`` and
  ``tenant/acme/w-1``, or two spellings of one timestamp, name the same entity.
"""

from __future__ import annotations

import hashlib

from shared.tools import paths
from shared.tools.canonical import CanonicalArguments
from shared.tools.contracts import CallerStated, OncePerRun, PerCommand, PerEntity
from shared.tools.jcs import jcs
from shared.tools.rejections import Rejection, RejectionCode
from shared.tools.spec import ToolSpec
from shared.tools.tenancy import require_tenant

MAX_CALLER_KEY = 255


def operation_key(tool: ToolSpec, tenant_id: str, run_id: str, canonical: CanonicalArguments,
                  caller_key: str | None) -> str:
    require_tenant(tenant_id)
    scheme = tool.key
    match scheme:
        case CallerStated():
            parts = [_checked_caller_key(caller_key)]
        case PerEntity(fields=fields):
            parts = [_required(canonical.value, field, "entity field") for field in fields]
        case PerCommand(nonce_field=nonce_field):
            parts = [_required(canonical.value, nonce_field, "nonce")]
        case OncePerRun():
            if not isinstance(run_id, str) or not run_id:
                raise Rejection(RejectionCode.OPERATION_KEY_MISSING,
                                "a once-per-run tool needs a run id")
            parts = [run_id]
    digest = hashlib.sha256(jcs([scheme.scheme, tenant_id, tool.name, *parts])).hexdigest()
    return f"{tenant_id}:{scheme.scheme}:{digest}"


def _checked_caller_key(caller_key: str | None) -> str:
    if caller_key is None:
        raise Rejection(RejectionCode.OPERATION_KEY_MISSING,
                        "this tool's intents are named by the caller: send an operation key")
    if (not isinstance(caller_key, str) or not 0 < len(caller_key) <= MAX_CALLER_KEY
            or not caller_key.isprintable()):
        raise Rejection(RejectionCode.OPERATION_KEY_INVALID, f"an operation key is 1 to "
                        f"{MAX_CALLER_KEY} printable characters")
    return caller_key


def _required(arguments: dict, field: str, role: str) -> object:
    value = paths.value_at(arguments, paths.parse_path(field))
    if value is paths.MISSING or value is None or value == "":
        raise Rejection(RejectionCode.OPERATION_KEY_MISSING,
                        f"the {role} {field!r} that names this intent is missing or empty")
    return value
