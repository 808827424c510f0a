"""``mlxport mcp``: the graph's tools for an MCP client, over stdio (see mlxport/mcp_server.py)."""

from __future__ import annotations

from mlxport.cli import options as o

app = o.command_app("Serve mlxport's tools to an MCP client over stdio.")


@app.command()
def mcp(backend: o.Backend = "auto") -> None:
    """Serve the porting tools (the graph's, plus list_tasks, create_task and port) to an MCP client
    over stdio; the backend is the default of calls that name none."""
    from mlxport.mcp_server import serve_mcp

    serve_mcp(backend)
