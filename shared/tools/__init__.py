"""The tool registry and the identity of a proposed call: canonical arguments, argumentsHash
and operation key. Pure code: the only I/O is reading the registry file at start-up."""

from shared.tools.canonical import CanonicalArguments, canonicalize
from shared.tools.keys import operation_key
from shared.tools.loader import RegistryError, load_registry, parse_registry
from shared.tools.registry import ToolRegistry
from shared.tools.rejections import Rejection, RejectionCode
from shared.tools.spec import ToolSpec
from shared.tools.tenancy import TENANT_ID_PATTERN

__all__ = [
    "TENANT_ID_PATTERN",
    "CanonicalArguments",
    "RegistryError",
    "Rejection",
    "RejectionCode",
    "ToolRegistry",
    "ToolSpec",
    "canonicalize",
    "load_registry",
    "operation_key",
    "parse_registry",
]
