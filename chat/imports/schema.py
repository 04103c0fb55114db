"""What an import keeps of what it read: every field's type checked, the first wrong one refused
with a sentence naming it (ActionError), and only what the Messages API accepts passed on.

A message keeps the block types the API takes in the roles that may carry them, with only the
fields the API needs: text; tool_use in an assistant message (a unique id and a name the API
accepts, an object input); tool_result with a string or text blocks for content, in a user
message or, as this app stores a turn with tools (one reply row holding its steps), in an
assistant message after its call; files, as images and documents holding their bytes or text
(chat/imports/files.py: stored as uploads by the importer). An image from a URL is not
imported, nor a block of any other type: each becomes a text block saying what it was ("[an
image from a URL, not imported]"); a reply's thinking is kept as exported (shown folded, never
sent again). Orphaned tool calls and results are kept as written; the window drops them from
every request (compaction/assembly.py).

Titles and text are checked as typed text is (core/clean.py): no NUL, no lone surrogate. What a
message says of its place among versions, its pin, dates and figures, and an export's
compactions, are checked in chat/imports/history.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from chat.imports import files
from chat.imports.history import KEEP_MESSAGE_HISTORY, Said, message_history
from chat.imports.history import text as _text
from chat.imports.reader import ANY, SCALAR, describe
from core.clean import SYSTEM_PROMPT, clean
from core.errors import ActionError
from providers.blocks import FILE_TYPES, THINKING_TYPES, type_of

KEPT_STATUSES = {"complete", "error", "interrupted", "cancelled"}
ROLES = ("user", "assistant")
# The API's rule for tool ids and names (a name is also at most 64 characters).
_API_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
_API_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# What the reader builds (chat/imports/reader.py): only these keys, the rest read past.
KEEP_MESSAGE = {"role": SCALAR, "content": ANY, "status": SCALAR, **KEEP_MESSAGE_HISTORY}


@dataclass
class Imported:
    """One conversation as it will be stored, with its dates when the file gives them."""

    title: str = ""
    system_prompt: str | None = None
    messages: list[Said] = field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    leaf: int | None = None  # the end of the branch on screen (None: the newest message)


@dataclass
class Calls:
    """The tool ids a conversation has used so far: the API refuses a repeated one."""

    ids: set[str] = field(default_factory=set)


# --- this app's export.json ----------------------------------------------------------------------


def message(raw, n: int, calls: Calls) -> Said:
    """Message `n` of an export, or ActionError naming what is wrong."""
    if not isinstance(raw, dict):
        raise ActionError(f"Message {n} is {describe(raw)}; a message is an object with a role.")
    role = raw.get("role")
    if role not in ROLES:
        shown = repr(role[:20]) if isinstance(role, str) else describe(role)
        raise ActionError(f'Message {n} has role {shown}; it must be "user" or "assistant".')
    status = optional(raw.get("status"), str, f"Message {n}'s status is", "it must be a string")
    status = status if status in KEPT_STATUSES else "complete"
    said = Said(role, blocks(raw.get("content"), f"message {n}", role, calls), status)
    return message_history(raw, n, said)


def blocks(content, where: str, role: str, calls: Calls) -> list[dict]:
    """A message's content: a string, or the API's blocks, each kept, refused or replaced."""
    if isinstance(content, str):
        return [{"type": "text", "text": _text(content, f"the text of {where}")}]
    if not isinstance(content, list):
        raise ActionError(
            f"The content of {where} is {describe(content)}; "
            "content must be text or a list of content blocks."
        )
    kept, asked, answered = [], set(), set()
    for i, raw in enumerate(content, start=1):
        kept.append(_block(raw, f"{where}, block {i}", role, calls, asked, answered))
    return kept


def _block(raw, where: str, role: str, calls: Calls, asked: set, answered: set) -> dict:
    if not isinstance(raw, dict):
        raise ActionError(f"The {where} is {describe(raw)}; a content block is an object.")
    kind = type_of(raw)
    if not isinstance(kind, str):
        raise ActionError(f"The {where} has a type that is {describe(kind)}; it must be text.")
    _text(kind, f"the type of the {where}")
    if kind == "text":
        return {"type": "text", "text": _text(raw.get("text"), f"the text of {where}")}
    if kind == "tool_use":
        return _tool_use(raw, where, role, calls, asked)
    if kind == "tool_result":
        return _tool_result(raw, where, role, asked, answered)
    if kind in THINKING_TYPES and role == "assistant":
        return _thinking(raw, where)
    if role != "user" and type_of(raw) in FILE_TYPES:
        # The API takes files from the user (and in tool results), never in a reply's own words.
        return not_imported(f"a file in an {role} message")
    return _other(raw, where)


def _other(raw: dict, where: str) -> dict:
    """A file (an image or a document holding its bytes or text: stored by the importer,
    chat/imports/files.py), or a block of a type not imported, as text saying what it was."""
    kind = type_of(raw)
    if kind in FILE_TYPES and (found := files.pending(raw, where)) is not None:
        return found
    if kind == "image":
        url = type_of(raw.get("source")) == "url"
        return not_imported("an image from a URL" if url else "an image")
    return not_imported(f"a {_shown(kind)} block")


def _thinking(raw: dict, where: str) -> dict:
    """A reply's thinking, kept as an export holds it (shown folded; never sent again: the window
    leaves earlier turns' thinking out, so a signature no model made is never checked)."""
    if type_of(raw) == "redacted_thinking":
        return {"type": "redacted_thinking", "data": _text(raw.get("data"), f"the data of {where}")}
    return {
        "type": "thinking",
        "thinking": _text(raw.get("thinking"), f"the thinking of {where}"),
        "signature": _text(raw.get("signature", ""), f"the signature of {where}"),
    }


