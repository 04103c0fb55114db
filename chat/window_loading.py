"""The window a conversation's next request carries, built from its transcript rows.

`state_of` is a plain function over rows already read (chat/snapshot.py): the rows of the branch
on screen from the boundary on, the pinned ones before it, what their reported usage says the
window weighs. `load_window` reads them and builds it in one query, bounded by the window, never
by the length of the conversation.
"""

from __future__ import annotations

from django.conf import settings

from chat.models import SETTLED, Conversation, Message
from chat.snapshot import Row, Snapshot, read_snapshot
from compaction.clearing import cleared
from compaction.models import Compaction
from compaction.policy import Budget
from compaction.window_state import Anchor, WindowState, anchor_at, budget_for, head_tokens


def state_of(
    conversation: Conversation,
    state: Snapshot,
    *,
    before_seq: int | None = None,
    leaf: int | None = None,
) -> WindowState:
    """The window over rows already read (no queries), for the reply numbered `before_seq`
    (None: the next request), along the branch ending at `leaf` (None: the one on screen). Rows
    it does not carry are skipped: newer or unsettled messages, messages still queued, other
    versions, and those before the cut that are not pinned."""
    system = conversation.system_prompt
    leaf = conversation.leaf_seq if leaf is None else leaf
    boundary, rows, kept = state.boundary, state.rows, state.first_kept
    branch = set(state.branch(leaf))
    # A message whose reply waits in the queue is not in any window yet (it can still be
    # cancelled): only the one the window is built for answers to its own reply.
    waiting = {
        r.parent
        for r in rows
        if r.status == Message.Status.QUEUED
        and r.seq != before_seq
        and (r.seq in branch or r.seq < kept)
    }
    stop = before_seq if before_seq is not None else float("inf")
    # One pass, as this runs on every turn over the whole window.
    carried, entries, pinned, per_turn = [], [], [], []
    for r in rows:
        if r.seq >= stop or r.status not in SETTLED or r.seq in waiting:
            continue
        if r.seq >= kept:
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
    # committed summary is never empty (chat/compactions.py refuses one).
    summary = (boundary.summary or None) if boundary else None
    head = head_tokens(system, summary, pinned)
    return WindowState(
        budget=budget_of(conversation),
        system=system,
        summary=summary,
        entries=entries,
        pinned_before_cut=pinned,
        boundary=boundary,
        head_tokens=head,
        anchor=_anchor(carried, boundary, head),
        per_turn=per_turn,
    )


def budget_of(conversation: Conversation) -> Budget:
    """The conversation's budget: its model's, compacting and keeping as it chose (its
    settings; unset: the environment's defaults)."""
    return budget_for(
        conversation.model,
        auto_at=conversation.auto_compact_at,
        keep_share=conversation.keep_tail_share,
    )


def _anchor(rows: list[Row], boundary: Compaction | None, head_now: int) -> Anchor | None:
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
            head_then = head_now if row.window_head_tokens is None else row.window_head_tokens
            return anchor_at(row.seq, row.window_tokens, head_then)
    return None


def load_window(conversation: Conversation, before_seq: int | None = None) -> WindowState:
    """The window the next request would carry (one query)."""
    return state_of(conversation, read_snapshot(conversation.pk), before_seq=before_seq)
