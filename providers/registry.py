"""Which client answers for a model, and the models people may pick.

`client_for(model)` is the one place that decides: a client registered for the model (or for
every model: a test's or a benchmark's fake, `register`), else the offline demo for the model
named "demo" and Anthropic (or any compatible server) for every other name. Clients built from
the settings are kept on the runtime, one per configuration. `available_models()` is what a new
conversation may pick, `context_budget(model)` the window's budget of a conversation on it, and
`summary_model` the model that writes its summaries.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass

from django.conf import settings

from core import runtime
from providers import demo
from providers.anthropic import AnthropicClient
from providers.values import Capabilities, Final, LLMError, Request


def _offline() -> bool:
    """LLM_PROVIDER forces a provider, else a key or a base URL means Anthropic and their
    absence means the offline demo."""
    forced = settings.LLM_PROVIDER
    return forced == "demo" or (
        not forced and not (settings.ANTHROPIC_API_KEY or settings.ANTHROPIC_BASE_URL)
    )


def default_model() -> str:
    """The model of a new conversation when none is picked: the demo offline, else CHAT_MODEL."""
    return demo.MODEL if _offline() else settings.CHAT_MODEL


@dataclass(frozen=True)
class ModelChoice:
    """A model as people see it: the picker's options and the conversation's header."""

    id: str
    label: str
    budget: int  # the window's budget in tokens (context_budget)
    default: bool = False

    @property
    def budget_short(self) -> str:
        """200,000 -> "200k", 1,500 -> "1.5k", 1,000,000 -> "1M"."""
        for size, unit in ((1_000_000, "M"), (1_000, "k")):
            if self.budget >= size:
                return f"{self.budget / size:.1f}".removesuffix(".0") + unit
        return str(self.budget)

    @property
    def shown(self) -> str:
        return f"{self.label} · {self.budget_short} tokens"


def _listed(model: str) -> dict | None:
    return next((m for m in settings.CHAT_MODELS if m["id"] == model), None)


def context_budget(model: str) -> int:
    """The window's budget for a conversation on `model`: the model's own "context" in
    CHAT_MODELS, else CONTEXT_BUDGET_TOKENS (the budget of every model not given one), else the
    provider's context window for it. The most specific setting wins."""
    listed = _listed(model)
    if listed and listed.get("context"):
        return int(listed["context"])
    return settings.CONTEXT_BUDGET_TOKENS or capabilities(model).context_window


def output_limit(model: str) -> int | None:
    """The most tokens one answer of `model` may hold (CHAT_MODELS "output"), if declared."""
    listed = _listed(model)
    return listed.get("output") if listed else None


def thinks(model: str) -> bool:
    """Whether `model` may be asked to think before it answers (extended thinking): declared
    so in CHAT_MODELS ("thinking": true), never offline."""
    listed = _listed(model)
    return bool(listed and listed.get("thinking")) and not _offline()


def model_info(model: str, *, default: bool = False) -> ModelChoice:
    """Any model's label and budget: one no longer configured (an old conversation's) is
    shown by its id."""
    listed = _listed(model)
    if listed and listed.get("label"):
        label = listed["label"]
    else:
        label = "Demo (offline)" if model == demo.MODEL else model
    return ModelChoice(model, label, context_budget(model), default)


def available_models() -> list[ModelChoice]:
    """What a new conversation may pick, in the configured order, the default marked: the
    models of CHAT_MODELS, or offline only the demo (nothing else could answer)."""
    default = default_model()
    return [model_info(model, default=model == default) for model in _offered()]


def _offered() -> list[str]:
    """The ids of `available_models()`, in order."""
    if _offline():
        return [demo.MODEL]
    ids = [m["id"] for m in settings.CHAT_MODELS]
    if settings.CHAT_MODEL not in ids:  # CHAT_MODELS always holds it; a test may set one alone
        ids.insert(0, settings.CHAT_MODEL)
    return ids


def summary_model(model: str, chosen: str = "") -> str:
    """The model that writes the summaries of a conversation on `model`: the one it `chosen`,
    else SUMMARY_MODEL, else its own; a choice no longer offered (the configuration changed,
    or the offline demo answers everything) gives way to the next."""
    offered = _offered()
    return next((m for m in (chosen, settings.SUMMARY_MODEL) if m and m in offered), model)


def register(client, *models: str) -> None:
    """Answer for `models` with `client`, in place of what the settings say; with no model
    named, for every model. Tests and benchmarks register their fake models here; the
    registrations last as long as the runtime (`core.runtime.reset`)."""
    for model in models or ("",):
        runtime.current().registered[model] = client


def client_for(model: str):
    """The client that answers for `model` (a conversation's stored model)."""
    registered = runtime.current().registered
    client = registered.get(model) or registered.get("")
    if client is not None:
        return client
    if model == demo.MODEL:
        return demo.DemoClient(word_delay=settings.DEMO_WORD_DELAY_MS / 1000)
    config = (
        settings.ANTHROPIC_API_KEY or "",
        settings.ANTHROPIC_BASE_URL or "",
        int(settings.LLM_MAX_RETRIES),
        float(settings.LLM_TIMEOUT_SECONDS),
        bool(settings.PROMPT_CACHING),
    )
    built = runtime.current().clients
    client = built.get(config)
    if client is None:
        key, base_url, retries, timeout, caching = config
        client = built[config] = AnthropicClient(
            api_key=key, base_url=base_url, max_retries=retries, timeout=timeout, caching=caching
        )
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
