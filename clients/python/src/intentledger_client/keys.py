"""The operation key of a call a framework made: one intent per (run, tool-call id).

A framework names each tool call the model makes (OpenAI Agents' ``call_id``, LangChain's
``ToolCall["id"]``, Pydantic AI's ``tool_call_id``) and keeps that id when it runs the call
again: a resumed run, a re-executed graph node, an approval's second pass. Keyed by it, each of
those is answered as the duplicate it is and cannot take effect twice. The run is in the key
because a framework's ids are unique within a conversation only (Pydantic AI's ``TestModel``
always says ``pyd_ai_tool_call_id__<tool>``; a scripted model reuses the ids it was given),
while a caller key is unique tenant-wide.

Hashed, not joined: ``("a:b", "c")`` and ``("a", "b:c")`` must not meet, and a key stays within
the 255 printable characters the intake accepts whatever the lengths of the two ids.
"""

from __future__ import annotations

import hashlib
import json


def call_key(run_id: str, tool_call_id: str) -> str:
    """The key of the call ``tool_call_id`` of ``run_id``: the same pair, the same key."""
    if not run_id or not tool_call_id:
        raise ValueError("an operation key needs both the run id and the tool-call id")
    digest = hashlib.sha256(json.dumps([run_id, tool_call_id]).encode()).hexdigest()
    return f"tool-call:{digest[:40]}"
