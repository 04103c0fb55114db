"""The Anthropic provider, through the real SDK, against a local fake Messages server."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import aclosing

import pytest

from providers import anthropic as anthropic_provider
from providers import registry, values
from providers.anthropic import AnthropicClient
from providers.demo import DemoClient
from providers.values import Final, LLMError, Request, TextDelta
from support.servers import free_port

MESSAGES = [{"role": "user", "content": "Say hello."}]
MODEL = "claude-test-model"


class Collector:
    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.events: list = []

    @property
    def text(self) -> str:
        return "".join(self.chunks)


async def ask(
    got: Collector | None = None,
    *,
    model: str = MODEL,
    system: str = "s",
    messages: list[dict] = MESSAGES,
    max_tokens: int = 10,
    on_text=None,
) -> Final:
    """Stream one request through the provider; deltas land in `got` as they arrive."""
    got = got if got is not None else Collector()
    final = None
    request = Request(model=model, system=system, messages=messages, max_tokens=max_tokens)
    async with aclosing(registry.client_for(model).stream(request)) as events:
        async for event in events:
            got.events.append(event)
            if isinstance(event, TextDelta):
                got.chunks.append(event.text)
                if on_text is not None:
                    await on_text(event.text)
            elif isinstance(event, Final):
                final = event
    assert final is not None and isinstance(got.events[-1], Final)
    return final


async def test_it_streams_a_reply_in_order_and_returns_content_usage_and_stop_reason(
    fake_anthropic,
):
    fake_anthropic.enqueue_reply(
        ["Hello", ", ", "Alice", "!"],
        usage={"input_tokens": 42, "output_tokens": 7, "cache_read_input_tokens": 5},
    )
    got = Collector()

    reply = await ask(got, system="Be brief.", max_tokens=256)

    assert got.chunks == ["Hello", ", ", "Alice", "!"]
    assert reply.content == [{"type": "text", "text": "Hello, Alice!"}]
    assert reply.text == "Hello, Alice!"
    assert reply.usage.as_dict() == {
        "input_tokens": 42,
        "output_tokens": 7,
        "cache_read_input_tokens": 5,
        "cache_creation_input_tokens": 0,
    }
    assert reply.stop_reason == "end_turn"


async def test_text_reaches_on_text_while_the_reply_is_still_streaming(fake_anthropic):
    fake_anthropic.enqueue_reply(["one ", "two ", "three"], delay=0.2)
    arrivals: list[float] = []

    async def on_text(text: str) -> None:
        arrivals.append(time.monotonic())

    await ask(on_text=on_text)

    assert len(arrivals) == 3
    assert arrivals[-1] - arrivals[0] > 0.3  # not buffered until the end


async def test_cancelling_a_reply_propagates_and_keeps_the_text_so_far(fake_anthropic):
    fake_anthropic.enqueue_hang(3)
    got = Collector()
    first = asyncio.Event()

    async def on_text(text: str) -> None:
        first.set()

    task = asyncio.create_task(ask(got, on_text=on_text))
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert got.text.startswith("word0 ")


async def test_it_sends_system_as_its_own_parameter_with_our_messages_model_and_max_tokens(
    fake_anthropic, settings
):
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": "second"},
    ]

    await ask(system="You are terse.", messages=messages, max_tokens=123)

    sent = fake_anthropic.requests[-1]
    assert sent["system"] == "You are terse."
    assert sent["messages"] == messages
    assert all(m["role"] in ("user", "assistant") for m in sent["messages"])
    assert sent["model"] == "claude-test-model"
    assert sent["max_tokens"] == 123
    assert sent["stream"] is True
    headers = fake_anthropic.headers[-1]
    # SDK 2.14 sends the key as "Authorization: Bearer"; older ones used "x-api-key".
    assert "test-key" in headers.get("authorization", "") + headers.get("x-api-key", "")


async def test_it_leaves_out_an_empty_system_prompt(fake_anthropic):
    await ask(system="")

    assert "system" not in fake_anthropic.requests[-1]
    assert "tools" not in fake_anthropic.requests[-1]


async def test_it_asks_for_the_requested_model_and_returns_the_one_the_server_named(
    fake_anthropic,
):
    reply = await ask(model="llama3.2")

    assert fake_anthropic.requests[-1]["model"] == "llama3.2"
    assert reply.model == "llama3.2"


async def test_it_explains_an_overloaded_api(fake_anthropic):
    fake_anthropic.enqueue_status(529, "overloaded_error", "Overloaded")

    with pytest.raises(LLMError) as err:
        await ask()

    assert err.value.status == 529
    assert "overloaded" in err.value.reason.lower()


async def test_it_explains_a_rate_limit(fake_anthropic):
    fake_anthropic.enqueue_status(429, "rate_limit_error", "Number of requests exceeded")

    with pytest.raises(LLMError) as err:
        await ask()

    assert err.value.status == 429
    assert "rate-limit" in err.value.reason
    assert "wait a moment" in err.value.reason


@pytest.mark.parametrize(
    ("status", "error_type", "words"),
    [
        (401, "authentication_error", "rejected the API key"),
        (403, "permission_error", "not allowed"),
        (404, "not_found_error", "'claude-missing' was not found"),
        (400, "invalid_request_error", "messages: roles must alternate"),
        (500, "api_error", "server error"),
    ],
)
async def test_it_explains_other_api_errors(fake_anthropic, settings, status, error_type, words):
    fake_anthropic.enqueue_status(status, error_type, "messages: roles must alternate")

    with pytest.raises(LLMError) as err:
        await ask(model="claude-missing")

    assert err.value.status == status
    assert words in err.value.reason


async def test_it_retries_an_overloaded_api_when_retries_are_allowed(fake_anthropic, settings):
    settings.LLM_MAX_RETRIES = 1
    fake_anthropic.enqueue_status(529, "overloaded_error", "Overloaded")
    fake_anthropic.enqueue_reply(["Second ", "time."])

    reply = await ask()

    assert reply.text == "Second time."
    assert len(fake_anthropic.requests) == 2


async def test_an_error_event_mid_stream_raises_after_the_partial_text_arrived(fake_anthropic):
    fake_anthropic.enqueue_stream_error(
        ["Once ", "upon "], error_type="overloaded_error", message="Overloaded"
    )
    got = Collector()

    with pytest.raises(LLMError) as err:
        await ask(got)

    assert got.text == "Once upon "
    assert "mid-reply" in err.value.reason
    assert "Overloaded" in err.value.reason
    assert err.value.status == 200


async def test_a_dropped_connection_raises_after_the_partial_text_arrived(fake_anthropic):
    fake_anthropic.enqueue_drop(["Half ", "a "])
    got = Collector()

    with pytest.raises(LLMError) as err:
        await ask(got)

    assert got.text == "Half a "
    assert "connection" in err.value.reason
    assert fake_anthropic.url in err.value.reason


async def test_a_slow_server_times_out_readably(fake_anthropic, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    fake_anthropic.enqueue_reply(["slow ", "reply"], delay=2)
    got = Collector()

    with pytest.raises(LLMError) as err:
        await ask(got)

    assert got.text == "slow "
    assert "timed out after 0.3 s" in err.value.reason


async def test_an_unreachable_server_raises_readably(settings):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.LLM_PROVIDER = "anthropic"
    settings.ANTHROPIC_BASE_URL = url
    settings.ANTHROPIC_API_KEY = ""
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT_SECONDS = 5

    with pytest.raises(LLMError) as err:
        await ask()

    assert err.value.reason == f"Could not reach the model server at {url}."
    assert err.value.status is None


async def test_a_base_url_without_a_key_sends_a_placeholder_key(fake_anthropic, settings):
    settings.ANTHROPIC_API_KEY = ""

    reply = await ask()

    assert reply.text == "Hello from the fake server."
    headers = fake_anthropic.headers[-1]
    assert anthropic_provider.PLACEHOLDER_API_KEY in headers.get("authorization", "") + headers.get(
        "x-api-key", ""
    )


async def test_anthropic_forced_without_key_or_url_raises_readably(settings):
    settings.LLM_PROVIDER = "anthropic"
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""

    with pytest.raises(LLMError) as err:
        await ask()

    assert "ANTHROPIC_API_KEY" in err.value.reason


async def test_a_deprecated_model_name_is_logged_not_raised(fake_anthropic, settings, caplog):
    # The SDK emits a DeprecationWarning for models nearing end-of-life (its own list); the
    # suite runs with -W error::DeprecationWarning, so this would fail if the warning escaped.
    from anthropic._data import DEPRECATED_MODELS

    model = next(iter(DEPRECATED_MODELS))
    with caplog.at_level(logging.WARNING, logger="providers.anthropic"):
        for _ in range(2):
            reply = await ask(model=model)
            assert reply.text == "Hello from the fake server."
        quiet = await ask(model="claude-bench-quiet")
        assert quiet.text == "Hello from the fake server."

    # Said once; a model it warns about is never taken as quiet, one it did not warn about is.
    said = [r.getMessage() for r in caplog.records if model in r.getMessage()]
    assert len(said) == 1 and "end-of-life" in said[0]
    client = registry.client_for(model)
    assert model not in client.quiet_models and "claude-bench-quiet" in client.quiet_models


async def test_zero_usage_is_unknown_not_zero(fake_anthropic):
    fake_anthropic.enqueue_reply(["Hi"], usage={"input_tokens": 0, "output_tokens": 0})

    reply = await ask()

    assert reply.text == "Hi"
    assert not reply.usage.known
    assert reply.usage.as_dict() is None


async def test_a_stream_without_usage_still_completes(fake_anthropic):
    fake_anthropic.enqueue_without_usage(["All ", "the ", "text."])

    reply = await ask()

    assert reply.text == "All the text."
    assert reply.stop_reason == "end_turn"
    assert not reply.usage.known


async def test_a_whole_json_message_answering_a_stream_is_read_as_the_reply(fake_anthropic):
    # A LiteLLM gateway answers `stream: true` with one JSON message: not an error.
    fake_anthropic.enqueue_json(["One ", "piece."], usage={"input_tokens": 12, "output_tokens": 3})
    got = Collector()

    reply = await ask(got)

    assert got.text == "One piece."
    assert reply.content == [{"type": "text", "text": "One piece."}]
    assert reply.usage.as_dict()["input_tokens"] == 12


async def test_tool_use_streams_start_input_deltas_and_a_parsed_stop(fake_anthropic):
    fake_anthropic.enqueue_tool_use(
        ["Let me check."],
        tool_id="toolu_1",
        name="search_history",
        input_parts=['{"query": "dead', 'line", "limit"', ": 3}"],
    )
    got = Collector()

    reply = await ask(got)

    tool_events = [e for e in got.events if not isinstance(e, (TextDelta, Final))]
    assert tool_events == [
        values.ToolUseStart(1, "toolu_1", "search_history"),
        values.ToolInputDelta(1, '{"query": "dead'),
        values.ToolInputDelta(1, 'line", "limit"'),
        values.ToolInputDelta(1, ": 3}"),
        values.ToolUseStop(1, "toolu_1", "search_history", {"query": "deadline", "limit": 3}),
    ]
    assert reply.stop_reason == "tool_use"
    assert reply.content == [
        {"type": "text", "text": "Let me check."},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "search_history",
            "input": {"query": "deadline", "limit": 3},
        },
    ]


def test_a_conversation_model_named_demo_is_answered_by_the_demo(settings):
    settings.ANTHROPIC_API_KEY = "sk-test"

    assert isinstance(registry.client_for("demo"), DemoClient)
    assert registry.capabilities("demo").offline
    assert not registry.capabilities("demo").can_summarise


def test_every_other_model_is_answered_by_anthropic(settings):
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""

    client = registry.client_for("claude-sonnet-5")
    assert isinstance(client, AnthropicClient)
    assert client is registry.client_for("claude-other")  # one client per configuration
    assert registry.capabilities("claude-sonnet-5").context_window == 200_000
    assert registry.capabilities("claude-sonnet-5").supports_caching


def test_new_conversations_get_the_configured_model_when_a_base_url_is_set(settings):
    settings.LLM_PROVIDER = ""
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = "http://127.0.0.1:11434"
    settings.CHAT_MODEL = "qwen3"

    assert registry.default_model() == "qwen3"


def test_new_conversations_get_the_configured_model_when_a_key_is_set(settings):
    settings.LLM_PROVIDER = ""
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = ""

    assert registry.default_model() == settings.CHAT_MODEL


def test_new_conversations_get_the_demo_without_key_or_base_url(settings):
    settings.LLM_PROVIDER = ""
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""

    assert registry.default_model() == "demo"


def test_llm_provider_forces_one(settings):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.LLM_PROVIDER = "demo"
    assert registry.default_model() == "demo"

    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""
    settings.LLM_PROVIDER = "anthropic"
    assert registry.default_model() == settings.CHAT_MODEL


def test_changed_settings_give_a_new_client(settings):
    settings.ANTHROPIC_API_KEY = "sk-test"
    first = registry.client_for("claude-x")

    settings.ANTHROPIC_API_KEY = "sk-other"

    assert registry.client_for("claude-x") is not first
