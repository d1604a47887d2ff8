"""The reference downstream wallet (docs/design.md §7): debit and refund, reachable through the Kafka
effect adapter and over HTTP, each intent applied at most once."""
