"""How text becomes HTML: a person's message as typed with its code fences, a tool's result as
markdown that keeps its lines (JSON as it came), and "What the model sees" with its summary
unwrapped and each tool call beside its result. Everything sanitised."""

from __future__ import annotations

from compaction.assembly import SUMMARY_INTRO, Window, summary_pair, summary_parts
from render.bubbles import blocks
from render.markdown import render_typed
from render.window_view import window_messages


def test_a_persons_fence_is_a_code_block_and_the_rest_is_as_typed():
    html = render_typed(
        "Look:\n\n```python\ndef f():\n    return 1\n```\n  indented *not em*\n# not a heading"
    )
    assert '<pre><code class="language-python">def f():\n    return 1\n</code></pre>' in html
    assert "<p>  indented *not em*\n# not a heading</p>" in html  # pre-wrap keeps it
    assert "```" not in html and "<em>" not in html and "<h1>" not in html


def test_a_persons_text_stays_inert():
    html = render_typed('<img src=x onerror=alert(1)>\n```"><script>\n<b>x</b>\n```')
    assert "<img" not in html and "<script" not in html and "<b>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert render_typed("a\n~~~\nleft open") == "<p>a</p><pre><code>left open</code></pre>"
    assert render_typed("") == ""


def test_a_tool_result_is_markdown_with_its_lines_and_json_as_it_came():
    call = {"type": "tool_use", "id": "t", "name": "search_history", "input": {"query": "x"}}
    text = "2 best matches:\n#1 · user\n  the **blue** submarine\n<script>x</script>"
    html = blocks([call, {"type": "tool_result", "tool_use_id": "t", "content": text}])
    result = html.split('<p class="tool-label">Result</p>')[1]
    assert "<strong>blue</strong>" in result and "**" not in result
    assert "2 best matches:<br" in result and "<script" not in result
    # A snippet cut mid-code-span does not swallow the next line's marks.
    cut = "#1 · user\n  he wrote ```python for x\n#2 · user\n  the **blue** one ``` cut"
    html = blocks([call, {"type": "tool_result", "tool_use_id": "t", "content": cut}])
    assert "<strong>blue</strong>" in html and "```python for x" in html
    data = '{"time": "12:00",\n  "zone": "UTC"}'
    html = blocks([call, {"type": "tool_result", "tool_use_id": "t", "content": data}])
    assert '<pre class="tool-result">{&quot;time&quot;: &quot;12:00&quot;,\n  &quot;zone' in html


def test_the_summary_message_is_read_back_into_its_parts():
    text = summary_pair("Said </summary> then <summary>.\nMore.")[0]["content"][0]["text"]
    intro, summary, rest = summary_parts(text)
    assert intro == SUMMARY_INTRO
    assert summary == "Said &lt;/summary> then &lt;summary>.\nMore."  # neutralised, as sent
    assert rest.startswith("The summarised messages are kept")
    assert summary_parts("Hello <summary>x</summary>") is None


def test_the_model_view_unwraps_the_summary_and_pairs_each_call_with_its_result():
    call = {"type": "tool_use", "id": "t1", "name": "search_history", "input": {"q": "a"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "found **it**"}
    messages = [
        *summary_pair("The user asked about TOML."),
        {"role": "user", "content": [{"type": "text", "text": "where is it?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Searching."}, call]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [{"type": "text", "text": "Here."}]},
    ]
    shown = window_messages(Window(system="s", messages=messages, head=2))
    assert [(s.role, s.summary) for s in shown] == [
        ("user", True),
        ("assistant", True),
        ("user", False),
        ("assistant", False),
        ("assistant", False),
    ]
    head = shown[0].html
    assert "<summary>" not in head and "&lt;summary&gt;" not in head
    assert 'class="window-summary"' in head and "The user asked about TOML." in head
    paired = shown[3].html
    assert 'class="tool-call done"' in paired and "found <strong>it</strong>" in paired
    assert 'class="text markdown typed"' in shown[2].html  # a person's text, as typed
