"""Prompt caching: every request marks its stable layers (system and tools, the summary pair,
the latest message), within the API's limit of four; between two compactions each request's
prefix is byte-identical to the one before, so the local server (which keeps a prompt cache by
prefix, as the API does) reports it read from the cache."""

from __future__ import annotations

import copy
import json

import pytest

from chat.models import Message
from compaction.models import Compaction
from providers.caching import EPHEMERAL, with_breakpoints
from support.messages_api import breakpoints, stripped, system_text
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for

SUMMARY_PAIR = [
    {"role": "user", "content": [{"type": "text", "text": "summary"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "ack"}]},
]


def test_the_stable_layers_are_marked_and_the_window_is_not_changed():
    messages = [*SUMMARY_PAIR, {"role": "user", "content": "latest"}]
    before = copy.deepcopy(messages)
    system, marked, tools = with_breakpoints("sys", messages, [{"name": "t"}], head=2, latest=True)
    assert system == [{"type": "text", "text": "sys", "cache_control": EPHEMERAL}]
    assert tools == [{"name": "t"}]  # the system mark covers the tools before it
    assert marked[1]["content"][-1]["cache_control"] == EPHEMERAL
    assert marked[2]["content"] == [{"type": "text", "text": "latest", "cache_control": EPHEMERAL}]
    assert "cache_control" not in marked[0]["content"][0]
    assert messages == before
    body = {"system": system, "messages": marked, "tools": tools}
    assert breakpoints(body) == 3


def test_without_a_system_prompt_the_last_tool_carries_the_mark():
    system, marked, tools = with_breakpoints(
        "",
        [{"role": "user", "content": "hi"}],
        [{"name": "a"}, {"name": "b"}],
        head=0,
        latest=False,
    )
    assert system == "" and tools[-1]["cache_control"] == EPHEMERAL
    assert breakpoints({"system": system, "messages": marked, "tools": tools}) == 1


# --- through turns ----------------------------------------------------------------------------


async def turns(user, conversation, texts: list[str], first_reply: int = 2) -> None:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    for i, text in enumerate(texts):
        await ws.send_to(text_data=json.dumps({"action": "send", "message": text}))
        await receive_until(ws, shows(first_reply + 2 * i, "complete"), timeout=15)
        await settle(conversation.pk)
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_between_compactions_each_request_extends_the_last_and_reads_it_from_cache(
    alice, conversation, fake_anthropic
):
    fake_anthropic.cache.min_tokens = 1  # the real API's minimum is about a thousand tokens
    await turns(alice, conversation, ["first question", "second one", "third one"])
    requests = fake_anthropic.requests
    assert fake_anthropic.invalid == []
    for earlier, later in zip(requests, requests[1:], strict=False):
        assert breakpoints(later) == 2  # system (with the tools before it), latest message
        assert later["tools"] == earlier["tools"] and system_text(later) == system_text(earlier)
        n = len(earlier["messages"])
        assert stripped(later["messages"][:n]) == stripped(earlier["messages"])
    replies = [m async for m in Message.objects.filter(role="assistant").order_by("seq")]
    assert replies[0].usage.cache_read_input_tokens == 0
    assert replies[0].usage.cache_creation_input_tokens > 0
    for reply in replies[1:]:
        assert reply.usage.cache_read_input_tokens > 0  # everything up to the last request


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_after_a_compaction_the_summary_pair_is_a_layer_and_tool_steps_move_the_mark(
    alice, conversation, fake_anthropic
):
    for seq, role in ((1, "user"), (2, "assistant")):
        await Message.objects.acreate(
            conversation=conversation,
            seq=seq,
            role=role,
            content=[{"type": "text", "text": "I like herons." if seq == 1 else "Noted."}],
        )
    await Compaction.objects.acreate(
        conversation=conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=3,
        summary="Earlier: the user likes herons.",
    )
    fake_anthropic.enqueue_tool_calls([], [("toolu_1", "search_history", {"query": "herons"})])
    fake_anthropic.enqueue_reply(["Herons, yes."])
    await turns(alice, conversation, ["what birds do I like?"], first_reply=4)
    step1, step2 = fake_anthropic.requests
    assert fake_anthropic.invalid == []
    for request in (step1, step2):
        assert breakpoints(request) == 3
        assert request["messages"][1]["content"][-1]["cache_control"] == EPHEMERAL  # the pair
        assert request["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL  # latest
    assert step2["messages"][-1]["content"][-1]["type"] == "tool_result"
    assert stripped(step2["messages"][: len(step1["messages"])]) == stripped(step1["messages"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_a_summary_request_marks_only_its_fixed_instructions(
    alice, conversation, fake_anthropic, settings
):
    from asgiref.sync import sync_to_async

    from tests.transcripts import add_turns

    settings.CONTEXT_BUDGET_TOKENS = 2000
    await sync_to_async(add_turns)(conversation, 8)
    fake_anthropic.enqueue_reply(["<summary>## Primary request and intent\nTurns.</summary>"])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "compact", "instructions": ""}))
    await receive_until(ws, lambda f: "Compacted (manual)" in f)
    await settle(conversation.pk)
    await ws.disconnect()
    assert fake_anthropic.requests  # one per part of the span, when it is folded in parts
    for summary in fake_anthropic.requests:
        assert breakpoints(summary) == 1 and summary["system"][0]["cache_control"] == EPHEMERAL
    assert fake_anthropic.invalid == []


