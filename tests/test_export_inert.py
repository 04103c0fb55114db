"""export.md is inert in any Markdown reader: a conversation full of hostile text, rendered by
Python-Markdown, markdown-it (raw HTML on), mistune (raw HTML on) and commonmark, gives no
script, no event handler, no iframe and no link or source that is not http(s) or mailto."""

from __future__ import annotations

from html.parser import HTMLParser

import commonmark
import markdown
import mistune
import pytest
from markdown_it import MarkdownIt

from chat.exports import as_markdown, safe_markdown
from chat.models import Message
from compaction.models import Compaction
from tests.transcripts import text_block

pytestmark = pytest.mark.django_db

HOSTILE = [
    "<script>alert(1)</script>",
    "Inline <script>alert(2)</script> in a sentence",
    "\\<script>alert(3)\\</script> escaped the CommonMark way",
    '<img src=x onerror="alert(4)">',
    "A picture <img src=x onerror=alert(5)> mid-line",
    '<div onmouseover="alert(6)">hover me</div>',
    '<iframe srcdoc="&lt;script&gt;alert(7)&lt;/script&gt;"></iframe>',
    "[click](javascript:alert(8)) and [caps](JaVaScRiPt:alert(9))",
    "[entity](&#106;avascript:alert(10)) and [hex](&#x6A;avascript:alert(11))",
    "![image](javascript:alert(12)) and ![data](data:text/html;base64,PHNjcmlwdD4=)",
    "An autolink <javascript:alert(13)> and <vbscript:msgbox(14)>",
    "[ref][evil] and [evil]\n\n[evil]: javascript:alert(15)",
    "<!-- a comment hiding <script>alert(16)</script> -->",
    "<!-- an unclosed comment\n\n<script>alert(17)</script>",
    "```\n<script>alert(18)</script>\n````\n<script>alert(19)</script>\n```",
    "~~~\n```\n~~~\n<img src=x onerror=alert(20)>\n```",
    "- a list\n\n      <script>alert(21)</script>\n\n  ```\n  <img src=x onerror=alert(22)>\n  ```",
    "> quoted\n> ```\n> <iframe src=javascript:alert(23)></iframe>\n> ```",
    "`x\n<script>alert(24)</script>`",
    "A heading {: onclick=alert(25) }\n\n# Title {: onmouseover=alert(26) }",
    "```python {onclick=alert(27)}\nprint(1)\n```",
    '<a href="javascript:alert(28)">a link</a> and <svg onload=alert(29)>',
    "<details open ontoggle=alert(30)><summary>x</summary></details>",
    "&lt;script&gt;alert(31)&lt;/script&gt; as entities",
    "<scr<script>ipt>alert(32)</script>",
    '<math><mi xlink:href="javascript:alert(33)">x</mi></math>',
    "[a](<javascript:alert(34)>) [b](javascript&#58;alert(35))",
    "<https://example.org/?a=1&b=2> stays a link, <mailto:a@example.org> too",
]


def _python_markdown(text: str) -> str:
    return markdown.markdown(text, extensions=["extra"])  # fences, tables, attribute lists


def _python_markdown_fences(text: str) -> str:
    return markdown.markdown(text, extensions=["fenced_code"])


READERS = {
    "python-markdown": _python_markdown,
    "python-markdown-plain": markdown.markdown,  # no extensions: it knows no fences
    "python-markdown-fences": _python_markdown_fences,
    "markdown-it": MarkdownIt("commonmark", {"html": True}).render,
    "mistune": mistune.create_markdown(escape=False),
    "commonmark": commonmark.commonmark,
}


