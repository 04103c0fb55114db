"""Import: this app's export.json (round trip) and ChatGPT's conversations.json; untidy exports
kept as they are with every request still valid; bad files refused with a reason, nothing made."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chat.models import Conversation, Message
from chat.transcript import current_branch
from chat.window_loading import load_window
from support.messages_api import invalid_request

pytestmark = pytest.mark.django_db(transaction=True)


def upload(client, payload, name="export.json"):
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return client.post("/conversations/import/", {"file": SimpleUploadedFile(name, raw)})


def chatgpt_conversation(title: str, turns: list[tuple[str, object]], *, branch: bool = False):
    """ChatGPT's tree: a root, a hidden system message, then `turns` in a chain; `branch` adds
    an abandoned sibling answer, imported off the branch on screen."""
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["sys"]}}
    mapping["sys"] = {
        "id": "sys",
        "message": {
            "author": {"role": "system"},
            "content": {"content_type": "text", "parts": [""]},
        },
        "parent": "root",
        "children": [],
    }
    parent = "sys"
    for i, (role, parts) in enumerate(turns):
        node = f"n{i}"
        mapping[parent]["children"].append(node)
        mapping[node] = {
            "id": node,
            "message": {
                "author": {"role": role},
                "content": {"content_type": "text", "parts": parts},
                "create_time": 1700000000 + i,
            },
            "parent": parent,
            "children": [],
        }
        parent = node
    if branch:
        mapping["n0"]["children"].append("old")
        mapping["old"] = {
            "id": "old",
            "message": {"author": {"role": "assistant"}, "content": {"parts": ["ABANDONED"]}},
            "parent": "n0",
            "children": [],
        }
    return {"title": title, "mapping": mapping, "current_node": parent}


def test_an_export_round_trips(client, alice, conversation):
    for seq, (role, text) in enumerate([("user", "Plan the trip"), ("assistant", "Lisbon.")], 1):
        Message.objects.create(
            conversation=conversation, seq=seq, role=role, content=[{"type": "text", "text": text}]
        )
    client.force_login(alice)
    exported = client.get(f"/conversations/{conversation.pk}/export.json").json()
    response = upload(client, exported)
    assert response.status_code == 302
    copy = Conversation.objects.exclude(pk=conversation.pk).get(owner=alice)
    assert response["Location"] == f"/conversations/{copy.pk}/"
    assert copy.title == f"Imported: {conversation.title}"
    assert copy.system_prompt == conversation.system_prompt
    assert [(m.seq, m.role, m.content) for m in copy.messages.order_by("seq")] == [
        (m["seq"], m["role"], m["content"]) for m in exported["messages"]
    ]
    assert all(m.tokens > 0 and m.search_text for m in copy.messages.all())


def test_only_role_and_content_are_required(client, alice):
    client.force_login(alice)
    response = upload(client, {"messages": [{"role": "user", "content": "just text"}]})
    assert response.status_code == 302
    imported = Conversation.objects.get(owner=alice)
    assert imported.title == "Imported: just text"
    assert imported.messages.get().content == [{"type": "text", "text": "just text"}]


def test_a_chatgpt_export_becomes_one_conversation_each_showing_the_branch_on_screen(client, alice):
    untidy = chatgpt_conversation(
        "Untidy one",
        [
            ("assistant", ["Hello! How can I help?"]),  # opens with the assistant
            ("user", ["First question"]),
            ("user", ["and a second one in a row"]),  # two of one role
            ("tool", ["hidden tool output"]),
            ("assistant", ["An answer", {"content_type": "image_asset_pointer"}]),
        ],
        branch=True,
    )
    tidy = chatgpt_conversation("Tidy", [("user", ["hi"]), ("assistant", ["hello"])])
    client.force_login(alice)
    response = upload(client, [untidy, tidy], "conversations.json")
    assert response.status_code == 302
    first, second = Conversation.objects.filter(owner=alice).order_by("id")
    assert response["Location"] == f"/conversations/{first.pk}/"
    assert (first.title, second.title) == ("Imported: Untidy one", "Imported: Tidy")
    rows = list(first.messages.order_by("seq"))
    assert [(m.role, m.text) for m in rows] == [
        ("assistant", "Hello! How can I help?"),
        ("user", "First question"),
        ("user", "and a second one in a row"),
        ("assistant", "An answer"),
        ("assistant", "ABANDONED"),  # kept, off the branch on screen
    ]
    assert current_branch(first) == {1, 2, 3, 4}
    # The transcript keeps them as they were; the window the model gets is still valid.
    window = load_window(first).window()
    assert invalid_request({"messages": window.messages}) == ""
    assert window.messages[0]["role"] == "user"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json at all", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b'{"title": "no messages key"}', "neither"),
        (b'{"messages": []}', "no messages"),
        (b'{"messages": [{"role": "system", "content": "x"}]}', "must be"),
        (b'{"messages": [{"role": "user", "content": 42}]}', "content must be"),
        (b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}', "invalid Unicode"),
        (b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}', "NUL"),
        (b"[]", "neither"),
        (b'[{"mapping": {}}]', "no messages"),
    ],
)
def test_a_bad_file_is_refused_with_its_reason_and_creates_nothing(client, alice, raw, reason):
    client.force_login(alice)
    response = upload(client, raw)
    assert response.status_code == 400
    assert reason in response.content.decode()
    assert not Conversation.objects.exists() and not Message.objects.exists()


def test_a_bad_conversation_anywhere_in_the_file_creates_none_of_them(client, alice):
    good = chatgpt_conversation("Good", [("user", ["hi"])])
    bad = {"title": "Bad", "mapping": "not a mapping"}
    client.force_login(alice)
    assert upload(client, [good, bad]).status_code == 400
    assert not Conversation.objects.exists()


def test_import_needs_a_login_a_file_and_a_small_enough_one(client, alice, settings):
    assert upload(client, {"messages": [{"role": "user", "content": "x"}]}).status_code == 302
    assert not Conversation.objects.exists()  # the redirect was to the login page
    client.force_login(alice)
    assert client.post("/conversations/import/").status_code == 400
    settings.IMPORT_MAX_BYTES = 10
    response = upload(client, {"messages": [{"role": "user", "content": "too long"}]})
    assert response.status_code == 400 and "IMPORT_MAX_BYTES" in response.content.decode()


@pytest.mark.usefixtures("channel_layer")
async def test_a_long_import_compacts_before_its_first_request(
    async_client, alice, fake_anthropic, settings
):
    from support.waiting import settle
    from tests.conftest import receive_until, shows, socket_for

    settings.CONTEXT_BUDGET_TOKENS = 3000
    words = " ".join(f"word{i}" for i in range(300))
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Part {i}: {words}"}
        for i in range(20)
    ]
    await async_client.aforce_login(alice)
    raw = json.dumps({"title": "Long", "messages": messages}).encode()
    response = await async_client.post(
        "/conversations/import/", {"file": SimpleUploadedFile("export.json", raw)}
    )
    assert response.status_code == 302
    conversation = await Conversation.objects.aget(owner=alice)
    fake_anthropic.enqueue_reply(["<summary>## Primary request and intent\nLong import.</summary>"])
    fake_anthropic.enqueue_reply(["Carrying on."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "go on"}))
    await receive_until(ws, shows(22, "complete"), timeout=20)
    await settle(conversation.pk)
    await ws.disconnect()
    reply = fake_anthropic.requests[-1]
    assert "<summary>" in json.dumps(reply["messages"][0])  # a summary heads the window
    assert len(reply["messages"]) < 21
    assert fake_anthropic.invalid == []
