"""The Anthropic Messages API (or any server that speaks it), streamed through the official SDK.

`ANTHROPIC_BASE_URL` reaches any Anthropic-compatible server (Ollama, vLLM, llama.cpp's server, a
LiteLLM gateway). Those differ from the real API in ways this module absorbs:
- usage reported as zeros, or not at all: the final event says so (`Usage.known` is False);
- a streaming request answered with one whole JSON message instead of server-sent events: it is
  read as that message, not treated as an error.

The SDK sends the request (auth, retries on 429/529/connection errors, status errors); the
events are read here from the raw server-sent events as plain dicts, so a field a server leaves
out is a missing key, not a validation failure, and no per-token model objects are built.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from anthropic import AsyncStream

from core import runtime
from providers.blocks import text_of, thinking_of, type_of, without_empty_text
from providers.caching import with_breakpoints
from providers.values import (
    Capabilities,
    Event,
    Final,
    LLMError,
    Request,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStart,
    ToolUseStop,
    Usage,
)

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"
# Local Anthropic-compatible servers ignore the key, but the SDK refuses to send a request
# without one.
PLACEHOLDER_API_KEY = "not-needed-for-local-server"

# Context windows by model family; anything unknown gets the common 200k.
CONTEXT_WINDOWS = {"claude": 200_000}
DEFAULT_CONTEXT_WINDOW = 200_000


@dataclass(frozen=True)
class _SDKConfig:
    api_key: str
    base_url: str
    max_retries: int
    timeout: float


def _sdk_client(config: _SDKConfig) -> anthropic.AsyncAnthropic:
    """One AsyncAnthropic per configuration *and event loop*: its connection pool belongs to the
    loop that opened it, and a sync caller going through async_to_sync may run each call on a
    fresh loop. Kept on the runtime's state of the running loop."""
    clients = runtime.current().loop().sdk_clients
    client = clients.get(config)
    if client is None:
        client = clients[config] = anthropic.AsyncAnthropic(
            api_key=config.api_key,
            base_url=config.base_url,
            max_retries=config.max_retries,
            timeout=config.timeout,
        )
    return client


class AnthropicClient:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str = "",
        base_url: str = "",
        max_retries: int = 2,
        timeout: float = 120,
        caching: bool = True,
    ) -> None:
        self.timeout = timeout
        self.caching = caching
        # Models the SDK had nothing to warn about when asked for them: their requests skip
        # catching warnings (which copies and resets the process's warning filters); and the
        # warnings already logged, each said once.
        self.quiet_models: set[str] = set()
        self._logged: set[str] = set()
        if not api_key and base_url:
            api_key = PLACEHOLDER_API_KEY
        # An explicit key (never None) also keeps the SDK from reading credentials of its own
        # from the environment or a profile on disk: settings are the one source of truth.
        self._config = (
            _SDKConfig(api_key, base_url or DEFAULT_BASE_URL, max_retries, timeout)
            if api_key
            else None
        )

    def capabilities(self, model: str) -> Capabilities:
        window = next(
            (size for prefix, size in CONTEXT_WINDOWS.items() if model.startswith(prefix)),
            DEFAULT_CONTEXT_WINDOW,
        )
        return Capabilities(
            context_window=window,
            can_summarise=True,
            supports_caching=self.caching,
            supports_tools=True,
        )

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        if self._config is None:
            raise LLMError(
                "No model API key is configured: set ANTHROPIC_API_KEY "
                "(or ANTHROPIC_BASE_URL for a local server), or LLM_PROVIDER=demo."
            )
        client = _sdk_client(self._config)
        system, messages, tools = request.system, request.messages, list(request.tools)
        if request.cache_head is not None:
            system, messages, tools = with_breakpoints(
                system, messages, tools, head=request.cache_head, latest=request.cache_latest
            )
        try:
            manager = self._open(
                client,
                request.model,
                max_tokens=request.max_tokens,
                system=system or anthropic.omit,
                messages=messages,
                tools=tools or anthropic.omit,
                thinking=thinking_param(request.thinking_budget),
            )
            async with manager as sdk_stream:
                response = sdk_stream.response
                if "json" in response.headers.get("content-type", ""):
                    body = json.loads(await response.aread())
                    for event in _events_of_message(body, request.model):
                        yield event
                    return
                reader = _Reader(request.model)
                async for sse in AsyncStream.raw_events(response):
                    for event in reader.read(sse.event, sse.data):
                        yield event
                yield reader.final(self._where())
        except anthropic.AnthropicError as exc:
            raise self._error(exc, request.model) from exc
        except httpx2.HTTPError as exc:
            # Once the stream is open the SDK does not wrap transport errors: a cut connection
            # or a read timeout mid-reply arrives as the raw httpx2 exception.
            raise self._transport_error(exc) from exc
        except json.JSONDecodeError:
            raise LLMError(
                f"The model server at {self._where()} sent a reply that is not valid JSON."
            ) from None

    def _open(self, client: anthropic.AsyncAnthropic, model: str, **params):
        """The SDK's stream manager for `model`. The SDK warns (DeprecationWarning) when a model
        is nearing end-of-life; the model is the operator's choice, so that is said once in the
        log instead of raising under `-W error` or repeating it on every turn."""
        if model in self.quiet_models:
            return client.messages.stream(model=model, **params)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            manager = client.messages.stream(model=model, **params)
        for w in caught:
            if str(w.message) not in self._logged:
                self._logged.add(str(w.message))
                logger.warning("%s", w.message)
        if not caught:
            self.quiet_models.add(model)
        return manager

    def _where(self) -> str:
        return self._config.base_url if self._config else DEFAULT_BASE_URL

    def _transport_error(self, exc: httpx2.HTTPError) -> LLMError:
        if isinstance(exc, httpx2.TimeoutException):
            return LLMError(f"The model request timed out after {self.timeout:g} s.")
        return LLMError(
            f"The connection to the model server at {self._where()} was lost mid-reply "
            f"({_short(str(exc) or type(exc).__name__)})."
        )

    def _error(self, exc: anthropic.AnthropicError, model: str) -> LLMError:
        # Order matters: the timeout is a connection error, overloaded is a server error.
        if isinstance(exc, anthropic.APITimeoutError):
            return LLMError(f"The model request timed out after {self.timeout:g} s.")
        if isinstance(exc, anthropic.APIConnectionError):
            return LLMError(f"Could not reach the model server at {self._where()}.")
        if not isinstance(exc, anthropic.APIStatusError):
            return LLMError(f"The model call failed: {_short(str(exc) or type(exc).__name__)}.")
        return status_error(
            exc.status_code, _api_error_type(exc), _api_message(exc), model, self._where()
        )


