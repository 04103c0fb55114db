"""The one error a person is shown when what they asked for is refused."""

from __future__ import annotations


class ActionError(Exception):
    """Refused input or a refused action: `reason` is shown to the user as it is (a sentence
    that says what is wrong and what to do)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
