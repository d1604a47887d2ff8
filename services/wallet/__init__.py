"""The reference downstream wallet (DESIGN.md §7): debit and refund over the Kafka effect adapter."""