def thinking_param(budget: int | None):
    """The request's `thinking` parameter: enabled with `budget` tokens, or left out."""
    if budget is None:
        return anthropic.omit
    return {"type": "enabled", "budget_tokens": budget}


def status_error(status: int, error_type: str, message: str, model: str, where: str) -> LLMError:
    """An HTTP error status (or an `event: error` in a 200 stream) as a sentence for the user."""
    if status == 200:
        # An `event: error` inside a stream that had already started (HTTP 200).
        detail = message or error_type or "unknown error"
        if error_type == "overloaded_error" and "overload" not in detail.lower():
            detail += " (the API is overloaded)"
        return LLMError(f"The model stopped with an error mid-reply: {detail}.", status=status)
    if status == 429:
        return LLMError(
            "The model API is rate-limiting requests (HTTP 429): wait a moment and send again.",
            status=status,
        )
    if status == 529 or error_type == "overloaded_error":
        return LLMError(
            f"The model API is overloaded right now (HTTP {status}): wait a moment and send again.",
            status=status,
        )
    if status >= 500:
        return LLMError(
            f"The model API had a server error (HTTP {status}): try again in a moment.",
            status=status,
        )
    if status == 401:
        return LLMError(
            "The model API rejected the API key (HTTP 401): check ANTHROPIC_API_KEY.",
            status=status,
        )
    if status == 403:
        return LLMError(
            f"The API key is not allowed to use model {model!r} (HTTP 403).", status=status
        )
    if status == 404:
        return LLMError(
            f"Model {model!r} was not found at {where} (HTTP 404): check CHAT_MODEL.",
            status=status,
        )
    if status == 400:
        return LLMError(
            f"The model API rejected the request (HTTP 400): {message or 'bad request'}.",
            status=status,
        )
    return LLMError(
        f"The model API returned an error (HTTP {status}): {message or 'no details'}.",
        status=status,
    )


