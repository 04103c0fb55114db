"""A file of many of this app's conversations ("Export everything", chat/exports/as_json.py): a
JSON list whose items are export.json's objects, as ChatGPT's conversations.json is a list of
its own. A list may even mix the two.

The reader builds each item of a list whole (within IMPORT_MAX_BYTES, as it builds each of
ChatGPT's); `unpacked` hands this app's items on as the pieces a single export.json is read in
(its compactions, its messages one at a time, then its top level), then `READ`, so the importer
stages each conversation exactly as it stages one export.json, then goes on to the next.
"""

from __future__ import annotations

from collections.abc import Iterator

from chat.imports import chatgpt, reader
from chat.imports.history import KEEP_DATES
from chat.imports.reader import ANY, SCALAR

# What the reader keeps of a list's items: ChatGPT's keys, and an export.json's.
KEEP_CONVERSATION = {
    **chatgpt.KEEP_CONVERSATION,
    "system_prompt": SCALAR,
    "branch_end": SCALAR,
    "messages": ANY,
    "compactions": ANY,
    **KEEP_DATES,
}
# What the reader keeps of the top level: an export's, or one ChatGPT conversation alone.
KEEP_TOP = {"system_prompt": SCALAR, **KEEP_DATES, **chatgpt.KEEP_CONVERSATION}
# After each of a bundle's conversations: it has been read whole.
READ = object()


def unpacked(pieces: Iterator) -> Iterator:
    """The reader's pieces, with each of this app's conversations in a list spread out as a
    single export's pieces are; every other piece as it comes."""
    for piece in pieces:
        value = piece.value if isinstance(piece, reader.Item) else None
        if value is not None and piece.where == "conversations" and _ours(value):
            for where in ("compactions", "messages"):
                items = value.get(where)
                if isinstance(items, list):
                    yield from (reader.Item(where, item) for item in items)
            # The top level as the importer checks it: a list read is marked streamed, anything
            # else stays what it is, to be refused with what it was.
            top = {
                key: reader.STREAMED if isinstance(found, list) else found
                for key, found in value.items()
            }
            yield reader.Fields("an object", top)
            yield READ
        else:
            yield piece


def _ours(value) -> bool:
    return isinstance(value, dict) and "messages" in value and "mapping" not in value
