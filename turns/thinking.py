"""Extended thinking in a turn: what each request of it asks for.

A conversation whose model may think (CHAT_MODELS "thinking": true) and that switched it on
(chat/controls.py) asks every step of its turn to think up to its budget, with room to answer
after it. The API's rules: the budget is at least 1024 tokens and under max_tokens. The thinking
of earlier turns is left out of the window (compaction/assembly.entry_messages: the API strips it
anyway); this turn's, signed, goes back unchanged with its tool results (the turn's own blocks).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from providers import registry
from providers.blocks import is_thinking, type_of, without_thinking
from providers.tokens import estimate_content

MIN_BUDGET = 1024


def limits(
    model: str, chosen: int | None, room: int, messages: Sequence[dict]
) -> tuple[int | None, int]:
    """(thinking budget, max_tokens) of one request of a conversation on `model` that chose
    `chosen` tokens of thinking (None: none), with `room` tokens left in its window, sending
    `messages`: the answer keeps CHAT_MAX_TOKENS beside the thinking (the budget shrinks first),
    and a budget the room cannot hold above the API's least is no thinking; nor does a request
    that goes on with an assistant turn that did not think (`may_think`)."""
    room = max(1, room)
    plain = None, min(settings.CHAT_MAX_TOKENS, room)
    if chosen is None or not registry.thinks(model) or not may_think(messages):
        return plain
    # The model's own output limit (CHAT_MODELS "output") holds thinking and answer together.
    max_tokens = min(chosen + settings.CHAT_MAX_TOKENS, room, registry.output_limit(model) or room)
    budget = min(chosen, max_tokens - settings.CHAT_MAX_TOKENS)
    return plain if budget < MIN_BUDGET else (budget, max_tokens)


def may_think(messages: Sequence[dict]) -> bool:
    """Whether a request may think: not when its last message answers the tools of an
    assistant message that does not open with thinking. That request goes on with a turn that
    did not think (a step that could not, or a turn stopped at TOOL_STEP_LIMIT whose tool results
    a "go on" joins, its thinking left out as an earlier turn's), and one assistant turn keeps
    one mode: the API refuses thinking there."""
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return True
    last = messages[-1]["content"]
    if isinstance(last, str) or not any(type_of(b) == "tool_result" for b in last):
        return True
    before = messages[-2]["content"]
    return not isinstance(before, str) and bool(before) and is_thinking(before[0])


def carried(window_tokens: int | None, content: Sequence[dict]) -> int | None:
    """The window after a turn, as the server counted it, less the turn's thinking: the next
    request leaves an ended turn's thinking out (compaction/assembly.entry_messages)."""
    if window_tokens is None:
        return None
    thought = estimate_content(content) - estimate_content(without_thinking(content))
    return max(0, window_tokens - thought)
