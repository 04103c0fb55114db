"""Tools from Model Context Protocol servers the operator lists in `MCP_SERVERS`.

Each server is a command this process starts on first use (the official `mcp` SDK, stdio
transport) and keeps running: one task per server holds the SDK's client open, because its
context managers must be entered and left in one task. Its tools are listed once per connection
and offered to the model as `<server>__<tool>`, so names from different servers (and the
built-in tools) never collide. A server that cannot start, or dies, makes its calls answer an
error the model can read; the next use starts it again.

Connections are per event loop (a server process has one; each test has its own), kept on the
runtime (`core.runtime.Loop`), and closed by `shutdown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass

from django.conf import settings

from core import runtime
from tools.values import ToolError

log = logging.getLogger(__name__)

SEPARATOR = "__"
_NAME = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class Listed:
    """One MCP tool as the model is offered it."""

    server: str
    tool: str  # its name on the server
    definition: dict  # {"name": "<server>__<tool>", "description", "input_schema"}


class _Connection:
    def __init__(self, name: str, config: dict) -> None:
        self.name = name
        self.config = config
        self.tools: asyncio.Future[tuple[Listed, ...]] = asyncio.get_running_loop().create_future()
        self.client = None
        self._close = asyncio.Event()
        self.task = asyncio.ensure_future(self._hold())

    @property
    def alive(self) -> bool:
        return not self.task.done()

    async def _hold(self) -> None:
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(
            command=self.config["command"],
            args=[str(a) for a in self.config.get("args", [])],
            env={str(k): str(v) for k, v in (self.config.get("env") or {}).items()} or None,
        )
        try:
            async with Client(params, read_timeout_seconds=settings.MCP_TIMEOUT_SECONDS) as client:
                listed = await client.list_tools()
                self.client = client
                self.tools.set_result(tuple(_listed(self.name, t) for t in listed.tools))
                await self._close.wait()
        except Exception as exc:
            log.warning("MCP server %s stopped: %s", self.name, exc)
            if not self.tools.done():
                self.tools.set_exception(ToolError(f"The MCP server {self.name} did not start."))
        finally:
            self.client = None
            _quiet_unretrieved(self.tools)

    async def close(self) -> None:
        self._close.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self.task, 5)


def _listed(server: str, tool) -> Listed:
    name = _NAME.sub("_", f"{server}{SEPARATOR}{tool.name}")[:64]
    schema = tool.input_schema or {"type": "object", "properties": {}}
    description = (tool.description or tool.name)[:1000]
    return Listed(
        server,
        tool.name,
        {"name": name, "description": f"[{server}] {description}", "input_schema": schema},
    )


def _quiet_unretrieved(future: asyncio.Future) -> None:
    if future.done() and not future.cancelled():
        future.exception()  # marks it retrieved: a failed start is reported where it is used


def _open(name: str) -> _Connection:
    connections = runtime.current().loop().mcp_servers
    connection = connections.get(name)
    if connection is None or not connection.alive:
        connection = connections[name] = _Connection(name, settings.MCP_SERVERS[name])
    return connection


# A server that did not start is not waited for again until this many seconds have passed, so
# one broken server does not hold up every turn.
RETRY_SECONDS = 60.0


async def tools() -> tuple[Listed, ...]:
    """Every configured server's tools (servers are started on first use). A server that does
    not start within MCP_TIMEOUT_SECONDS is left out, logged, and tried again later."""
    if not settings.MCP_SERVERS:
        return ()
    resting = runtime.current().loop().mcp_resting
    found: list[Listed] = []
    for name in settings.MCP_SERVERS:
        if resting.get(name, 0) > time.monotonic():
            continue
        connection = _open(name)
        try:
            found += await asyncio.wait_for(
                asyncio.shield(connection.tools), settings.MCP_TIMEOUT_SECONDS
            )
        except (ToolError, TimeoutError):
            log.warning("MCP server %s offers no tools: it did not start", name)
            resting[name] = time.monotonic() + RETRY_SECONDS
            await connection.close()
    return tuple(found)


async def call(listed: Listed, arguments: dict) -> tuple[str, bool]:
    """Call one tool; its text content and whether the server flagged it an error."""
    connection = _open(listed.server)
    await asyncio.wait_for(asyncio.shield(connection.tools), settings.MCP_TIMEOUT_SECONDS)
    client = connection.client
    if client is None:
        raise ToolError(f"The MCP server {listed.server} is not running.")
    try:
        result = await client.call_tool(listed.tool, arguments)
    except Exception as exc:
        log.warning("MCP call %s on %s failed: %s", listed.tool, listed.server, exc)
        raise ToolError(f"The MCP server {listed.server} failed: {exc}") from None
    return _text(result), bool(result.is_error)


def _text(result) -> str:
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        else:
            parts.append(f"[{kind} content]")
    return "\n".join(parts) or "(no content)"


async def shutdown() -> None:
    here = runtime.current().loop()
    connections, here.mcp_servers = here.mcp_servers, {}
    here.mcp_resting.clear()
    await asyncio.gather(*(c.close() for c in connections.values()))
