"""The Messages API's rules and its prompt cache, as the fake server (support/fake_anthropic.py)
checks and accounts every request: what the real API would refuse with a 400, and what it would
read from and write to its cache.

Helpers over request bodies (plain JSON dicts) live here too: a request's system prompt as text,
its parts without cache marks, its breakpoints, its messages' blocks and their shape.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import threading
import time


def invalid_request(body: dict) -> str:
    """What the real API would refuse in this request's messages, or "" (the rules the window
    must keep: user first, roles alternating, no empty message, every tool_use answered by a
    tool_result in the very next message, results first, no result without its call)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    has_tools = bool(body.get("tools"))
    previous: dict | None = None
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not content:
            return f"messages.{i}: content must not be empty"
        if role == (previous or {}).get("role", "assistant"):
            return f"messages.{i}: roles must alternate, starting with user"
        for block in content:
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                return f"messages.{i}: text content blocks must be non-empty"
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for item in [block, *(inner if isinstance(inner, list) else ())]:
                if wrong := invalid_file(item):
                    return f"messages.{i}: {wrong}"
        asked = {
            b["id"] for b in (previous or {}).get("content", []) if b.get("type") == "tool_use"
        }
        results = [b for b in content if b.get("type") == "tool_result"]
        if role == "user":
            if {b.get("tool_use_id") for b in results} - asked:
                return f"messages.{i}: tool_result without a tool_use in the message before"
            if asked - {b.get("tool_use_id") for b in results}:
                return f"messages.{i}: tool_use ids without a tool_result right after them"
            if results and any(b.get("type") != "tool_result" for b in content[: len(results)]):
                return f"messages.{i}: tool_result blocks must come first"
        elif not has_tools and any(b.get("type") == "tool_use" for b in content):
            return f"messages.{i}: tool_use blocks need the tools parameter"
        previous = {"role": role, "content": content}
    last = messages[-1]
    if last.get("role") == "assistant" and any(
        b.get("type") == "tool_use" for b in last.get("content") or []
    ):
        return "the last message holds tool_use blocks without results"
    return ""


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


# --- extended thinking ----------------------------------------------------------------------------

MIN_THINKING_BUDGET = 1024
# The fake's own key: a thinking block's signature is its reasoning's digest under it, so a
# block sent back altered (or with another's signature) is caught, as the API catches it.
_SIGNING_KEY = b"fake-anthropic-thinking"


def signature_of(thinking: str) -> str:
    digest = hashlib.sha256(_SIGNING_KEY + thinking.encode()).digest()
    return base64.b64encode(digest).decode()


def invalid_thinking(body: dict, issued: dict[str, list[dict]]) -> str:
    """What the API would refuse about extended thinking in this request, or "": its parameter
    (enabled, a budget of at least 1024 under max_tokens, no temperature or top_k beside it), a
    thinking block altered or signed by nobody, and, in a turn's tool loop, the thinking that
    came with the calls being answered missing or changed. `issued`: the thinking blocks this
    server sent with each tool_use id. (Thinking from earlier turns may be sent or left out:
    the API strips it.)"""
    thinking = body.get("thinking")
    if thinking is not None:
        budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
        if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
            return "thinking: type must be 'enabled' (with budget_tokens) or the field left out"
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            return f"thinking.budget_tokens: Input should be >= {MIN_THINKING_BUDGET}"
        if budget >= int(body.get("max_tokens") or 0):
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        for knob in ("temperature", "top_k"):
            if knob in body and not (knob == "temperature" and body[knob] == 1):
                return f"`{knob}` may only be set to 1 when thinking is enabled"
    messages = body.get("messages") or []
    for i, message in enumerate(messages):
        for block in message_blocks(message):
            if block.get("type") == "thinking" and block.get("signature") != signature_of(
                str(block.get("thinking", ""))
            ):
                return f"messages.{i}: Invalid `signature` in `thinking` block"
            if block.get("type") == "redacted_thinking" and not block.get("data"):
                return f"messages.{i}: redacted_thinking.data: Field required"
    # The tool loop: the calls the last user message answers came with thinking; the assistant
    # message holding them must carry it back first, whole and unchanged.
    if len(messages) >= 2 and messages[-1].get("role") == "user":
        answered = [
            b.get("tool_use_id")
            for b in message_blocks(messages[-1])
            if b.get("type") == "tool_result"
        ]
        before = message_blocks(messages[-2])
        sent = next((issued[a] for a in answered if a in issued), [])
        if sent and [b for b in before if b.get("type") in THINKING] != sent:
            return (
                f"messages.{len(messages) - 2}: the thinking blocks that came with these "
                "tool_use blocks must be passed back unchanged"
            )
        if thinking is not None and answered and before:
            first = before[0].get("type")
            if first not in THINKING:
                return (
                    f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                    f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, a "
                    "final `assistant` message must start with a thinking block"
                )
    return ""


THINKING = ("thinking", "redacted_thinking")


