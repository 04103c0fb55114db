"""Tool use through the real SDK against the local SSE server: the turn loops over model calls,
runs the tools, answers every call (errors included) and stores each step as the API's blocks.
The fake server refuses any request the real API would (tool pairing, roles, empty blocks)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from chat.models import Message
from chat.window_loading import load_window
from providers.tokens import MESSAGE_OVERHEAD
from providers.usage_columns import COLUMNS
from support.messages_api import stripped, system_text
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for
from tools import registry as tools_registry

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


def send(text: str) -> str:
    return json.dumps({"action": "send", "message": text})


async def turn(user, conversation, text: str, reply_seq: int) -> list[str]:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send(text))
    frames = await receive_until(ws, shows(reply_seq, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.disconnect()
    return frames


async def reply(conversation, seq: int) -> Message:
    return await Message.objects.aget(conversation=conversation, seq=seq)


async def plant(conversation, *texts):
    for seq, text in enumerate(texts, start=1):
        await Message.objects.acreate(
            conversation=conversation,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=[{"type": "text", "text": text}],
        )


def tool_names(request: dict) -> list[str]:
    return [t["name"] for t in request.get("tools", [])]


async def test_the_model_searches_its_history_and_answers_with_what_it_found(
    alice, conversation, fake_anthropic
):
    await plant(conversation, "The staging password rotates on Fridays.", "Noted.")
    fake_anthropic.enqueue_tool_calls(
        ["Let me look that up."],
        [("toolu_1", "search_history", ['{"query": "when does the ', 'password rotate"}'])],
    )
    fake_anthropic.enqueue_reply(["It rotates on Fridays (#1)."])
    frames = await turn(alice, conversation, "When does the staging password rotate?", 4)

    first, second = fake_anthropic.requests
    assert tool_names(first) == ["search_history", "read_messages", "read_attachment"]
    assert first["tools"] == second["tools"]  # the same bytes every step
    # The second step carries the first one's blocks and the result, paired by id.
    assistant, result = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]
    assert assistant["content"][1]["input"] == {"query": "when does the password rotate"}
    assert result["role"] == "user"
    (block,) = result["content"]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_1"
    assert "is_error" not in block
    assert "#1 · user" in block["content"] and "**password**" in block["content"].lower()
    assert fake_anthropic.invalid == []

    saved = await reply(conversation, 4)
    assert saved.status == "complete"
    assert [b["type"] for b in saved.content] == ["text", "tool_use", "tool_result", "text"]
    assert saved.content[-1]["text"] == "It rotates on Fridays (#1)."
    assert set(saved.tool_runs) == {"toolu_1"} and saved.tool_runs["toolu_1"]["ms"] >= 0
    # Billed for both steps; the window after the turn is what the last step's input held
    # (every step before it) plus its output, and the next turn's count anchors on it.
    counts = fake_anthropic.counts
    for column, key in COLUMNS.items():
        if key != "output_tokens":
            assert getattr(saved, column) == sum(c[key] for c in counts)
    last_input = sum(counts[1].values())
    assert last_input < saved.window_tokens < last_input + saved.output_tokens
    state = await sync_to_async(load_window)(conversation)
    assert state.anchor[:2] == (4, saved.window_tokens + MESSAGE_OVERHEAD)
    await conversation.arefresh_from_db()
    assert conversation.usage == saved.usage  # the running total: this turn, both steps
    # The page showed the call running, then answered, then the final reply with the call.
    page = "".join(frames)
    assert 'class="tool-call running" data-tool="search_history"' in page
    assert 'class="tool-call done" data-tool="search_history"' in frames[-1]


async def test_parallel_calls_are_answered_in_one_message_and_errors_are_marked(
    alice, conversation, fake_anthropic
):
    await plant(conversation, "alpha", "beta")
    fake_anthropic.enqueue_tool_calls(
        [],
        [
            ("toolu_a", "read_messages", {"from_seq": 1, "to_seq": 2}),
            ("toolu_b", "read_messages", {"from_seq": 5, "to_seq": 2}),
            ("toolu_c", "rm_rf", {"path": "/"}),
        ],
    )
    fake_anthropic.enqueue_reply(["Done."])
    await turn(alice, conversation, "read back", 4)

    assert len(fake_anthropic.requests) == 2 and fake_anthropic.invalid == []
    results = fake_anthropic.requests[1]["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in results] == ["toolu_a", "toolu_b", "toolu_c"]
    ok, backwards, unknown = results
    assert "is_error" not in ok and "#1 · user" in ok["content"] and "beta" in ok["content"]
    assert backwards["is_error"] is True and "before from_seq" in backwards["content"]
    assert unknown["is_error"] is True and "no tool named 'rm_rf'" in unknown["content"]
    saved = await reply(conversation, 4)
    assert [b["type"] for b in saved.content] == [
        "tool_use", "tool_use", "tool_use", "tool_result", "tool_result", "tool_result", "text"
    ]  # fmt: skip


async def test_the_step_limit_ends_the_turn_with_every_call_answered(
    alice, conversation, fake_anthropic, settings
):
    settings.TOOL_STEP_LIMIT = 2
    for i in range(2):
        fake_anthropic.enqueue_tool_calls(
            [f"step {i}"], [(f"toolu_{i}", "search_history", {"query": "anything"})]
        )
    await turn(alice, conversation, "loop forever", 2)

    assert len(fake_anthropic.requests) == 2  # the limit is on model calls
    saved = await reply(conversation, 2)
    assert saved.status == "complete"
    assert "TOOL_STEP_LIMIT" in saved.error
    last = saved.content[-1]
    assert last["type"] == "tool_result" and last["tool_use_id"] == "toolu_1"
    assert last["is_error"] is True and "limit" in last["content"]

    # The next turn's window is valid: the stored turn expands into paired messages.
    fake_anthropic.enqueue_reply(["ok"])
    await turn(alice, conversation, "thanks", 4)
    assert fake_anthropic.invalid == []
    messages = fake_anthropic.requests[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    # The unanswered-by-the-model last result and the new message share one user message.
    assert [b["type"] for b in messages[-1]["content"]] == ["tool_result", "text"]


async def test_stop_during_a_later_step_keeps_every_step_and_the_text_so_far(
    alice, conversation, fake_anthropic
):
    fake_anthropic.enqueue_tool_calls(
        ["Searching."], [("toolu_1", "search_history", {"query": "x"})]
    )
    fake_anthropic.enqueue_hang(5, chunks=50)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("look it up"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f and "word0" in f, timeout=10)
    await ws.send_to(text_data=json.dumps({"action": "stop"}))
    await receive_until(ws, shows(2, "interrupted"), timeout=10)
    await settle(conversation.pk)
    await ws.disconnect()

    saved = await reply(conversation, 2)
    assert saved.status == "interrupted"
    kinds = [b["type"] for b in saved.content]
    assert kinds[:3] == ["text", "tool_use", "tool_result"] and kinds[-1] == "text"
    assert saved.content[-1]["text"].startswith("word0")
    # The finished step was billed and is counted; a stopped turn anchors nothing.
    assert saved.input_tokens == fake_anthropic.counts[0]["input_tokens"] > 0
    assert saved.window_tokens is None


async def test_stop_while_a_tool_runs_answers_the_call_not_run(
    alice, conversation, fake_anthropic, settings, tmp_path
):
    # A tool that takes its time: a real MCP server's (tests/slow_mcp_server.py), which says it
    # has started by creating a file.
    server = Path(__file__).with_name("slow_mcp_server.py")
    settings.MCP_SERVERS = {"slow": {"command": sys.executable, "args": [str(server)]}}
    settings.MCP_TIMEOUT_SECONDS = 30
    started = tmp_path / "started"

    fake_anthropic.enqueue_tool_calls([], [("toolu_1", "slow__wait", {"started": str(started)})])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("slow tool"))
    async with asyncio.timeout(30):
        while not started.exists():  # the MCP server, another process, creates it
            await asyncio.sleep(0.05)
    await ws.send_to(text_data=json.dumps({"action": "stop"}))
    await receive_until(ws, shows(2, "interrupted"), timeout=10)
    await settle(conversation.pk)
    await ws.disconnect()

    saved = await reply(conversation, 2)
    assert saved.status == "interrupted"
    assert [b["type"] for b in saved.content] == ["tool_use", "tool_result"]
    assert saved.content[1]["is_error"] is True and "stopped" in saved.content[1]["content"]
    assert len(fake_anthropic.requests) == 1


async def test_tool_output_is_escaped_in_the_page(alice, conversation, fake_anthropic):
    await plant(conversation, "<img src=x onerror=alert(1)> payload", "ok")
    fake_anthropic.enqueue_tool_calls(
        [], [("toolu_1", "read_messages", {"from_seq": 1, "to_seq": 1})]
    )
    fake_anthropic.enqueue_reply(["fine"])
    frames = await turn(alice, conversation, "read it", 4)
    assert "<img src=x" not in frames[-1]
    assert "&lt;img src=x onerror=alert(1)&gt;" in frames[-1]


async def test_the_offline_demo_recalls_a_compacted_fact_through_search_history(
    alice, conversation
):
    from compaction.models import Compaction
    from providers import registry
    from providers.demo import DemoClient

    registry.register(DemoClient())
    await plant(
        conversation,
        "The vault combination is 31-17-42.",
        "Noted.",
        "Let us talk about lunch.",
        "Sure.",
    )
    # The first two messages are compacted away: only the summary (which lost it) remains.
    await Compaction.objects.acreate(
        conversation=conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=3,
        summary="The user shared some numbers earlier.",
        pre_tokens=100,
        post_tokens=50,
        summariser="rules",
    )
    frames = await turn(alice, conversation, "What is the vault combination?", 6)

    saved = await reply(conversation, 6)
    kinds = [b["type"] for b in saved.content]
    assert kinds == ["text", "tool_use", "tool_result", "text"]
    assert saved.content[1]["name"] == "search_history"
    assert "#1 · user" in saved.content[2]["content"]
    assert "message #1" in saved.content[-1]["text"] and "31-17-42" in saved.content[-1]["text"]
    assert 'data-tool="search_history"' in frames[-1]


async def test_the_offline_demo_looks_in_the_users_other_conversations_when_this_one_has_nothing(
    alice, bob, conversation
):
    from chat.models import Conversation
    from providers import registry
    from providers.demo import DemoClient

    registry.register(DemoClient())
    earlier = await Conversation.objects.acreate(owner=alice, model="demo", title="Lighthouse trip")
    await plant(earlier, "The lighthouse keeper is called Morwenna Trask.", "Noted.")
    theirs = await Conversation.objects.acreate(owner=bob, model="demo", title="Bob's trip")
    await plant(theirs, "The lighthouse keeper is called Bartholomew Quill.", "Noted.")
    await plant(conversation, "Hello there.", "Hello.")

    await turn(alice, conversation, "Who is the lighthouse keeper?", 4)

    saved = await reply(conversation, 4)
    calls = [b["input"] for b in saved.content if b["type"] == "tool_use"]
    assert [c.get("scope", "conversation") for c in calls] == ["conversation", "all"]
    answer = saved.content[-1]["text"]
    assert f"conversation {earlier.pk} “Lighthouse trip”" in answer and "Morwenna Trask" in answer
    assert "Bartholomew" not in str(saved.content)


def test_the_demo_does_not_search_when_its_window_answers_or_no_tool_is_offered():
    from providers.demo import compose

    window = [
        {"role": "user", "content": "The colour of the boat is blue."},
        {"role": "assistant", "content": "Ok."},
    ]
    asked = [*window, {"role": "user", "content": "What colour is the boat?"}]
    assert compose("", asked, can_search=True)[1] is None  # its window answers
    unknown = [*window, {"role": "user", "content": "Where is the lighthouse?"}]
    assert compose("", unknown, can_search=True)[1].input["query"] == "Where is the lighthouse?"
    assert compose("", unknown, can_search=False)[1] is None


async def test_a_compaction_lands_between_two_steps_when_the_results_fill_the_window(
    alice, conversation, fake_anthropic, settings
):
    from compaction.models import Compaction
    from compaction.prompt import PREFIX_MARKER
    from providers.tokens import estimate_content

    settings.CONTEXT_BUDGET_TOKENS = 4000  # reserve 400, tail 1,000
    settings.SUMMARY_REVISES_FACTS = False  # three requests: no revision of the summary's facts
    for seq in range(1, 5):  # about 670 estimated tokens each: the window fits, with room
        content = [
            {"type": "text", "text": f"Turn {seq}: " + " ".join(f"note{i}" for i in range(250))}
        ]
        await Message.objects.acreate(
            conversation=conversation,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=content,
            tokens=estimate_content(content),
        )
    # Reading them all back (about 2,700 tokens) leaves no room for the next step.
    fake_anthropic.enqueue_tool_calls(
        [], [("toolu_1", "read_messages", {"from_seq": 1, "to_seq": 4})]
    )
    fake_anthropic.enqueue_reply(["<summary>## Primary request and intent\nNotes.</summary>"])
    fake_anthropic.enqueue_reply(["Read it all."])
    frames = await turn(alice, conversation, "read the notes back to me", 6)

    step1, summary_request, step2 = fake_anthropic.requests
    # The previous step has just cached the window: the summary request reads it, asking for
    # the brief after the turn's message (the same system, tools and messages before it).
    assert system_text(summary_request) == system_text(step1) == "Be brief."
    assert summary_request["tools"] == step1["tools"]
    assert stripped(summary_request["messages"][:-1]) == stripped(step1["messages"][:-1])
    asked = summary_request["messages"][-1]["content"]
    assert asked[0]["text"] == "read the notes back to me"
    assert asked[1]["text"].startswith(PREFIX_MARKER) and "#1 user: 'Turn 1:" in asked[1]["text"]
    assert fake_anthropic.counts[1]["cache_read_input_tokens"] > 0
    assert fake_anthropic.invalid == []
    # The second step goes on in the compacted window: the summary, then this very turn whole.
    head = json.dumps(step2["messages"][0])
    assert "<summary>" in head and "Notes." in head
    assert step2["messages"][-3]["content"][-1]["text"] == "read the notes back to me"
    assert step2["messages"][-1]["content"][0]["tool_use_id"] == "toolu_1"
    assert len(step2["messages"]) == 5  # summary pair, the message, the call, its result
    row = await Compaction.objects.aget(conversation=conversation)
    assert (row.status, row.trigger, row.first_kept_seq) == ("committed", "auto", 5)
    saved = await reply(conversation, 6)
    assert saved.status == "complete" and saved.content[-1]["text"] == "Read it all."
    assert saved.window_boundary_id == row.pk  # its usage describes the compacted window
    assert "Compacted (auto)" in "".join(frames)


def test_saving_the_switches_keeps_those_of_a_server_that_is_down():
    disabled = ["time__convert_time", "fetch__fetch"]  # fetch's server is not running now
    listed = {"search_history", "read_messages", "time__convert_time", "time__get_current_time"}
    enabled = {"search_history", "time__convert_time"}

    off = tools_registry.switched_off(disabled, listed, enabled)

    assert off == ["fetch__fetch", "read_messages", "time__get_current_time"]
