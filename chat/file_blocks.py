"""A message's file blocks as the API takes them: the stored block names its upload
(providers/blocks.py), and just before a request or an export it becomes the API's own block,
read from storage:

- an image: `{"type": "image", "source": {"type": "base64", "media_type", "data"}}`, after a
  one-line text block naming it (the API's image block has no title, and a person refers to
  files by name);
- a PDF: `{"type": "document", "source": {"type": "base64", ...}, "title": name}`;
- a text file: `{"type": "document", "source": {"type": "text", "media_type": "text/plain",
  "data": text}, "title": name}`.

A PDF block whose description carries `"range": [first, last]` (read_attachment's, asked for
some pages of a long one) is sent as a PDF of those pages only, cut by pypdf.

An export keeps the name in the block itself (`"title"`, an image's too), so an import can give
the file back its name. One query per request, for every file in it, whatever the window's
length.
"""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Iterable

from pypdf import PdfReader, PdfWriter

from chat.file_checks import PDF, TEXT
from chat.models import Attachment
from providers.blocks import file_label, file_of, type_of

UNREADABLE = "could not be read from storage"
log = logging.getLogger(__name__)


def for_request(messages: list[dict], owner_id: int) -> list[dict]:
    """`messages` (a request's) with every file block, at the top level of a message or inside
    a tool result, replaced by the API's blocks; the rows are the owner's only."""
    ids = _ids(m.get("content") for m in messages)
    if not ids:
        return messages
    rows = _rows(ids, owner_id)  # a block whose row is gone still becomes text, never a reference
    return [
        {**m, "content": _content(m["content"], rows, labelled=True)}
        if isinstance(m.get("content"), list)
        else m
        for m in messages
    ]


def names_files(messages: list[dict]) -> bool:
    """Whether any of `messages` holds a file block (else a request needs no storage at all)."""
    return bool(_ids(m.get("content") for m in messages))


def file_ids(content: list) -> set[int]:
    """The uploads a message's content names, in a tool result too (read_attachment's)."""
    return _ids([content])


def label(block: dict) -> str:
    """A file block as one line: "image: build-error.png, 800×600 px, 640 tokens"."""
    return file_label(file_of(block) or {})


def for_export(content: list, rows: dict[int, Attachment]) -> list:
    """A message's content as export.json holds it: each file as the API's block, named."""
    return _content(content, rows, labelled=False)


def rows_for(contents: Iterable, owner_id: int) -> dict[int, Attachment]:
    """The owner's uploads that `contents` (messages' content) name, by id: one query."""
    return _rows(_ids(contents), owner_id)


def labelled(content: object) -> object:
    """`content` with each file block, inside a tool result too, as its one-line label (a text
    block): a window written out without the bytes its messages hold already."""
    if not isinstance(content, list):
        return content
    out = []
    for block in content:
        if type_of(block) == "tool_result" and isinstance(block.get("content"), list):
            block = {**block, "content": labelled(block["content"])}
        meta = file_of(block)
        out.append(block if meta is None else {"type": "text", "text": f"[{file_label(meta)}]"})
    return out


def _ids(contents: Iterable) -> set[int]:
    found = set()
    for content in contents:
        for block in content if isinstance(content, list) else ():
            inner = block.get("content") if type_of(block) == "tool_result" else None
            for item in [block, *(inner if isinstance(inner, list) else ())]:
                meta = file_of(item)
                if meta is not None and isinstance(meta.get("id"), int):
                    found.add(meta["id"])
    return found


def _rows(ids: set[int], owner_id: int) -> dict[int, Attachment]:
    if not ids:
        return {}
    return {a.pk: a for a in Attachment.objects.filter(pk__in=ids, owner_id=owner_id)}


def _content(content: list, rows: dict[int, Attachment], *, labelled: bool) -> list:
    out = []
    for block in content:
        if type_of(block) == "tool_result" and isinstance(block.get("content"), list):
            block = {**block, "content": _content(block["content"], rows, labelled=labelled)}
        meta = file_of(block)
        if meta is None:
            out.append(block)
            continue
        row = rows.get(meta.get("id"))
        if row is None:  # its upload is gone (never the case while its conversation is kept)
            out.append({"type": "text", "text": f"[{file_label(meta)}: no longer stored]"})
            continue
        try:
            sent = api_block(row, titled_image=not labelled, pages=_range(meta, row))
        except Exception:  # noqa: BLE001 - any storage's failure (a file gone, a bucket down)
            # One file unreadable must not fail every turn after it: said in its place.
            log.warning("could not read the stored file of attachment %s", row.pk, exc_info=True)
            out.append({"type": "text", "text": f"[{file_label(meta)}: {UNREADABLE}]"})
            continue
        if labelled and type_of(block) == "image":
            out.append({"type": "text", "text": f"[{file_label(meta)}]"})
        out.append(sent)
    return out


def _range(meta: dict, row: Attachment) -> tuple[int, int] | None:
    """The pages a PDF's block asks for, when they are some of its pages (None: all)."""
    wanted = meta.get("range")
    if row.media_type != PDF or not isinstance(wanted, list) or len(wanted) != 2:
        return None
    first, last = wanted
    if not all(isinstance(n, int) for n in wanted) or not 1 <= first <= last <= row.pages:
        return None
    return first, last


def api_block(
    attachment: Attachment, *, titled_image: bool = False, pages: tuple[int, int] | None = None
) -> dict:
    """One upload as the API's block, its bytes read from storage (a PDF's `pages` only)."""
    with attachment.file.open("rb") as stored:
        data = stored.read()
    if pages is not None:
        data = _pdf_pages(data, *pages)
    if attachment.media_type == TEXT:
        source = {"type": "text", "media_type": TEXT, "data": data.decode("utf-8")}
        return {"type": "document", "source": source, "title": attachment.name}
    source = {
        "type": "base64",
        "media_type": attachment.media_type,
        "data": base64.b64encode(data).decode("ascii"),
    }
    if attachment.media_type == PDF:
        return {"type": "document", "source": source, "title": attachment.name}
    block = {"type": "image", "source": source}
    return {**block, "title": attachment.name} if titled_image else block


def _pdf_pages(data: bytes, first: int, last: int) -> bytes:
    """A PDF of pages `first` to `last` (from 1) of the PDF `data`."""
    reader = PdfReader(io.BytesIO(data), strict=False)
    writer = PdfWriter()
    for page in reader.pages[first - 1 : last]:
        writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
