"""A session that ends closes its sockets, in every process; and a socket opens only from this
server's own origin: scheme, host and port."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings

from tests.conftest import socket_for
from web.consumer import SESSION_ENDED
from web.origin import same_origin

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


async def _closed_with(ws) -> int | None:
    output = await ws.receive_output(timeout=3)
    return output.get("code") if output["type"] == "websocket.close" else None


async def test_logging_out_closes_the_users_sockets_and_no_one_elses(
    alice, bob, conversation, client
):
    from chat.models import Conversation

    others = await Conversation.objects.acreate(owner=bob, model="fake-model")
    mine, theirs = socket_for(alice, conversation.pk), socket_for(bob, others.pk)
    assert (await mine.connect())[0] and (await theirs.connect())[0]
    await sync_to_async(client.force_login)(alice)
    assert (await sync_to_async(client.post)("/accounts/logout/")).status_code == 302
    assert await _closed_with(mine) == SESSION_ENDED
    frame = (
        await theirs.receive_output(timeout=0.3) if not await theirs.receive_nothing(0.3) else None
    )
    assert frame is None, frame  # bob's socket is untouched
    await theirs.disconnect()


async def test_a_password_change_closes_the_users_sockets(alice, conversation):
    ws = socket_for(alice, conversation.pk)
    assert (await ws.connect())[0]
    await sync_to_async(alice.save)(update_fields=["last_login"])  # not a password change
    assert await ws.receive_nothing(timeout=0.3)
    alice.set_password("a whole new secret")
    await sync_to_async(alice.save)()
    assert await _closed_with(ws) == SESSION_ENDED


@pytest.mark.parametrize("end", ["deactivate", "delete"])
async def test_deactivating_or_deleting_a_user_closes_their_sockets(alice, conversation, end):
    ws = socket_for(alice, conversation.pk)
    assert (await ws.connect())[0]
    if end == "deactivate":
        alice.is_active = False
        await sync_to_async(alice.save)()
    else:
        await sync_to_async(alice.delete)()
    assert await _closed_with(ws) == SESSION_ENDED


def _scope(origin: str | None, host: str, scheme: str = "ws") -> dict:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {"type": "websocket", "scheme": scheme, "headers": headers}


@pytest.mark.parametrize(
    ("origin", "host", "scheme", "allowed"),
    [
        ("http://localhost:8000", "localhost:8000", "ws", True),
        ("https://localhost", "localhost", "wss", True),
        ("https://localhost:443", "localhost", "wss", True),  # the default port, spelled out
        ("http://localhost:8001", "localhost:8000", "ws", False),  # another port
        ("https://localhost:8000", "localhost:8000", "ws", False),  # another scheme
        ("http://localhost:8000", "localhost:8000", "wss", False),  # a page over plain http
        ("http://evil.example", "localhost", "ws", False),
        ("http://evil.example", "evil.example", "ws", False),  # a host not allowed
        (None, "localhost", "ws", False),  # no Origin: not a browser page of ours
        ("null", "localhost", "ws", False),
        ("http://[bad", "localhost", "ws", False),
    ],
)
def test_the_origin_must_match_scheme_host_and_port(origin, host, scheme, allowed, settings):
    settings.ALLOWED_HOSTS = ["localhost"]
    settings.CSRF_TRUSTED_ORIGINS = []
    assert same_origin(_scope(origin, host, scheme)) is allowed


def test_a_trusted_origin_may_open_sockets(settings):
    settings.ALLOWED_HOSTS = ["chat.example"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.example"]
    assert same_origin(_scope("https://app.example", "chat.example", "wss"))
    assert not same_origin(_scope("https://app.example:8443", "chat.example", "wss"))


async def test_a_socket_from_another_port_of_the_same_host_is_refused(alice, conversation):
    from config.asgi import application

    ws = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://localhost:9999"), (b"host", b"localhost:8000")],
    )
    assert not (await ws.connect())[0]


# --- across real server processes ----------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _log_out(base: str, session_key: str, conversation_id: int) -> int:
    """Log out over HTTP with a session cookie, as a browser would; the response's status."""
    opener = urllib.request.build_opener(_NoRedirect)
    cookies = f"sessionid={session_key}"
    page = opener.open(
        urllib.request.Request(
            f"{base}/conversations/{conversation_id}/", headers={"Cookie": cookies}
        )
    )
    html = page.read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    csrf = re.search(r"csrftoken=([^;]+)", page.headers.get("Set-Cookie", "")).group(1)
    request = urllib.request.Request(
        f"{base}/accounts/logout/",
        data=urllib.parse.urlencode({"csrfmiddlewaretoken": token}).encode(),
        headers={"Cookie": f"{cookies}; csrftoken={csrf}", "Origin": base, "Referer": f"{base}/"},
    )
    try:
        return opener.open(request).status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.skipif(not settings.REDIS_URL, reason="several processes need the Redis layer")
