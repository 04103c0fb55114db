"""Abuse limits, each a setting with a clear refusal: sends per minute and replies at once per
user, compactions per hour, sign-ups per address, failed sign-ins per name and per address.
Counted in the database, one atomic statement per count, shared by every process."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from chat import limits
from chat.models import Conversation, Message
from core.errors import ActionError
from support.waiting import settle
from tests.conftest import receive_until, socket_for
from turns import actions

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_window_counts_up_to_its_limit_then_refuses_until_the_next(settings):
    settings.SENDS_PER_MINUTE = 2
    start = 6_000_000.0  # a minute's start
    limits.hit(limits.SENDS, "u", now=start + 1)
    limits.hit(limits.SENDS, "u", now=start + 2)
    with pytest.raises(limits.Limited) as refused:
        limits.hit(limits.SENDS, "u", now=start + 15)
    assert refused.value.reason == (
        "Too many attempts at sending messages: the limit is 2 a minute. Try again in 45 seconds."
    )
    limits.hit(limits.SENDS, "someone-else", now=start + 15)
    limits.hit(limits.SENDS, "u", now=start + 61)  # a new window


@pytest.mark.usefixtures("channel_layer")
async def test_sends_past_the_limit_are_refused_and_not_stored(
    alice, conversation, fake_llm, settings
):
    settings.SENDS_PER_MINUTE = 2
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    for n in range(3):
        await ws.send_to(text_data=json.dumps({"action": "send", "message": f"m{n}"}))
    frames = await receive_until(ws, lambda f: 'id="notice"' in f)
    assert "limit is 2 a minute" in frames[-1]
    await settle(conversation.pk)
    await ws.disconnect()
    users = Message.objects.filter(conversation=conversation, role="user")
    assert [m.text async for m in users] == ["m0", "m1"]


async def test_a_new_reply_is_refused_past_the_replies_at_once_but_a_queued_one_is_not(
    alice, bob, conversation, settings
):
    settings.REPLIES_AT_ONCE = 1
    elsewhere = await Conversation.objects.acreate(owner=alice, model="fake-model")
    for seq, role, status in ((1, "user", "complete"), (2, "assistant", "streaming")):
        await Message.objects.acreate(
            conversation=elsewhere, seq=seq, role=role, status=status, heartbeat_at=timezone.now()
        )
    with pytest.raises(ActionError, match="1 replies streaming in other conversations"):
        await actions.send(alice, conversation.pk, "one more at once")
    assert not await Message.objects.filter(conversation=conversation).aexists()
    # Into the busy conversation it only queues; and bob has his own count.
    claim = await actions.send(alice, elsewhere.pk, "after that one")
    assert claim.queued
    theirs = await Conversation.objects.acreate(owner=bob, model="fake-model")
    assert (await actions.send(bob, theirs.pk, "mine")).message is not None


@pytest.mark.usefixtures("channel_layer")
async def test_compactions_past_the_limit_are_refused(alice, conversation, settings):
    settings.COMPACTIONS_PER_HOUR = 1
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    frames = []
    for _ in range(2):
        await ws.send_to(text_data=json.dumps({"action": "compact", "instructions": ""}))
        frames.append(await ws.receive_from())
    await ws.disconnect()
    assert "Nothing to compact yet" in frames[0]  # counted: it asked
    assert "Too many attempts at compacting by hand: the limit is 1 an hour" in frames[1]


def _login(client, username, password, address="127.0.0.1", url="/accounts/login/"):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_failed_sign_ins_are_limited_per_name_and_per_address(client, alice, bob, settings):
    settings.LOGIN_FAILURES_PER_15_MINUTES = 3
    for user in (alice, bob):
        user.set_password("right password")
        user.save()
    for _ in range(3):
        assert _login(client, "alice", "wrong", "10.0.0.1").status_code == 200
    # The right password no longer helps, for her name from anywhere…
    refused = _login(client, "alice", "right password", "10.0.0.9").content.decode()
    assert "Too many attempts at signing in: the limit is 3 in 15 minutes" in refused
    # …nor for anyone from that address; bob elsewhere signs in.
    assert (
        "Too many attempts" in _login(client, "bob", "right password", "10.0.0.1").content.decode()
    )
    assert _login(client, "bob", "right password", "10.0.0.2").status_code == 302


def test_the_admin_sign_in_is_limited_too(client, django_user_model, settings):
    settings.LOGIN_FAILURES_PER_15_MINUTES = 2
    django_user_model.objects.create_superuser("root", password="right password")
    for _ in range(2):
        _login(client, "root", "wrong", url="/admin/login/")
    refused = _login(client, "root", "right password", url="/admin/login/")
    assert (
        refused.status_code == 200 and "Too many attempts at signing in" in refused.content.decode()
    )


def test_sign_ups_are_limited_per_address(client, django_user_model, settings):
    settings.SIGNUPS_PER_HOUR = 2
    for n in range(3):
        client.logout()
        page = client.post(
            "/accounts/signup/",
            {"username": f"new{n}", "password1": "a fine pass 123", "password2": "a fine pass 123"},
        )
    assert "Too many attempts at signing up from this address" in page.content.decode()
    assert sorted(django_user_model.objects.values_list("username", flat=True)) == ["new0", "new1"]


async def test_the_limits_hold_across_server_processes(alice, fake_anthropic):
    from support.servers import session_for
    from tests.servers import Server, Tab

    env = {"SENDS_PER_MINUTE": "2"}
    first = Server(fake_anthropic.url, **env).start()
    second = Server(fake_anthropic.url, **env).start()
    try:
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        key = await sync_to_async(session_for)(alice)
        tabs = [await Tab(server, conversation.pk, key).open() for server in (first, second)]
        for n, tab in enumerate(tabs):
            await tab.send(action="send", message=f"from process {n}")
            await tab.until(lambda f, n=n: f"from process {n}" in f)
        await tabs[0].send(action="send", message="a third")
        assert "limit is 2 a minute" in await tabs[0].until(lambda f: "notice" in f)
        for tab in tabs:
            await tab.close()
    finally:
        first.stop()
        second.stop()


def test_a_place_given_back_is_taken_again_and_ended_windows_are_swept(settings):
    from chat.models import LimitCount

    settings.SIGNUPS_PER_HOUR = 1
    start = 7_200_000.0  # an hour's start
    limits.hit(limits.SIGNUPS, "addr", now=start + 1)
    limits.release(limits.SIGNUPS, "addr", now=start + 2)  # that form had a mistake
    limits.hit(limits.SIGNUPS, "addr", now=start + 3)
    with pytest.raises(limits.Limited):
        limits.hit(limits.SIGNUPS, "addr", now=start + 4)
    limits.hit(limits.SIGNUPS, "addr", now=start + 3601)  # the next hour's window
    limits.sweep(now=start + 3602)
    assert list(LimitCount.objects.values_list("count", flat=True)) == [1]
