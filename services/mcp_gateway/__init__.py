"""The MCP gateway: MCP clients call the registry's tools through intentledger (docs/mcp.md)."""
