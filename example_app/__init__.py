"""Example services that expose their routes as MCP tools."""
