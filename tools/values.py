"""Plain values of a tool call: who it runs for, what it answered."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model


@dataclass(frozen=True)
class Context:
    """What a tool may reach: one conversation of one user, never more."""

    owner_id: int
    conversation_id: int
    # The turn's own message: what the model searches is the history before it (the turn
    # itself is in its window, and would only echo the question back).
    turn_seq: int | None = None

    @property
    def owner(self):
        # Only its id is used (every query is scoped by it): no need to load the row.
        return get_user_model()(pk=self.owner_id)


@dataclass(frozen=True)
class Outcome:
    """A tool's answer as the model will see it (`tool_result`), and how long it took."""

    # The tool_result's content: text, or blocks (read_attachment's line and file block).
    content: str | list[dict]
    is_error: bool = False
    ms: int = 0


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model (is_error)."""
