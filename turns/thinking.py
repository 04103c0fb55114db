"""Extended thinking in a turn: what each request of it asks for.

A conversation whose model may think (CHAT_MODELS "thinking": true) and that switched it on
(chat/controls.py) asks every step of its turn to think up to its budget, with room to answer
after it. The API's rules: the budget is at least 1024 tokens and under max_tokens. The thinking
of earlier turns is left out of the window (compaction/assembly.entry_messages: the API strips it
anyway); this turn's, signed, goes back unchanged with its tool results (the turn's own blocks).
"""

from __future__ import annotations

from django.conf import settings

from providers import registry

MIN_BUDGET = 1024


def limits(model: str, chosen: int | None, room: int) -> tuple[int | None, int]:
    """(thinking budget, max_tokens) of one request of a conversation on `model` that chose
    `chosen` tokens of thinking (None: none), with `room` tokens left in its window: the answer
    keeps CHAT_MAX_TOKENS beside the thinking where the window allows, and a budget the room
    cannot hold above the API's least is no thinking."""
    room = max(1, room)
    if chosen is None or not registry.thinks(model):
        return None, min(settings.CHAT_MAX_TOKENS, room)
    max_tokens = min(chosen + settings.CHAT_MAX_TOKENS, room)
    budget = min(chosen, max_tokens - 1)
    if budget < MIN_BUDGET:
        return None, min(settings.CHAT_MAX_TOKENS, room)
    return budget, max_tokens
