"""Steps held for a person: finding them, answering them, and the MCP server's check tokens."""
