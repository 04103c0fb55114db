"""Which tools a conversation's model gets, and running one call.

The built-in recall tools and every configured MCP server's tools, minus those the conversation
switched off. Only what was offered can run: a call naming anything else is an error result. A
call never raises into the turn: bad input, a failing tool or an unknown name becomes an
`is_error` result the model can read and act on. Only cancellation (Stop) goes through.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings

from core import db
from tools import mcp, recall
from tools.values import Context, Outcome, ToolError

log = logging.getLogger(__name__)

_BUILT_IN = {
    "search_history": recall.search_history,
    "read_messages": recall.read_messages,
    "read_attachment": recall.read_attachment,
}


@dataclass(frozen=True)
class Toolbox:
    """The tools one request offers: their definitions, in a fixed order (a stable prefix)."""

    definitions: tuple[dict, ...] = ()
    servers: dict[str, mcp.Listed] = field(default_factory=dict, hash=False)  # by offered name

    def offers(self, name: str) -> bool:
        return any(d["name"] == name for d in self.definitions)


@dataclass(frozen=True)
class Available:
    """A tool as the conversation's tool switches list it."""

    name: str
    source: str  # "built-in" or the MCP server's name
    description: str


async def available() -> list[Available]:
    """Every tool this chat has, switched on or not."""
    found = [Available(d["name"], "built-in", d["description"]) for d in _built_in()]
    found += [
        Available(t.definition["name"], t.server, t.definition["description"])
        for t in await mcp.tools()
    ]
    return found


def switched_off(disabled: list[str], listed: set[str], enabled: set[str]) -> list[str]:
    """A conversation's tools switched off once its switches are saved: the listed ones not
    enabled. A tool of a server that is down now (not listed) keeps the switch it had."""
    kept = [name for name in disabled if name not in listed]
    return sorted({*kept, *(listed - enabled)})


async def toolbox(disabled: list[str] | tuple[str, ...] = ()) -> Toolbox:
    """What a request of a conversation with these tools switched off offers."""
    off = set(disabled)
    listed = {t.definition["name"]: t for t in await mcp.tools() if t.definition["name"] not in off}
    definitions = [d for d in _built_in() if d["name"] not in off]
    definitions += [t.definition for t in listed.values()]
    return Toolbox(tuple(definitions), listed)


async def offered(capabilities, disabled: list[str] | tuple[str, ...] = ()) -> Toolbox | None:
    """What a conversation's requests offer its model: nothing to a model without tools. Chat
    steps and summaries over the cache both ask here, so their tool definitions match byte
    for byte."""
    return await toolbox(disabled) if capabilities.supports_tools else None


def _built_in() -> tuple[dict, ...]:
    return recall.DEFINITIONS if settings.RECALL_TOOLS else ()


async def run(call: dict, context: Context, box: Toolbox) -> Outcome:
    """Run one `tool_use` block; the answer as its `tool_result` will say it."""
    name, arguments = call.get("name", ""), call.get("input")
    started = time.monotonic()
    try:
        if not isinstance(arguments, dict):
            raise ToolError("The tool input must be a JSON object.")
        if not box.offers(name):
            raise ToolError(f"There is no tool named {name!r} in this chat.")
        if name in box.servers:
            content, is_error = await mcp.call(box.servers[name], arguments)
        else:
            content, is_error = await db.run(_BUILT_IN[name], context, arguments), False
    except ToolError as exc:
        content, is_error = str(exc), True
    except TimeoutError:
        content, is_error = f"The tool {name} did not answer in time.", True
    except Exception:
        log.exception("tool %s failed in conversation %s", name, context.conversation_id)
        content, is_error = f"The tool {name} failed on the server.", True
    return Outcome(_bounded(content), is_error, round((time.monotonic() - started) * 1000))


def _bounded(content: str | list[dict]) -> str | list[dict]:
    """A text answer cut at TOOL_RESULT_MAX_CHARS; blocks (a file given back: its size is its
    token estimate, counted as any file's) have each text of theirs cut."""
    if isinstance(content, list):
        return [{**b, "text": _bounded(b["text"])} if "text" in b else b for b in content]
    text, limit = content, settings.TOOL_RESULT_MAX_CHARS
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut: {len(text):,} characters, the first {limit:,} shown]"
