"""Reads the deployment's registry file; a bad file stops the service at start-up.

A registry mistake found while a proposal is in flight would turn into a wrong key or a
wrong effect class for a real intent, so every refusal happens here, with the file name and
the place in it. YAML's silent traps are closed: a repeated key is an error (PyYAML keeps the
last one), and versions must be quoted strings (``1.10`` would otherwise load as ``1.1``).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from shared.tools.registry import ToolRegistry


class RegistryError(ValueError):
    """The registry file cannot be used; the message says where and why."""


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        for key in keys:
            if keys.count(key) > 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"repeated key {key!r}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def parse_registry(text: str, source: str = "<registry>") -> ToolRegistry:
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: builds no objects
    except yaml.YAMLError as error:
        raise RegistryError(f"{source}: not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise RegistryError(f"{source}: expected a mapping with a 'tools' list at the top")
    try:
        return ToolRegistry.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(
            f"{_where(document, problem['loc'])}: {problem['msg'].removeprefix('Value error, ')}"
            for problem in error.errors())
        raise RegistryError(f"{source}: {problems}") from None


def load_registry(path: str | Path) -> ToolRegistry:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RegistryError(f"{path}: cannot read the tool registry: {error}") from None
    return parse_registry(text, str(path))


def _where(document: dict, location: tuple) -> str:
    """``tools[2] (wallet.debit v1).retry.max_attempts`` rather than ``tools.2.retry...``."""
    parts: list[str] = []
    for step in location:
        if isinstance(step, int) and parts:
            label = _tool_label(document, step) if parts == ["tools"] else ""
            parts[-1] += f"[{step}]{label}"
        else:
            parts.append(str(step))
    return ".".join(parts) or "(top level)"


def _tool_label(document: dict, index: int) -> str:
    tools = document.get("tools")
    entry = tools[index] if isinstance(tools, list) and index < len(tools) else None
    if isinstance(entry, dict) and "name" in entry:
        return f" ({entry.get('name')} v{entry.get('version')})"
    return ""
