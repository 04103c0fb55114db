"""Token accounting.

The API's `usage` on a reply is the ground truth for what the window it was sent cost. Between
replies we only *estimate* what was added since, with a deliberately conservative (high) local
estimator, so the window is never believed smaller than it is. Each message's estimate is stored
once when it is saved; nothing here re-counts a whole history.
"""

from __future__ import annotations

import json
import math

# English prose runs near 4 characters a token for Claude's tokenizer; code and other scripts run
# denser. Three characters a token over-counts prose by ~30%, which is the safe direction.
CHARS_PER_TOKEN = 3.0
# Role markers and block framing cost a few tokens per message.
MESSAGE_OVERHEAD = 4

# Context windows by model family; anything unknown gets the common 200k.
MODEL_CONTEXT = {
    "claude": 200_000,
    "demo": 2_000,  # small on purpose: a newcomer sees compaction after a handful of turns
}
DEFAULT_CONTEXT = 200_000


def estimate_text(text: str) -> int:
    if not text:
        return 0
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def block_text(block: dict) -> str:
    """The characters a content block puts in front of the model."""
    kind = block.get("type")
    if kind == "text":
        return block.get("text", "")
    if kind == "tool_use":
        return f"{block.get('name', '')} {json.dumps(block.get('input', {}), sort_keys=True)}"
    if kind == "tool_result":
        inner = block.get("content", "")
        if isinstance(inner, list):
            return "\n".join(block_text(b) for b in inner)
        return str(inner)
    return json.dumps(block, sort_keys=True)


def estimate_content(content: list[dict] | str) -> int:
    if isinstance(content, str):
        return MESSAGE_OVERHEAD + estimate_text(content)
    return MESSAGE_OVERHEAD + sum(estimate_text(block_text(b)) for b in content)


def estimate_request(system: str, messages: list[dict]) -> int:
    """Estimate a whole request: only for windows with no reported usage to anchor on."""
    return estimate_text(system) + sum(estimate_content(m["content"]) for m in messages)


def usage_input_total(usage: dict | None) -> int:
    """Total input tokens of a request: the API reports cache reads and writes separately."""
    if not usage:
        return 0
    return (
        int(usage.get("input_tokens") or 0)
        + int(usage.get("cache_read_input_tokens") or 0)
        + int(usage.get("cache_creation_input_tokens") or 0)
    )


def default_budget(model: str, provider: str) -> int:
    if provider == "demo":
        return MODEL_CONTEXT["demo"]
    for prefix, size in MODEL_CONTEXT.items():
        if model.startswith(prefix):
            return size
    return DEFAULT_CONTEXT


def window_total(head_tokens: int, entries: list, anchor: tuple[int, int, int] | None) -> int:
    """Tokens of a window: reported usage where we have it, stored estimates for the rest.

    `head_tokens` is the estimate for the system prompt and summary pair now; `anchor` is
    `(seq, tokens, head_then)` of the latest reply sent under the current boundary, where `tokens`
    is what the API reported for its request plus its own output and `head_then` the head
    estimate when it was sent. Only messages after the anchor, and any change to the head since,
    are estimated.
    """
    if anchor is None:
        return head_tokens + sum(e.tokens for e in entries)
    anchor_seq, reported, head_then = anchor
    return max(
        reported + head_tokens - head_then + sum(e.tokens for e in entries if e.seq > anchor_seq),
        0,
    )
