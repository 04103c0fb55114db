"""The one in-process fake model for fast tests and in-process benches (no HTTP, no SDK),
registered as a provider is: `providers.registry.register(client)` (for every model), or
`register(client, "model-name")`.

client = FakeClient()
client.enqueue(["Hel", "lo"])
client.enqueue_error("The model API is overloaded right now.", after_chunks=["Par", "tial"])
client.enqueue_text("<summary>…</summary>")           # one chunk, e.g. a summary
... code under test streams client.stream(request) ...
assert client.calls[0].messages[-1]["content"][-1]["text"] == "hi"
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field

from providers.sent_files import estimated
from providers.tokens import estimate_text
from providers.values import Capabilities, Final, LLMError, Request, TextDelta, Usage

DEFAULT_REPLY = ["This ", "is ", "the ", "fake ", "model."]
OMIT = object()  # as `usage`: the server reports no usage at all


@dataclass
class _Scripted:
    chunks: list[str]
    usage: dict | None | object = None
    error: str | None = None
    status: int | None = None
    stop_reason: str = "end_turn"
    delay: float | None = None
    gate: asyncio.Event | None = None
    gate_at: int = 1
    burst: bool = False
    crash: BaseException | None = None


@dataclass
class FakeClient:
    """A provider client that answers from a queue; records every request in `.calls`."""

    name: str = "fake"
    context_window: int = 200_000
    can_summarise: bool = True
    delay: float = 0.0  # seconds between chunks, unless an enqueued reply sets its own
    on_request: object = None  # called with each request as it arrives, when set
    calls: list[Request] = field(default_factory=list)
    _queue: list[_Scripted] = field(default_factory=list)

    def capabilities(self, model: str) -> Capabilities:
        return Capabilities(context_window=self.context_window, can_summarise=self.can_summarise)

    def enqueue(
        self,
        chunks: list[str],
        usage: dict | None | object = None,
        *,
        stop_reason: str = "end_turn",
        delay: float | None = None,
        gate: asyncio.Event | None = None,
        gate_at: int = 1,
        burst: bool = False,
    ) -> None:
        """A reply of these chunks. `usage` overrides the estimate (zeros, or OMIT for none);
        with `gate`, the reply waits for it before chunk number `gate_at` (0: before any text),
        so a test holds a reply "still streaming" for as long as it needs, without timers.
        `burst`: the chunks come as from one read, never waiting between them."""
        self._queue.append(
            _Scripted(
                list(chunks),
                usage,
                stop_reason=stop_reason,
                delay=delay,
                gate=gate,
                gate_at=gate_at,
                burst=burst,
            )
        )

    def enqueue_text(self, text: str, **kwargs) -> None:
        self.enqueue([text], **kwargs)

    def enqueue_error(
        self,
        reason: str,
        after_chunks: list[str] | None = None,
        *,
        status: int | None = None,
        delay: float | None = None,
    ) -> None:
        """Stream `after_chunks`, then raise LLMError(reason)."""
        self._queue.append(
            _Scripted(list(after_chunks or []), error=reason, status=status, delay=delay)
        )

    def enqueue_crash(self, exception: BaseException) -> None:
        """Fail the next request with `exception`, as a bug (not a provider fault) would."""
        self._queue.append(_Scripted([], crash=exception))

    async def stream(self, request: Request):
        if self.on_request is not None:
            self.on_request(request)
        # Copy what was sent: callers may mutate their lists after the call.
        self.calls.append(
            Request(
                request.model,
                request.system,
                copy.deepcopy(request.messages),
                request.max_tokens,
                request.tools,
            )
        )
        script = self._queue.pop(0) if self._queue else _Scripted(list(DEFAULT_REPLY))
        if script.crash is not None:
            raise script.crash
        delay = self.delay if script.delay is None else script.delay
        for i, chunk in enumerate(script.chunks):
            if i == script.gate_at and script.gate is not None:
                await script.gate.wait()
            if i and not script.burst:
                await asyncio.sleep(delay)
            yield TextDelta(chunk)
        if script.error is not None:
            raise LLMError(script.error, status=script.status)
        text = "".join(script.chunks)
        if script.usage is OMIT:
            usage = Usage()
        elif isinstance(script.usage, Usage):
            usage = script.usage
        else:
            usage = {
                "input_tokens": estimated(request.system, request.messages),
                "output_tokens": estimate_text(text),
            }
            usage.update(script.usage or {})
            usage = Usage.from_mapping(usage)
        yield Final(
            content=[{"type": "text", "text": text}] if text else [],
            stop_reason=script.stop_reason,
            usage=usage,
            model=request.model,
        )
