"""Choose where the window's kept tail starts: a safe cut.

A cut is the seq of the first message the model will keep seeing verbatim; everything before it
is replaced by the summary. Only a message a person typed (a user message that is not a
tool_result) can start the tail. That one rule gives the others for free: the request starts with
`user`, and a tool_use (always answered in the very next message, a tool_result) can never be
separated from its result.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from compaction.entries import Entry


def choose_cut(
    entries: Sequence[Entry], keep_tokens: int, later_versions: Collection[int] = ()
) -> int | None:
    """The seq of the new first kept message, or None when nothing can be cut.

    Of the safe cut points, the earliest whose tail fits in `keep_tokens` keeps the most history
    verbatim within budget. When none fits, the latest one still keeps the last user turn whole:
    a turn is never split, even if it alone exceeds the budget.

    `later_versions` are messages with an older version (an edited message sent again): a tail
    starting at one would leave the older version before the boundary, where its ‹ › switcher
    can no longer reach it, so the next cut point is taken instead, when there is one.
    """
    ordered = sorted(entries, key=lambda e: e.seq)
    # Index 0 is excluded: cutting there would summarise nothing.
    candidates = [i for i, e in enumerate(ordered) if i > 0 and e.starts_user_turn]
    if not candidates:
        return None
    tails = _suffix_tokens(ordered)
    # Tails only shrink: the cut points that fit are the last ones.
    fitting = [i for i in candidates if tails[i] <= keep_tokens] or candidates[-1:]
    chosen = next((i for i in fitting if ordered[i].seq not in later_versions), fitting[0])
    return ordered[chosen].seq


def _suffix_tokens(ordered: Sequence[Entry]) -> list[int]:
    # One backwards pass, so choosing a cut is linear in the window, not quadratic.
    tails = [0] * (len(ordered) + 1)
    for i in range(len(ordered) - 1, -1, -1):
        tails[i] = tails[i + 1] + ordered[i].tokens
    return tails
