"""A span of history too large for one summary request, folded in parts that each fit.

Every summary request fits the summariser's window: the conversation's budget (the most the app
sends its model in one request), never more than the model's own context window. A span whose
transcript does not fit is cut into parts, in order; the summariser folds them one after the
other, the brief each part yields carried into the next as its previous summary (the running
brief, as from one compaction to the next). A single message too large for a part is given by
its head and tail, with a note naming it: the whole is kept, and `read_messages` reads it.

Plain functions over entries and token estimates (the conservative ones every request is judged
by); the calls are compaction/summariser.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from compaction.entries import Entry
from compaction.prompt import build_summary_request, neutralise_tags, render_block, render_entry
from providers.tokens import CHARS_PER_TOKEN, estimate_request, estimate_text

# The summary's reply takes at most this share of the window: room for the model's notes and
# the brief, leaving most of the request for the transcript it reads.
REPLY_SHARE = 0.2
# A part that holds less transcript than this is not worth a request: the window is too small
# for the summariser's instructions (the rule-based brief is written instead).
MIN_TRANSCRIPT = 200
# What stands for the part of a message too long for one request. Its number and the recall
# tool's call are spelled out, so the brief can say where the whole is.
LEFT_OUT = (
    "[… {chars:,} characters of message #{seq} left out here: too long for one summary "
    "request. The whole message is kept; read_messages(from_seq={seq}, to_seq={seq}) reads "
    "it …]"
)
BRIEF_LEFT_OUT = "[… {chars:,} characters of the earlier brief left out here, for length …]"


def summary_window(budget: int | None, context_window: int) -> int:
    """The tokens a summary request and its reply may take: the conversation's budget (no
    request over it is ever sent), within the model's context window (None: that window)."""
    return context_window if budget is None else min(budget, context_window)


def reply_tokens(window: int, max_tokens: int) -> int:
    """A summary request's max_tokens: the configured maximum, within its share of the window."""
    return max(1, min(max_tokens, int(window * REPLY_SHARE)))


@dataclass(frozen=True)
class Room:
    """How one summary request shares the summariser's window, in estimated tokens."""

    window: int  # the request and its reply, together
    reply: int  # the request's max_tokens
    brief: int  # the running brief it carries in, at most
    framing: int  # the system prompt, the rules and the user's instructions

    @property
    def transcript(self) -> int:
        """The transcript's share of a part: what is left."""
        return self.window - self.reply - self.brief - self.framing

    def first(self, previous: str | None) -> int:
        """The first part's transcript share: what the earlier brief it carries leaves (all
        of a span that fits with it is asked in one request, as before any were cut)."""
        return self.window - self.reply - brief_tokens(previous) - self.framing


def room(window: int, max_tokens: int, previous: str | None, instructions: str) -> Room | None:
    """The room of each request folding a span into a brief, or None when the window cannot
    hold a useful one. The brief's share is what the model may write (a brief it wrote fits in
    its reply), more for a longer earlier brief, up to the reply's share of the window."""
    reply = reply_tokens(window, max_tokens)
    brief = max(reply, min(brief_tokens(previous), int(window * REPLY_SHARE)))
    found = Room(window, reply, brief, framing_tokens(instructions))
    return found if found.transcript >= MIN_TRANSCRIPT else None


def framing_tokens(instructions: str) -> int:
    """A summary request's estimate without its transcript and brief (with the framing both
    bring: tags and the rule to revise): what every part pays."""
    return estimate_request(*build_summary_request([], "-", instructions))


def brief_tokens(brief: str | None) -> int:
    """What a brief adds to a request, as the request carries it."""
    return estimate_text(neutralise_tags(brief.strip())) if brief else 0


def entry_tokens(entry: Entry) -> int:
    """What one message adds to a request's transcript, as the request renders it (with the
    blank line between messages). Estimates of parts add up to at least the whole's."""
    return estimate_text(neutralise_tags(render_entry(entry))) + 1


def parts(entries: list[Entry], transcript: int, first: int | None = None) -> list[list[Entry]]:
    """`entries` in order, in runs whose transcripts each fit in `transcript` tokens (the first
    in `first`, when given). A message too large for a part alone is given by its head and tail
    (`shortened`). Every entry is in exactly one part, in order; no part is empty."""
    found: list[list[Entry]] = []
    current: list[Entry] = []
    used = 0
    for entry in entries:
        share = transcript if found or first is None else first  # of the part being filled
        cost = entry_tokens(entry)
        if current and used + cost > share:
            found.append(current)
            current, used, share = [], 0, transcript
        if cost > share:
            entry = shortened(entry, share)
            cost = entry_tokens(entry)
        current.append(entry)
        used += cost
    if current:
        found.append(current)
    return found


def shortened(entry: Entry, tokens: int) -> Entry:
    """`entry` as its head and tail around a note naming it, rendered within `tokens`."""
    body = "\n".join(p for p in (render_block(b) for b in entry.content) if p.strip())
    made, keep, over = entry, len(body), entry_tokens(entry) - tokens
    while over > 0 and keep > 0:
        keep = max(keep - int(over * CHARS_PER_TOKEN) - 1, 0)
        cut = _head_and_tail(body, keep, LEFT_OUT.format(chars=len(body) - keep, seq=entry.seq))
        made = Entry(entry.seq, entry.role, [{"type": "text", "text": cut}], entry.tokens)
        over = entry_tokens(made) - tokens
    return made


def fitted_brief(brief: str | None, tokens: int) -> str | None:
    """A brief within `tokens` as a request carries it: whole when it fits, else its head
    (the request and intent) and its tail (the latest work and the next step)."""
    if brief is None or brief_tokens(brief) <= tokens:
        return brief
    text = cut = brief.strip()
    keep, over = len(text), brief_tokens(text) - tokens
    while over > 0 and keep > 0:
        keep = max(keep - int(over * CHARS_PER_TOKEN) - 1, 0)
        cut = _head_and_tail(text, keep, BRIEF_LEFT_OUT.format(chars=len(text) - keep))
        over = brief_tokens(cut) - tokens
    return cut


def _head_and_tail(text: str, keep: int, note: str) -> str:
    """`keep` characters of `text`: the first half and the last, `note` between them."""
    head = keep - keep // 2
    tail = text[len(text) - keep // 2 :] if keep // 2 else ""
    return f"{text[:head]}\n{note}\n{tail}"