class Live(HTMLParser):
    """What a browser would run or load from the rendered HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "iframe", "object", "embed", "frame", "svg", "math"):
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=>")
            if name in ("href", "src", "srcdoc", "xlink:href", "action", "formaction"):
                self.links.append(value or "")
                squeezed = "".join((value or "").split()).lower()
                if name == "srcdoc" or not squeezed.startswith(("http://", "https://", "mailto:")):
                    self.found.append(f"<{tag} {name}={value!r}>")


def live(html: str) -> Live:
    parser = Live()
    parser.feed(html)
    parser.close()
    return parser


def hostile_export(conversation) -> str:
    conversation.title = "<script>alert('title')</script> [t](javascript:alert(0))"
    conversation.system_prompt = "\n\n".join(HOSTILE)
    conversation.save()
    seq = 0
    for text in HOSTILE:
        for role in ("user", "assistant"):
            seq += 1
            Message.objects.create(
                conversation=conversation, seq=seq, role=role, content=text_block(text)
            )
    seq += 1
    Message.objects.create(
        conversation=conversation,
        seq=seq,
        role="assistant",
        status="error",
        error="<img src=x onerror=alert('error')>",
        content=[
            {"type": "tool_use", "id": "t1", "name": "<b onclick=x>", "input": {"q": HOSTILE[0]}},
            {"type": "tool_result", "tool_use_id": "t1", "content": "\n\n".join(HOSTILE)},
        ],
    )
    Compaction.objects.create(
        conversation=conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=3,
        pre_tokens=10,
        post_tokens=5,
        summary="\n\n".join(HOSTILE),
        summariser="model",
        instructions="<script>alert('instructions')</script>",
    )
    return "".join(as_markdown.conversation_markdown(conversation))


@pytest.mark.parametrize("reader", READERS)
def test_a_hostile_export_is_inert_in_every_reader(conversation, reader):
    html = READERS[reader](hostile_export(conversation))
    parsed = live(html)
    assert parsed.found == []
    assert "https://example.org/?a=1&b=2" in parsed.links  # a plain http(s) link stays one


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("reader", READERS)
def test_each_hostile_message_is_inert_alone(reader, text):
    assert live(READERS[reader](safe_markdown.contained(text))).found == []


def test_html_is_written_as_entities_and_reads_as_the_text_it_was():
    text = "Compare a < b && c > d, then <b>bold</b> and \\<i>"
    written = safe_markdown.contained(text)
    assert "&lt;b>bold&lt;/b>" in written and "\\<" not in written
    for reader in READERS.values():
        html = reader(written)
        assert "a &lt; b &amp;&amp; c &gt; d" in html or "a &lt; b &amp;&amp; c > d" in html
        assert "&lt;b&gt;bold&lt;/b&gt;" in html or "&lt;b>bold&lt;/b>" in html


def test_fences_are_longer_than_any_run_of_backticks_or_tildes_inside():
    assert safe_markdown.verbatim("a\n~~~~~~\n````", "text").startswith("```````text\n")
    # CommonMark closes a fence with a longer run; other readers only with the same one.
    rewritten = safe_markdown.contained("````\n```\nstill code\n`````\nafter <b>")
    assert rewritten.startswith("````\n```\nstill code\n````\n")
    for name, reader in READERS.items():
        html = reader(rewritten)
        if name != "python-markdown-plain":  # which knows no fences, and shows them as text
            code, rest = html.split("</pre>")
            assert html.count("<pre>") == 1 and "still code" in code and "after &lt;b" in rest
        assert "<b>" not in html


def test_code_a_fenceless_reader_would_run_is_indented_even_after_a_list(conversation):
    text = "```html\n<script>alert(1)</script>\n[x](javascript:alert(2))\n```"
    assert safe_markdown.verbatim("a < b", "text") == "    a < b"
    assert safe_markdown.verbatim("[x](javascript:y)") == "    [x](javascript:y)"
    assert safe_markdown.verbatim('{"a": [1, 2]}', "json").startswith("```json")
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="assistant",
        content=[{"type": "text", "text": "- a list"}, {"type": "text", "text": text}],
    )
    export = "".join(as_markdown.conversation_markdown(conversation))
    for reader in READERS.values():
        html = reader(export)
        assert live(html).found == []
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html.split("<pre><code>")[-1]


def test_plain_links_and_code_stay_readable():
    text = "See [the docs](https://example.org/a_b) or mail [me](mailto:a@example.org).\n\n`<b>`"
    for reader in READERS.values():
        html = reader(safe_markdown.contained(text))
        assert '<a href="https://example.org/a_b">the docs</a>' in html
        assert '<a href="mailto:a@example.org">me</a>' in html
        assert "<code>&lt;b&gt;</code>" in html
