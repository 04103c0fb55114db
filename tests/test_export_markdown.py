"""export.md: the transcript as a Markdown download, with its compaction dividers and summaries;
owner only; untrusted text cannot break the document; a fixed number of queries, streamed."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.db import connection
from django.test import AsyncClient
from django.test.utils import CaptureQueriesContext
from markdown_it import MarkdownIt

from chat.exports import as_markdown, downloads, safe_markdown
from chat.models import Conversation, Message
from compaction.models import Compaction
from tests.transcripts import add_turns, text_block

pytestmark = pytest.mark.django_db


def url(conversation) -> str:
    return f"/conversations/{conversation.pk}/export.md"


def download(client, conversation) -> str:
    response = client.get(url(conversation))
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


def add(conversation, seq, role, content, **fields) -> Message:
    if isinstance(content, str):
        content = text_block(content)
    return Message.objects.create(
        conversation=conversation, seq=seq, role=role, content=content, **fields
    )


class Outline(HTMLParser):
    """The rendered export's headings, and the text found inside <pre> or <code>."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.headings: list[tuple[str, str]] = []
        self.in_code = ""

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)
        if tag[0] == "h" and tag[1:].isdigit():
            self.headings.append((tag, ""))

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        if self.open and self.open[-1][0] == "h" and self.open[-1][1:].isdigit():
            tag, text = self.headings[-1]
            self.headings[-1] = (tag, text + data)
        if "pre" in self.open or "code" in self.open:
            self.in_code += data


# As a Markdown reader that passes raw HTML through would read it (the chat page's own renderer
# escapes it; GitHub and editors' previews do not).
_reader = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def outline(markdown: str) -> Outline:
    parser = Outline()
    parser.feed(_reader.render(markdown))
    parser.close()
    return parser


# --- the download --------------------------------------------------------------------------------


def test_it_is_a_markdown_download_for_the_owner_only(client, alice, bob, conversation):
    add_turns(conversation, 1)
    client.force_login(alice)
    response = client.get(url(conversation))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="new-conversation-{conversation.pk}.md"'
    )
    assert b"Question 1" in b"".join(response.streaming_content)
    client.force_login(bob)
    assert client.get(url(conversation)).status_code == 404
    assert client.get("/conversations/999999/export.md").status_code == 404
    client.logout()
    assert client.get(url(conversation)).status_code == 302  # to the sign-in page


def test_the_conversation_menu_links_it_next_to_export_json(client, alice, conversation):
    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    json_link = page.index(f'href="/conversations/{conversation.pk}/export.json"')
    markdown_link = page.index(f'href="/conversations/{conversation.pk}/export.md"')
    assert 0 < markdown_link - json_link < 200


def test_it_holds_title_model_prompt_then_the_transcript_with_dividers_in_order(
    client, alice, conversation
):
    conversation.title = "Planning the release"
    conversation.save()
    add_turns(conversation, 3)  # messages 1-6
    Compaction.objects.create(
        conversation=conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=5,
        pre_tokens=1_234,
        post_tokens=456,
        summary="## Primary request and intent\nShip on Friday.\n\nSecond paragraph.",
        summariser="model",
        summary_model="claude-haiku-4",
        instructions="focus on dates",
    )
    client.force_login(alice)
    text = download(client, conversation)
    order = [
        "# Planning the release",
        "fake-model",
        "## System prompt",
        "Be brief.",
        "## Transcript",
        "### User · #1",
        "Question 1:",
        "### Assistant · #2",
        "### Assistant · #4",
        "**Compaction (manual) · 1,234 → 456 tokens**",
        "written by claude-haiku-4;",  # the model that wrote the summary
        "Instructions: focus on dates",
        "> ##### Primary request and intent",  # the summary, quoted, its headings demoted
        "> Ship on Friday.\n>\n> Second paragraph.",
        "### User · #5",
        "### Assistant · #6",
    ]
    positions = [text.index(piece) for piece in order]
    assert positions == sorted(positions)
    headings = outline(text).headings
    assert headings[0] == ("h1", "Planning the release")
    assert [h for h in headings if h[0] == "h3"][-1][1].startswith("Assistant · #6")


