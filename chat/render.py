"""Fragments pushed over the websocket: each is HTML that htmx swaps in out-of-band by id."""

from __future__ import annotations

from dataclasses import dataclass

from django.template.loader import render_to_string
from django.utils.html import escape

from compaction import service as compaction
from compaction.chart import sawtooth_svg
from compaction.models import Compaction
from compaction.tokens import estimate_text, usage_input_total

from .models import Conversation, Message
from .transcript import Item

PAGE = "chat/conversation.html"
CHART_TURNS = 120  # the chart shows the latest turns, so its cost does not grow without bound
LISTED_BOUNDARIES = 20


def _part(name: str, context: dict) -> str:
    return render_to_string(f"{PAGE}#{name}", context)


def message(item: Item, *, oob: str = "") -> str:
    return _part("message", {"item": item, "oob": oob})


def appended_message(msg: Message) -> str:
    return (
        '<div hx-swap-oob="beforeend:#transcript">'
        + message(Item(kind="message", message=msg))
        + "</div>"
    )


def replaced_message(msg: Message, *, pinned: bool = False) -> str:
    return message(Item(kind="message", message=msg, pinned=pinned), oob="outerHTML")


def delta(seq: int, text: str) -> str:
    return f'<span hx-swap-oob="beforeend:#msg-{seq}-text">{escape(text)}</span>'


def title(conversation: Conversation) -> str:
    return _part("title", {"conversation": conversation, "oob": True})


def notice(text: str, level: str = "error") -> str:
    return _part("notice", {"text": text, "level": level, "oob": True})


def progress(text: str) -> str:
    return _part("progress", {"text": text, "oob": True})


@dataclass
class Context:
    """Numbers for the context panel: the meter, its breakdown and the sawtooth."""

    tokens: int
    budget: int
    threshold: int
    reserve: int
    system_tokens: int
    summary_tokens: int
    history_tokens: int
    first_kept_seq: int
    boundaries: list[Compaction]
    chart: str
    chart_capped: bool  # the chart shows only the latest CHART_TURNS replies
    draft: Compaction | None
    paused_until: object

    def pct(self, value: int) -> float:
        return round(100 * value / self.budget, 1) if self.budget else 0

    @property
    def threshold_pct(self) -> float:
        return self.pct(self.threshold)

    @property
    def segments(self) -> list[tuple[str, str, int, float]]:
        parts = [
            ("system", "System prompt", self.system_tokens),
            ("summary", "Summary", self.summary_tokens),
            ("history", "Kept history", self.history_tokens),
            ("reserve", "Reply reserve", self.reserve),
        ]
        return [(key, label, value, self.pct(value)) for key, label, value in parts]


def context_data(conversation: Conversation, state=None) -> Context:
    state = state or compaction.load_window(conversation)
    system_tokens = estimate_text(conversation.system_prompt)
    head = state.head_tokens
    history = max(state.tokens - head, 0)
    replies = list(
        conversation.messages.filter(role=Message.Role.ASSISTANT, usage__isnull=False)
        .order_by("-seq")
        .values_list("usage", flat=True)[:CHART_TURNS]
    )
    per_turn = [usage_input_total(u) for u in reversed(replies)]
    boundaries = list(
        Compaction.objects.filter(
            conversation=conversation, status__in=["committed", "undone"]
        ).order_by("-id")[:LISTED_BOUNDARIES]
    )
    draft = Compaction.objects.filter(conversation=conversation, status="draft").first()
    paused = compaction.auto_pause(conversation)
    return Context(
        tokens=state.tokens,
        budget=state.budget.total,
        threshold=state.budget.threshold,
        reserve=state.budget.reserve,
        system_tokens=system_tokens,
        summary_tokens=head - system_tokens,
        history_tokens=history,
        first_kept_seq=state.boundary.first_kept_seq if state.boundary else 1,
        boundaries=boundaries,
        chart_capped=len(replies) == CHART_TURNS,
        chart=sawtooth_svg(
            per_turn + [state.tokens], budget=state.budget.total, threshold=state.budget.threshold
        ),
        draft=draft,
        paused_until=paused,
    )


def context_panel(conversation_id: int, state=None) -> str:
    conversation = Conversation.objects.get(pk=conversation_id)
    data = context_data(conversation, state)
    context = {"ctx": data, "conversation": conversation, "oob": True}
    return _part("context", context)


def compaction_outcome(row: Compaction) -> str:
    """Everything a tab must change after a compaction was committed, drafted, failed or undone."""
    parts = []
    if row.status == Compaction.Status.COMMITTED:
        parts.append(
            f'<div hx-swap-oob="beforebegin:#msg-{row.first_kept_seq}">'
            + _part("divider", {"row": row})
            + "</div>"
        )
        parts.append(_part("review", {"draft": None, "oob": True}))
    elif row.status == Compaction.Status.UNDONE:
        parts.append(_part("divider", {"row": row, "oob": True}))
    elif row.status == Compaction.Status.DRAFT:
        parts.append(_part("review", {"draft": row, "oob": True}))
    elif row.status == Compaction.Status.DISCARDED:
        parts.append(_part("review", {"draft": None, "oob": True}))
        parts.append(notice("Draft summary discarded; the window is unchanged.", "info"))
    elif row.status == Compaction.Status.FAILED:
        parts.append(notice(f"Compaction failed: {row.error}"))
    parts.append(context_panel(row.conversation_id))
    return "".join(parts)
