"""How the dispatcher reaches a tool: effect requests over Kafka, or HTTP."""
