"""Uploads kept in an S3-compatible bucket (ATTACHMENTS_S3_BUCKET, through django-storages): a
real server process configured as a deployment of several machines would be, against moto's
S3 server on this machine. The same contract: kept and described, stripped of metadata, refused
leaving no object, served to its owner only, and swept with its conversation; sent through the
consumer, the request carries the blocks read from the bucket; an export holds them, and its
import stores them in the bucket again, or, refused, stores nothing."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import boto3
import httpx2 as httpx  # the HTTP client the anthropic SDK installs
import pytest
from django.utils import timezone
from moto.server import ThreadedMotoServer

from chat.models import Attachment, Conversation, Message
from support.servers import free_port, session_for
from tests import sample_files
from tests.conftest import shows
from tests.servers import Server, Tab

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
BUCKET = "chat-files"
KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


@pytest.fixture
def bucket():
    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    url = f"http://127.0.0.1:{port}"
    s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", **KEYS)
    s3.create_bucket(Bucket=BUCKET)
    yield url, s3
    moto.stop()


@pytest.fixture
def server(fake_anthropic, bucket):
    url, _ = bucket
    running = Server(
        fake_anthropic.url,
        ATTACHMENTS_S3_BUCKET=BUCKET,
        ATTACHMENTS_S3_ENDPOINT_URL=url,
        ATTACHMENTS_S3_REGION="us-east-1",
        ATTACHMENTS_S3_ACCESS_KEY_ID="test",
        ATTACHMENTS_S3_SECRET_ACCESS_KEY="test",
        NO_PROXY="127.0.0.1,localhost",
        TURN_HEARTBEAT_SECONDS="1",  # its sweep, every second
    ).start()
    yield running
    running.stop()


def objects(s3) -> dict[str, bytes]:
    """The bucket's objects. One the server's sweep deletes between the listing and its read
    (while the test waits for the sweep) is gone, not an error."""
    found = {}
    for listed in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        try:
            found[listed["Key"]] = s3.get_object(Bucket=BUCKET, Key=listed["Key"])["Body"].read()
        except s3.exceptions.NoSuchKey:
            continue
    return found


@contextmanager
def logged_in(server: Server, user) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"http://127.0.0.1:{server.port}",
        cookies={"sessionid": session_for(user)},
        timeout=60,
    ) as client:
        token = TOKEN.search(client.get("/", follow_redirects=True).text).group(1)
        client.headers["X-CSRFToken"] = token
        yield client


def test_a_bucket_keeps_serves_refuses_and_sweeps_like_the_file_system(
    server, bucket, alice, bob, conversation
):
    _, s3 = bucket
    url = f"/conversations/{conversation.pk}/attachments/"
    with logged_in(server, alice) as client:
        photo = sample_files.photo_with_gps((2000, 1000))
        answer = client.post(url, files={"file": ("IMG_1.jpg", photo, "image/jpeg")})
        assert answer.status_code == 201, answer.text
        kept = answer.json()
        assert kept["media_type"] == "image/jpeg" and kept["tokens"] == 1600
        [(key, stored)] = objects(s3).items()
        assert key.startswith(f"attachments/{alice.pk}/") and "IMG" not in key
        assert len(stored) == kept["bytes"] and b"PhoneMaker" not in stored

        refused = client.post(url, files={"file": ("x.pdf", b"%PDF-1.4 broken", "text/plain")})
        assert refused.status_code == 400 and "damaged" in refused.json()["error"]
        assert list(objects(s3)) == [key]  # nothing more kept

        served = client.get(f"/attachments/{kept['id']}/")
        assert served.status_code == 200 and served.content == stored
        assert served.headers["content-type"] == "image/jpeg"
        assert served.headers["x-content-type-options"] == "nosniff"
        assert served.headers["content-disposition"] == 'inline; filename="IMG_1.jpg"'

    with logged_in(server, bob) as client:
        assert client.get(f"/attachments/{kept['id']}/").status_code == 404
        assert client.post(url, files={"file": ("b.txt", b"bob", "text/plain")}).status_code == 404

    # Deleted past its undo window: the server's own sweep takes the row and the object.
    Conversation.objects.filter(pk=conversation.pk).update(
        deleted_at=timezone.now() - timedelta(days=1)
    )
    deadline = time.monotonic() + 20
    while objects(s3) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert objects(s3) == {} and not Attachment.objects.exists()


FILES = [
    ("build-error.png", sample_files.image("PNG", (800, 600)), "image/png"),
    ("spec.pdf", sample_files.pdf(2), "application/pdf"),
    ("notes.md", b"# Notes\nThe port is 8443.\n", "text/markdown"),
]


async def sent(server: Server, conversation_id: int, session: str, ids: list[int]) -> None:
    tab = await Tab(server, conversation_id, session).open()
    try:
        await tab.send(action="send", message="What do these say?", attachments=ids)
        await tab.until(shows(2, "complete"), timeout=60)
    finally:
        await tab.close()


def test_a_bucket_sends_exports_and_imports_files_like_the_file_system(
    server, bucket, alice, conversation, fake_anthropic
):
    _, s3 = bucket
    with logged_in(server, alice) as client:
        url = f"/conversations/{conversation.pk}/attachments/"
        ids = []
        for name, data, media_type in FILES:
            answer = client.post(url, files={"file": (name, data, media_type)})
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["id"])
        fake_anthropic.enqueue_reply(["Seen."])
        asyncio.run(sent(server, conversation.pk, session_for(alice), ids))

        # The request carries each file as the API's block, its bytes read from the bucket.
        assert fake_anthropic.invalid == []
        [blocks] = [
            r["messages"][-1]["content"]
            for r in fake_anthropic.requests
            if "What do these say?" in json.dumps(r["messages"][-1])
        ]
        kept = objects(s3)
        image, pdf, text = (Attachment.objects.get(pk=pk) for pk in ids)
        assert base64.b64decode(blocks[2]["source"]["data"]) == kept[f"attachments/{image.file}"]
        assert base64.b64decode(blocks[3]["source"]["data"]) == kept[f"attachments/{pdf.file}"]
        assert blocks[4]["source"] == {
            "type": "text",
            "media_type": "text/plain",
            "data": "# Notes\nThe port is 8443.\n",
        }

        export = client.get(f"/conversations/{conversation.pk}/export.json")
        assert export.status_code == 200
        doc = export.json()
        files = doc["messages"][0]["content"][1:]
        assert [base64.b64decode(b["source"]["data"]) for b in files[:2]] == [
            kept[f"attachments/{image.file}"],
            kept[f"attachments/{pdf.file}"],
        ]

        # Refused (a damaged PDF after the good files): no row, no object left in the bucket.
        damaged = base64.b64encode(b"%PDF-1.4 broken").decode()
        broken = json.loads(json.dumps(doc))
        broken["messages"][0]["content"].append(
            {"type": "document", "source": {"type": "base64", "data": damaged}, "title": "x.pdf"}
        )
        raw = json.dumps(broken).encode()
        refused = client.post("/conversations/import/", files={"file": ("e.json", raw)})
        assert refused.status_code == 400 and "it is damaged" in refused.text
        assert objects(s3) == kept and Attachment.objects.count() == 3

        raw = json.dumps(doc).encode()
        imported = client.post("/conversations/import/", files={"file": ("export.json", raw)})
        assert imported.status_code == 302, imported.text[:500]

    copy = Conversation.objects.exclude(pk=conversation.pk).get(owner=alice)
    message = Message.objects.get(conversation=copy, seq=1)
    copied = list(Attachment.objects.filter(conversation=copy).order_by("pk"))
    assert [(a.name, a.message_id) for a in copied] == [(n, message.pk) for n, _, _ in FILES]
    now = objects(s3)
    assert len(now) == 6
    for original, again in zip((image, pdf, text), copied, strict=True):
        assert now[f"attachments/{again.file}"] == kept[f"attachments/{original.file}"]
