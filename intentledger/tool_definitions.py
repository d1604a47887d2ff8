"""``intentledger tools export``: the deployment's registry as the tool definitions each model
provider takes, so an agent's ``tools=[…]`` is generated, never written a second time.

The registry read is the intake's (``INTENTLEDGER_INTAKE_TOOLS_FILE``): the tools it resolves
are the tools an agent may be given."""

from __future__ import annotations

import json
from pathlib import Path

from services.proposal_intake.settings import IntakeSettings
from shared.tools import ToolRegistry, load_registry
from intentledger_client.tools import CATALOG, Format, ToolDefinition, export


def catalog(registry: ToolRegistry) -> list[ToolDefinition]:
    return [ToolDefinition(name=tool.name, version=tool.version, description=tool.description,
                           arguments_schema=tool.arguments_schema,
                           result_schema=tool.result_schema, aliases=tool.aliases)
            for tool in registry.tools]


def export_command(format: Format | str, tools_file: str | None) -> str:
    """The JSON printed: a provider's list of tool definitions, or the catalogue itself."""
    registry = load_registry(Path(tools_file) if tools_file else IntakeSettings().tools_file)
    definitions = catalog(registry)
    if format == "catalog":
        return CATALOG.dump_json(definitions, indent=2).decode()
    return json.dumps(export(definitions, format), indent=2)
