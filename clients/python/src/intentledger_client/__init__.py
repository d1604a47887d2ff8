"""The agent's side of intentledger: propose tool calls, await their settled outcomes, pair
them back to the model.

Agents need not use it: any Kafka client publishing JSON per ``schemas/agent.proposals`` and
reading its tenant's ``agent.results.<tenant>`` gets the same answers. This is the shortest
correct way in Python; the ledger's services name topics, place answers, sign and parse
answers with this very package.
"""

from intentledger_client.client import Client
from intentledger_client.contracts import ProposalOutcome, ToolCallAwaitingApproval, ToolCallSettled
from intentledger_client.outcomes import Handle, NotTheProposer, Outcome, Status
from intentledger_client.pairing import (to_anthropic_tool_results, to_openai_responses_items,
                                         to_openai_tool_messages)
from intentledger_client.sync import SyncClient

__version__ = "0.1.0"
"""The public contract's version (``schemas/asyncapi.yaml``, ``info.version``): a client speaks
the contract of its own version."""

__all__ = ["Client", "Handle", "NotTheProposer", "Outcome", "ProposalOutcome", "Status", "SyncClient",
           "ToolCallAwaitingApproval", "ToolCallSettled", "__version__", "to_anthropic_tool_results",
           "to_openai_responses_items", "to_openai_tool_messages"]
