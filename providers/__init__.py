"""The model behind the chat, behind one interface.

A client has `capabilities(model)` and `stream(request)`, an async iterator of `values.Event`s
ending with a `values.Final` (or raising `values.LLMError`, whose `reason` is a sentence for the
user). `client_for(model)` is the one place that decides which provider serves a model: the demo
serves the model named "demo", Anthropic (or any compatible server) serves every other name.
"""

from __future__ import annotations

from contextlib import aclosing

from django.conf import settings

from . import demo
from .anthropic import AnthropicClient
from .values import Capabilities, Final, LLMError, Request

__all__ = ["Capabilities", "Final", "LLMError", "Request", "client_for", "complete"]

_anthropic: dict[tuple, AnthropicClient] = {}


def default_model() -> str:
    """The model of a new conversation: LLM_PROVIDER forces a provider, else a key or a base
    URL means Anthropic and their absence means the offline demo."""
    forced = settings.LLM_PROVIDER
    if forced == "demo" or (
        not forced and not (settings.ANTHROPIC_API_KEY or settings.ANTHROPIC_BASE_URL)
    ):
        return demo.MODEL
    return settings.CHAT_MODEL


def client_for(model: str):
    """The client that answers for `model` (a conversation's stored model)."""
    if model == demo.MODEL:
        return demo.DemoClient(word_delay=settings.DEMO_WORD_DELAY_MS / 1000)
    config = (
        settings.ANTHROPIC_API_KEY or "",
        settings.ANTHROPIC_BASE_URL or "",
        int(settings.LLM_MAX_RETRIES),
        float(settings.LLM_TIMEOUT_SECONDS),
        bool(settings.PROMPT_CACHING),
    )
    client = _anthropic.get(config)
    if client is None:
        key, base_url, retries, timeout, caching = config
        client = AnthropicClient(
            api_key=key, base_url=base_url, max_retries=retries, timeout=timeout, caching=caching
        )
        _anthropic[config] = client
    return client


def capabilities(model: str) -> Capabilities:
    return client_for(model).capabilities(model)


async def complete(client, request: Request) -> Final:
    """Drain a stream to its final message, for callers that do not show it as it arrives."""
    async with aclosing(client.stream(request)) as events:
        async for event in events:
            if isinstance(event, Final):
                return event
    raise LLMError("The model stream ended without a final message.")
