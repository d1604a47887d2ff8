"""Messaging primitives: the envelope, the outbox, the inbox and the consumer template."""
