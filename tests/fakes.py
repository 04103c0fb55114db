"""In-process test doubles for fast tests (no HTTP, no SDK).

client = FakeClient()
client.enqueue(["Hel", "lo"])
client.enqueue_error("The model API is overloaded right now.", after_chunks=["Par", "tial"])
... code under test calls client.reply(...) ...
assert client.calls[0].messages[-1]["content"] == "hi"
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from chat.llm import USAGE_KEYS, LLMError, Reply, TextCallback
from compaction.tokens import estimate_request, estimate_text

DEFAULT_REPLY = ["This ", "is ", "the ", "fake ", "model."]


@dataclass(frozen=True)
class Call:
    system: str
    messages: list[dict]
    max_tokens: int


@dataclass
class _Scripted:
    chunks: list[str]
    usage: dict | None = None
    error: str | None = None
    status: int | None = None
    stop_reason: str = "end_turn"
    delay: float | None = None


@dataclass
class FakeClient:
    """An LLMClient that answers from a queue; records every call in `.calls`."""

    provider: str = "fake"
    model: str = "fake-model"
    delay: float = 0.0  # seconds between chunks, unless an enqueued reply sets its own
    calls: list[Call] = field(default_factory=list)
    _queue: list[_Scripted] = field(default_factory=list)

    def enqueue(
        self,
        chunks: list[str],
        usage: dict | None = None,
        *,
        stop_reason: str = "end_turn",
        delay: float | None = None,
    ) -> None:
        self._queue.append(_Scripted(list(chunks), usage, stop_reason=stop_reason, delay=delay))

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

    async def reply(
        self,
        *,
        system: str,
        messages: list[dict],
        max_tokens: int,
        on_text: TextCallback | None = None,
    ) -> Reply:
        # Copy what was sent: callers may mutate their lists after the call.
        self.calls.append(Call(system, [dict(m) for m in messages], max_tokens))
        script = self._queue.pop(0) if self._queue else _Scripted(list(DEFAULT_REPLY))
        delay = self.delay if script.delay is None else script.delay
        for i, chunk in enumerate(script.chunks):
            if i:
                await asyncio.sleep(delay)
            if on_text is not None:
                await on_text(chunk)
        if script.error is not None:
            raise LLMError(script.error, status=script.status)
        text = "".join(script.chunks)
        usage = dict.fromkeys(USAGE_KEYS, 0)
        usage["input_tokens"] = estimate_request(system, messages)
        usage["output_tokens"] = estimate_text(text)
        usage.update(script.usage or {})
        return Reply(
            content=[{"type": "text", "text": text}],
            usage=usage,
            stop_reason=script.stop_reason,
            model=self.model,
        )
