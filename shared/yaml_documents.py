"""Reading a deployment's YAML file into a pydantic model; every refusal names the file and
the place in it.

YAML's silent traps are closed: a repeated key is an error (PyYAML would keep the last one, so
a second ``effect:`` in a rule or a second ``topic:`` in a tool would quietly win), and the
loader is a SafeLoader, which builds no objects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
Label = Callable[[dict], str]
"""How an entry of a top-level list is named in error messages, e.g. ``acme-debits``."""


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        for key in keys:
            if keys.count(key) > 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"repeated key {key!r}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def parse_document(text: str, source: str, model: type[M], error: type[Exception], *,
                   top: str, label: Label) -> M:
    """``top`` names the list the file must hold, for the message when it holds no mapping."""
    try:
        document = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as problem:
        raise error(f"{source}: not valid YAML: {problem}") from None
    if not isinstance(document, dict):
        raise error(f"{source}: expected a mapping with a '{top}' list at the top")
    try:
        return model.model_validate(document)
    except ValidationError as invalid:
        problems = "; ".join(
            f"{_where(document, problem['loc'], label)}: "
            f"{problem['msg'].removeprefix('Value error, ')}" for problem in invalid.errors())
        raise error(f"{source}: {problems}") from None


def read_document(path: str | Path, what: str, error: type[Exception]) -> tuple[str, str]:
    """(text, source) of ``path``; ``what`` names the file's role in the message."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as problem:
        raise error(f"{path}: cannot read {what}: {problem}") from None


def _where(document: dict, location: tuple, label: Label) -> str:
    """``rules[2] (acme-debits).max_amount_minor`` rather than ``rules.2.max_amount_minor``."""
    parts: list[str] = []
    for step in location:
        if isinstance(step, int) and parts:
            entries = document.get(parts[-1]) if len(parts) == 1 else None
            entry = entries[step] if isinstance(entries, list) and step < len(entries) else None
            named = label(entry) if isinstance(entry, dict) and "name" in entry else ""
            parts[-1] += f"[{step}]" + (f" ({named})" if named else "")
        else:
            parts.append(str(step))
    return ".".join(parts) or "(top level)"
