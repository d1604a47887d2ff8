"""Schema and table names are interpolated into SQL, so they are checked, never trusted."""

import re

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def checked_identifier(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"{name!r} is not a plain lower-case SQL identifier")
    return name
