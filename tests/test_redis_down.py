"""Redis stopped and started again under a live chat, on a real server process with a Redis of
its own: nothing the person did is lost, they are told what is going on, signing in and up keep
working, and the tab picks up where it was once Redis is back."""

from __future__ import annotations

import re

import httpx2 as httpx  # the HTTP client the anthropic SDK installs
import pytest
from asgiref.sync import sync_to_async
from websockets.exceptions import ConnectionClosed, InvalidStatus

from chat.models import Conversation, Message
from support.servers import Redis, session_for
from tests.servers import Server, Tab, wait_for
from web.consumer import LAYER_DOWN

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def redis():
    server = Redis().start()
    yield server
    server.stop()


def sign_up_and_in(base: str, name: str) -> tuple[int, int]:
    """Sign up as `name`, then sign in again from a fresh browser: the two status codes."""
    form = {"username": name, "password1": "a fine pass 123", "password2": "a fine pass 123"}
    with httpx.Client(base_url=base, timeout=30) as browser:
        token = TOKEN.search(browser.get("/accounts/signup/").text).group(1)
        made = browser.post("/accounts/signup/", data={"csrfmiddlewaretoken": token, **form})
    with httpx.Client(base_url=base, timeout=30) as browser:
        token = TOKEN.search(browser.get("/accounts/login/").text).group(1)
        signed_in = browser.post(
            "/accounts/login/",
            data={"csrfmiddlewaretoken": token, "username": name, "password": form["password1"]},
        )
    return made.status_code, signed_in.status_code


async def test_a_chat_lives_through_redis_stopping_and_starting(alice, fake_anthropic, redis):
    # The tab that acts is on a server whose heartbeat is slow, so the action is what finds
    # Redis down; the idle tab's server beats every second.
    slow = {"TURN_HEARTBEAT_SECONDS": "60", "TURN_STALE_SECONDS": "180"}
    server = Server(fake_anthropic.url, REDIS_URL=redis.url, **slow).start()
    other = Server(fake_anthropic.url, REDIS_URL=redis.url, TURN_HEARTBEAT_SECONDS="1").start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        key = await sync_to_async(session_for)(alice)
        tab = await Tab(server, conversation.pk, key).open()
        idle = await Tab(other, conversation.pk, key).open()  # a second tab that does nothing
        await tab.send(action="send", message="before")
        await tab.until(lambda f: "Hello from the fake server" in f and "streaming" not in f)

        redis.stop()
        await tab.send(action="send", message="while Redis is down")
        notice = await tab.until(lambda f: 'id="notice"' in f)
        assert "Live updates are paused: the server cannot reach Redis" in notice
        assert any('id="send-accepted"' in f for f in tab.frames)  # the composer empties
        with pytest.raises(ConnectionClosed) as closed:
            await tab.until(lambda f: False, timeout=10)
        assert closed.value.rcvd.code == LAYER_DOWN  # the page shows its banner and retries
        with pytest.raises(InvalidStatus):
            await Tab(server, conversation.pk, key).open()
        # The idle tab would miss everything from now on: its process's heartbeat drops it too,
        # so its page reconnects (and fetches what happened) once Redis is back.
        with pytest.raises(ConnectionClosed) as closed:
            await idle.until(lambda f: False, timeout=10)
        assert closed.value.rcvd.code == LAYER_DOWN
        assert "Live updates are paused" in idle.frames[-1]
        # The message is kept and answered; the page and signing up and in still work.
        answered = Message.objects.filter(
            conversation=conversation, seq=4, status=Message.Status.COMPLETE
        )
        await wait_for(answered.aexists, timeout=20)
        texts = [m.text async for m in Message.objects.filter(conversation=conversation)]
        assert texts[2:] == ["while Redis is down", "Hello from the fake server."]
        page = await sync_to_async(httpx.get)(
            f"{base}/conversations/{conversation.pk}/", cookies={"sessionid": key}
        )
        assert page.status_code == 200 and "while Redis is down" in page.text
        assert await sync_to_async(sign_up_and_in)(base, "newcomer") == (302, 302)

        redis.start()

        async def reopened():
            try:
                return await Tab(server, conversation.pk, key).open()
            except (InvalidStatus, OSError):
                return None

        tab = await wait_for(reopened, timeout=20, every=0.5)
        await tab.send(action="send", message="after")
        await tab.until(lambda f: "Hello from the fake server" in f and "streaming" not in f)
        assert "Live updates are paused" not in "".join(tab.frames)
        await tab.close()
    finally:
        server.stop()
        other.stop()


async def test_a_tab_that_did_nothing_catches_up_after_a_short_outage(alice, fake_anthropic, redis):
    """An outage shorter than a heartbeat drops no idle socket, but its frames are lost: once
    Redis answers again, every tab of that conversation is told to fetch it again (or, if a
    beat fell inside the outage, was dropped and reconnects). Either way it is not left stale."""
    beats = {"TURN_HEARTBEAT_SECONDS": "1", "TURN_STALE_SECONDS": "5"}
    server = Server(fake_anthropic.url, REDIS_URL=redis.url, **beats).start()
    try:
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        key = await sync_to_async(session_for)(alice)
        tab = await Tab(server, conversation.pk, key).open()
        idle = await Tab(server, conversation.pk, key).open()
        redis.stop()
        await tab.send(action="send", message="in a short outage")
        await tab.until(lambda f: "Live updates are paused" in f)
        redis.start()
        try:
            told = await idle.until(lambda f: 'id="missed"' in f, timeout=15)
        except ConnectionClosed as closed:
            assert closed.rcvd.code == LAYER_DOWN
        else:
            assert "hx-swap-oob" in told
        await tab.close()
        await idle.close()
    finally:
        server.stop()
