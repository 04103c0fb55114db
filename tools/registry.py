"""Which tools a conversation's model gets, and running one call.

A call never raises into the turn: bad input, a failing tool or an unknown name becomes an
`is_error` result the model can read and act on. Only cancellation (Stop) goes through.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings

from chat import db

from . import recall
from .values import Context, Outcome, ToolError

log = logging.getLogger(__name__)

_BUILT_IN = {"search_history": recall.search_history, "read_messages": recall.read_messages}


def definitions() -> tuple[dict, ...]:
    """The tool definitions every request carries (the same bytes each turn: a cacheable prefix)."""
    return recall.DEFINITIONS if settings.RECALL_TOOLS else ()


async def run(call: dict, context: Context) -> Outcome:
    """Run one `tool_use` block; the answer as its `tool_result` will say it."""
    name, arguments = call.get("name", ""), call.get("input")
    started = time.monotonic()
    try:
        if not isinstance(arguments, dict):
            raise ToolError("The tool input must be a JSON object.")
        function = _BUILT_IN.get(name) if settings.RECALL_TOOLS else None
        if function is None:
            raise ToolError(f"There is no tool named {name!r} in this chat.")
        text, is_error = await db.run(function, context, arguments), False
    except ToolError as exc:
        text, is_error = str(exc), True
    except Exception:
        log.exception("tool %s failed in conversation %s", name, context.conversation_id)
        text, is_error = f"The tool {name} failed on the server.", True
    return Outcome(_bounded(text), is_error, round((time.monotonic() - started) * 1000))


def _bounded(text: str) -> str:
    limit = settings.TOOL_RESULT_MAX_CHARS
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut: {len(text):,} characters, the first {limit:,} shown]"
