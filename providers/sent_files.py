"""Files as a request carries them: the API's image and document blocks with their bytes inline
(chat/file_blocks.py resolves the stored references just before a request), read here without
the database: the file block a message stores for each (what kind, how large, what it is
estimated to cost), and, for the offline demo model, a text file's or a PDF's words.

A block of a resolved request has no upload's estimate in it, so what it costs is worked out as
the upload's was (providers/tokens.py): an image by its pixels (Pillow reads only its header),
a PDF by its pages (pypdf counts them), a text document by its text. Anything unreadable is
None: nothing here raises on a malformed block.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import warnings

from PIL import Image
from pypdf import PdfReader

from providers.blocks import text_of, type_of
from providers.tokens import estimate_request, estimate_text, image_tokens, pdf_tokens

# The media types a PDF and a text file are stored and sent as (chat/file_checks.py decides
# which a file is; both read these).
PDF, TEXT = "application/pdf", "text/plain"
# The line chat/file_blocks.py writes before an image, providers.blocks.file_label's.
NAMING_RE = re.compile(r"\[image: (.+?)(?:, \d+×\d+ px)?, [\d,]+ tokens\]")
# What is read of a file's words: for search and the brief (chat/file_checks.py), as of a
# message's, and for the demo.
TEXT_CHARS = 100_000


def estimated(system: str, messages: list[dict]) -> int:
    """A request on its way, estimated as the window it came from was (the usage an offline
    model reports): each file counted as its upload was, never its base64 as text."""
    return estimate_request(
        system, [{**m, "content": as_references(m.get("content"))} for m in messages]
    )


def as_references(content: object) -> object:
    """A message's content with each of the API's file blocks as the file block a message
    stores (providers/blocks.py: {"type", "attachment": {"name", "media_type", "bytes",
    "tokens", ...}}), inside tool results too, and an image's naming line (which
    chat/file_blocks.py writes before it) left out: what every reader of stored content reads,
    the token estimate above all. A block that cannot be read stays as it is."""
    if not isinstance(content, list):
        return content
    out = []
    for block in content:
        if type_of(block) == "tool_result" and isinstance(block.get("content"), list):
            block = {**block, "content": as_references(block["content"])}
        meta = described(block, _named(out[-1]) if out else "")
        if meta is None:
            out.append(block)
            continue
        if type_of(block) == "image" and out and _named(out[-1]):
            out.pop()  # the line naming it: the reference names it itself
        out.append({"type": type_of(block), "attachment": meta})
    return out


def described(block: object, name: str = "") -> dict | None:
    """A request's image or document block (with its "source") described as a stored file
    block's "attachment" is; None for any other block or one that cannot be read. `name`: an
    image's, from the line naming it (the API's image block has no title)."""
    source = block.get("source") if type_of(block) in ("image", "document") else None
    if not isinstance(source, dict):
        return None
    name = str(block.get("title") or name or "file")
    if source.get("type") == "text":
        text = source.get("data")
        if not isinstance(text, str):
            return None
        return _meta(name, TEXT, len(text.encode()), estimate_text(text))
    data = _bytes(source)
    if data is None:
        return None
    media = str(source.get("media_type") or "")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if media == PDF:
                pages = len(PdfReader(io.BytesIO(data), strict=False).pages)
                return _meta(name, PDF, len(data), pdf_tokens(pages), pages=pages)
            with Image.open(io.BytesIO(data)) as image:  # the header only: no decoding
                width, height = image.size
    except Exception:  # noqa: BLE001 - Pillow and pypdf raise many kinds on a broken file
        return None
    tokens = image_tokens(width, height)
    return _meta(name, media, len(data), tokens, width=width, height=height)


def _meta(name: str, media_type: str, size: int, tokens: int, **more: int) -> dict:
    return {"name": name, "media_type": media_type, "bytes": size, "tokens": tokens, **more}


def _named(block: object) -> str:
    """The name in an image's naming line ("[image: build-error.png, 800×600 px, …]")."""
    match = NAMING_RE.fullmatch(text_of(block))
    return match.group(1) if match else ""


def words(block: object) -> str:
    """A text document's text, or a PDF's (its pages' until TEXT_CHARS); "" for anything else."""
    source = block.get("source") if type_of(block) == "document" else None
    if not isinstance(source, dict):
        return ""
    if source.get("type") == "text":
        return source["data"] if isinstance(source.get("data"), str) else ""
    data = _bytes(source) if source.get("media_type") == PDF else None
    if data is None:
        return ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pages = PdfReader(io.BytesIO(data), strict=False).pages
    except Exception:  # noqa: BLE001 - what pypdf cannot read has no words to read
        return ""
    return pdf_words(pages)


def pdf_words(pages) -> str:
    """A PDF's text, page by page (pypdf's pages), until TEXT_CHARS: nothing of a page that has
    none (a scan) or that pypdf cannot read (the model still sees the page as an image)."""
    parts, size = [], 0
    for page in pages:
        words = _page_words(page)
        if words:
            parts.append(words)
            size += len(words)
        if size >= TEXT_CHARS:
            break
    return "\n\n".join(parts)[:TEXT_CHARS]


def _page_words(page) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (page.extract_text() or "").strip()
    except Exception:  # noqa: BLE001 - pypdf raises many kinds on odd pages; none is fatal
        return ""


def _bytes(source: dict) -> bytes | None:
    if source.get("type") != "base64" or not isinstance(source.get("data"), str):
        return None
    try:
        return base64.b64decode(source["data"], validate=True)
    except (binascii.Error, ValueError):
        return None
