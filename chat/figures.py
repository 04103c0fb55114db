"""The figures shown beside a conversation: the window's meter and its parts, the tokens after
each turn (the sawtooth), the boundaries, and what the conversation cost. Numbers only: they are
drawn in render/meter.py.

Every loader runs a fixed number of queries bounded by the window, never by the length of the
conversation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.utils import timezone

from chat.models import Conversation
from chat.transcript import SHOWN_BOUNDARIES
from chat.window_loading import load_window
from compaction.models import Compaction
from compaction.window_state import WindowState
from core import runtime
from providers.prices import cost
from providers.tokens import estimate_text
from providers.usage_columns import COLUMNS, from_row
from providers.values import Usage

CHART_TURNS = 120  # the chart shows the latest turns, so its cost does not grow without bound
LISTED_BOUNDARIES = 20


@dataclass(frozen=True)
class Spend:
    """What some model calls cost: dollars (None: a model with no price), and the share of
    their input read from the prompt cache."""

    dollars: float | None
    cached_share: float | None

    @classmethod
    def of(cls, usage: Usage | None, model: str) -> Spend | None:
        if usage is None or not usage.known:
            return None
        total = usage.input_total
        share = (usage.cache_read_input_tokens or 0) / total if total else None
        return cls(cost(usage, model), share)


@dataclass(frozen=True)
class Spent:
    """The conversation's spend in all (replies and summaries) and its latest turn's."""

    total: Spend | None
    last: Spend | None


# The latest reply that was billed (its steps summed), walking back from the newest on the
# conversation's index: bounded by the replies since, never by the length of the history.
_LAST_SPENT_SQL = (
    f"SELECT {', '.join(COLUMNS)} FROM chat_message "  # noqa: S608 - the column names are ours
    "WHERE conversation_id = %s AND input_tokens IS NOT NULL ORDER BY seq DESC LIMIT 1"
)


def load_spent(conversation: Conversation, last_usage: Usage | None = None) -> Spent:
    """The total from the conversation's running totals, the latest turn's from its row (or
    `last_usage`: the reply just closed, when it was billed, is the latest)."""
    if last_usage is None:
        with connection.cursor() as cursor:
            cursor.execute(_LAST_SPENT_SQL, [conversation.pk])
            last = cursor.fetchone()
        if last:
            last_usage = from_row(last)
    return Spent(_total(conversation), Spend.of(last_usage, conversation.model))


def dollars_spent(conversation: Conversation) -> float | None:
    """What it cost in all (None: nothing it paid for has a price): its running totals at its
    model's price, and what other models' calls cost."""
    own = cost(conversation.usage, conversation.model)
    other = conversation.other_models_cost or 0.0
    return own if not other else (own or 0.0) + other


def _total(conversation: Conversation) -> Spend | None:
    own = Spend.of(conversation.usage, conversation.model)
    if not conversation.other_models_cost:
        return own
    return Spend(dollars_spent(conversation), own.cached_share if own else None)


@dataclass
class Panel:
    """Numbers for the context panel: the meter, its breakdown, the sawtooth, the boundaries."""

    tokens: int
    budget: int
    threshold: int
    reserve: int
    system_tokens: int
    summary_tokens: int
    history_tokens: int  # the kept messages but their files
    files_tokens: int  # the files the kept and pinned messages carry (WindowState's file tokens)
    first_kept_seq: int
    boundaries: list[Compaction]
    per_turn: list[int]  # the window after each of the latest replies, oldest first
    chart_capped: bool  # the chart shows only the latest CHART_TURNS replies
    draft: Compaction | None
    paused_until: datetime | None
    spent: Spent | None = None
    # A boundary is in force: Undo gives the model what it folded (the newest committed one,
    # then the one before it, and so on).
    undoable: bool = False


def load_panel(conversation: Conversation) -> Panel:
    """The whole panel of the window the next request would carry: the figures, and the
    boundaries with any draft (one query more)."""
    panel = load_figures(conversation, load_window(conversation))
    # The draft, if any, is the newest open compaction: it comes with the listed boundaries.
    rows = list(
        Compaction.objects.filter(
            conversation_id=conversation.pk,
            status__in=[*SHOWN_BOUNDARIES, Compaction.Status.DRAFT],
        ).order_by("-id")[: LISTED_BOUNDARIES + 1]
    )
    panel.draft = next((r for r in rows if r.status == Compaction.Status.DRAFT), None)
    panel.boundaries = [r for r in rows if r.status != Compaction.Status.DRAFT][:LISTED_BOUNDARIES]
    return panel


# Replies before the current boundary never change: their points are read once per boundary.
_EARLIER_SQL = (
    "SELECT window_tokens FROM chat_message WHERE conversation_id = %s AND role = 'assistant' "
    "AND window_tokens IS NOT NULL AND seq < %s ORDER BY seq DESC LIMIT %s"
)


def _earlier_points(conversation_id: int, boundary: Compaction | None) -> list[int]:
    """The chart's points before the window: replies before the boundary (none without one)."""
    if boundary is None:
        return []
    key = (conversation_id, boundary.pk)
    cache = runtime.current().chart_points
    points = cache.get(key)
    if points is None:
        with connection.cursor() as cursor:
            cursor.execute(_EARLIER_SQL, [conversation_id, boundary.first_kept_seq, CHART_TURNS])
            points = [tokens for (tokens,) in reversed(cursor.fetchall()) if tokens]
        cache.put(key, points)
    return points


def load_figures(
    conversation: Conversation, state: WindowState, last_usage: Usage | None = None
) -> Panel:
    """The meter and the chart, what a reply changes (the boundaries change only by compaction):
    the window's numbers and latest points from `state`, the points before its boundary read
    once per boundary; `last_usage` as `load_spent` takes it."""
    points = _earlier_points(conversation.pk, state.boundary) + state.per_turn
    system_tokens = estimate_text(conversation.system_prompt)
    kept = max(state.tokens - state.head_tokens, 0)
    pinned_files = min(state.head_file_tokens, max(state.head_tokens - system_tokens, 0))
    files = min(state.file_tokens, kept)
    paused = conversation.auto_compact_paused_until
    return Panel(
        tokens=state.tokens,
        budget=state.budget.total,
        threshold=state.budget.threshold,
        reserve=state.budget.reserve,
        system_tokens=system_tokens,
        summary_tokens=state.head_tokens - system_tokens - pinned_files,
        history_tokens=kept - files,
        files_tokens=files + pinned_files,
        first_kept_seq=state.first_kept,
        boundaries=[],
        per_turn=points[-CHART_TURNS:],
        chart_capped=len(points) >= CHART_TURNS,
        draft=None,
        # An expired pause is no pause: say so only while it holds.
        paused_until=paused if paused and paused > timezone.now() else None,
        spent=load_spent(conversation, last_usage),
        undoable=state.boundary is not None,
    )