def test_statuses_errors_and_tool_calls_read_plainly(client, alice, conversation):
    add(conversation, 1, "user", "What time is it?")
    add(
        conversation,
        2,
        "assistant",
        [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "clock", "input": {"zone": "UTC"}},
            {"type": "tool_result", "tool_use_id": "t1", "content": "12:00"},
            {"type": "tool_use", "id": "t2", "name": "clock", "input": {"zone": "Mars"}},
            {"type": "tool_result", "tool_use_id": "t2", "content": "no such", "is_error": True},
            {"type": "text", "text": "It is noon."},
        ],
        tool_runs={"t1": {"ms": 12}},
    )
    add(conversation, 3, "user", "And tomorrow?")
    add(conversation, 4, "assistant", "Tomorrow it", status="interrupted")
    add(conversation, 5, "user", "Again?")
    add(conversation, 6, "assistant", "", status="error", error="The API is *overloaded*.")
    add(conversation, 7, "user", "Never mind", status="cancelled")
    client.force_login(alice)
    text = download(client, conversation)
    assert "**Tool call** `clock` (12 ms), input:" in text
    assert '```json\n{\n  "zone": "UTC"\n}\n```' in text
    assert "**Tool result** of `clock`:\n\n```text\n12:00\n```" in text
    assert "**Tool error** of `clock`:\n\n```text\nno such\n```" in text
    assert text.index("Let me look.") < text.index("12:00") < text.index("It is noon.")
    assert "### Assistant · #4 · " in text and " · interrupted\n" in text
    assert "*Interrupted: stopped before it finished" in text
    assert "*Error: The API is \\*overloaded\\*.*" in text
    assert " · cancelled\n\n*Cancelled: taken back before it was sent.*" in text


def test_undone_boundaries_and_clearings_are_dividers_too(client, alice, conversation):
    add_turns(conversation, 3)
    Compaction.objects.create(
        conversation=conversation,
        trigger="auto",
        kind="clear",
        status="committed",
        cleared_before_seq=3,
        cleared_count=2,
        first_kept_seq=1,
        pre_tokens=9_000,
        post_tokens=2_000,
    )
    Compaction.objects.create(
        conversation=conversation,
        trigger="auto",
        status="undone",
        first_kept_seq=5,
        pre_tokens=3_000,
        post_tokens=1_000,
        summary="Old brief.",
        summariser="rules",
    )
    Compaction.objects.create(  # a failed one is not a boundary
        conversation=conversation, trigger="manual", status="failed", first_kept_seq=5
    )
    client.force_login(alice)
    text = download(client, conversation)
    assert text.index("**Cleared 2 tool results (auto) · 9,000 → 2,000 tokens**") < text.index(
        "### User · #3"
    )
    assert "(undone later: the model saw the whole messages again)" in text
    assert "written by rules (no model)" in text
    assert text.count("**Compaction (") == 1


# --- untrusted text stays in its place -----------------------------------------------------------


