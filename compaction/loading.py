"""Loading the window: which transcript rows it carries, what it weighs, and the figures shown
about it.

The queries live here; the decisions stay pure (`build_state` over rows already loaded, the
policy and the cut in their own modules). Every loader runs a fixed number of queries bounded by
the window, never by the length of the conversation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

import providers
from chat.branches import on_branch, versions
from chat.models import USAGE_COLUMNS, Conversation, Message
from providers.prices import cost

from .chart import sawtooth_svg
from .clearing import cleared
from .entries import Entry
from .models import Compaction
from .policy import Budget
from .snapshot import QUEUED, SETTLED, Row, Snapshot, read_snapshot, version_rows
from .tokens import (
    MESSAGE_OVERHEAD,
    estimate_content,
    estimate_text,
    usage_input_total,
    window_total,
)
from .window import Window, assemble, summary_pair

CHART_TURNS = 120  # the chart shows the latest turns, so its cost does not grow without bound
LISTED_BOUNDARIES = 20


@dataclass(frozen=True)
class WindowState:
    """The window the next request carries, as plain values, and its size in tokens."""

    system: str
    summary: str | None
    entries: list[Entry] = field(hash=False)  # transcript messages carried verbatim
    pinned_before_cut: list[Entry] = field(hash=False)
    boundary: Compaction | None
    budget: Budget
    head_tokens: int  # estimate for the system prompt, summary pair and pins
    # (seq, tokens, head_then) of the latest reply whose reported usage describes this window's
    # prefix; None: estimate it all.
    anchor: tuple[int, int, int] | None
    tokens: int
    # The window's size after each reply it carries, as the server counted it, oldest first:
    # the chart's latest points.
    per_turn: list[int] = field(default_factory=list, hash=False)
    # The rows it was built from, every version included, as read before the turn's own
    # messages were stored (read only when a compaction opens).
    rows: list[Row] = field(default_factory=list, hash=False, repr=False, compare=False)

    def later_versions(self) -> set[int]:
        """Messages after the boundary with an older version there (cut.py avoids starting the
        tail at one)."""
        rows = version_rows(self.rows, self.boundary)
        return {seq for seq, place in versions(rows, rows).items() if place.previous is not None}

    def window(self) -> Window:
        return assemble(self.system, self.summary, self.entries, self.pinned_before_cut)

    def extended(self, added: list[Entry], window_tokens: int | None = None) -> WindowState:
        """The state once `added` (a user message, its reply) are in the transcript. The
        window's size after the reply, when the server counted it, becomes the new anchor."""
        entries = self.entries + added
        anchor, per_turn = self.anchor, self.per_turn
        if added and window_tokens:
            anchor = (added[-1].seq, window_tokens + MESSAGE_OVERHEAD, self.head_tokens)
            per_turn = [*per_turn, window_tokens]
        tokens = window_total(self.head_tokens, entries, anchor)
        return replace(self, entries=entries, anchor=anchor, tokens=tokens, per_turn=per_turn)


