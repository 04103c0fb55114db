"""Versions seen from outside the chat: pins (a boundary unpins the versions it folds away off
the branch, and such a version cannot be pinned again: it would ride in the window; a pinned
message keeps its switcher), the admin and the exports."""

from __future__ import annotations

import pytest

from chat.models import Conversation, Message
from chat.window_loading import load_window
from compaction.models import Compaction
from tests.test_versions import _edited_conversation


@pytest.mark.django_db
def test_a_boundary_unpins_versions_it_folds_away(conversation):
    from chat.compactions import unpin_abandoned
    from chat.models import Pin

    _edited_conversation(conversation)  # branch 1 2 5 6; 3 and 4 abandoned
    for seq in (2, 3, 6):
        Pin.objects.create(
            conversation=conversation,
            message=Message.objects.get(conversation=conversation, seq=seq),
        )
    state = load_window(conversation)
    unpin_abandoned(conversation.pk, state, first_kept=6)
    assert sorted(Pin.objects.values_list("message__seq", flat=True)) == [2, 6]


@pytest.mark.django_db
def test_a_version_a_boundary_folded_away_cannot_be_pinned_again(client, alice, conversation):
    from chat.models import Pin

    _edited_conversation(conversation)  # branch 1 2 5 6; 3 and 4 abandoned
    Compaction.objects.create(
        conversation=conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=6,
        summary="## Primary request and intent\nEdits.",
    )
    client.force_login(alice)
    message = {m.seq: m.pk for m in Message.objects.filter(conversation=conversation)}
    refused = client.post(f"/messages/{message[3]}/pin/", {"pinned": "1"})
    assert refused.status_code == 400
    assert "left behind on another branch" in refused.content.decode()
    assert client.post(f"/messages/{message[2]}/pin/", {"pinned": "1"}).status_code == 200
    assert list(Pin.objects.values_list("message__seq", flat=True)) == [2]
    assert [e.seq for e in load_window(conversation).pinned_before_cut] == [2]


@pytest.mark.django_db
def test_a_message_pinned_keeps_its_version_switcher(client, alice, conversation):
    # The pin swaps the bubble whole: without its switcher the other version is out of reach.
    _edited_conversation(conversation)
    message = Message.objects.get(conversation=conversation, seq=3)
    client.force_login(alice)
    for pinned in ("1", "0"):
        bubble = client.post(f"/messages/{message.pk}/pin/", {"pinned": pinned}).content.decode()
        assert 'aria-label="Versions of message 3"' in bubble and "1 / 2" in bubble


@pytest.mark.django_db
def test_the_admin_shows_every_version_and_which_are_on_the_branch(admin_client, conversation):
    _edited_conversation(conversation)
    html = admin_client.get(f"/admin/chat/conversation/{conversation.pk}/change/").content.decode()
    inline = html.split("On the branch")[1]
    assert inline.count('alt="True"') == 4 and inline.count('alt="False"') == 2
    assert ">#2<" in inline  # message 5 follows message 2


@pytest.mark.django_db
def test_export_json_lists_every_version_with_its_parent_and_branch(client, alice, conversation):
    _edited_conversation(conversation)
    Conversation.objects.filter(pk=conversation.pk).update(leaf_seq=4)  # switched back
    client.force_login(alice)
    data = client.get(f"/conversations/{conversation.pk}/export.json").json()
    assert [(m["seq"], m["parent"], m["on_branch"]) for m in data["messages"]] == [
        (1, 0, True),
        (2, 1, True),
        (3, 2, True),
        (4, 3, True),
        (5, 2, False),
        (6, 5, False),
    ]
    assert data["branch_end"] == 4
    assert [m["content"][0]["text"] for m in data["window"]["messages"]] == ["m1", "m2", "m3", "m4"]


@pytest.mark.django_db
def test_export_md_marks_the_versions_off_the_branch(client, alice, conversation):
    _edited_conversation(conversation)
    client.force_login(alice)
    response = client.get(f"/conversations/{conversation.pk}/export.md")
    text = b"".join(response.streaming_content).decode()
    assert text.count("Another version, off the branch on screen") == 2
    assert "it follows #2." in text  # message 3, the one edited
    edited = text.split("#5")[1]
    assert "Another version" not in edited.split("###")[0]  # on the branch: no note
