"""intentledger's services. They never import each other; they share only ``shared``."""