def budget_for(model: str) -> Budget:
    """The budget of a conversation on `model`: its total follows the model (its "context" in
    CHAT_MODELS, else CONTEXT_BUDGET_TOKENS, else the provider's window), so the meter, the
    threshold and the cut all follow the conversation's own model."""
    total = providers.context_budget(model)
    return Budget(
        total=total,
        auto_at=settings.AUTO_COMPACT_AT,
        keep_share=settings.KEEP_TAIL_SHARE,
        # Room for the reply: the configured maximum, but never most of a small budget.
        reserve=min(settings.CHAT_MAX_TOKENS, total // 10),
    )


def head_tokens(system: str, summary: str | None, pinned: list[Entry]) -> int:
    head = estimate_text(system)
    if summary:
        head += sum(estimate_content(m["content"]) for m in summary_pair(summary, pinned))
    return head


def build_state(
    system: str,
    model: str,
    boundary: Compaction | None,
    rows: list[Row],
    before_seq: int | None = None,
    leaf: int | None = None,
) -> WindowState:
    """The window over loaded rows (no queries), for the reply numbered `before_seq` (None: the
    next request), along the branch ending at `leaf` (None: at the newest row). Rows it does
    not carry are skipped, so callers may pass a superset: newer or unsettled messages, messages
    still queued, other versions, or those before the cut that are not pinned."""
    first_kept = boundary.first_kept_seq if boundary else 1
    parents = {r.seq: r.parent for r in rows if r.seq >= first_kept}
    end = max(parents, default=0) if leaf is None else leaf
    branch = set(on_branch(parents, end, first_kept))
    # A message whose reply waits in the queue is not in any window yet (it can still be
    # cancelled): only the one the window is built for answers to its own reply.
    waiting = {
        r.parent
        for r in rows
        if r.status == QUEUED and r.seq != before_seq and (r.seq in branch or r.seq < first_kept)
    }
    stop = before_seq if before_seq is not None else float("inf")
    # One pass, as this runs on every turn over the whole window.
    carried, entries, pinned, per_turn = [], [], [], []
    for r in rows:
        if r.seq >= stop or r.status not in SETTLED or r.seq in waiting:
            continue
        if r.seq >= first_kept:
            if r.seq in branch:
                carried.append(r)
                entries.append(r.entry)
                if r.window_tokens:
                    per_turn.append(r.window_tokens)
        elif r.pin_id is not None:
            pinned.append(r.entry)
    if boundary is not None and boundary.cleared_before_seq:
        entries = cleared(entries, boundary.cleared_before_seq, settings.TOOL_CLEAR_MIN_CHARS)
    # A boundary without summary text (a clearing with no summary before it) adds no pair: a
    # committed summary is never empty (compaction/run.py refuses one).
    summary = (boundary.summary or None) if boundary else None
    head = head_tokens(system, summary, pinned)
    anchor = _anchor(carried, boundary, head)
    return WindowState(
        per_turn=per_turn,
        rows=rows,
        system=system,
        summary=summary,
        entries=entries,
        pinned_before_cut=pinned,
        boundary=boundary,
        budget=budget_for(model),
        head_tokens=head,
        anchor=anchor,
        tokens=window_total(head, entries, anchor),
    )


def _anchor(
    rows: list[Row], boundary: Compaction | None, head_now: int
) -> tuple[int, int, int] | None:
    """The latest reply whose reported usage describes the current window's prefix.

    Zero or missing usage is "unknown", never a figure (`window_tokens` stays empty): a server
    that reports zeros would otherwise make every window look a few tokens long and compaction
    would never fire.
    """
    boundary_id = boundary.pk if boundary else None
    for row in reversed(rows):
        if (
            row.role == Message.Role.ASSISTANT
            and row.window_tokens
            and row.window_boundary_id == boundary_id
        ):
            # The reply re-enters the next request as a message: plus its framing.
            head_then = head_now if row.window_head_tokens is None else row.window_head_tokens
            return row.seq, row.window_tokens + MESSAGE_OVERHEAD, head_then
    return None


def load_window(conversation: Conversation, before_seq: int | None = None) -> WindowState:
    """The window the next request would carry (one query)."""
    return state_of(conversation, read_snapshot(conversation.pk), before_seq=before_seq)


def state_of(
    conversation: Conversation,
    seen: Snapshot,
    *,
    before_seq: int | None = None,
    leaf: int | None = None,
) -> WindowState:
    """The window along the branch on screen, or the one ending at `leaf`."""
    return build_state(
        conversation.system_prompt,
        conversation.model,
        seen.boundary,
        seen.rows,
        before_seq,
        leaf=conversation.leaf_seq if leaf is None else leaf,
    )


# --- the context panel's figures ---------------------------------------------------------------


@dataclass(frozen=True)
class Spend:
    """What some model calls cost: dollars (None: a model with no price), and the share of
    their input read from the prompt cache."""

    dollars: float | None
    cached_share: float | None

    @classmethod
    def of(cls, usage: dict | None, model: str) -> Spend | None:
        if not usage:
            return None
        total = usage_input_total(usage)
        share = usage.get("cache_read_input_tokens", 0) / total if total else None
        return cls(cost(usage, model), share)

    @property
    def money(self) -> str:
        return f"${self.dollars:,.4f}" if self.dollars is not None else "unknown"

    @property
    def shown(self) -> str:
        if self.cached_share is None:
            return self.money
        return f"{self.money} · {self.cached_share:.0%} of input from cache"


@dataclass(frozen=True)
class Spent:
    """The conversation's spend in all (replies and summaries) and its latest turn's."""

    total: Spend | None
    last: Spend | None


# The latest reply that was billed (its steps summed), walking back from the newest on the
# conversation's index: bounded by the replies since, never by the length of the history.
_LAST_SPENT_SQL = (
    "SELECT input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens "
    "FROM chat_message WHERE conversation_id = %s AND input_tokens IS NOT NULL "
    "ORDER BY seq DESC LIMIT 1"
)


def load_spent(conversation: Conversation, last_usage: dict | None = None) -> Spent:
    """The total from the conversation's running totals, the latest turn's from its row (or
    `last_usage`: the reply just closed, when it was billed, is the latest)."""
    if last_usage is None:
        with connection.cursor() as cursor:
            cursor.execute(_LAST_SPENT_SQL, [conversation.pk])
            last = cursor.fetchone()
        last_usage = Message(**dict(zip(USAGE_COLUMNS, last, strict=True))).usage if last else None
    return Spent(
        Spend.of(conversation.usage, conversation.model), Spend.of(last_usage, conversation.model)
    )


@dataclass
class Panel:
    """Numbers for the context panel: the meter, its breakdown, the sawtooth, the boundaries."""

    tokens: int
    budget: int
    threshold: int
    reserve: int
    system_tokens: int
    summary_tokens: int
    history_tokens: int
    first_kept_seq: int
    boundaries: list[Compaction]
    per_turn: list[int]  # the window after each of the latest replies, oldest first
    chart_capped: bool  # the chart shows only the latest CHART_TURNS replies
    draft: Compaction | None
    paused_until: datetime | None
    spent: Spent | None = None

    # Formatted here rather than with template filters: the figures are drawn after every reply.

    def pct(self, value: int) -> str:
        return f"{100 * value / self.budget:.1f}" if self.budget else "0.0"

    @property
    def threshold_pct(self) -> str:
        return self.pct(self.threshold)

    @property
    def numbers(self) -> dict[str, str]:
        """The meter's figures with thousands separators."""
        return {
            "tokens": f"{self.tokens:,}",
            "budget": f"{self.budget:,}",
            "threshold": f"{self.threshold:,}",
        }

    @property
    def segments(self) -> list[tuple[str, str, str, str]]:
        """(key, label, tokens, % of the budget) of each part of the window."""
        parts = [
            ("system", "System prompt", self.system_tokens),
            ("summary", "Summary", self.summary_tokens),
            ("history", "Kept history", self.history_tokens),
            ("reserve", "Reply reserve", self.reserve),
        ]
        return [(key, label, f"{value:,}", self.pct(value)) for key, label, value in parts]

    @property
    def chart(self) -> str:
        return sawtooth_svg(
            self.per_turn + [self.tokens], budget=self.budget, threshold=self.threshold
        )


def load_panel(conversation: Conversation, state: WindowState) -> Panel:
    """The whole panel: the figures, and the boundaries with any draft (one query more)."""
    panel = load_figures(conversation, state)
    # The draft, if any, is the newest open compaction: it comes with the listed boundaries.
    rows = list(
        Compaction.objects.filter(
            conversation_id=conversation.pk,
            status__in=[
                Compaction.Status.COMMITTED,
                Compaction.Status.UNDONE,
                Compaction.Status.DRAFT,
            ],
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
_earlier: OrderedDict[tuple[int, int], list[int]] = OrderedDict()
_earlier_lock = threading.Lock()


def _earlier_points(conversation_id: int, boundary: Compaction | None) -> list[int]:
    """The chart's points before the window: replies before the boundary (none without one)."""
    if boundary is None:
        return []
    key = (conversation_id, boundary.pk)
    with _earlier_lock:
        if key in _earlier:
            _earlier.move_to_end(key)
            return _earlier[key]
    with connection.cursor() as cursor:
        cursor.execute(_EARLIER_SQL, [conversation_id, boundary.first_kept_seq, CHART_TURNS])
        points = [tokens for (tokens,) in reversed(cursor.fetchall()) if tokens]
    with _earlier_lock:
        _earlier[key] = points
        while len(_earlier) > 1000:
            _earlier.popitem(last=False)
    return points


def load_figures(
    conversation: Conversation, state: WindowState, last_usage: dict | None = None
) -> Panel:
    """The meter and the chart, what a reply changes (the boundaries change only by compaction):
    the window's numbers and latest points from `state`, the points before its boundary read
    once per boundary; `last_usage` as `load_spent` takes it."""
    points = _earlier_points(conversation.pk, state.boundary) + state.per_turn
    per_turn = points[-CHART_TURNS:]
    system_tokens = estimate_text(conversation.system_prompt)
    paused = conversation.auto_compact_paused_until
    return Panel(
        tokens=state.tokens,
        budget=state.budget.total,
        threshold=state.budget.threshold,
        reserve=state.budget.reserve,
        system_tokens=system_tokens,
        summary_tokens=state.head_tokens - system_tokens,
        history_tokens=max(state.tokens - state.head_tokens, 0),
        first_kept_seq=state.boundary.first_kept_seq if state.boundary else 1,
        boundaries=[],
        per_turn=per_turn,
        chart_capped=len(points) >= CHART_TURNS,
        draft=None,
        # An expired pause is no pause: say so only while it holds.
        paused_until=paused if paused and paused > timezone.now() else None,
        spent=load_spent(conversation, last_usage),
    )
