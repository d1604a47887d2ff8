"""Pieces with no business meaning that every intentledger service shares."""
