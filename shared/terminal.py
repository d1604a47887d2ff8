"""Text as a terminal will show it: every character that is not itself on screen escaped.

Ids, reasons and payloads come from agents, and a terminal obeys what it prints: a newline
forges a table row, an escape sequence recolours or rewrites the screen, a bidirectional
override reorders a line so that one id reads as another. The intake refuses such ids
(``shared.contracts.proposals.UNPRINTABLE``), but records written before that, dead letters and
free-text fields still hold them; whatever the operator CLI prints goes through ``printable``.
"""

from __future__ import annotations

import unicodedata

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Control, format (zero-width, bidi), surrogate, private-use, unassigned, line and paragraph
separator characters."""


def printable(text: str) -> str:
    """``text`` with each hidden character written as its Python escape (``\\n``, ``\\x1b``,
    ``\\u202e``): what is shown is what is there."""
    if text.isprintable():
        return text
    return "".join(_escaped(char) if unicodedata.category(char) in _HIDDEN else char
                   for char in text)


def _escaped(char: str) -> str:
    return repr(char)[1:-1] if char not in "'\"" else char
