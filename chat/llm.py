"""The model behind the chat: one small interface, two implementations.

`AnthropicClient` streams from the Anthropic Messages API (or any server that speaks it: Ollama,
vLLM and llama.cpp's server all serve `/v1/messages`, reached through `ANTHROPIC_BASE_URL`).
`DemoClient` is an offline, deterministic stand-in that describes the window it was sent, so a
newcomer can watch compaction work without an API key.

Callers get a `Reply` (plain values, ready to store) or an `LLMError` whose `reason` is a sentence
fit to show the user. Cancellation (`asyncio.CancelledError`) is never swallowed: a caller that
stops a reply keeps whatever text it already collected through `on_text`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import warnings
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anthropic
import httpx2
from django.conf import settings

from compaction.tokens import block_text, estimate_request, estimate_text
from compaction.window import SUMMARY_ACK, SUMMARY_INTRO

logger = logging.getLogger(__name__)

TextCallback = Callable[[str], Awaitable[None]]

DEFAULT_BASE_URL = "https://api.anthropic.com"
# Local Anthropic-compatible servers ignore the key, but the SDK refuses to send a request
# without one.
PLACEHOLDER_API_KEY = "not-needed-for-local-server"

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


@dataclass(frozen=True)
class Reply:
    content: list[dict]  # Anthropic content blocks as plain dicts
    usage: dict  # the four USAGE_KEYS, ints, 0 when the server did not report one
    stop_reason: str | None
    model: str

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")


class LLMError(Exception):
    """A model call that failed; `reason` is a readable sentence for the user."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class LLMClient(Protocol):
    provider: str  # "anthropic" | "demo" (tests: "fake")
    model: str

    async def reply(
        self,
        *,
        system: str,
        messages: list[dict],
        max_tokens: int,
        on_text: TextCallback | None = None,
    ) -> Reply: ...


def _usage_dict(usage: Any) -> dict:
    if usage is None:
        return dict.fromkeys(USAGE_KEYS, 0)
    if isinstance(usage, dict):
        return {k: int(usage.get(k) or 0) for k in USAGE_KEYS}
    return {k: int(getattr(usage, k, 0) or 0) for k in USAGE_KEYS}


