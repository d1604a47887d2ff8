"""policy: decides each accepted intent (allow with a capability, deny, or ask for approval),
with the policy library of ``shared/policy/``."""
