"""Model output is untrusted: hostile markup in a reply renders inert."""

from __future__ import annotations

import pytest

from chat.models import Message

pytestmark = pytest.mark.django_db

HOSTILE = (
    'Here you go <script>alert("x")</script> and <img src=x onerror="alert(1)"> '
    '[click](javascript:alert(2)) <a href="javascript:alert(3)">a</a>\n\n'
    "```html\n<script>inside code</script>\n```"
)


@pytest.fixture
def hostile_reply(conversation):
    Message.objects.create(
        conversation=conversation, seq=1, role="user", content=[{"type": "text", "text": "hi"}]
    )
    return Message.objects.create(
        conversation=conversation,
        seq=2,
        role="assistant",
        content=[{"type": "text", "text": HOSTILE}],
    )


def test_a_reply_with_script_and_onerror_renders_inert(client, alice, conversation, hostile_reply):
    client.force_login(alice)
    html = client.get(f"/conversations/{conversation.pk}/").content.decode()
    bubble = html.split('id="msg-2"', 1)[1].split("</article>", 1)[0]
    assert "<script" not in bubble
    assert "<img" not in bubble
    assert '<a href="javascript' not in bubble
    assert "&lt;script&gt;" in bubble  # shown as text, not run


def test_user_text_is_escaped_too(client, alice, conversation):
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        content=[{"type": "text", "text": "<img src=x onerror=alert(1)>"}],
    )
    client.force_login(alice)
    html = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_streamed_deltas_are_escaped():
    from render.frames import delta

    assert "<script>" not in delta(3, "<script>alert(1)</script>")
    assert "&lt;script&gt;" in delta(3, "<script>")


def test_every_value_a_bubble_shows_is_escaped():
    """render/bubbles.py writes the bubble as a string: the user's text (in the edit box
    too), the error a provider sent and the tool's name, input and result all arrive as text."""
    from chat.transcript import Item
    from render.bubbles import message_html

    evil = '"><img src=x onerror=alert(1)>'
    user = Message(pk=1, seq=1, role="user", content=[{"type": "text", "text": evil}])
    reply = Message(
        pk=2,
        seq=2,
        role="assistant",
        status="error",
        error=evil,
        content=[
            {"type": "tool_use", "id": "t", "name": evil, "input": {"q": evil}},
            {"type": "tool_result", "tool_use_id": "t", "content": evil},
        ],
    )
    for message in (user, reply):
        html = message_html(Item(kind="message", message=message))
        assert "<img" not in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.parametrize("link", ["//evil.example/x", "/\\evil.example/x", "\\\\evil.example"])
def test_a_link_in_a_reply_never_leaves_for_another_host_without_a_scheme(link):
    from render.markdown import render_markdown

    html = render_markdown(f"[docs]({link}) and [here](/conversations/2/?at=3#msg-3)")
    # Dropped, or a path of this site (the parser writes a backslash as %5C): never `//host`.
    assert 'href="//' not in html and 'href="/\\' not in html
    assert 'href="/conversations/2/?at=3#msg-3"' in html
