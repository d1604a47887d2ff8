"""The agent SDK: propose tool calls, await their outcomes, pair them back to the provider.

Agents need not use it: any Kafka client publishing JSON per ``schemas/agent.proposals`` and
reading its tenant's ``agent.results.<tenant>`` gets the same answers. This is the shortest
correct way in Python.
"""

from shared.client.agent import Outcome, ProposalClient
from shared.client.pairing import to_anthropic_tool_results, to_openai_tool_messages

__all__ = ["Outcome", "ProposalClient", "to_anthropic_tool_results", "to_openai_tool_messages"]
