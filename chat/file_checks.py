"""What an uploaded file is, decided by its content, never by its name: an image (PNG, JPEG, GIF,
WebP) that Pillow opens and decodes, a PDF that pypdf opens, or text that decodes as UTF-8.
Anything else is refused with a reason a person understands (`Refused`).

What is kept is what the model will be sent: an image decoded and encoded again (its metadata,
EXIF and GPS included, left behind; scaled so its long edge is at most 1,568 px, the size the
API works at), a PDF and a text file as they came. Plain functions over bytes: storing and the
limits on it are chat/attachments.py's.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from dataclasses import dataclass

from django.conf import settings
from PIL import Image, ImageOps, UnidentifiedImageError
from pypdf import PdfReader
from pypdf.errors import PyPdfError

from core.clean import scrubbed
from core.errors import ActionError
from providers.sent_files import PDF, TEXT, TEXT_CHARS, pdf_words
from providers.tokens import estimate_text, image_tokens, pdf_tokens

# The API scales an image whose long edge is longer than this (and so do we, before storing).
LONG_EDGE = 1568
# Each kind's token estimate (Anthropic's guides, erring high) is providers/tokens.py's.

# Pillow's format name -> the media type stored and sent; the format we encode it in again.
IMAGE_FORMATS = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}

# An SVG is text, but a browser runs its scripts: it is refused, whatever it is named.
_SVG_NAME = re.compile(r"\.svgz?$", re.IGNORECASE)
_SVG_START = re.compile(
    rb"^(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*(?:<!DOCTYPE\s+svg|<svg[\s>])",
    re.IGNORECASE | re.DOTALL,
)


class Refused(ActionError):
    """The file is not one we take: the reason says why."""


@dataclass(frozen=True)
class Checked:
    """A file as it will be stored and sent."""

    media_type: str
    data: bytes
    tokens: int
    width: int = 0  # an image's, as stored
    height: int = 0
    pages: int = 0  # a PDF's
    # A text file's or PDF's words, as far as TEXT_CHARS: what search, the brief's first lines
    # and the offline model read (nobody reads a PDF's bytes for them).
    text: str = ""


def check(data: bytes, name: str) -> Checked:
    """`data` as one of the kinds we take, or Refused. `name` is only read to refuse an SVG
    (and for the messages): the content decides the kind."""
    if not data:
        raise Refused(f"“{name}” is empty.")
    if _SVG_NAME.search(name) or _SVG_START.match(data[:4096]):
        raise Refused(f"“{name}” is an SVG image, which is not accepted: send it as PNG instead.")
    if data.startswith(b"%PDF-"):
        return _pdf(data, name)
    kind = _image_kind(data)
    if kind is not None:
        return _image(data, name, kind)
    return _text(data, name)


def _image_kind(data: bytes) -> str | None:
    """Pillow's format for what the first bytes say, among those we take (a truncated or
    corrupt file of one of these kinds is refused as such, not read as text)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    return None


def _image(data: bytes, name: str, kind: str) -> Checked:
    broken = Refused(f"“{name}” looks like a {kind} image but cannot be read: it is damaged.")
    # A PNG, GIF or WebP is decoded whole before it is scaled (4 bytes a pixel and a copy: a
    # 250 kB PNG of 81 megapixels took 424 MiB), so the limit is a setting, below Pillow's.
    limit = min(settings.ATTACHMENT_MAX_IMAGE_PIXELS, Image.MAX_IMAGE_PIXELS)
    with warnings.catch_warnings():
        # Past Image.MAX_IMAGE_PIXELS Pillow only warns (an error at twice that): both refuse.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=[kind]) as probe:
                if probe.width * probe.height > limit:  # what its header claims, read first
                    raise Image.DecompressionBombError
                probe.verify()  # the structure and checksums, without decoding the pixels
            with Image.open(io.BytesIO(data), formats=[kind]) as image:
                kept = _stripped_and_scaled(image)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise Refused(
                f"“{name}” has too many pixels to open safely: the limit is {limit:,} "
                "(ATTACHMENT_MAX_IMAGE_PIXELS). It may be a decompression bomb."
            ) from None
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError):
            raise broken from None
    out = io.BytesIO()
    if kind == "JPEG":
        kept.save(out, "JPEG", quality=90)
    elif kind == "GIF":
        kept.save(out, "GIF")  # the first frame: the API reads no animation
    else:
        kept.save(out, kind)
    width, height = kept.size
    tokens = image_tokens(width, height)
    return Checked(IMAGE_FORMATS[kind], out.getvalue(), tokens, width=width, height=height)


def _stripped_and_scaled(image: Image.Image) -> Image.Image:
    """The pixels alone, in a new image (nothing of the file's metadata comes along: no EXIF,
    GPS, comments or colour profile chunks), turned upright as its EXIF said and scaled so the
    long edge is at most LONG_EDGE. Scaled first, so every copy after is of the small image."""
    if image.format == "JPEG" and max(image.size) > LONG_EDGE:
        # Decoded at the smallest of 1/2, 1/4 or 1/8 that is still at least the size kept: a
        # 27-megapixel photo never takes its full size in memory.
        ratio = LONG_EDGE / max(image.size)
        image.draft(image.mode, (math.ceil(image.width * ratio), math.ceil(image.height * ratio)))
    image.load()
    ImageOps.exif_transpose(image, in_place=True)
    if max(image.size) > LONG_EDGE:
        image.thumbnail((LONG_EDGE, LONG_EDGE), Image.Resampling.LANCZOS)
    mode = image.mode
    if mode not in ("RGB", "RGBA", "L", "LA", "P"):
        mode = "RGBA" if "A" in mode or "transparency" in image.info else "RGB"
    if image.format == "JPEG" and mode not in ("RGB", "L"):
        mode = "RGB"
    pixels = image.convert(mode) if mode != image.mode else image
    clean = Image.new(pixels.mode, pixels.size)
    clean.paste(pixels)
    if pixels.mode == "P":
        clean.putpalette(pixels.getpalette())
        if "transparency" in pixels.info:
            clean.info["transparency"] = pixels.info["transparency"]
    return clean


def _pdf(data: bytes, name: str) -> Checked:
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise Refused(f"“{name}” is an encrypted PDF: send one without a password.")
        pages = len(reader.pages)
    except Refused:
        raise
    except (
        PyPdfError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
        OSError,
        RecursionError,
    ):
        # pypdf reads a damaged file as far as it can; what it cannot, it raises as any of these.
        raise Refused(f"“{name}” looks like a PDF but cannot be read: it is damaged.") from None
    if pages == 0:
        raise Refused(f"“{name}” is a PDF without pages.")
    limit = settings.ATTACHMENT_MAX_PDF_PAGES
    if pages > limit:
        raise Refused(
            f"“{name}” has {pages:,} pages: the limit is {limit:,} pages a PDF "
            "(ATTACHMENT_MAX_PDF_PAGES). Send the pages that matter."
        )
    # Scrubbed: pypdf may read a NUL glyph, which no text column of PostgreSQL stores.
    words = scrubbed(pdf_words(reader.pages))
    return Checked(PDF, data, pdf_tokens(pages), pages=pages, text=words)


def _text(data: bytes, name: str) -> Checked:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(
            f"“{name}” is not an image (PNG, JPEG, GIF, WebP), a PDF or UTF-8 text: "
            "this kind of file is not accepted."
        ) from None
    if "\x00" in text:
        raise Refused(f"“{name}” is not text: it holds NUL characters (a binary file?).")
    return Checked(TEXT, data, estimate_text(text), text=text[:TEXT_CHARS])
