"""Topic names. ⚑ marks the public contract (DESIGN.md §2): agents and downstream systems use them."""

AGENT_PROPOSALS = "agent.proposals"  # ⚑ in: proposals from agents, any supported format
AGENT_RESULTS = "agent.results"      # ⚑ out: outcomes agents pair back to their tool calls
LEDGER_INTAKE = "ledger.intake"      # internal: intake's ledger events, consumed by policy
LEDGER_APPROVALS = "ledger.approvals"  # ⚑ in: people's approval decisions, consumed by policy
LEDGER_EFFECTS = "ledger.effects"    # ⚑ out: committed business effects, for any subscriber
LEDGER_AUTHORIZATIONS = "ledger.authorizations"  # internal: policy decisions, read by dispatcher
LEDGER_RESOLUTIONS = "ledger.resolutions"  # ⚑ in: operators' manual repairs, read by dispatcher
LEDGER_DISPATCH = "ledger.dispatch"  # internal: the dispatcher's call lifecycle, for the projection
