"""Reads the deployment's registry file; a bad file stops the service at start-up.

A registry mistake found while a proposal is in flight would turn into a wrong key or a
wrong effect class for a real intent, so every refusal happens here, with the file name and
the place in it. YAML's silent traps are closed: a repeated key is an error
(``shared/yaml_documents.py``), and versions must be quoted strings (``1.10`` would otherwise
load as ``1.1``).
"""

from __future__ import annotations

from pathlib import Path

from shared.tools.registry import ToolRegistry
from shared.yaml_documents import parse_document, read_document


class RegistryError(ValueError):
    """The registry file cannot be used; the message says where and why."""


def parse_registry(text: str, source: str = "<registry>") -> ToolRegistry:
    return parse_document(text, source, ToolRegistry, RegistryError, top="tools",
                          label=lambda tool: f"{tool.get('name')} v{tool.get('version')}")


def load_registry(path: str | Path) -> ToolRegistry:
    return parse_registry(*read_document(path, "the tool registry", RegistryError))
