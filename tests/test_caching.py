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
from tests.conftest import receive_until, shows, socket_for
from tests.fake_anthropic import breakpoints, system_text
from tests.waiting import settle

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


def stripped(value):
    """A request part without its cache marks: what must stay byte-identical."""
    if isinstance(value, list):
        return [stripped(v) for v in value]
    if isinstance(value, dict):
        return {k: stripped(v) for k, v in value.items() if k != "cache_control"}
    return value


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
    assert replies[0].usage["cache_read_input_tokens"] == 0
    assert replies[0].usage["cache_creation_input_tokens"] > 0
    for reply in replies[1:]:
        assert reply.usage["cache_read_input_tokens"] > 0  # everything up to the last request


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
    (summary,) = fake_anthropic.requests
    assert breakpoints(summary) == 1 and summary["system"][0]["cache_control"] == EPHEMERAL
    assert fake_anthropic.invalid == []


def test_the_local_server_refuses_what_the_api_refuses():
    from tests.fake_anthropic import CacheRuleError, PromptCache

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
