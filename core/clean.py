"""Text entering the app, checked at the edge: every field a person can type, each with one
explicit limit (the same number the form shows and the server enforces).

Websocket frames are JSON, and JSON can carry what no page can show: a lone UTF-16 surrogate
("\\ud800") decodes to a Python string that cannot be encoded back to UTF-8, and a NUL is refused
by PostgreSQL. Either is refused here with a reason, never stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from core.errors import ActionError

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Field:
    """A field people type into: its name in messages, and the setting holding its limit."""

    label: str  # "That message", "The system prompt", …
    setting: str

    @property
    def limit(self) -> int:
        return getattr(settings, self.setting)


MESSAGE = Field("That message", "MAX_MESSAGE_CHARS")
SYSTEM_PROMPT = Field("The system prompt", "MAX_SYSTEM_PROMPT_CHARS")
INSTRUCTIONS = Field("The instructions", "MAX_INSTRUCTIONS_CHARS")
TITLE = Field("The title", "MAX_TITLE_CHARS")
SUMMARY = Field("The summary", "MAX_SUMMARY_CHARS")
QUERY = Field("The search", "MAX_QUERY_CHARS")


FIELDS = (MESSAGE, SYSTEM_PROMPT, INSTRUCTIONS, TITLE, SUMMARY, QUERY)


def limits() -> dict[str, int]:
    """Every field's limit by its setting's name, for the templates (maxlength, hints)."""
    return {f.setting: f.limit for f in FIELDS}


def clean(value, field: Field, *, required: bool = False) -> str:
    """`value` stripped, if it is text this app can store and show; else ActionError saying
    what is wrong and what to do."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ActionError(f"{field.label} must be text.")
    problem = invalid_text(value)
    if problem:
        raise ActionError(f"{field.label} {problem}; it was not saved.")
    value = value.strip()
    if required and not value:
        raise ActionError(f"{field.label} is empty; type something first.")
    if len(value) > field.limit:
        raise ActionError(
            f"{field.label} is {len(value):,} characters; the limit is {field.limit:,}. Shorten it."
        )
    return value


def invalid_text(value: str) -> str:
    """Why `value` cannot be stored and shown, or "" if it can."""
    if "\x00" in value:
        return "contains a NUL character"
    if _SURROGATE.search(value):
        return "contains invalid Unicode (a lone surrogate)"
    return ""


def scrubbed(value: str) -> str:
    """Untrusted text (model or tool output) made storable: what `invalid_text` refuses from a
    person is replaced with U+FFFD, since output cannot be sent back."""
    if "\x00" in value or _SURROGATE.search(value):
        return _SURROGATE.sub("\ufffd", value.replace("\x00", "\ufffd"))
    return value


def scrubbed_blocks(value):
    """Every string in some content blocks (text, a tool call's input) scrubbed."""
    if isinstance(value, str):
        return scrubbed(value)
    if isinstance(value, list):
        return [scrubbed_blocks(v) for v in value]
    if isinstance(value, dict):
        return {scrubbed(k): scrubbed_blocks(v) for k, v in value.items()}
    return value


def number(value) -> int | None:
    """A whole number as a person or a page sent it (an id, a seq: text or a JSON number), or
    None for anything else, and for one no database column holds (past 64 bits: a query with it
    would overflow, not find nothing). Every id from a frame, a form or a URL is read through
    this."""
    if isinstance(value, bool):
        return None
    found = None
    if isinstance(value, int):
        found = value
    elif isinstance(value, float) and value.is_integer():
        found = int(value)
    elif isinstance(value, str) and len(value) <= 20:
        try:
            found = int(value)
        except ValueError:
            return None
    return found if found is not None and abs(found) <= BIGGEST else None


# The largest value of a 64-bit signed column (PostgreSQL's bigint, SQLite's integer).
BIGGEST = 2**63 - 1
