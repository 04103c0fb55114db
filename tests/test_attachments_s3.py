"""Uploads kept in an S3-compatible bucket (ATTACHMENTS_S3_BUCKET, through django-storages): a
real server process configured as a deployment of several machines would be, against moto's
S3 server on this machine. The same contract: kept and described, stripped of metadata, refused
leaving no object, served to its owner only, and swept with its conversation."""

from __future__ import annotations

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

from chat.models import Attachment, Conversation
from support.servers import free_port, session_for
from tests import sample_files
from tests.servers import Server

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
    listed = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}


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
