"""The one error users see from an action."""

from __future__ import annotations


class ActionError(Exception):
    """Refused input: `reason` is shown to the user as it is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
