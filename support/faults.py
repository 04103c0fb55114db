"""The fault campaign's planner for the fake Anthropic server: a random outcome per request.

Run by `bench/faults.py` in its own process (`python -m support.fake_anthropic --faults --log
PATH`), so its sleeps and writes do not share an interpreter with the clients. Every request
gets, at random: a reply streamed over about a second, an HTTP 529 (overloaded) or 429 (rate
limit), an `event: error` after some text, a connection dropped after some text, a slow first
token, or (for chat requests offering `search_history`) a tool call. Summary requests get a
well-formed `<summary>`, or the same faults.

Nothing is scripted per test here: `plan` decides per request. The fake's own checks still run
first: a request breaking the Messages API's rules (roles, tool_use/tool_result pairing,
cache_control) is refused with a 400 and logged whole. Every request, answered or refused, is one
JSON line in the log, which `bench/faults.py` reads at the end: what each turn's provider stream
delivered is what the stored reply must keep.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# How the app's summary requests show themselves (compaction/prompt.py: plain values, imported
# without Django set up): the system prompt of a separate-transcript summary, or the marker
# opening a summary asked over the chat's prefix.
from compaction.prompt import PREFIX_MARKER, SYSTEM_PROMPT
from support.messages_api import message_blocks, offers, shape, system_text
from support.scripts import Script

# Every user message of the campaign opens with its key: conversation index and message number.
KEY_RE = re.compile(r"^(k\d+t\d+):", re.M)

# Words of the replies: characters the page must escape, some non-ASCII, some markdown.
WORDS = (
    "Sure & here's a <short> answer: the 'reply' streams word by word — café, naïve, 42% done, "
    '*emphasis*, `code`, a > b, and "quotes" too; then the saved message matches what was shown.'
).split()


@dataclass
class Faults:
    """Share of requests given each outcome; the rest are plain replies."""

    overloaded: float = 0.05  # HTTP 529 overloaded_error
    rate_limited: float = 0.04  # HTTP 429 rate_limit_error
    stream_error: float = 0.04  # 200, some text, then `event: error`
    dropped: float = 0.04  # 200, some text, then the connection is cut
    slow_first_token: float = 0.06  # 1.5-4 s between the stream's start and its first text
    tool_call: float = 0.05  # not a fault: text, then a search_history call (chat requests)


def classify(body: dict) -> tuple[str, str | None]:
    """("summary" | "chat" | "tool", the key of the turn it answers). A tool step's last user
    message holds tool results: its key is that of the user message before them."""
    messages = body.get("messages") or []
    last = message_blocks(messages[-1]) if messages else []
    texts = [b.get("text", "") for b in last if b.get("type") == "text"]
    if system_text(body).startswith(SYSTEM_PROMPT) or any(PREFIX_MARKER in t for t in texts):
        return "summary", None
    # The turn's key is in the latest user message with one in its text: the message itself, or
    # for a tool step the one before the results. (A turn that ended on tool results, a failed
    # step, is followed by the next message in the same user message: results, then the text.)
    keys = []
    for message in reversed(messages):
        if message.get("role") == "user":
            keys = KEY_RE.findall(
                "\n".join(
                    b.get("text", "") for b in message_blocks(message) if b.get("type") == "text"
                )
            )
            if keys:
                break
    texts_keyed = bool(KEY_RE.findall("\n".join(texts)))
    results = any(b.get("type") == "tool_result" for b in last)
    step = "tool" if results and not texts_keyed else "chat"
    return step, keys[-1] if keys else None  # two merged messages: the later is this turn


class FaultPlanner:
    """Answers each request with a random outcome and logs it as one JSON line."""

    def __init__(self, faults: Faults, seed: int, log_path: Path) -> None:
        self.faults = faults
        self.rng = random.Random(seed)
        self.count = 0
        self._lock = threading.Lock()
        self._log = log_path.open("a", buffering=1)  # line-buffered: complete lines on disk
        self._log_lock = threading.Lock()

    def plan(self, body: dict) -> Script:
        step, key = classify(body)
        with self._lock:
            self.count += 1
            n = self.count
            outcome = self.outcome(step, body)
            chunks = self.chunks(step, n)
            split = self.rng.randint(1, len(chunks) - 1)  # where a mid-stream fault cuts in
            delay = self.rng.uniform(0.015, 0.05)  # between deltas: a reply takes ~1 s
            first_delay = self.rng.uniform(1.5, 4.0)
        script = self.script(outcome, chunks, split, delay, first_delay, n)
        delivered = "" if script.kind == "status" else "".join(script.chunks)
        self.write(
            {"n": n, "t": time.time(), "step": step, "key": key, "outcome": outcome}
            | {"text": delivered, "tool": outcome == "tool_call"}
        )
        return script

    def outcome(self, step: str, body: dict) -> str:
        roll, edge = self.rng.random(), 0.0
        for name, share in asdict(self.faults).items():
            if name == "tool_call" and (step != "chat" or not offers(body, "search_history")):
                continue
            edge += share
            if roll < edge:
                return name
        return "ok"

    def chunks(self, step: str, n: int) -> list[str]:
        if step == "summary":
            body = (
                f"<analysis>Notes {n}.</analysis>\n<summary>\n## Primary request and intent\n"
                f"The user sends numbered test messages (brief {n}).\n## All user messages\n"
                "Each message opens with its key and is answered briefly.\n"
                "## Current work\nAnswering the latest message.\n</summary>"
            )
            return [body[i : i + 40] for i in range(0, len(body), 40)]
        words = [self.rng.choice(WORDS) for _ in range(self.rng.randint(12, 36))]
        return [f"r{n}:"] + [" " + w for w in words]

    def script(self, outcome, chunks, split, delay, first_delay, n) -> Script:
        if outcome == "overloaded":
            return Script("status", status=529, error_type="overloaded_error", message="Overloaded")
        if outcome == "rate_limited":
            return Script(
                "status", status=429, error_type="rate_limit_error", message="Rate limited"
            )
        if outcome == "stream_error":
            return Script(
                "stream_error",
                chunks[:split],
                delay=delay,
                error_type=self.rng.choice(["overloaded_error", "api_error"]),
                message="Internal error mid-stream",
            )
        if outcome == "dropped":
            return Script("drop", chunks[:split], delay=delay)
        script = Script("reply", chunks, delay=delay, counted=True)
        script.usage = {"output_tokens": len(chunks)}
        if outcome == "slow_first_token":
            script.first_delay = first_delay
        if outcome == "tool_call":
            script.stop_reason = "tool_use"
            script.tools = [
                {
                    "id": f"toolu_faults_{n:06d}",
                    "name": "search_history",
                    "input_parts": ['{"query": "', "answer", ' words"}'],
                }
            ]
        return script

    def refused(self, body: dict, reason: str) -> None:
        """A request the server refused with a 400: logged with its whole body."""
        step, key = classify(body) if isinstance(body.get("messages"), list) else ("?", None)
        with self._lock:
            self.count += 1
            n = self.count
        self.write(
            {"n": n, "t": time.time(), "step": step, "key": key, "outcome": "invalid"}
            | {"invalid": reason, "shape": shape(body), "body": body}
        )

    def truncated(self, received: int, length: int) -> None:
        with self._lock:
            self.count += 1
            n = self.count
        self.write(
            {"n": n, "t": time.time(), "step": "?", "key": None, "outcome": "truncated"}
            | {"received": received, "length": length}
        )

    def write(self, entry: dict) -> None:
        line = json.dumps(entry, ensure_ascii=False)
        with self._log_lock:
            self._log.write(line + "\n")