def test_the_local_server_refuses_what_the_api_refuses():
    from support.messages_api import CacheRuleError, PromptCache

    cache = PromptCache()
    five = [{"type": "text", "text": f"b{i}", "cache_control": EPHEMERAL} for i in range(5)]
    with pytest.raises(CacheRuleError, match="maximum of 4"):
        cache.account({"messages": [{"role": "user", "content": five}]})
    with pytest.raises(CacheRuleError, match="ephemeral"):
        cache.account(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "x", "cache_control": {}}],
                    }
                ]
            }
        )


# --- summary requests over the conversation's own prefix ---------------------------------------


# Three turns of long messages, with the three recall tools' definitions, stay under the auto
# threshold (60%) of this budget: the compaction is the one the test asks for.
THREE_TURNS_BUDGET = 3600


async def _chat_then_compact(user, conversation, fake_anthropic, settings, *, summaries):
    """Three real turns (long messages: there is something to fold away), then "compact now",
    the summary call answered by `summaries`; the compaction row."""
    settings.CONTEXT_BUDGET_TOKENS = THREE_TURNS_BUDGET
    fake_anthropic.cache.min_tokens = 1
    texts = [f"Question {n}: " + " ".join(f"detail{n}x{i}" for i in range(150)) for n in range(3)]
    await turns(user, conversation, texts)
    return await _compact_now(user, conversation, fake_anthropic, summaries)


async def _compact_now(user, conversation, fake_anthropic, summaries):
    for text in summaries:
        fake_anthropic.enqueue_reply([text])
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "compact", "instructions": "keep details"}))
    await receive_until(ws, lambda f: "Compacted (manual)" in f)
    await settle(conversation.pk)
    await ws.disconnect()
    return await Compaction.objects.aget(conversation=conversation)


GOOD_BRIEF = "<analysis>notes</analysis><summary>## Primary request and intent\nQ.</summary>"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_a_summary_while_the_prefix_is_cached_is_asked_over_it_and_reads_it(
    alice, conversation, fake_anthropic, settings
):
    from compaction.prompt import PREFIX_MARKER

    row = await _chat_then_compact(
        alice, conversation, fake_anthropic, settings, summaries=[GOOD_BRIEF]
    )
    *_, last_chat, summary = fake_anthropic.requests
    assert fake_anthropic.invalid == []
    # The chat request as it was, its reply, then the request for the brief.
    assert system_text(summary) == system_text(last_chat) and summary["tools"] == last_chat["tools"]
    n = len(last_chat["messages"])
    assert stripped(summary["messages"][:n]) == stripped(last_chat["messages"])
    assert summary["messages"][n]["role"] == "assistant" and len(summary["messages"]) == n + 2
    asked = summary["messages"][-1]["content"][0]["text"]
    assert asked.startswith(PREFIX_MARKER) and "#1 user: 'Question 0:" in asked
    assert "<instructions>\nkeep details\n</instructions>" in asked
    assert breakpoints(summary) == 2  # system with the tools, latest message
    read = fake_anthropic.counts[-1]["cache_read_input_tokens"]
    assert read > 0 and read > fake_anthropic.counts[-1]["input_tokens"]
    assert (row.status, row.summariser, row.summary) == (
        "committed",
        "model",
        "## Primary request and intent\nQ.",
    )
    assert row.cache_read_tokens == read
    # The conversation's running totals are every billed call's: three replies and the summary.
    await conversation.arefresh_from_db()
    replies = [m async for m in Message.objects.filter(role="assistant")]
    for column in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"):
        billed = sum(getattr(m, column) for m in replies) + getattr(row, column)
        assert getattr(conversation, column) == billed > 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
@pytest.mark.parametrize("why", ["cold", "setting"])
async def test_without_a_cached_prefix_the_summary_is_asked_over_a_separate_transcript(
    alice, conversation, fake_anthropic, settings, why
):
    from datetime import timedelta

    from django.utils import timezone

    from compaction.prompt import SYSTEM_PROMPT

    settings.CONTEXT_BUDGET_TOKENS = THREE_TURNS_BUDGET
    texts = [f"Question {n}: " + " ".join(f"detail{n}x{i}" for i in range(150)) for n in range(3)]
    await turns(alice, conversation, texts)
    if why == "cold":  # the last reply finished five minutes ago: its prefix has left the cache
        await Message.objects.aupdate(updated_at=timezone.now() - timedelta(minutes=5))
    else:
        settings.SUMMARY_READS_CACHE = False
    row = await _compact_now(alice, conversation, fake_anthropic, [GOOD_BRIEF])
    summary = fake_anthropic.requests[-1]
    assert system_text(summary) == SYSTEM_PROMPT and "tools" not in summary
    assert "<transcript>" in summary["messages"][0]["content"][0]["text"]
    assert row.summariser == "model"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_a_model_that_goes_on_chatting_instead_is_asked_again_over_a_transcript(
    alice, conversation, fake_anthropic, settings
):
    from compaction.prompt import SYSTEM_PROMPT

    row = await _chat_then_compact(
        alice,
        conversation,
        fake_anthropic,
        settings,
        summaries=["Happy to go on: what next?", GOOD_BRIEF],
    )
    *_, over_prefix, separate = fake_anthropic.requests
    assert over_prefix["messages"][-1]["content"][0]["text"].startswith("[Summary request")
    assert system_text(separate) == SYSTEM_PROMPT
    assert (row.status, row.summariser) == ("committed", "model")
    both = fake_anthropic.counts[-2:]
    assert row.input_tokens == sum(c["input_tokens"] for c in both)  # both calls are paid for
    assert row.cache_read_tokens == sum(c["cache_read_input_tokens"] for c in both)
