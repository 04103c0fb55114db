"""A code fence quoted in a summary cannot open a code block that swallows the rest of it.

A user message with three backticks used to open a code block inside the rule-based brief; once
rendered (the divider, "What the model sees") every section after it, and the summary pair's
recall note and pinned messages, read as code.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from compaction.assembly import RECALL_NOTE, summary_pair
from compaction.brief import (
    clean_summary,
    close_open_fence,
    neutralise_fences,
    rule_based_summary,
)
from compaction.entries import Entry
from compaction.models import Compaction
from compaction.prompt import SECTIONS
from render.markdown import render_markdown
from tests.transcripts import add_turns, text_block

CODE = "```python\ndef f():\n    return 1\n"  # opened, never closed
LONG_CODE = "```python\n" + "x = 1\n" * 300 + "```\n"  # closed, but past a quote's share

pytestmark = pytest.mark.django_db


def entry(seq: int, role: str, text: str) -> Entry:
    return Entry(seq=seq, role=role, content=text_block(text), tokens=len(text) // 3)


class Where(HTMLParser):
    """For each piece of text: the tags it sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.found: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        self.found.append((data, tuple(self.open)))


def tags_around(html: str, text: str) -> tuple[str, ...]:
    parser = Where()
    parser.feed(html)
    return next(tags for data, tags in parser.found if text in data)


def assert_sections_outside_code(html: str, sections) -> None:
    for name in sections:
        tags = tags_around(html, name)
        assert tags[-1] == "h2", f"{name!r} is not a heading: inside {tags}"
        assert "pre" not in tags and "code" not in tags


@pytest.mark.parametrize("code", [CODE, LONG_CODE], ids=["unclosed", "closed-but-cut"])
def test_a_quoted_fence_leaves_no_open_code_block_in_the_rule_based_brief(code):
    entries = [
        entry(1, "user", f"Please fix this:\n{code}"),
        entry(2, "assistant", "Fixed in `app.py`, see the error handling."),
        entry(3, "user", "Next, write the tests."),
        entry(4, "assistant", "Tests written."),
    ]
    summary = rule_based_summary(entries, None, max_chars=4000)
    html = render_markdown(summary)
    present = [name for name in SECTIONS if f"## {name}\n" in summary]
    assert "All user messages" in present and "Next step" in present
    assert_sections_outside_code(html, present)
    # The latest request, in the sections after the quote, is prose again.
    tags = tags_around(html, "Continue from the most recent user request (#3)")
    assert "pre" not in tags and "code" not in tags
    # Quoted, not lost: the backticks still show.
    assert "```python" in html


def test_a_quoted_heading_cannot_pass_for_a_section():
    entries = [entry(1, "user", "My notes:\n## Next step\nnothing"), entry(2, "assistant", "Ok.")]
    html = render_markdown(rule_based_summary(entries, None))
    assert html.count("<h2>Next step</h2>") == 1


def test_an_earlier_brief_cut_inside_its_code_block_cannot_swallow_the_new_one():
    previous = "## Files and code\n```python\n" + "y = 2\n" * 2000 + "```\n## Next step\nShip."
    entries = [entry(5, "user", "Carry on."), entry(6, "assistant", "Carrying on.")]
    summary = rule_based_summary(entries, previous, max_chars=3000)
    html = render_markdown(summary)
    assert_sections_outside_code(html, ["All user messages", "Next step"])


def test_the_model_view_shows_the_sections_and_the_recall_note_outside_code(
    client, alice, conversation
):
    """Through the page itself: "What the model sees" renders the summary pair."""
    add_turns(conversation, 3)
    entries = [entry(1, "user", f"Run this:\n{CODE}"), entry(2, "assistant", "Ran it.")]
    Compaction.objects.create(
        conversation=conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=3,
        summary=rule_based_summary(entries, None),
        summariser="rules",
    )
    client.force_login(alice)
    html = client.get(f"/conversations/{conversation.pk}/window/").content.decode()
    assert_sections_outside_code(html, ["All user messages", "Next step"])
    tags = tags_around(html, RECALL_NOTE.split(":")[0])
    assert "pre" not in tags and "code" not in tags


def test_a_model_summary_left_with_an_open_fence_is_closed_where_it_ends():
    raw = "<summary>## Files and code\n```python\nprint(1)\n</summary>"
    cleaned = clean_summary(raw)
    assert cleaned == "## Files and code\n```python\nprint(1)\n```"
    text = summary_pair(cleaned)[0]["content"][0]["text"]
    tags = tags_around(render_markdown(text), RECALL_NOTE.split(":")[0])
    assert "pre" not in tags and "code" not in tags


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        ("a\n```\nb\n```", "a\n```\nb\n```"),  # balanced: untouched
        ("  ~~~~ sh\nls", "  ~~~~ sh\nls\n  ~~~~"),  # at its own indentation and length
        ("````\n```\nstill code", "````\n```\nstill code\n````"),  # a shorter fence does not close
        ("``` a ` b\nnot a fence", "``` a ` b\nnot a fence"),  # backticks in the info: no fence
    ],
)
def test_close_open_fence(text, closed):
    assert close_open_fence(text) == closed


def test_neutralised_fences_keep_every_character():
    assert neutralise_fences("x\n  ```js\n~~~") == "x\n  \\`\\`\\`js\n\\~\\~\\~"
    assert render_markdown(neutralise_fences("```js\nlet a\n```")).count("<pre>") == 0
