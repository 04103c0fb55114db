"""The fake server speaks extended thinking and keeps its rules as the API does, so a turn that
breaks them fails its test: thinking with temperature, a budget under 1024 or not under
max_tokens, a thinking block altered or its signature changed, and in a turn's tool loop the
thinking that came with the calls left out or moved."""

from __future__ import annotations

import httpx2
import pytest

from support.fake_anthropic import FakeAnthropic
from support.messages_api import invalid_thinking, signature_of
from support.scripts import thinking_reply

THOUGHT = {
    "type": "thinking",
    "thinking": "Search first.",
    "signature": signature_of("Search first."),
}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "search_history", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "nothing"}
ISSUED = {"toolu_1": [THOUGHT]}


def body(assistant: list[dict], **extra) -> dict:
    return {
        "model": "m",
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": [RESULT]},
        ],
        **extra,
    }


def test_a_tool_step_with_its_thinking_whole_and_first_passes():
    assert invalid_thinking(body([THOUGHT, CALL]), ISSUED) == ""


@pytest.mark.parametrize(
    ("assistant", "extra", "said"),
    [
        ([CALL], {}, "passed back unchanged"),  # dropped
        ([{**THOUGHT, "thinking": "Search later."}, CALL], {}, "Invalid `signature`"),  # altered
        ([{**THOUGHT, "signature": "forged"}, CALL], {}, "Invalid `signature`"),
        ([THOUGHT, CALL], {"temperature": 0.2}, "`temperature` may only be set to 1"),
        ([THOUGHT, CALL], {"max_tokens": 2048}, "greater than `thinking.budget_tokens`"),
        (
            [THOUGHT, CALL],
            {"thinking": {"type": "enabled", "budget_tokens": 512}},
            "budget_tokens: Input should be >= 1024",
        ),
    ],
)
def test_the_fake_refuses_what_the_api_refuses(assistant, extra, said):
    assert said in invalid_thinking(body(assistant, **extra), ISSUED)


def test_with_thinking_on_a_tool_loop_starts_with_thinking():
    # Thinking the server never sent is not asked for back; but the step must start with some.
    said = invalid_thinking(body([{"type": "text", "text": "Looking."}, CALL]), {})
    assert "must start with a thinking block" in said


def test_the_server_refuses_a_tool_step_that_drops_its_thinking():
    fake = FakeAnthropic().start()
    try:
        fake.push(thinking_reply(["Search first."], ["Looking."], calls=[("toolu_1", "s", {})]))
        first = {"model": "m", "max_tokens": 4096, "messages": [{"role": "user", "content": "Hi"}]}
        first["thinking"] = {"type": "enabled", "budget_tokens": 2048}
        first["tools"] = [{"name": "s", "input_schema": {"type": "object"}}]
        assert httpx2.post(f"{fake.url}/v1/messages", json=first).status_code == 200
        later = {**first, "messages": body([CALL])["messages"]}
        answer = httpx2.post(f"{fake.url}/v1/messages", json=later)
        assert answer.status_code == 400
        assert "passed back unchanged" in answer.json()["error"]["message"]
        assert fake.invalid == [answer.json()["error"]["message"]]
    finally:
        fake.stop()
