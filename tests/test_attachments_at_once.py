"""Uploads at once, from threads against two real server processes sharing one database and one
storage: one person's storage (ATTACHMENT_STORAGE_PER_USER) and a message's files
(ATTACHMENTS_PER_MESSAGE) hold however many uploads race for the last room, and every refused
upload leaves no file behind."""

from __future__ import annotations

import re
import shutil
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx2 as httpx  # the HTTP client the anthropic SDK installs
import pytest
from django.core.files.storage import storages

from chat.models import Attachment
from support.servers import session_for
from tests.sample_files import stored_files
from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def two_servers(fake_anthropic, request):
    root = storages["attachments"].location
    shutil.rmtree(root, ignore_errors=True)
    env = {"ATTACHMENTS_ROOT": root, **request.param}
    servers = [Server(fake_anthropic.url, **env).start() for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()
    shutil.rmtree(root, ignore_errors=True)


def uploads_at_once(servers, session: str, conversation_id: int, count: int) -> Counter:
    """POST a 1,000-byte text file `count` times at once (spread over the servers)."""
    ready = threading.Barrier(count)

    def attempt(n: int) -> str:
        port = servers[n % len(servers)].port
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", cookies={"sessionid": session}, timeout=60
        ) as client:
            token = TOKEN.search(client.get("/", follow_redirects=True).text).group(1)
            ready.wait()
            answer = client.post(
                f"/conversations/{conversation_id}/attachments/",
                headers={"X-CSRFToken": token},
                files={"file": (f"log-{n}.txt", b"x" * 999 + b"\n", "text/plain")},
            )
            if answer.status_code == 201:
                return "kept"
            return f"{answer.status_code}: {answer.json()['error']}"

    with ThreadPoolExecutor(count) as pool:
        return Counter(pool.map(attempt, range(count)))


def refusal(outcomes: Counter, setting: str) -> int:
    """How many outcomes are 400s naming `setting` (any other outcome fails the test)."""
    for outcome in outcomes:
        assert outcome == "kept" or (outcome.startswith("400: ") and setting in outcome), outcome
    return sum(n for outcome, n in outcomes.items() if outcome != "kept")


@pytest.mark.parametrize(
    "two_servers",
    [{"ATTACHMENT_STORAGE_PER_USER": "5000", "ATTACHMENTS_PER_MESSAGE": "100"}],
    indirect=True,
)
def test_twelve_uploads_at_once_keep_what_the_storage_limit_allows(
    two_servers, alice, conversation
):
    outcomes = uploads_at_once(two_servers, session_for(alice), conversation.pk, 12)
    assert outcomes["kept"] == 5
    assert refusal(outcomes, "ATTACHMENT_STORAGE_PER_USER") == 7
    assert Attachment.objects.filter(owner=alice).count() == 5
    assert len(stored_files()) == 5


@pytest.mark.parametrize("two_servers", [{"ATTACHMENTS_PER_MESSAGE": "3"}], indirect=True)
def test_ten_uploads_at_once_to_one_message_keep_its_limit(two_servers, alice, conversation):
    outcomes = uploads_at_once(two_servers, session_for(alice), conversation.pk, 10)
    assert outcomes["kept"] == 3
    assert refusal(outcomes, "ATTACHMENTS_PER_MESSAGE") == 7
    assert len(stored_files()) == 3
