"""The deployment's tools, looked up by (name, version).

Agents name the version they were prompted with; a proposal for a version this deployment does
not run is refused rather than mapped to a neighbour, because a different version may have a
different argument meaning, key scheme or effect class.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator

from shared.tools.rejections import Rejection, RejectionCode
from shared.tools.spec import ToolSpec


class ToolRegistry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tools: tuple[ToolSpec, ...]

    _index: dict[tuple[str, str], ToolSpec] = PrivateAttr()
    _aliases: dict[str, str] = PrivateAttr()

    @model_validator(mode="after")
    def _references_resolve(self) -> ToolRegistry:
        if not self.tools:
            raise ValueError("the registry declares no tools")
        declared = [(tool.name, tool.version) for tool in self.tools]
        for name, version in {pair for pair in declared if declared.count(pair) > 1}:
            raise ValueError(f"tool {name} v{version} is declared twice")
        for tool in self.tools:
            target = tool.compensating_tool
            if target is None:
                continue
            if (target.name, target.version) not in declared:
                raise ValueError(f"{tool.name} v{tool.version}: compensating tool "
                                 f"{target.name} v{target.version} is not declared")
            if (target.name, target.version) == (tool.name, tool.version):
                raise ValueError(f"{tool.name} v{tool.version} cannot compensate itself")
        return self

    def model_post_init(self, context: Any) -> None:
        self._index = {(tool.name, tool.version): tool for tool in self.tools}
        self._aliases = {alias: tool.name for tool in self.tools for alias in tool.aliases}
        clashes = set(self._aliases) & {tool.name for tool in self.tools}
        if clashes:
            raise ValueError(f"aliases {sorted(clashes)} are also tool names")

    def resolve(self, name: str, version: str | None) -> ToolSpec:
        """The tool an agent meant: by name or declared alias; without a version, the only one.

        A missing version is resolved only when the deployment runs exactly one version of the
        tool; with several, guessing could pick another argument meaning, so it is refused.
        """
        name = self._aliases.get(name, name)
        if version is not None:
            return self.get(name, version)
        versions = sorted(v for (n, v) in self._index if n == name)
        if len(versions) == 1:
            return self._index[(name, versions[0])]
        if versions:
            raise Rejection(RejectionCode.UNKNOWN_TOOL_VERSION, f"tool {name[:64]!r} runs in "
                            f"versions {', '.join(versions)} here: state tool_version")
        raise Rejection(RejectionCode.UNKNOWN_TOOL, f"no tool named {name[:64]!r} in this deployment")

    def get(self, name: str, version: str) -> ToolSpec:
        tool = self._index.get((name, version))
        if tool is not None:
            return tool
        versions = sorted(v for (n, v) in self._index if n == name)
        if versions:
            raise Rejection(RejectionCode.UNKNOWN_TOOL_VERSION, f"tool {name[:64]!r} has no "
                            f"version {version[:32]!r}; this deployment runs {', '.join(versions)}")
        raise Rejection(RejectionCode.UNKNOWN_TOOL, f"no tool named {name[:64]!r} in this deployment")
