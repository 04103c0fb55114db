"""Files of each kind the uploads take, and broken ones, made here (Pillow, pypdf, zlib)."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

from django.core.files.storage import storages
from PIL import Image
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject


def image(kind: str = "PNG", size: tuple[int, int] = (800, 600), **save) -> bytes:
    picture = Image.new("RGB", size, (200, 80, 40))
    out = io.BytesIO()
    picture.save(out, kind, **save)
    return out.getvalue()


def photo_with_gps(size: tuple[int, int] = (4000, 3000)) -> bytes:
    """A JPEG as a phone takes it: EXIF with the camera and where it was (GPS), and a comment."""
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"  # Make
    exif[0x0110] = "Phone 12"  # Model
    gps = exif.get_ifd(0x8825)
    gps[1] = "N"
    gps[2] = (51.0, 30.0, 26.0)  # GPSLatitude
    gps[3] = "W"
    gps[4] = (0.0, 7.0, 39.0)
    return image("JPEG", size, exif=exif, comment=b"taken at home")


def pdf(pages: int = 3, *, password: str | None = None) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    if password:
        writer.encrypt(password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pdf_with_text(pages: list[list[str]]) -> bytes:
    """A PDF whose pages hold these lines of text (Helvetica, which pypdf reads back)."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for lines in pages:
        page = writer.add_blank_page(width=612, height=792)
        said = [
            line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in lines
        ]
        stream = DecodedStreamObject()
        stream.set_data(
            "\n".join(
                ["BT /F1 12 Tf 14 TL 72 720 Td", *(f"({s}) Tj T*" for s in said), "ET"]
            ).encode("latin-1")
        )
        page.replace_contents(stream)
        fonts = DictionaryObject({NameObject("/F1"): font})
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height pixels, with a few bytes of data: a
    decompression bomb's shape (what it claims is what it would cost to decode)."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit greyscale
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(b"\x00" * 1024))
        + _chunk(b"IEND", b"")
    )


def png_with_html() -> bytes:
    """A real PNG carrying a page of HTML in a text chunk: a polyglot a browser sniffing it as
    HTML would run."""
    picture = image("PNG", (40, 30))
    html = b"Comment\x00<html><script>alert(document.cookie)</script></html>"
    end = picture.rindex(b"IEND") - 4
    return picture[:end] + _chunk(b"tEXt", html) + picture[end:]


def stored_files() -> list[Path]:
    """Every file in the attachments storage (the test process's own folder)."""
    root = Path(storages["attachments"].location)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
