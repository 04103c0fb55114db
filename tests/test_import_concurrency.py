"""Imports at once, from threads against two real server processes sharing one database: one
user's imports run one at a time (the database decides, across processes) and no more than
IMPORTS_PER_HOUR are counted; while an import runs, its conversation is in none of its owner's
pages or searches."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx2 as httpx  # the HTTP client the anthropic SDK installs
import pytest
from django.db import connection

from chat.models import Conversation
from support.servers import session_for
from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def two_servers(fake_anthropic, request):
    servers = [Server(fake_anthropic.url, **request.param).start() for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()


def client_for(server: Server, session: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{server.port}", cookies={"sessionid": session}, timeout=120
    )


def outcome(answer: httpx.Response) -> str:
    if answer.status_code == 302:
        return "imported"
    if answer.status_code == 429 and "still running" in answer.text:
        return "busy"
    if answer.status_code == 429 and "Too many attempts" in answer.text:
        return "limited"
    return f"other {answer.status_code}: {answer.text[:300]}"


def imports_at_once(servers: list[Server], session: str, raw: bytes, count: int) -> Counter:
    """POST the file `count` times at once (spread over the servers); the outcomes, counted."""
    ready = threading.Barrier(count)

    def attempt(n: int) -> str:
        with client_for(servers[n % len(servers)], session) as client:
            token = TOKEN.search(client.get("/").text).group(1)
            ready.wait()
            answer = client.post(
                "/conversations/import/",
                data={"csrfmiddlewaretoken": token},
                files={"file": ("export.json", raw, "application/json")},
            )
            return outcome(answer)

    with ThreadPoolExecutor(count) as pool:
        return Counter(pool.map(attempt, range(count)))


def export(title: str, messages: int, word: str = "plain") -> bytes:
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{word} message {i}"}
        for i in range(messages)
    ]
    return json.dumps({"title": title, "messages": turns}).encode()


@pytest.mark.parametrize("two_servers", [{"IMPORTS_PER_HOUR": "1000"}], indirect=True)
def test_one_users_imports_at_once_run_one_at_a_time(two_servers, alice):
    session = session_for(alice)
    # Long enough (seconds) to be running still when the other seven arrive.
    outcomes = imports_at_once(two_servers, session, export("Big", 40_000), 8)
    assert outcomes == {"imported": 1, "busy": 7}
    assert Conversation.objects.get(owner=alice).messages.count() == 40_000


@pytest.mark.parametrize("two_servers", [{"IMPORTS_PER_HOUR": "3"}], indirect=True)
def test_imports_at_once_count_against_the_hourly_limit(two_servers, alice):
    session = session_for(alice)
    outcomes = imports_at_once(two_servers, session, export("Small", 2), 8)
    assert outcomes["limited"] == 5
    assert outcomes["imported"] >= 1 and outcomes["imported"] + outcomes["busy"] == 3
    assert Conversation.objects.filter(owner=alice).count() == outcomes["imported"]


@pytest.mark.parametrize("two_servers", [{"IMPORTS_PER_HOUR": "1000"}], indirect=True)
def test_an_import_running_is_in_none_of_its_owners_pages(two_servers, alice):
    session = session_for(alice)
    done = threading.Event()
    looks: list[tuple[bool, bool]] = []  # (still staged, the page or search showed it)

    def look() -> None:
        """Alice's home page and search, again and again; each look counts only if the import
        was still staged after it (the page was made while it was)."""
        with client_for(two_servers[1], session) as client:
            while not done.is_set():
                shown = "Quokka" in client.get("/", follow_redirects=True).text
                shown |= "quokka message" in client.get("/search/?q=quokka").text
                staged = Conversation.objects.filter(importing__isnull=False).exists()
                looks.append((staged, shown))
                time.sleep(0.05)
        connection.close()

    watcher = threading.Thread(target=look)
    watcher.start()
    try:
        with client_for(two_servers[0], session) as client:
            token = TOKEN.search(client.get("/").text).group(1)
            answer = client.post(
                "/conversations/import/",
                data={"csrfmiddlewaretoken": token},
                files={"file": ("export.json", export("Quokka", 30_000, "quokka"), "text/json")},
            )
    finally:
        done.set()
        watcher.join()
    assert outcome(answer) == "imported"
    assert any(staged for staged, _ in looks)  # it was looked at while staged
    assert not any(staged and shown for staged, shown in looks)
    with client_for(two_servers[1], session) as client:
        assert "Quokka" in client.get("/", follow_redirects=True).text