async def test_logging_out_closes_the_users_sockets_in_every_process(alice, bob, fake_anthropic):
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    from chat.models import Conversation
    from support.servers import session_for
    from tests.servers import Server, Tab

    first, second = Server(fake_anthropic.url).start(), Server(fake_anthropic.url).start()
    try:
        mine = await Conversation.objects.acreate(owner=alice, model="claude-test")
        theirs = await Conversation.objects.acreate(owner=bob, model="claude-test")
        alice_key = await sync_to_async(session_for)(alice)
        bob_key = await sync_to_async(session_for)(bob)
        tabs = [await Tab(server, mine.pk, alice_key).open() for server in (first, second)]
        bobs = await Tab(second, theirs.pk, bob_key).open()

        # Log out on the first process, as the browser does: the page's CSRF token, then POST.
        status = await sync_to_async(_log_out)(f"http://127.0.0.1:{first.port}", alice_key, mine.pk)
        assert status == 302

        for tab in tabs:  # closed on both processes
            with pytest.raises(ConnectionClosed) as closed:
                await tab.until(lambda f: False, timeout=10)
            assert closed.value.rcvd.code == SESSION_ENDED
        with pytest.raises(InvalidStatus):  # and the ended session cannot open a new one
            await Tab(second, mine.pk, alice_key).open()
        await bobs.send(action="nope")  # bob's socket on the second process is still open
        assert "Unknown action" in await bobs.until(lambda f: "notice" in f, timeout=10)
        await bobs.close()
    finally:
        first.stop()
        second.stop()


def test_deployments_on_one_redis_server_do_not_share_channel_groups(monkeypatch):
    """Redis pub/sub ignores the database number: the layer's prefix follows REDIS_URL."""
    import importlib

    import config.settings as config

    prefixes = set()
    for url in ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/12"):
        monkeypatch.setenv("REDIS_URL", url)
        monkeypatch.setenv("DJANGO_DEBUG", "true")
        prefixes.add(importlib.reload(config).CHANNEL_LAYERS["default"]["CONFIG"]["prefix"])
    monkeypatch.undo()
    importlib.reload(config)
    assert len(prefixes) == 2


@pytest.mark.skipif(not settings.REDIS_URL, reason="several processes need the Redis layer")
async def test_deactivating_a_user_closes_their_sockets_in_every_process(alice, fake_anthropic):
    """As unticking "active" in the admin does: the user's tabs on both processes close, and
    the session, still in the database, opens no new socket; nor can they send meanwhile."""
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    from chat.models import Conversation, Message
    from support.servers import session_for
    from tests.servers import Server, Tab

    first, second = Server(fake_anthropic.url).start(), Server(fake_anthropic.url).start()
    try:
        mine = await Conversation.objects.acreate(owner=alice, model="claude-test")
        key = await sync_to_async(session_for)(alice)
        tabs = [await Tab(server, mine.pk, key).open() for server in (first, second)]
        alice.is_active = False
        await sync_to_async(alice.save)()
        for tab in tabs:
            with pytest.raises(ConnectionClosed) as closed:
                await tab.until(lambda f: False, timeout=10)
            assert closed.value.rcvd.code == SESSION_ENDED
        with pytest.raises(InvalidStatus):
            await Tab(second, mine.pk, key).open()
        assert not await Message.objects.filter(conversation=mine).aexists()
    finally:
        first.stop()
        second.stop()
