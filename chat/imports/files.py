"""The files of an imported export.json: each is the API's block, as the export wrote it
(chat/file_blocks.for_export): an image or a PDF with a base64 source, a text file with a text
source, named by its "title". `pending` checks a block's shape as the file is read
(chat/imports/schema.py); `stored` gives each file back as an upload of the new conversation,
checked and limited as an upload is (chat.attachments.imported), and leaves in its place the
block a sent message holds (a reference, never the bytes).

A file that cannot be given back (not base64, refused by the checks, over a limit) refuses the
whole import, naming the message, the block and the reason: an export of this app never holds
one, so it is a damaged or hand-edited file, and importing the rest without it would lose a file
without anyone deciding to. What a file's block claims (its type, its media_type) is not
trusted: its content decides, as for an upload. A block whose file is elsewhere (a URL, a file
id of the API's Files service) is not fetched: it becomes a text line saying what it was, as
other blocks the app does not take do.

Memory: the reader builds one message at a time; each of its files is decoded, checked and
stored before the next message is read, and the message keeps only the reference, so an import
holds one message's files at most, whatever the number of files in it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from django.conf import settings

from chat import attachments
from chat.file_checks import Refused
from chat.imports.history import text
from chat.models import Attachment
from core.errors import ActionError
from providers.blocks import FILE_TYPES, type_of

SOURCES = ("base64", "text")


def pending(raw: dict, where: str) -> dict | None:
    """An image or document block holding its file, checked for shape, as `stored` takes it;
    None when its file is elsewhere (a URL, a file id): not imported."""
    source = raw.get("source")
    kind = type_of(source)
    if kind not in SOURCES:
        return None
    data = source.get("data")
    if not isinstance(data, str):
        raise ActionError(f"The file in {where} has no data: its source's data must be text.")
    if kind == "text":
        text(data, f"the text of the file in {where}")
    title = raw.get("title")
    if title is not None:
        text(title, f"the title of the file in {where}")
    name = title or ("image" if type_of(raw) == "image" else "document")
    return {"type": type_of(raw), "source": {"type": kind, "data": data}, "title": name}


def waiting(blocks: list[dict]) -> bool:
    """Whether a message's blocks hold a file still to store."""
    return any(_is_pending(b) for b in _with_results(blocks))


def stored(
    blocks: list[dict], where: str, keep: Callable[[str, bytes], Attachment]
) -> tuple[list[dict], list[Attachment]]:
    """`blocks` with each pending file stored by `keep(name, data)` and replaced by its
    reference (chat.attachments.block), at the top level or in a tool result; and the uploads
    made, to attach to the message once it is written."""
    made: list[Attachment] = []

    def one(block: dict, at: str) -> dict:
        if not _is_pending(block):
            return block
        try:
            attachment = keep(block["title"], _decoded(block["source"], at))
        except Refused as exc:  # the upload's reason, said of its place in the file
            raise ActionError(f"The file in {at} is refused: {exc.reason}") from None
        made.append(attachment)
        return attachments.block(attachment)

    out = []
    for i, block in enumerate(blocks, start=1):
        at = f"{where}, block {i}"
        if type_of(block) == "tool_result" and isinstance(block.get("content"), list):
            inner = [one(b, f"{at}, part {j}") for j, b in enumerate(block["content"], start=1)]
            block = {**block, "content": inner}
        out.append(one(block, at))
    return out, made


def _is_pending(block) -> bool:
    return type_of(block) in FILE_TYPES and isinstance(block.get("source"), dict)


def _with_results(blocks: list[dict]) -> list:
    inner = [
        b.get("content")
        for b in blocks
        if type_of(b) == "tool_result" and isinstance(b.get("content"), list)
    ]
    return [*blocks, *(item for content in inner for item in content)]


def _decoded(source: dict, where: str) -> bytes:
    data = source["data"]
    if source["type"] == "text":
        return data.encode("utf-8")  # checked by `pending`: no lone surrogate, no NUL
    # Past the size limit, refused before decoding: base64 is 4 characters for 3 bytes.
    if len(data) > (settings.ATTACHMENT_MAX_BYTES + 2) // 3 * 4 + 4:
        raise ActionError(
            f"The file in {where} is over {settings.ATTACHMENT_MAX_BYTES / 1_000_000:,.1f} MB: "
            "the limit is that a file (ATTACHMENT_MAX_BYTES)."
        )
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ActionError(
            f"The file in {where} is not valid base64: the export is damaged there."
        ) from None
