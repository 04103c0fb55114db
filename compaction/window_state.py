"""The window as a value: what the next request carries and what it weighs.

The transcript's rows are read and filtered to the branch on screen by the domain
(chat/window_loading.py); here the window is what they make: the system prompt, the summary
pair (with pinned messages), the entries kept verbatim, their size in tokens, and the budget
they must fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from django.conf import settings

from compaction.assembly import Window, assemble, summary_pair
from compaction.entries import Entry
from compaction.models import Compaction
from compaction.policy import Budget, shares
from providers import registry
from providers.blocks import file_tokens, files
from providers.tokens import MESSAGE_OVERHEAD, estimate_content, estimate_text

# (seq, tokens, head_then) of the latest reply whose reported usage describes the window's
# prefix: its seq, the window's size after it as the server counted it (plus its framing), and
# the head's estimate when it was sent.
Anchor = tuple[int, int, int]


def anchor_at(reply_seq: int, window_tokens: int, head_then: int) -> Anchor:
    """The anchor a reply gives, its window's size as the server counted it: that reply
    re-enters the next request as a message, so plus its framing."""
    return reply_seq, window_tokens + MESSAGE_OVERHEAD, head_then


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
    anchor: Anchor | None  # None: estimate it all
    # The window's size after each reply it carries, as the server counted it, oldest first:
    # the chart's latest points.
    per_turn: list[int] = field(default_factory=list, hash=False)

    @cached_property
    def tokens(self) -> int:
        """The window's size: reported usage where there is some, estimates for the rest."""
        return window_total(self.head_tokens, self.entries, self.anchor)

    @cached_property
    def file_tokens(self) -> int:
        """The files' part of the kept messages' tokens (with `head_file_tokens`, the meter's
        Files segment)."""
        return files_total(self.entries, self.anchor)

    @cached_property
    def head_file_tokens(self) -> int:
        """The files' part of `head_tokens`: pinned messages' own files riding in the summary
        message (compaction/assembly.summary_pair carries those, not a pinned reply's tool
        results), at their estimates, as the head is."""
        return sum(file_tokens(meta) for e in self.pinned_before_cut for meta in files(e.content))

    @property
    def first_kept(self) -> int:
        """The first message the window carries verbatim: the boundary's, or the first."""
        return first_kept(self.boundary)

    def window(self) -> Window:
        return assemble(self.system, self.summary, self.entries, self.pinned_before_cut)

    def extended(self, added: list[Entry], window_tokens: int | None = None) -> WindowState:
        """The state once `added` (a user message, its reply) are in the transcript. The
        window's size after the reply, when the server counted it, becomes the new anchor."""
        entries = self.entries + added
        anchor, per_turn = self.anchor, self.per_turn
        if added and window_tokens:
            anchor = anchor_at(added[-1].seq, window_tokens, self.head_tokens)
            per_turn = [*per_turn, window_tokens]
        return replace(self, entries=entries, anchor=anchor, per_turn=per_turn)


def first_kept(boundary: Compaction | None) -> int:
    """Where the window's verbatim part starts under `boundary` (None: no compaction yet)."""
    return boundary.first_kept_seq if boundary else 1


def budget_for(
    model: str, *, auto_at: float | None = None, keep_share: float | None = None
) -> Budget:
    """The budget of a conversation on `model`: its total follows the model (its "context" in
    CHAT_MODELS, else CONTEXT_BUDGET_TOKENS, else the provider's window), so the meter, the
    threshold and the cut all follow the conversation's own model; it compacts at `auto_at` and
    keeps `keep_share` of it, the conversation's choices (None: AUTO_COMPACT_AT and
    KEEP_TAIL_SHARE, `policy.shares`)."""
    total = registry.context_budget(model)
    auto_at, keep_share = shares(
        auto_at,
        keep_share,
        default_auto=settings.AUTO_COMPACT_AT,
        default_keep=settings.KEEP_TAIL_SHARE,
    )
    return Budget(
        total=total,
        auto_at=auto_at,
        keep_share=keep_share,
        # Room for the reply: the configured maximum, but never most of a small budget.
        reserve=min(settings.CHAT_MAX_TOKENS, total // 10),
    )


def head_tokens(system: str, summary: str | None, pinned: list[Entry]) -> int:
    """The estimate for the window's head: the system prompt and the summary pair."""
    head = estimate_text(system)
    if summary:
        head += sum(estimate_content(m["content"]) for m in summary_pair(summary, pinned))
    return head


def window_total(head_tokens: int, entries: list[Entry], anchor: Anchor | None) -> int:
    """Tokens of a window: reported usage where there is some, stored estimates for the rest.

    `head_tokens` is the estimate for the system prompt and summary pair now; `anchor` is the
    latest reply sent under the current boundary whose usage the server reported. Only messages
    after the anchor, and any change to the head since, are estimated.
    """
    if anchor is None:
        return head_tokens + sum(e.tokens for e in entries)
    anchor_seq, reported, head_then = anchor
    return max(
        reported + head_tokens - head_then + sum(e.tokens for e in entries if e.seq > anchor_seq),
        0,
    )


def files_total(entries: list[Entry], anchor: Anchor | None) -> int:
    """The files' part of a window's size: their estimates, corrected by reported usage as the
    text is.

    The server counts a request as one number, so which part of it the estimates got wrong is
    unknown (an image's is the API's own formula, a PDF's the top of a two-fold range, text's
    some 30% high). The messages the anchor covers weigh what the server counted less the head
    as estimated then (what `window_total` makes of them); that weight is shared between their
    files and their text in proportion to their estimates, so neither takes the other's error
    and the meter's segments still add up to the total. Messages after the anchor count at
    their estimates, as in `window_total`.
    """
    if anchor is None:
        return sum(e.file_tokens for e in entries)
    anchor_seq, reported, head_then = anchor
    estimated = covered = after = 0
    for e in entries:
        if e.seq <= anchor_seq:
            estimated += e.tokens
            covered += e.file_tokens
        else:
            after += e.file_tokens
    counted = max(reported - head_then, 0)
    return after + (round(covered * counted / estimated) if estimated else 0)


def post_tokens(state: WindowState, summary: str, cut: int) -> int:
    """The window's size once a boundary with `summary` at `cut` is in force."""
    kept = [e for e in state.entries if e.seq >= cut]
    pinned = state.pinned_before_cut + [e for e in state.entries if e.seq < cut and e.pinned]
    return head_tokens(state.system, summary, pinned) + sum(e.tokens for e in kept)