def invalid_file(block: dict) -> str:
    """What the API would refuse in an image or document block, or "": a source of base64
    (an image of its four types, a PDF) or, for a document, plain text; nothing else in it."""
    kind = block.get("type")
    if kind not in ("image", "document"):
        return ""
    extra = (
        set(block)
        - {"type", "source", "cache_control"}
        - ({"title", "context", "citations"} if kind == "document" else set())
    )
    if extra:
        return f"{kind}: Extra inputs are not permitted: {sorted(extra)}"
    source = block.get("source")
    if not isinstance(source, dict):
        return f"{kind}.source: Field required"
    media = source.get("media_type")
    if source.get("type") == "base64":
        allowed = IMAGE_TYPES if kind == "image" else ("application/pdf",)
        if media not in allowed:
            return f"{kind}.source.media_type: Input should be one of {allowed}"
        try:
            base64.b64decode(source.get("data") or "", validate=True)
        except (ValueError, TypeError):
            return f"{kind}.source.data: invalid base64"
        return "" if source.get("data") else f"{kind}.source.data: empty"
    if kind == "document" and source.get("type") == "text" and media == "text/plain":
        return "" if isinstance(source.get("data"), str) else "document.source.data: Field required"
    return f"{kind}.source: unsupported source {source.get('type')!r}"


def system_text(body: dict) -> str:
    """A request's system prompt as text (sent as a string, or as blocks to mark for caching)."""
    system = body.get("system") or ""
    if isinstance(system, str):
        return system
    return "".join(b.get("text", "") for b in system)


def stripped(value):
    """A request part without its cache marks: what must stay byte-identical."""
    if isinstance(value, list):
        return [stripped(v) for v in value]
    if isinstance(value, dict):
        return {k: stripped(v) for k, v in value.items() if k != "cache_control"}
    return value


def breakpoints(body: dict) -> int:
    """How many blocks of a request carry cache_control."""
    return len(cache_units(body)[1])


def message_blocks(message: dict) -> list[dict]:
    """A message's content as blocks (a string content is one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def shape(body: dict) -> str:
    """A request's messages in brief, for a report: `user[text] assistant[text,tool_use] ...`."""
    return " ".join(
        f"{m.get('role')}[{','.join(b.get('type', '?') for b in message_blocks(m))}]"
        for m in body.get("messages") or []
    )


def offers(body: dict, tool: str) -> bool:
    """Whether the request offers the model this tool."""
    return any(t.get("name") == tool for t in body.get("tools") or [])


class CacheRuleError(Exception):
    """A request that breaks the prompt-caching rules (the real API answers 400)."""


class PromptCache:
    """Prompt caching as the API does it, closely enough for the figures to mean something.

    A request is a sequence of blocks in the API's order: tools, then system, then each
    message's content blocks. A block with `cache_control` is a breakpoint (at most 4, each
    `{"type": "ephemeral"}`, never on an empty text block). The prefix up to each breakpoint is
    written to the cache (if it has at least `min_tokens`); a later request whose prefix up to
    one of its breakpoints, or one of the 20 block boundaries before it, is byte-identical
    reads it, refreshing its 5-minute life. Usage
    reports the tokens read, written and the rest apart, as `usage.input_tokens` excludes reads
    and writes. Tokens are counted as a quarter of the characters of each block's JSON.
    """

    TTL = 300.0
    MAX_BREAKPOINTS = 4
    LOOKBACK = 20

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._entries: dict[str, float] = {}
        self._lock = threading.Lock()

    def account(self, body: dict) -> dict[str, int]:
        units, marks = cache_units(body)
        if len(marks) > self.MAX_BREAKPOINTS:
            raise CacheRuleError(
                f"A maximum of {self.MAX_BREAKPOINTS} blocks with cache_control may be "
                f"provided. Found {len(marks)}."
            )
        sizes = [math.ceil(len(text) / 4) for text in units]
        digests, running = [], hashlib.sha256()
        for text in units:
            running.update(text.encode())
            digests.append(running.copy().hexdigest())
        total, now = sum(sizes), time.monotonic()
        read_end = 0  # units [0, read_end) read from the cache
        with self._lock:
            # Like the API, a breakpoint also finds a prefix cached at any of the LOOKBACK
            # block boundaries before it: a moving breakpoint reads what the last request wrote.
            for mark in reversed(marks):
                for end in range(mark, max(-1, mark - self.LOOKBACK), -1):
                    expires = self._entries.get(digests[end])
                    if expires is not None and expires > now:
                        self._entries[digests[end]] = now + self.TTL
                        read_end = end + 1
                        break
                if read_end:
                    break
            written_end = read_end
            for mark in marks:
                if mark + 1 > read_end and sum(sizes[: mark + 1]) >= self.min_tokens:
                    self._entries[digests[mark]] = now + self.TTL
                    written_end = mark + 1
        read = sum(sizes[:read_end])
        written = sum(sizes[read_end:written_end])
        return {
            "input_tokens": max(1, total - read - written),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def cache_units(body: dict) -> tuple[list[str], list[int]]:
    """The request's blocks in cache order, as canonical JSON without their cache_control, and
    the indices of those that carried one."""
    blocks: list[tuple[str, dict]] = [("tool", t) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks += [("system", b) for b in system]
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks += [(f"{i}:{message.get('role')}", b) for b in content or [] if isinstance(b, dict)]
    units, marks = [], []
    for index, (where, block) in enumerate(blocks):
        control = block.get("cache_control")
        if control is not None:
            if not isinstance(control, dict) or control.get("type") != "ephemeral":
                raise CacheRuleError(f"{where}: cache_control must be {{'type': 'ephemeral'}}")
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                raise CacheRuleError(f"{where}: cache_control cannot be set on an empty text block")
            marks.append(index)
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        units.append(where + json.dumps(plain, sort_keys=True, ensure_ascii=False))
    return units, marks