def _tool_use(raw: dict, where: str, role: str, calls: Calls, asked: set) -> dict:
    call_id = _string(raw.get("id"), f"the id of the tool call in {where}")
    name = _string(raw.get("name"), f"the tool name in {where}")
    tool_input = raw.get("input", {})
    if not isinstance(tool_input, dict):
        raise ActionError(
            f"The input of the tool call in {where} is {describe(tool_input)}; "
            "it must be an object."
        )
    _strings(tool_input, f"the input of the tool call in {where}")
    if role != "assistant":
        return not_imported(f"a call of the tool {_shown(name)} in a user message")
    if not _API_ID.fullmatch(call_id) or not _API_NAME.fullmatch(name) or call_id in calls.ids:
        return not_imported(f"a call of the tool {_shown(name)} with an id or name the API refuses")
    calls.ids.add(call_id)
    asked.add(call_id)
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def _tool_result(raw: dict, where: str, role: str, asked: set, answered: set) -> dict:
    call_id = _string(raw.get("tool_use_id"), f"the tool_use_id of the tool result in {where}")
    is_error = raw.get("is_error", False)
    if not isinstance(is_error, bool):
        raise ActionError(
            f"The is_error of the tool result in {where} is {describe(is_error)}; "
            "it must be true or false."
        )
    content = _result_content(raw.get("content", ""), f"the tool result in {where}")
    if call_id in answered or (role == "assistant" and call_id not in asked):
        # This app stores a turn's results in its reply, after their calls; a second result
        # for one call would make the request invalid.
        return not_imported("a tool result without its call")
    answered.add(call_id)
    result = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    return result | {"is_error": True} if is_error else result


def _result_content(content, where: str):
    if isinstance(content, str):
        return _text(content, f"the content of {where}")
    if not isinstance(content, list):
        raise ActionError(
            f"The content of {where} is {describe(content)}; it must be text or text blocks."
        )
    kept = []
    for i, inner in enumerate(content, start=1):
        kind = type_of(inner)
        if not isinstance(kind, str):
            raise ActionError(
                f"Part {i} of the content of {where} is {describe(inner)}; "
                "it must be a block with a type."
            )
        _text(kind, f"the type of part {i} of {where}")
        if kind == "text":
            kept.append({"type": "text", "text": _text(inner.get("text"), f"part {i} of {where}")})
        else:
            kept.append(_other(inner, f"part {i} of {where}"))
    return kept


def not_imported(what: str) -> dict:
    return {"type": "text", "text": f"[{what}, not imported]"}


def _shown(kind: str) -> str:
    return repr(kind[:40])


def top(fields: dict) -> tuple[str, str | None]:
    """An export's title and system prompt (either may be missing or null; an empty prompt is a
    conversation that had none, and stays so)."""
    system = fields.get("system_prompt")
    if system is not None:
        system = clean(_text(system, "the system prompt"), SYSTEM_PROMPT)
    return title(fields.get("title"), "the file"), system


def title(value, where: str) -> str:
    if value is None:
        return ""
    text = _text(value, f"the title of {where}")
    return " ".join(text.split())[: settings.MAX_TITLE_CHARS]


# --- values --------------------------------------------------------------------------------------


def optional(value, kind: type, is_: str, must: str):
    """`value` when it is missing (None) or of `kind`; else the refusal "<is_> <value>; <must>."
    ("The author of node x is a number; it must be an object.")."""
    if value is not None and not isinstance(value, kind):
        raise ActionError(f"{is_} {describe(value)}; {must}.")
    return value


def _string(value, what: str) -> str:
    if not isinstance(value, str) or not value:
        shown = describe(value) if value != "" else "empty"
        raise ActionError(f"{what[0].upper()}{what[1:]} is {shown}; it must be text.")
    return _text(value, what)


def _strings(value, what: str) -> None:
    """Every string (and key) inside a tool call's input is storable: the reader bounds how
    deep it nests, so this recursion is bounded too."""
    if isinstance(value, str):
        _text(value, what)
    elif isinstance(value, list):
        for inner in value:
            _strings(inner, what)
    elif isinstance(value, dict):
        for key, inner in value.items():
            _text(key, what)
            _strings(inner, what)
