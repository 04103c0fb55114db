"""What the fake Anthropic server answers one request with (`Script`), and the planner that
gives every request the same reply (the load benches' mode).

A planner is any object with `plan(body: dict) -> Script`, asked once per request that passed
the API's checks (support/fake_anthropic.py); it may also have `refused(body, reason)` (a request
refused with a 400) and `truncated(received, length)` (a request that never arrived whole).
Without a planner, the server answers from the queue its `enqueue_*` methods fill (tests).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

DEFAULT_CHUNKS = ["Hello", " from", " the", " fake", " server."]


@dataclass
class Script:
    """One scripted answer to one request."""

    kind: str  # "reply" | "json" | "status" | "stream_error" | "drop"
    chunks: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str = "end_turn"
    delay: float = 0.0  # seconds between text deltas
    status: int = 200
    error_type: str = ""
    message: str = ""
    report_usage: bool = True  # False: like servers that send no usage at all
    tools: list[dict] = field(default_factory=list)  # {"id", "name", "input_parts"} after the text
    # No usage scripted: report the request's own count, cache reads and writes included.
    counted: bool = False
    first_delay: float = 0.0  # seconds between the stream's start and its first text delta
    # Extended thinking before the text: its reasoning as thinking_delta chunks (signed by the
    # server, support/messages_api.signature_of), and a redacted_thinking block's data.
    thinking: list[str] = field(default_factory=list)
    redacted: str = ""

    def thinking_blocks(self) -> list[dict]:
        """The thinking blocks this answer starts with, as the API sends them whole."""
        from support.messages_api import signature_of

        blocks = [{"type": "redacted_thinking", "data": self.redacted}] if self.redacted else []
        if self.thinking:
            thought = "".join(self.thinking)
            blocks.append(
                {"type": "thinking", "thinking": thought, "signature": signature_of(thought)}
            )
        return blocks


def thinking_events(script: Script) -> list[dict]:
    """The server-sent events of a script's thinking blocks, from index 0: a thinking block
    starts empty, its reasoning comes as thinking_delta and its signature as one
    signature_delta; a redacted one comes whole."""
    events = []
    for index, block in enumerate(script.thinking_blocks()):
        start = {**block, "thinking": "", "signature": ""} if "thinking" in block else block
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        if "thinking" in block:
            deltas = [{"type": "thinking_delta", "thinking": c} for c in script.thinking]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
            events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    return events


def thinking_reply(
    thinking: list[str], chunks: list[str], *, calls: list[tuple] = (), redacted: str = ""
) -> Script:
    """A streamed reply that thinks first (`thinking` chunks, signed; a redacted block with
    `redacted` data before it, if given), then says `chunks`, then asks for tools: one
    (id, name, input dict) per call, as FakeAnthropic.enqueue_tool_calls takes them."""
    tools = [{"id": i, "name": n, "input_parts": [json.dumps(a)]} for i, n, a in calls]
    # Thinking is billed as output, as the API bills it: a token per chunk, like the text.
    script = Script(
        "reply",
        list(chunks),
        usage_of({"output_tokens": len(chunks) + len(thinking)}, chunks),
        "tool_use" if tools else "end_turn",
        tools=tools,
        thinking=list(thinking),
        redacted=redacted,
    )
    script.counted = True
    return script


def usage_of(usage: dict[str, int] | None, chunks: list[str]) -> dict[str, int]:
    """The usage a script reports: what was given, with input and output counts filled in."""
    usage = dict(usage or {})
    usage.setdefault("input_tokens", 10)
    usage.setdefault("output_tokens", max(1, len(chunks)))
    return usage


def reply(chunks: list[str], *, delay: float = 0.0) -> Script:
    """A complete streamed reply of these chunks, reporting the request's own input count."""
    return Script("reply", list(chunks), usage_of(None, chunks), delay=delay, counted=True)


def error_body(error_type: str, message: str) -> dict:
    """The API's JSON error body."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


def message_json(script: Script, model: str) -> dict:
    """The whole message a non-streaming request (or a gateway's answer) carries."""
    usage = usage_of(script.usage, script.chunks)
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [*script.thinking_blocks(), {"type": "text", "text": "".join(script.chunks)}],
        "stop_reason": script.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
        },
    }


# --- the same reply to every request (bench/load.py, bench/turn_cpu.py) ------------------------

# Early words carry characters the app must escape (& ' < >), so a client checks its unescaping.
BENCH_WORDS = (
    "Sure & here's a short <answer>: the reply streams word by word, each delta is relayed to "
    "the browser as it arrives, and the saved message matches what was shown. That is all."
).split()


def standalone_chunks(words: int) -> list[str]:
    """The reply the standalone server sends: `words` words, one text delta each."""
    return [("" if i == 0 else " ") + BENCH_WORDS[i % len(BENCH_WORDS)] for i in range(words)]


class SameReply:
    """Answers every request with the same reply, its first delta at once and the last one
    `stream_seconds` later (0: all at once)."""

    def __init__(self, chunks: list[str], stream_seconds: float = 0.0) -> None:
        self.chunks = list(chunks)
        self.delay = stream_seconds / max(1, len(chunks) - 1)

    def plan(self, body: dict) -> Script:
        chunks = list(self.chunks)
        return Script("reply", chunks, usage_of(None, chunks), delay=self.delay)
