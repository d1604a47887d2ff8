"""Reading a policy file; every refusal names the file and the place in it.

YAML's silent traps are closed as in the tool registry: a repeated key is an error (PyYAML
would keep the last one, so a second ``effect:`` in a rule would quietly win).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from services.policy.document import Policy


class PolicyError(ValueError):
    """The policy file cannot be used; the message says where and why."""


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        for key in keys:
            if keys.count(key) > 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"repeated key {key!r}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: builds no objects
    except yaml.YAMLError as error:
        raise PolicyError(f"{source}: not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise PolicyError(f"{source}: expected a mapping with a 'rules' list at the top")
    try:
        return Policy.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(
            f"{_where(document, problem['loc'])}: {problem['msg'].removeprefix('Value error, ')}"
            for problem in error.errors())
        raise PolicyError(f"{source}: {problems}") from None


def load_policy(path: str | Path) -> Policy:
    """The policy in ``path``; raises PolicyError when it cannot be read or is invalid."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(f"{path}: cannot read the policy: {error}") from None
    return parse_policy(text, str(path))


def _where(document: dict, location: tuple) -> str:
    """``rules[2] (acme-debits).max_amount_minor`` rather than ``rules.2.max_amount_minor``."""
    parts: list[str] = []
    for step in location:
        if isinstance(step, int) and parts:
            entries = document.get(parts[-1]) if len(parts) == 1 else None
            entry = entries[step] if isinstance(entries, list) and step < len(entries) else None
            label = f" ({entry['name']})" if isinstance(entry, dict) and "name" in entry else ""
            parts[-1] += f"[{step}]{label}"
        else:
            parts.append(str(step))
    return ".".join(parts) or "(top level)"