def _block_dict(block: Any) -> dict | None:
    """The essential keys of a text or tool_use block; other kinds are not kept."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return None


# --- Anthropic ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SDKConfig:
    api_key: str
    base_url: str
    max_retries: int
    timeout: float


# One AsyncAnthropic per configuration *and event loop*: its connection pool belongs to the loop
# that opened it, and a sync caller going through async_to_sync may run each call on a fresh loop.
# Loops are held weakly, so a finished loop's clients go with it.
_sdk_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_SDKConfig, Any]] = (
    weakref.WeakKeyDictionary()
)


def _sdk_client(config: _SDKConfig) -> anthropic.AsyncAnthropic:
    per_loop = _sdk_clients.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get(config)
    if client is None:
        client = anthropic.AsyncAnthropic(
            api_key=config.api_key,
            base_url=config.base_url,
            max_retries=config.max_retries,
            timeout=config.timeout,
        )
        per_loop[config] = client
    return client


class AnthropicClient:
    provider = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str = "",
        base_url: str = "",
        max_retries: int = 2,
        timeout: float = 120,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        if not api_key and base_url:
            api_key = PLACEHOLDER_API_KEY
        # An explicit key (never None) also keeps the SDK from reading credentials of its own
        # from the environment or a profile on disk: settings are the one source of truth.
        self._config = (
            _SDKConfig(api_key, base_url or DEFAULT_BASE_URL, max_retries, timeout)
            if api_key
            else None
        )

    async def reply(
        self,
        *,
        system: str,
        messages: list[dict],
        max_tokens: int,
        on_text: TextCallback | None = None,
    ) -> Reply:
        if self._config is None:
            raise LLMError(
                "No model API key is configured: set ANTHROPIC_API_KEY "
                "(or ANTHROPIC_BASE_URL for a local server), or LLM_PROVIDER=demo."
            )
        client = _sdk_client(self._config)
        try:
            with warnings.catch_warnings(record=True) as caught:
                # The SDK warns (DeprecationWarning) when the model is nearing end-of-life. The
                # model is the operator's choice, so say it in the log instead of raising under
                # `-W error` or repeating it on every turn.
                warnings.simplefilter("always")
                manager = client.messages.stream(
                    model=self.model,
                    max_tokens=max_tokens,
                    system=system or anthropic.omit,
                    messages=messages,
                )
            for w in caught:
                _log_once(str(w.message))
            async with manager as stream:
                async for text in stream.text_stream:
                    if text and on_text is not None:
                        await on_text(text)
                try:
                    final = await stream.get_final_message()
                except AssertionError:
                    # The SDK asserts when a stream ended before its message_start event.
                    raise LLMError(
                        f"The model server at {self._config.base_url} ended the reply "
                        "without sending a message."
                    ) from None
        except anthropic.AnthropicError as exc:
            raise self._error(exc) from exc
        except httpx2.HTTPError as exc:
            # Once the stream is open the SDK does not wrap transport errors: a cut connection
            # or a read timeout mid-reply arrives as the raw httpx2 exception.
            raise self._transport_error(exc) from exc
        content = [d for d in map(_block_dict, final.content) if d is not None]
        return Reply(
            content=content,
            usage=_usage_dict(final.usage),
            stop_reason=final.stop_reason,
            model=final.model or self.model,
        )

    def _where(self) -> str:
        return self._config.base_url if self._config else DEFAULT_BASE_URL

    def _transport_error(self, exc: httpx2.HTTPError) -> LLMError:
        if isinstance(exc, httpx2.TimeoutException):
            return LLMError(f"The model request timed out after {self.timeout:g} s.")
        return LLMError(
            f"The connection to the model server at {self._where()} was lost mid-reply "
            f"({_short(str(exc) or type(exc).__name__)})."
        )

    def _error(self, exc: anthropic.AnthropicError) -> LLMError:
        # Order matters: the timeout is a connection error, overloaded is a server error.
        if isinstance(exc, anthropic.APITimeoutError):
            return LLMError(f"The model request timed out after {self.timeout:g} s.")
        if isinstance(exc, anthropic.APIConnectionError):
            return LLMError(f"Could not reach the model server at {self._where()}.")
        if not isinstance(exc, anthropic.APIStatusError):
            return LLMError(f"The model call failed: {_short(str(exc) or type(exc).__name__)}.")

        status = exc.status_code
        message = _api_message(exc)
        error_type = _api_error_type(exc)
        if status == 200:
            # An `event: error` inside a stream that had already started (HTTP 200).
            detail = message or error_type or "unknown error"
            if error_type == "overloaded_error" and "overload" not in detail.lower():
                detail += " (the API is overloaded)"
            return LLMError(f"The model stopped with an error mid-reply: {detail}.", status=status)
        if isinstance(exc, anthropic.RateLimitError) or status == 429:
            return LLMError(
                "The model API is rate-limiting requests (HTTP 429): wait a moment and send again.",
                status=status,
            )
        if (
            isinstance(exc, anthropic.OverloadedError)
            or status == 529
            or error_type == "overloaded_error"
        ):
            return LLMError(
                f"The model API is overloaded right now (HTTP {status}): "
                "wait a moment and send again.",
                status=status,
            )
        if isinstance(exc, anthropic.InternalServerError) or status >= 500:
            return LLMError(
                f"The model API had a server error (HTTP {status}): try again in a moment.",
                status=status,
            )
        if isinstance(exc, anthropic.AuthenticationError) or status == 401:
            return LLMError(
                "The model API rejected the API key (HTTP 401): check ANTHROPIC_API_KEY.",
                status=status,
            )
        if isinstance(exc, anthropic.PermissionDeniedError) or status == 403:
            return LLMError(
                f"The API key is not allowed to use model {self.model!r} (HTTP 403).",
                status=status,
            )
        if isinstance(exc, anthropic.NotFoundError) or status == 404:
            return LLMError(
                f"Model {self.model!r} was not found at {self._where()} (HTTP 404): "
                "check CHAT_MODEL.",
                status=status,
            )
        if isinstance(exc, anthropic.BadRequestError) or status == 400:
            return LLMError(
                f"The model API rejected the request (HTTP 400): {message or 'bad request'}.",
                status=status,
            )
        return LLMError(
            f"The model API returned an error (HTTP {status}): {message or 'no details'}.",
            status=status,
        )


def _api_message(exc: anthropic.APIStatusError) -> str:
    message = getattr(exc, "api_message", None)
    if not message and isinstance(exc.body, dict):
        error = exc.body.get("error")
        if isinstance(error, dict):
            message = error.get("message")
    if not message and isinstance(exc.body, str):
        message = exc.body
    return _short(str(message or "")).rstrip(".")


def _api_error_type(exc: anthropic.APIStatusError) -> str:
    error_type = getattr(exc, "type", None)
    if not error_type and isinstance(exc.body, dict):
        error = exc.body.get("error")
        if isinstance(error, dict):
            error_type = error.get("type")
    return str(error_type or "")


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_logged: set[str] = set()


def _log_once(message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        logger.warning("%s", message)


# --- Demo --------------------------------------------------------------------------------------

STOP_WORDS = frozenset(
    """
    the and for are but not you your yours all any can had her was one our out has have him his
    how its may who why what when where which with this that these those from they them their
    there then than too very just also into onto about over under some such only own same so
    does did doing done would could should will shall been being were is it of to in on at by
    me my mine we us i a an or if as be do no yes get got let say said tell told please
    """.split()
)
WORD_RE = re.compile(r"[^\W\d_]{3,}")


def _words(text: str) -> set[str]:
    return {w for w in WORD_RE.findall(text.lower()) if w not in STOP_WORDS}


def _message_text(message: dict) -> str:
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(block_text(b) for b in content)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


class DemoClient:
    """An offline model: deterministic, streams word by word, describes the window it was sent."""

    provider = "demo"
    model = "demo"

    async def reply(
        self,
        *,
        system: str,
        messages: list[dict],
        max_tokens: int,
        on_text: TextCallback | None = None,
    ) -> Reply:
        text = self.compose(system=system, messages=messages)
        delay = max(0, int(getattr(settings, "DEMO_WORD_DELAY_MS", 0) or 0)) / 1000
        for i, chunk in enumerate(re.findall(r"\S+\s*", text)):
            if i:
                # Zero still yields to the loop, so a stop request can land between words.
                await asyncio.sleep(delay)
            if on_text is not None:
                await on_text(chunk)
        usage = dict.fromkeys(USAGE_KEYS, 0)
        usage["input_tokens"] = estimate_request(system, messages)
        usage["output_tokens"] = estimate_text(text)
        return Reply(
            content=[{"type": "text", "text": text}],
            usage=usage,
            stop_reason="end_turn",
            model=self.model,
        )

    def compose(self, *, system: str, messages: list[dict]) -> str:
        """The whole reply, a pure function of the request."""
        tokens = estimate_request(system, messages)
        summarised = bool(
            messages
            and messages[0].get("role") == "user"
            and _message_text(messages[0]).startswith(SUMMARY_INTRO)
        )
        head = (
            f"I'm the offline demo model. My window holds {_plural(len(messages), 'message')} "
            f"(about {_plural(tokens, 'token')}), "
            + (
                "headed by a summary of earlier turns."
                if summarised
                else "with no summary of earlier turns."
            )
        )
        parts = [head]

        last = len(messages) - 1
        while last >= 0 and messages[last].get("role") != "user":
            last -= 1
        if last < 0:
            parts.append("There is no user message in my window to answer.")
            return "\n\n".join(parts)

        said = " ".join(_message_text(messages[last]).split())
        parts.append(f"You said: “{_short(said, 160)}”")
        if "?" in said:
            line = self._best_line(said, messages[:last] + messages[last + 1 :])
            if line:
                parts.append(
                    "The line in my window that best matches your question:\n\n> " + _short(line)
                )
            else:
                parts.append("Nothing in my window matches your question.")
        return "\n\n".join(parts)

    @staticmethod
    def _best_line(question: str, window: list[dict]) -> str | None:
        wanted = _words(question)
        best, best_score = None, 0
        for message in window:
            if message["role"] == "assistant":
                continue  # quote what the user (or the summary) said, not the demo's own echoes
            text = _message_text(message)
            if text.startswith(SUMMARY_INTRO):
                text = text[len(SUMMARY_INTRO) :]
            for line in text.splitlines():
                line = line.strip()
                if not line or line == SUMMARY_ACK:
                    continue
                score = len(wanted & _words(line))
                # `>=`: on a tie the later (more recent) line wins.
                if score and score >= best_score:
                    best, best_score = line, score
        return best


# --- choosing one ------------------------------------------------------------------------------

_clients: dict[tuple, LLMClient] = {}
_demo = DemoClient()


def provider_name() -> str:
    """ "anthropic" or "demo": LLM_PROVIDER forces one, else a key or base URL means anthropic."""
    forced = (getattr(settings, "LLM_PROVIDER", "") or "").strip().lower()
    if forced in ("anthropic", "demo"):
        return forced
    key = getattr(settings, "ANTHROPIC_API_KEY", "")
    base_url = getattr(settings, "ANTHROPIC_BASE_URL", "")
    return "anthropic" if (key or base_url) else "demo"


def get_client() -> LLMClient:
    if provider_name() == "demo":
        return _demo
    config = (
        settings.ANTHROPIC_API_KEY or "",
        settings.ANTHROPIC_BASE_URL or "",
        settings.CHAT_MODEL,
        int(settings.LLM_MAX_RETRIES),
        float(settings.LLM_TIMEOUT_SECONDS),
    )
    client = _clients.get(config)
    if client is None:
        key, base_url, model, retries, timeout = config
        client = AnthropicClient(
            model=model, api_key=key, base_url=base_url, max_retries=retries, timeout=timeout
        )
        _clients[config] = client
    return client


def clear_client_cache() -> None:
    """Forget every built client (tests change settings between cases)."""
    _clients.clear()
    _sdk_clients.clear()
