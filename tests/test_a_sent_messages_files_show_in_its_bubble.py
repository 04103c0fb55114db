"""A sent message's files in its bubble (render/bubbles.py), read from the blocks alone: an image
as its thumbnail (sized by the block, so the page does not jump), a PDF as an icon with its
pages, a text file as its first lines (kept in its block: `chat.attachments.first_lines`); each
opens the file itself in a new tab. The name is the uploader's, and stays text."""

from __future__ import annotations

import shutil
from html.parser import HTMLParser

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments
from chat.models import Message
from tests import sample_files

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


class Cards(HTMLParser):
    """Each file card of a page: its link's attributes, its image's, and its text."""

    def __init__(self):
        super().__init__()
        self.cards: list[dict] = []
        self.depth = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and "file-card" in (attrs.get("class") or ""):
            self.cards.append({"link": attrs, "img": None, "text": ""})
            self.depth = 1
        elif self.depth:
            if tag == "img":
                self.cards[-1]["img"] = attrs
            else:
                self.depth += 1

    def handle_endtag(self, tag):
        if self.depth and tag != "img":
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.cards[-1]["text"] += data


LOG = "line one\nline two <b>bold?</b>\nline three\nline four is not shown\n"


def test_each_file_shows_as_itself_and_opens_the_file(client, alice, conversation):
    def upload(name, data):
        return attachments.upload(alice, conversation.pk, SimpleUploadedFile(name, data))

    image = upload("build<i onmouseover=x>.png", sample_files.image("PNG", (800, 600)))
    pdf = upload("spec.pdf", sample_files.pdf(3))
    log = upload("server.log", LOG.encode())
    content = [{"type": "text", "text": "Look at these."}]
    content += [attachments.block(a) for a in (image, pdf, log)]
    Message.objects.create(conversation=conversation, seq=1, role="user", content=content)

    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/")
    assert page.status_code == 200
    parser = Cards()
    parser.feed(page.content.decode())
    picture, document, text = parser.cards

    for card, row in zip(parser.cards, (image, pdf, log), strict=True):
        assert card["link"]["href"] == f"/attachments/{row.pk}/"
        assert card["link"]["target"] == "_blank" and card["link"]["rel"] == "noopener"
    assert picture["img"]["src"] == f"/attachments/{image.pk}/"
    assert picture["img"]["alt"] == "build<i onmouseover=x>.png"  # as text, in the attribute
    assert (picture["img"]["width"], picture["img"]["height"]) == ("800", "600")
    assert "<i onmouseover" not in page.content.decode()
    assert picture["link"]["title"] == f"image: {image.name}, 800×600 px, 640 tokens"

    assert "PDF" in document["text"] and "spec.pdf" in document["text"]
    assert "3 pages · 9,000 tokens" in document["text"]

    assert "server.log" in text["text"]
    assert "line one\nline two <b>bold?</b>\nline three" in text["text"]  # escaped, then read
    assert "line four" not in text["text"]


def test_first_lines_are_three_lines_at_most_200_characters():
    assert attachments.first_lines("a\nb\nc\nd") == "a\nb\nc"
    assert attachments.first_lines("") == ""
    long = attachments.first_lines("x" * 500)
    assert len(long) == 200 and long.endswith("…")
