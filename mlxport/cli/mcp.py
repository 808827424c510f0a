"""``mlxport mcp``: mlxport's tools for an MCP client, over stdio (see mlxport/mcp_server.py)."""

from __future__ import annotations

from mlxport.cli import options as o

app = o.command_app("Serve mlxport's tools to an MCP client over stdio.")


@app.command()
def mcp() -> None:
    """Serve mlxport's tools (read, knowledge, compile, check, benchmark, port) to an MCP client over stdio."""
    from mlxport.mcp_server import serve_mcp

    serve_mcp()
