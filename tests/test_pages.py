"""Pages and endpoints other programs rely on: sign-up, create, export.json."""

from __future__ import annotations

import pytest

from chat.models import Conversation, Message
from compaction.assembly import SUMMARY_INTRO
from tests.transcripts import add_turns, committed_boundary

pytestmark = pytest.mark.django_db


def test_signup_logs_in_and_lands_on_the_chat(client):
    response = client.post(
        "/accounts/signup/",
        {"username": "carol", "password1": "a-long-pass-phrase", "password2": "a-long-pass-phrase"},
    )
    assert response.status_code == 302
    page = client.get("/", follow=True)
    assert "Start a conversation" in page.content.decode()


def test_signup_can_be_switched_off(client, settings):
    settings.ALLOW_SIGNUP = False
    assert client.get("/accounts/signup/").status_code == 404
    assert "Sign up" not in client.get("/accounts/login/").content.decode()


def test_post_conversations_creates_one_and_redirects_to_it(client, alice):
    client.force_login(alice)
    response = client.post("/conversations/")
    conversation = Conversation.objects.get(owner=alice)
    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{conversation.pk}/"


def test_the_page_says_plainly_when_the_demo_model_answers(client, alice, settings):
    settings.LLM_PROVIDER = "demo"
    client.force_login(alice)
    page = client.post("/conversations/", follow=True).content.decode()
    assert "Demo model answering" in page
    assert "The offline demo model is answering" in client.get("/").content.decode()


def test_export_json_has_the_documented_shape_and_the_exact_window(client, alice, conversation):
    add_turns(conversation, 4)
    committed_boundary(conversation, 5, summary="## Primary request and intent\nTest the export.")
    client.force_login(alice)
    response = client.get(f"/conversations/{conversation.pk}/export.json")
    assert response["Content-Disposition"].startswith("attachment; filename=")  # as export.md
    data = response.json()
    assert set(data) == {
        "id",
        "title",
        "model",
        "system_prompt",
        "created_at",
        "updated_at",
        "branch_end",
        "messages",
        "compactions",
        "window",
    }
    assert [m["seq"] for m in data["messages"]] == list(range(1, 9))
    assert data["branch_end"] == 8 and all(m["on_branch"] for m in data["messages"])
    assert set(data["messages"][0]) == {
        "seq", "parent", "on_branch", "pinned", "role", "content", "status", "tokens", "usage",
        "window_tokens", "window_head_tokens", "window_boundary", "created_at", "updated_at",
    }  # fmt: skip
    (boundary,) = data["compactions"]
    assert set(boundary) == {
        "id", "trigger", "kind", "status", "imported", "pre_tokens", "post_tokens",
        "first_kept_seq", "cleared_before_seq", "cleared_count", "files", "summary", "summariser",
        "summary_model", "instructions", "edited", "facts", "created_at", "updated_at",
    }  # fmt: skip
    assert (boundary["trigger"], boundary["first_kept_seq"]) == ("manual", 5)
    assert boundary["facts"] == {"total": 0, "kept": 0, "lost": []}  # none counted by hand
    window = data["window"]
    assert set(window) == {"system", "messages", "tokens"}
    assert window["system"] == "Be brief."
    assert window["messages"][0]["content"][0]["text"].startswith(SUMMARY_INTRO)
    assert window["messages"][2]["content"] == Message.objects.get(seq=5).content
    assert len(window["messages"]) == 2 + 4 and window["tokens"] > 0


def test_pinning_marks_the_message_and_unpinning_clears_it(client, alice, conversation):
    add_turns(conversation, 2)
    message = Message.objects.get(conversation=conversation, seq=1)
    client.force_login(alice)
    pinned = client.post(f"/messages/{message.pk}/pin/", {"pinned": "1"}).content.decode()
    assert "pinned" in pinned and "Unpin" in pinned
    assert message.content == Message.objects.get(pk=message.pk).content  # the row is untouched
    unpinned = client.post(f"/messages/{message.pk}/pin/", {"pinned": "0"}).content.decode()
    assert ">Pin<" in unpinned.replace("\n", "").replace(" ", "")


def test_the_model_view_shows_exactly_the_window(client, alice, conversation):
    add_turns(conversation, 3)
    committed_boundary(
        conversation,
        5,
        trigger="auto",
        summary="Earlier: the user asked about TOML.",
        summariser="",
    )
    client.force_login(alice)
    html = client.get(f"/conversations/{conversation.pk}/window/").content.decode()
    assert html.count("window-message") == 2 + 2
    assert SUMMARY_INTRO in html and "Earlier: the user asked about TOML." in html
    assert "Question 1:" not in html and "Question 5:" in html
