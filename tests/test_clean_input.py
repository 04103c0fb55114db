"""Text entering the app is valid Unicode without NUL, within one explicit limit per field, on
SQLite and PostgreSQL alike; model output that is not is made storable. Nothing stored can
break a page."""

from __future__ import annotations

import json

import pytest

from chat.models import Conversation, Message
from compaction.models import Compaction
from core.clean import FIELDS, scrubbed
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

# Raw frames: json.dumps would refuse nothing, but a browser or a script can send these escapes.
SURROGATE = '"a\\ud800b"'
NUL = '"a\\u0000b"'


async def _refused(user, conversation, frame: str) -> str:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame)
    notice = await ws.receive_from()
    await ws.disconnect()
    return notice


@pytest.mark.parametrize(("value", "reason"), [(SURROGATE, "invalid Unicode"), (NUL, "NUL")])
async def test_a_message_with_invalid_text_is_refused_and_nothing_is_stored(
    alice, conversation, value, reason
):
    notice = await _refused(alice, conversation, f'{{"action": "send", "message": {value}}}')
    assert 'id="notice"' in notice and reason in notice and "not saved" in notice
    assert await Message.objects.filter(conversation=conversation).acount() == 0


@pytest.mark.parametrize(("value", "reason"), [(SURROGATE, "invalid Unicode"), (NUL, "NUL")])
async def test_compaction_instructions_with_invalid_text_are_refused(
    alice, conversation, value, reason
):
    notice = await _refused(
        alice, conversation, f'{{"action": "compact", "instructions": {value}}}'
    )
    assert reason in notice
    assert await Compaction.objects.acount() == 0


async def test_instructions_over_their_limit_are_refused_with_it(alice, conversation, settings):
    settings.MAX_INSTRUCTIONS_CHARS = 50
    frame = json.dumps({"action": "compact", "instructions": "x" * 51})
    notice = await _refused(alice, conversation, frame)
    assert "51 characters; the limit is 50" in notice
    assert await Compaction.objects.acount() == 0


async def test_an_edited_summary_with_invalid_text_is_refused_and_the_draft_waits(
    alice, conversation
):
    draft = await Compaction.objects.acreate(
        conversation=conversation, trigger="manual", status="draft", first_kept_seq=3, summary="s"
    )
    frame = f'{{"action": "approve", "compaction": {draft.pk}, "summary": {SURROGATE}}}'
    assert "invalid Unicode" in await _refused(alice, conversation, frame)
    await draft.arefresh_from_db()
    assert draft.status == "draft" and draft.summary == "s"


def _settings_form(client, conversation, prompt: str):
    return client.post(
        f"/conversations/{conversation.pk}/settings/", {"system_prompt": prompt}, follow=True
    )


def test_a_system_prompt_over_its_limit_or_half_the_budget_is_refused(
    client, alice, conversation, settings
):
    client.force_login(alice)
    settings.MAX_SYSTEM_PROMPT_CHARS = 100
    page = _settings_form(client, conversation, "x" * 101).content.decode()
    assert "Settings not saved" in page and "101 characters; the limit is 100" in page
    settings.MAX_SYSTEM_PROMPT_CHARS = 50_000
    settings.CONTEXT_BUDGET_TOKENS = 2_000
    page = _settings_form(client, conversation, "word " * 1_000).content.decode()
    assert "more than half of this model&#x27;s window budget of 2,000" in page
    conversation.refresh_from_db()
    assert conversation.system_prompt == "Be brief."
    _settings_form(client, conversation, "Be kind. " * 50)
    conversation.refresh_from_db()
    assert conversation.system_prompt == ("Be kind. " * 50).strip()


def test_a_title_over_its_limit_is_refused(client, alice, conversation, settings):
    client.force_login(alice)
    settings.MAX_TITLE_CHARS = 20
    url = f"/conversations/{conversation.pk}/rename/"
    page = client.post(url, {"title": "t" * 21}, follow=True).content.decode()
    assert "21 characters; the limit is 20" in page
    client.post(url, {"title": "  A   short  one "})
    conversation.refresh_from_db()
    assert conversation.title == "A short one"


def test_a_search_with_a_nul_is_refused_with_a_reason(client, alice, conversation):
    client.force_login(alice)
    found = client.get(f"/conversations/{conversation.pk}/search.json", {"q": "a\x00b"})
    assert found.status_code == 400 and "NUL" in found.json()["error"]
    page = client.get(f"/conversations/{conversation.pk}/search/", {"q": "a\x00b"})
    assert page.status_code == 400 and "NUL" in page.content.decode()


async def test_model_output_with_invalid_text_is_stored_replaced_and_every_page_works(
    alice, conversation, fake_anthropic, async_client
):
    await Conversation.objects.filter(pk=conversation.pk).aupdate(model="claude-test")
    fake_anthropic.enqueue_reply(["fine \ud800 and \x00 done"])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "hello"}))
    await receive_until(ws, shows(2, "complete"))
    await settle(conversation.pk)
    await ws.disconnect()
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    assert reply.text == "fine \ufffd and \ufffd done"
    await async_client.aforce_login(alice)
    for url in (
        "/",
        f"/conversations/{conversation.pk}/",
        f"/conversations/{conversation.pk}/export.json",
    ):
        assert (await async_client.get(url, follow=True)).status_code == 200


def test_every_field_has_a_limit_and_scrubbing_keeps_valid_text():
    assert all(f.limit > 0 for f in FIELDS)
    assert scrubbed("ok ✓ 👍") == "ok ✓ 👍"
    assert scrubbed("\udfff\x00") == "\ufffd\ufffd"


def test_the_forms_show_the_limits_the_server_enforces(client, alice, conversation, settings):
    settings.MAX_SYSTEM_PROMPT_CHARS = 1234
    settings.MAX_INSTRUCTIONS_CHARS = 321
    settings.MAX_TITLE_CHARS = 99
    settings.MAX_QUERY_CHARS = 77
    settings.MAX_SUMMARY_CHARS = 4321
    Compaction.objects.create(
        conversation=conversation, trigger="manual", status="draft", first_kept_seq=3, summary="s"
    )
    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'name="system_prompt" rows="3" maxlength="1234"' in page
    assert "Up to 1,234 characters, and at most half of the window" in page
    assert page.count('maxlength="321"') == 2  # compact now, regenerate
    assert 'maxlength="4321"' in page and 'maxlength="99"' in page
    assert page.count('maxlength="77"') == 2  # the header's search, the sidebar's
