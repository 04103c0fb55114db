"""An MCP server (stdio, the official SDK) whose one tool takes its time: `wait` notes that it
started by creating the file it is given, then sleeps. Tests run it as a configured MCP server
(`MCP_SERVERS`) to have a tool still running when they press Stop."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("slow")


@server.tool()
async def wait(started: str, seconds: float = 30) -> str:
    """Create the file `started`, then wait `seconds`."""
    Path(started).touch()  # noqa: ASYNC240 - one tiny file, before the wait
    await asyncio.sleep(seconds)
    return "waited"


if __name__ == "__main__":
    server.run()
