"""Uploads are checked by their content, never their name (chat/file_checks.py): what is kept is
what the model will be sent, an image without its metadata and within 1,568 px; anything
malformed is a 4xx with a reason and leaves nothing behind, whatever the bytes (a fuzz test)."""

from __future__ import annotations

import io
import shutil

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from PIL import Image

from chat.models import Attachment
from tests import sample_files
from tests.sample_files import stored_files

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


@pytest.fixture
def upload(client, alice, conversation):
    client.force_login(alice)

    def send(name: str, data: bytes):
        file = SimpleUploadedFile(name, data, content_type="image/png")
        return client.post(f"/conversations/{conversation.pk}/attachments/", {"file": file})

    return send


def stored_image(answer) -> Image.Image:
    assert answer.status_code == 201, answer.content
    data = Attachment.objects.get(pk=answer.json()["id"]).file.read()
    return Image.open(io.BytesIO(data))


def test_a_photo_loses_its_exif_and_gps_and_is_scaled_to_the_long_edge(upload):
    photo = sample_files.photo_with_gps((4000, 3000))
    assert b"PhoneMaker" in photo and b"taken at home" in photo
    answer = upload("IMG_0001.jpg", photo)
    kept = stored_image(answer)
    assert kept.format == "JPEG" and kept.size == (1568, 1176)
    assert dict(kept.getexif()) == {} and "comment" not in kept.info and "exif" not in kept.info
    data = stored_files()[0].read_bytes()
    assert b"PhoneMaker" not in data and b"taken at home" not in data and b"Exif" not in data
    # 1568 x 1176 / 750 is 2,459: past the API's ~1,600 tokens, which it scales an image to.
    assert answer.json()["tokens"] == 1600


def test_a_photo_taken_sideways_is_kept_upright(upload):
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: the camera was turned; show it rotated 90 degrees
    answer = upload("sideways.jpg", sample_files.image("JPEG", (300, 200), exif=exif))
    assert stored_image(answer).size == (200, 300)


@pytest.mark.parametrize("kind", ["PNG", "JPEG", "GIF", "WEBP"])
def test_each_image_kind_is_kept_as_what_its_content_is(upload, kind):
    answer = upload("picture.pdf", sample_files.image(kind, (300, 200)))  # the name says PDF
    assert answer.json()["media_type"] == f"image/{kind.lower()}"
    assert stored_image(answer).size == (300, 200)
    assert answer.json()["tokens"] == 80  # 300 x 200 / 750


def test_a_pdf_named_as_an_image_is_a_pdf(upload):
    answer = upload("photo.png", sample_files.pdf(pages=2))
    assert answer.status_code == 201 and answer.json()["media_type"] == "application/pdf"


def test_a_polyglot_png_carrying_html_is_kept_as_the_image_alone(upload, client):
    answer = upload("innocent.html", sample_files.png_with_html())
    assert answer.json()["media_type"] == "image/png"
    assert b"<script" not in stored_files()[0].read_bytes()
    served = client.get(f"/attachments/{answer.json()['id']}/")
    assert served["Content-Type"] == "image/png"
    assert b"<script" not in b"".join(served.streaming_content)


def test_a_pdf_past_the_page_limit_is_refused_naming_it(upload, settings):
    settings.ATTACHMENT_MAX_PDF_PAGES = 5
    answer = upload("book.pdf", sample_files.pdf(pages=6))
    assert answer.status_code == 400
    assert "the limit is 5 pages a PDF (ATTACHMENT_MAX_PDF_PAGES)" in answer.json()["error"]
    assert stored_files() == []


def test_an_image_past_the_pixel_limit_is_refused_from_its_header(upload, settings):
    # 56 megapixels: under Pillow's own bomb limit (89), over the setting's default (50).
    answer = upload("huge.png", sample_files.png_claiming(8000, 7000))
    assert answer.status_code == 400
    assert "the limit is 50,000,000 (ATTACHMENT_MAX_IMAGE_PIXELS)" in answer.json()["error"]
    settings.ATTACHMENT_MAX_IMAGE_PIXELS = 1000
    assert upload("small.webp", sample_files.image("WEBP", (40, 30))).status_code == 400
    assert stored_files() == []


MALFORMED = {
    "truncated PNG": ("shot.png", sample_files.image("PNG")[:300], "damaged"),
    "truncated JPEG": ("shot.jpg", sample_files.image("JPEG")[:400], "damaged"),
    "truncated GIF": ("anim.gif", sample_files.image("GIF")[:100], "damaged"),
    "truncated WebP": ("shot.webp", sample_files.image("WEBP")[:60], "damaged"),
    "a PDF of garbage": ("paper.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 8, "damaged"),
    "a truncated PDF": ("paper.pdf", sample_files.pdf(pages=3)[:200], "damaged"),
    "an encrypted PDF": ("locked.pdf", sample_files.pdf(password="s3cret"), "encrypted"),
    "invalid UTF-8": ("notes.txt", "café".encode("latin-1") + b"\xff\xfe", "not accepted"),
    "a decompression bomb": ("bomb.png", sample_files.png_claiming(30_000, 30_000), "bomb"),
    "zero bytes": ("empty.txt", b"", "empty"),
    "text with NULs": ("data.csv", b"a,b\x00,c\n", "NUL"),
    "an executable named .txt": ("readme.txt", b"MZ\x90\x00\x03\x00\x00\x00\x04\xff\xff", "not"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_a_malformed_file_is_a_400_with_its_reason_and_leaves_nothing(upload, case):
    name, data, reason = MALFORMED[case]
    answer = upload(name, data)
    assert answer.status_code == 400
    assert reason in answer.json()["error"] and name in answer.json()["error"]
    assert not Attachment.objects.exists() and stored_files() == []


VALID = [
    ("a.png", sample_files.image("PNG", (64, 48))),
    ("a.jpg", sample_files.image("JPEG", (64, 48))),
    ("a.gif", sample_files.image("GIF", (64, 48))),
    ("a.webp", sample_files.image("WEBP", (64, 48))),
    ("a.pdf", sample_files.pdf(pages=1)),
    ("a.json", b'{"key": ["value", 1, 2.5]}\n'),
]


@st.composite
def damaged(draw):
    """A valid file of one kind, truncated, with bytes flipped, or with garbage spliced in."""
    name, data = draw(st.sampled_from(VALID))
    data = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(max_size=64))
    return name, bytes(data)


@hypothesis_settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=damaged())
def test_whatever_the_bytes_an_upload_is_kept_whole_or_refused_leaving_nothing(upload, case):
    name, data = case
    answer = upload(name, data)
    assert answer.status_code in (201, 400), answer.content
    if answer.status_code == 400:
        assert answer.json()["error"]
        assert not Attachment.objects.exists() and stored_files() == []
        return
    # Kept: what is stored is a whole file of the kind it says.
    row = Attachment.objects.get()
    stored = row.file.read()
    if row.media_type.startswith("image/"):
        Image.open(io.BytesIO(stored)).load()
    elif row.media_type == "text/plain":
        stored.decode("utf-8")
    assert len(stored_files()) == 1
    row.delete()  # its file goes with it, for the next example
    assert stored_files() == []
