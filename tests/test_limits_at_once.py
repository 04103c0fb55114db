"""Limits decided in one atomic step: many attempts at once, from threads against two real server
processes sharing one database, take no more places than the limit allows.

Each attempt is an HTTP request a browser would make (a form with its CSRF token); all of a
burst's requests are released together by a barrier. A sign-in for a name with no account still
runs the password hasher once (Django's guard against timing which names exist), so each attempt
spends a real hasher's time between the moment it asks for a place and the moment it knows: the
window in which a check-then-count limit lets every attempt through.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx2 as httpx  # the HTTP client the anthropic SDK installs
import pytest

from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def two_servers(fake_anthropic, request):
    env = getattr(request, "param", {})
    servers = [Server(fake_anthropic.url, **env).start() for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()


def burst(servers: list[Server], path: str, forms: list[dict], classify) -> Counter:
    """POST each form to `path` at once (spread over the servers); the outcomes, counted."""
    ready = threading.Barrier(len(forms))

    def attempt(n: int) -> str:
        port = servers[n % len(servers)].port
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            page = client.get(path)
            token = TOKEN.search(page.text).group(1)
            ready.wait()
            answer = client.post(path, data={"csrfmiddlewaretoken": token, **forms[n]})
            assert answer.status_code < 500, answer.text[:500]
            return classify(answer)

    with ThreadPoolExecutor(len(forms)) as pool:
        return Counter(pool.map(attempt, range(len(forms))))


def _refused_or(answer: httpx.Response, otherwise: str) -> str:
    return "refused" if "Too many attempts" in answer.text else otherwise


@pytest.mark.parametrize("two_servers", [{"LOGIN_FAILURES_PER_15_MINUTES": "10"}], indirect=True)
def test_thirty_wrong_passwords_at_once_are_ten_checked(two_servers):
    forms = [{"username": "nobody", "password": f"guess {n}"} for n in range(30)]
    outcomes = burst(two_servers, "/accounts/login/", forms, lambda a: _refused_or(a, "checked"))
    assert outcomes == {"checked": 10, "refused": 20}


@pytest.mark.parametrize("two_servers", [{"SIGNUPS_PER_HOUR": "5"}], indirect=True)
def test_twelve_sign_ups_at_once_from_one_address_make_five_accounts(
    two_servers, django_user_model
):
    forms = [
        {"username": f"new{n}", "password1": "a fine pass 123", "password2": "a fine pass 123"}
        for n in range(12)
    ]
    outcomes = burst(
        two_servers,
        "/accounts/signup/",
        forms,
        lambda a: "made" if a.status_code == 302 else _refused_or(a, "other"),
    )
    assert outcomes == {"made": 5, "refused": 7}
    assert django_user_model.objects.count() == 5


@pytest.mark.parametrize("two_servers", [{"PASSWORD_RESETS_PER_HOUR": "3"}], indirect=True)
def test_password_resets_are_limited_at_once_too(two_servers):
    forms = [{"email": f"someone{n}@example.com"} for n in range(8)]
    outcomes = burst(
        two_servers,
        "/accounts/password_reset/",
        forms,
        lambda a: "asked" if a.status_code == 302 else _refused_or(a, "other"),
    )
    assert outcomes == {"asked": 3, "refused": 5}  # per address: these all come from one


@pytest.mark.parametrize("two_servers", [{"REPLIES_AT_ONCE": "3"}], indirect=True)
async def test_eight_sends_at_once_to_eight_conversations_start_three_replies(
    two_servers, alice, fake_anthropic
):
    from asgiref.sync import sync_to_async

    from chat.models import Conversation, Message
    from support.servers import session_for
    from tests.servers import Tab

    for _ in range(8):
        fake_anthropic.enqueue_hang(4.0)
    key = await sync_to_async(session_for)(alice)
    tabs = []
    for n in range(8):
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        tabs.append(await Tab(two_servers[n % 2], conversation.pk, key).open())
    await asyncio.gather(*(tab.send(action="send", message="all at once") for tab in tabs))
    outcomes = Counter(
        "refused" if "replies streaming in other conversations" in frame else "started"
        for frame in await asyncio.gather(
            *(tab.until(lambda f: "notice" in f or "word0" in f) for tab in tabs)
        )
    )
    for tab in tabs:
        await tab.close()
    assert outcomes == {"started": 3, "refused": 5}
    assert len(fake_anthropic.requests) == 3
    assert await Message.objects.filter(role="user").acount() == 3  # refused ones not stored
