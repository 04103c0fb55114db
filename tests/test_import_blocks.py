"""Imported blocks (finding 7): only the types the Messages API accepts, in the roles that may
carry them, with only the fields they need, are stored; anything else is a text block saying what
it was. Orphaned tool calls and results are stored as written, and the window sends none of them:
the request the provider gets is valid."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chat.models import Conversation
from chat.window_loading import load_window
from support.messages_api import invalid_request

pytestmark = pytest.mark.django_db(transaction=True)

# An image kept by the API's Files service: not fetched (a file with its bytes in the block is
# stored as an upload: tests/test_import_files.py).
ELSEWHERE = {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}
MESSAGES = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Look at these", "cache_control": {"type": "ephemeral"}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            {"type": "image", "source": ELSEWHERE},
            {"type": "tool_use", "id": "toolu_u", "name": "search", "input": {}},
            {"type": "mystery", "payload": [1, 2]},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "text", "text": "Searching.", "citations": []},
            # This app's own layout: a reply holds its call and, after it, its result.
            {"type": "tool_use", "id": "toolu_a", "name": "search", "input": {"q": "a"}},
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "found a"},
            {"type": "tool_result", "tool_use_id": "toolu_nowhere", "content": "orphan"},
            {"type": "text", "text": "Found a. Now b."},
            # The API's layout: a call answered in the next (user) message.
            {"type": "tool_use", "id": "toolu_b", "name": "search", "input": {"q": "b"}},
            {"type": "tool_use", "id": "toolu_a", "name": "search", "input": {}},  # id again
            {"type": "tool_use", "id": "bad id!", "name": "search", "input": {}},
            {"type": "tool_use", "id": "toolu_c", "name": "search", "input": {}},  # never answered
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "the result, after my words"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_b",
                "content": [
                    {"type": "text", "text": "found b"},
                    {"type": "image", "source": ELSEWHERE},
                ],
                "is_error": False,
            },
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "again"},
            {"type": "tool_result", "tool_use_id": "toolu_z", "content": "orphan in a user"},
        ],
    },
    {"role": "assistant", "content": "Both found."},
]


def text(words: str) -> dict:
    return {"type": "text", "text": words}


STORED = [
    [
        text("Look at these"),
        text("[an image from a URL, not imported]"),
        text("[an image, not imported]"),
        text("[a call of the tool 'search' in a user message, not imported]"),
        text("[a 'mystery' block, not imported]"),
    ],
    [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        text("Searching."),
        {"type": "tool_use", "id": "toolu_a", "name": "search", "input": {"q": "a"}},
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "found a"},
        text("[a tool result without its call, not imported]"),
        text("Found a. Now b."),
        {"type": "tool_use", "id": "toolu_b", "name": "search", "input": {"q": "b"}},
        text("[a call of the tool 'search' with an id or name the API refuses, not imported]"),
        text("[a call of the tool 'search' with an id or name the API refuses, not imported]"),
        {"type": "tool_use", "id": "toolu_c", "name": "search", "input": {}},
    ],
    [
        text("the result, after my words"),
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": [text("found b"), text("[an image, not imported]")],
        },
        text("[a tool result without its call, not imported]"),
        {"type": "tool_result", "tool_use_id": "toolu_z", "content": "orphan in a user"},
    ],
    [text("Both found.")],
]


def imported(client, alice) -> Conversation:
    client.force_login(alice)
    raw = json.dumps({"title": "Blocks", "messages": MESSAGES}).encode()
    response = client.post(
        "/conversations/import/", {"file": SimpleUploadedFile("export.json", raw)}
    )
    assert response.status_code == 302
    return Conversation.objects.get(owner=alice)


def test_what_the_api_accepts_is_stored_and_the_rest_says_what_it_was(client, alice):
    conversation = imported(client, alice)
    stored = [m.content for m in conversation.messages.order_by("seq")]
    assert stored == STORED
    dumped = json.dumps(stored)
    assert "cache_control" not in dumped and "citations" not in dumped and "file_011" not in dumped


def test_the_window_of_an_import_is_a_valid_request(client, alice):
    conversation = imported(client, alice)
    messages = load_window(conversation).window().messages
    assert invalid_request({"messages": messages, "tools": [{"name": "search"}]}) == ""
    blocks = [b for m in messages for b in m["content"]]
    assert {b["type"] for b in blocks} == {"text", "tool_use", "tool_result"}
    calls = {b["id"] for b in blocks if b["type"] == "tool_use"}
    results = {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"}
    assert calls == results == {"toolu_a", "toolu_b"}  # the orphans stay out


@pytest.mark.usefixtures("channel_layer")
async def test_the_provider_gets_a_valid_request_from_an_import(alice, fake_anthropic):
    from asgiref.sync import sync_to_async
    from django.test import Client

    from support.waiting import settle
    from tests.conftest import receive_until, shows, socket_for

    conversation = await sync_to_async(imported)(Client(), alice)
    fake_anthropic.enqueue_reply(["Carrying on."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "go on"}))
    await receive_until(ws, shows(6, "complete"), timeout=20)
    await settle(conversation.pk)
    await ws.disconnect()
    assert fake_anthropic.invalid == []
    messages = fake_anthropic.requests[-1]["messages"]
    kinds = {b["type"] for m in messages for b in m["content"]}
    assert kinds == {"text", "tool_use", "tool_result"}
    assert "toolu_c" not in json.dumps(messages)  # the call never answered stays out