HOSTILE = [
    "# I am a title now\nand an open fence:\n```python\nprint('swallow everything')",
    "Setext heading\n==============\n~~~~\nopen tildes",
    "<pre>\nan unclosed raw block",
    "<!-- an unclosed comment",
    "```` four ticks ```` and ``` three, inline",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_markdown_inside_a_message_cannot_break_the_document(client, alice, conversation, hostile):
    add(conversation, 1, "user", hostile)
    add(conversation, 2, "assistant", hostile)
    add(conversation, 3, "user", "The last message.")
    Compaction.objects.create(
        conversation=conversation,
        trigger="auto",
        status="committed",
        first_kept_seq=3,
        pre_tokens=100,
        post_tokens=50,
        summary=hostile,
    )
    client.force_login(alice)
    parsed = outline(download(client, conversation))
    shown = [text for tag, text in parsed.headings if tag in ("h1", "h2", "h3")]
    assert shown[:3] == ["New conversation", "System prompt", "Transcript"]
    assert [text.split(" · ")[:2] for text in shown[3:]] == [
        ["User", "#1"],
        ["Assistant", "#2"],
        ["User", "#3"],
    ]
    assert "The last message." not in parsed.in_code
    assert "Compaction (auto)" not in parsed.in_code


def test_verbatim_parts_sit_in_fences_longer_than_any_backticks_inside(client, alice, conversation):
    conversation.system_prompt = "Answer with ````` five backticks\n```\nnever closed"
    conversation.save()
    add(
        conversation,
        1,
        "assistant",
        [{"type": "tool_result", "tool_use_id": "x", "content": "```` out ````"}],
    )
    client.force_login(alice)
    text = download(client, conversation)
    assert "``````text\nAnswer with ````` five backticks\n```\nnever closed\n``````" in text
    assert "`````text\n```` out ````\n`````" in text
    parsed = outline(text)
    assert ("h2", "Transcript") in parsed.headings


def test_inline_values_are_escaped():
    assert safe_markdown.inline("a *b*\n<i>#1</i>") == r"a \*b\* &lt;i&gt;\#1&lt;/i&gt;"
    assert safe_markdown.code_span("a`b") == "``a`b``"
    assert safe_markdown.code_span("`edge`") == "`` `edge` ``"


@pytest.mark.parametrize(
    "text",
    [
        'Hi <img src=x onerror="alert(1)"> there',
        "`<b>` makes <b>bold</b> text and `<i>` stays code",
        'A tag over two lines <span\nonclick="alert(1)">x</span>',
        "- item <script>alert(1)</script>\n- `<u>` then <u>under</u>",
        "A <!-- comment --> and an autolink <https://example.org>",
        "Many: " + "<b>x</b> `<b>` " * 100,
    ],
)
def test_raw_html_inside_a_paragraph_reads_as_text_and_code_spans_keep_theirs(text):
    """As the chat page shows it: a reader that passes raw HTML through gets no element from a
    message, while what sat in a code span is still code, unchanged."""
    html = _reader.render(safe_markdown.contained(text))
    for tag in ("<img", "<b>", "<span", "<script", "<u>", "<!--"):
        assert tag not in html
    assert html.count("<code>") == text.count("`") // 2
    for span in re.findall(r"`([^`]+)`", text):
        assert f"<code>{span.replace('<', '&lt;').replace('>', '&gt;')}</code>" in html
    assert '<a href="https://example.org">' in html or "example.org" not in text


def test_a_tag_the_quick_pass_misplaces_is_escaped_one_at_a_time():
    # An escaped backtick opens no code span, so the first <b> is a tag, not code.
    text = "A \\`<b>` and <b>x</b>"
    html = _reader.render(safe_markdown.contained(text))
    assert "<b>" not in html and "<code" not in html  # not code, and not fenced whole
    assert "`&lt;b&gt;` and &lt;b&gt;x&lt;/b&gt;" in html


def test_a_link_reference_in_one_message_links_nothing_in_another(client, alice, conversation):
    """Markdown's reference definitions are global to a document: each message's are text."""
    client.force_login(alice)
    add(conversation, 1, "user", "Where is it?\n\n[here]: https://evil.example/phish")
    add(conversation, 2, "assistant", "Look [here] or at [here][] – and `[here]: kept` as code.")
    add(conversation, 3, "user", "> - [docs]: https://evil.example/2\n\n```\n[x]: y\n```")
    html = _reader.render(download(client, conversation))
    assert "evil.example" in html and "<a " not in html  # shown as the text it is
    assert "<code>[here]: kept</code>" in html and "[x]: y" in html  # code keeps its text


@pytest.mark.parametrize(
    "text",
    ["[a]: /x\n[a]", "  [a]:\n  /x 'title'\n\n[a]", "[a\nb]: /x\n\n[a b]", "1. [a]: /x\n\n[a]"],
)
def test_reference_definitions_never_survive_containment(text):
    env: dict = {}
    _reader.parse(safe_markdown.contained(text), env)
    assert not env.get("references")


# --- cost and streaming --------------------------------------------------------------------------


def test_queries_do_not_grow_with_the_conversation(client, alice):
    counts = []
    for turns in (2, 150):
        conversation = Conversation.objects.create(owner=alice, model="demo")
        add_turns(conversation, turns)
        Compaction.objects.create(
            conversation=conversation,
            trigger="auto",
            status="committed",
            first_kept_seq=3,
            summary="Brief.",
        )
        with CaptureQueriesContext(connection) as queries:
            text = "".join(as_markdown.conversation_markdown(conversation))
        assert f"### Assistant · #{2 * turns}" in text
        counts.append(len(queries))
    # The boundaries, the branch on screen ((seq, parent) pairs), the pins, the messages by
    # .iterator().
    assert counts[0] == counts[1] == 4


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_it_streams_from_an_async_iterator(alice):
    conversation = await Conversation.objects.acreate(owner=alice, model="demo", title="Async")
    await Message.objects.acreate(
        conversation=conversation, seq=1, role="user", content=text_block("Hello there")
    )
    client = AsyncClient()
    await client.aforce_login(alice)
    response = await client.get(url(conversation))
    assert response.status_code == 200
    assert response.is_async  # streamed by the server, not gathered into a list first
    text = b"".join([chunk async for chunk in response.streaming_content]).decode()
    assert text.startswith("# Async\n") and "Hello there" in text
    assert re.search(r"### User · #1 · \d{4}-\d\d-\d\d \d\d:\d\d UTC\n\nHello there", text)


def test_batched_joins_pieces_into_chunks():
    assert list(downloads.batched(["ab", "cd", "e"], size=3)) == ["abcd", "e"]
    assert list(downloads.batched([], size=3)) == []


def test_pinned_messages_are_marked(client, alice, conversation):
    from chat.models import Pin

    client.force_login(alice)
    add(conversation, 1, "user", "Keep this: the budget is 4,000.")
    kept = add(conversation, 2, "assistant", "Noted.")
    Pin.objects.create(conversation=conversation, message=kept)
    text = download(client, conversation)
    assert "### Assistant · #2 · " in text and " · pinned\n\n*Pinned: carried verbatim" in text
    assert text.count(" · pinned") == 1  # message 1 is not
