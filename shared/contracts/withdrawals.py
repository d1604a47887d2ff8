"""⚑ ``ledger.approvals`` (inbound): the agent that proposed a call withdraws it while it waits
for people's approval.

Published by an agent's ``Client.withdraw`` (signed by the agent,
``intentledger-withdrawal+jws``), by the MCP gateway for an MCP client's ``tasks/cancel``
(through the same client, signed by the gateway naming the agent in the signature's ``agent``
claim and the person in ``person``, as its proposals are), or by any Kafka client an agent
writes with. The model is the agent client's (``intentledger_client.contracts``). Read by the
policy, which owns approval requests. It counts only if the signature proves the call's own
proposer sends it (``shared.identity.delegation``), and only while the call still awaits
approval: then the call is denied ``call_withdrawn`` exactly as a person's refusal would deny
it, an approval given afterwards does not count, and nothing is dispatched. A call already
decided (allowed, denied, or under way) is not touched: withdrawing is not cancelling an
effect.
"""

from intentledger_client.contracts import CALL_WITHDRAWAL_REQUESTED as CALL_WITHDRAWAL_REQUESTED
from intentledger_client.contracts import CallWithdrawal as CallWithdrawal  # the agent's model