class _Reader:
    """Turns the raw server-sent events of one reply into our events, accumulating the message.

    SSE order: message_start, then per block content_block_start, content_block_delta*,
    content_block_stop, then message_delta (stop reason, cumulative usage), message_stop.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = False
        self.blocks: dict[int, dict] = {}
        self.tool_json: dict[int, list[str]] = {}
        self.usage = Usage()
        self.stop_reason: str | None = None

    def read(self, name: str | None, data: str) -> list[Event]:
        if name in (None, "ping") or not data:
            return []
        try:
            payload = json.loads(data)
        except json.JSONDecodeError:
            raise LLMError(
                f"The model server sent an unreadable event ({_short(data, 80)})."
            ) from None
        if not isinstance(payload, dict):
            return []
        kind = payload.get("type") or name
        if name == "error" or kind == "error":
            error = payload.get("error") if isinstance(payload.get("error"), dict) else {}
            raise status_error(
                200,
                str(error.get("type") or ""),
                _short(str(error.get("message") or "")).rstrip("."),
                self.model,
                "",
            )
        if kind == "message_start":
            self.started = True
            message = payload.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage = self.usage.merged(Usage.from_mapping(message.get("usage")))
        elif kind == "content_block_start":
            return self._block_start(payload.get("index", 0), payload.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(payload.get("index", 0), payload.get("delta") or {})
        elif kind == "content_block_stop":
            return self._block_stop(payload.get("index", 0))
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self.usage = self.usage.merged(Usage.from_mapping(payload.get("usage")))
        return []

    def _block_start(self, index: int, block: dict) -> list[Event]:
        kind = type_of(block)
        if kind == "text":
            self.blocks[index] = {"type": "text", "text": text_of(block)}
        elif kind == "tool_use":
            self.blocks[index] = {
                "type": "tool_use",
                "id": str(block.get("id") or ""),
                "name": str(block.get("name") or ""),
                "input": {},
            }
            self.tool_json[index] = []
            return [ToolUseStart(index, self.blocks[index]["id"], self.blocks[index]["name"])]
        elif kind == "thinking":
            # Its reasoning streams as thinking_delta, its signature as signature_delta: both
            # are kept as sent, since the API takes the block back only unchanged.
            self.blocks[index] = {"type": "thinking", "thinking": "", "signature": ""}
            thought = thinking_of(block)
            if thought:
                self.blocks[index]["thinking"] = thought
                return [ThinkingDelta(thought)]
        elif kind == "redacted_thinking":
            self.blocks[index] = {"type": "redacted_thinking", "data": str(block.get("data") or "")}
        # Other kinds (server tools) are not kept.
        return []

    def _delta(self, index: int, delta: dict) -> list[Event]:
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text") or ""
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            if type_of(block) == "text" and text:
                block["text"] += text
                return [TextDelta(text)]
        elif kind == "thinking_delta" and type_of(self.blocks.get(index)) == "thinking":
            text = delta.get("thinking") or ""
            self.blocks[index]["thinking"] += text
            return [ThinkingDelta(text)] if text else []
        elif kind == "signature_delta" and type_of(self.blocks.get(index)) == "thinking":
            self.blocks[index]["signature"] += delta.get("signature") or ""
        elif kind == "input_json_delta" and index in self.tool_json:
            partial = delta.get("partial_json") or ""
            self.tool_json[index].append(partial)
            return [ToolInputDelta(index, partial)]
        return []

    def _block_stop(self, index: int) -> list[Event]:
        block = self.blocks.get(index)
        if type_of(block) != "tool_use":
            return []
        raw = "".join(self.tool_json.get(index, []))
        try:
            block["input"] = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            raise LLMError(
                f"The model sent tool input that is not valid JSON ({_short(raw, 80)})."
            ) from None
        return [ToolUseStop(index, block["id"], block["name"], block["input"])]

    def final(self, where: str) -> Final:
        if not self.started and not self.blocks:
            raise LLMError(
                f"The model server at {where} ended the reply without sending a message."
            )
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return Final(
            content=without_empty_text(content),
            stop_reason=self.stop_reason,
            usage=self.usage,
            model=self.model,
        )


def _events_of_message(body: Any, model: str) -> list[Event]:
    """A whole Messages API response (a server that ignored `stream`) as the events it implies."""
    if not isinstance(body, dict) or body.get("type") == "error":
        error = body.get("error") if isinstance(body, dict) else None
        error = error if isinstance(error, dict) else {}
        raise status_error(
            200, str(error.get("type") or ""), str(error.get("message") or ""), model, ""
        )
    events: list[Event] = []
    content: list[dict] = []
    for index, block in enumerate(body.get("content") or []):
        if not isinstance(block, dict):
            continue
        text = text_of(block)
        if text:
            content.append({"type": "text", "text": text})
            events.append(TextDelta(text))
        elif type_of(block) == "thinking":
            content.append(
                {
                    "type": "thinking",
                    "thinking": thinking_of(block),
                    "signature": str(block.get("signature") or ""),
                }
            )
            events.append(ThinkingDelta(thinking_of(block)))
        elif type_of(block) == "redacted_thinking":
            content.append({"type": "redacted_thinking", "data": str(block.get("data") or "")})
        elif type_of(block) == "tool_use":
            tool = {
                "type": "tool_use",
                "id": str(block.get("id") or ""),
                "name": str(block.get("name") or ""),
                "input": block.get("input") if isinstance(block.get("input"), dict) else {},
            }
            content.append(tool)
            events.append(ToolUseStart(index, tool["id"], tool["name"]))
            events.append(ToolUseStop(index, tool["id"], tool["name"], tool["input"]))
    events.append(
        Final(
            content=content,
            stop_reason=body.get("stop_reason"),
            usage=Usage.from_mapping(body.get("usage")),
            model=body.get("model") or model,
        )
    )
    return events


def _api_error(exc: anthropic.APIStatusError, key: str, attribute: str) -> str:
    """What the server said of its error: `key` of the body's "error" object, unless the SDK
    parsed it already (as `attribute`)."""
    value = getattr(exc, attribute, None)
    error = exc.body.get("error") if isinstance(exc.body, dict) else None
    if not value and isinstance(error, dict):
        value = error.get(key)
    return str(value or "")


def _api_message(exc: anthropic.APIStatusError) -> str:
    message = _api_error(exc, "message", "api_message")
    if not message and isinstance(exc.body, str):
        message = exc.body
    return _short(message).rstrip(".")


def _api_error_type(exc: anthropic.APIStatusError) -> str:
    return _api_error(exc, "type", "type")


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
