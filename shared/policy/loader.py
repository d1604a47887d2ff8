"""Reading a policy file; every refusal names the file and the place in it (see
``shared/yaml_documents.py``: repeated keys are errors, as in the tool registry)."""

from __future__ import annotations

from pathlib import Path

from shared.policy.document import Policy
from shared.yaml_documents import parse_document, read_document


class PolicyError(ValueError):
    """The policy file cannot be used; the message says where and why."""


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    return parse_document(text, source, Policy, PolicyError, top="rules",
                          label=lambda entry: str(entry["name"]))


def load_policy(path: str | Path) -> Policy:
    """The policy in ``path``; raises PolicyError when it cannot be read or is invalid."""
    return parse_policy(*read_document(path, "the policy", PolicyError))
