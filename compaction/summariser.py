"""Asking a model for the summary: over the conversation's cached prefix while it is warm, else
over a separate transcript, and falling back to the rule-based brief on any fault. Never empty.
A model's summary that leaves out key facts of what it replaces (compaction/key_facts.py) is
sent back once, with them named, to be revised.

The caller gives the client and what is asked, as one value (`SummaryAsk`), and for a request
over the prefix the window and the tools the conversation's requests offer (so it matches the
chat's byte for byte); nothing here reads the database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime, timedelta
from typing import NamedTuple

from compaction import brief, chunks, key_facts
from compaction.entries import Entry
from compaction.key_facts import KeyFact
from compaction.policy import Budget
from compaction.prompt import (
    build_prefix_request,
    build_revision_request,
    build_summary_request,
)
from compaction.window_state import WindowState
from providers import registry
from providers.tokens import CHARS_PER_TOKEN, estimate_content, estimate_text
from providers.values import Capabilities, Request, Usage

# The API keeps a cached prefix five minutes after its last use; a minute's margin covers the
# summary call's own start and clocks that differ between processes.
CACHE_WARM_FOR = timedelta(minutes=4)

# Awaited before each part of a span folded in parts, with its number and the count.
OnPart = Callable[[int, int], Awaitable[None]]


def cache_is_warm(last_request_at: datetime | None, now: datetime) -> bool:
    return last_request_at is not None and now - last_request_at < CACHE_WARM_FOR


def over_prefix(
    state: WindowState,
    older: Sequence[Entry],
    instructions: str,
    *,
    model: str,
    capabilities: Capabilities,
    max_tokens: int,
) -> Request | None:
    """The summary request over the conversation's cached prefix (the caller checked that it
    is cached and that reading it is wanted), if the window with the request fits the model's
    context. None: ask over a separate transcript. The caller adds the conversation's tools
    (the same as its chat requests offer, so the prefix matches): looked up only when asked."""
    if not capabilities.supports_caching:
        return None
    window = state.window()
    messages = build_prefix_request(window.messages, older, bool(state.summary), instructions)
    asked = estimate_content(messages[-1]["content"])  # with the message it joins: on the safe side
    if state.tokens + asked + max_tokens > capabilities.context_window:
        return None
    return Request(
        model=model,
        system=state.system,
        messages=messages,
        max_tokens=max_tokens,
        cache_head=window.head,  # the same marks as the chat requests: their prefix is read
    )


@dataclass(frozen=True)
class SummaryAsk:
    """What one summary is asked of the model: the span it replaces, the summary before it and
    the person's instructions; how far its requests may go; and, while the conversation's prefix
    is cached, the request over it (`over_prefix`) to try first."""

    model: str
    entries: Sequence[Entry] = field(hash=False)  # the span the summary replaces, in order
    previous_summary: str | None = None  # revised, not summarised again: the running brief
    instructions: str = ""
    _: KW_ONLY
    revise: bool = True  # one chance back for the key facts a model's summary lost
    budget: int | None = None  # the conversation's: no request over it (None: the model's window)
    max_tokens: int = 4096  # a summary request's reply, at most
    max_chars: int = 6000  # the rule-based brief's size, at most
    over_prefix: Request | None = None


async def summarise(
    client, ask: SummaryAsk, *, on_part: OnPart | None = None
) -> brief.SummaryResult:
    """The summary (see `_first`), with one chance back for the key facts it lost: when the
    model wrote it, some facts of what it replaces are missing and `ask.revise` is on, the model
    is asked once to revise it with them (`revised`). `on_part(number, count)` is awaited
    before each part of a span folded in parts."""
    result = await _first(client, ask, on_part)
    if not ask.revise or result.summariser != "model":
        return result
    found = key_facts.of_span(ask.entries, ask.previous_summary)
    if not key_facts.lost(found, result.summary):
        return result
    # Within the summary model's share of its window, as the first request was.
    max_tokens = (
        ask.max_tokens if ask.budget is None else chunks.reply_tokens(ask.budget, ask.max_tokens)
    )
    return await revised(client, ask.model, result, found, max_tokens)


async def revised(
    client, model: str, result: brief.SummaryResult, found: list[KeyFact], max_tokens: int
) -> brief.SummaryResult:
    """`result` revised by the model with the facts of `found` it lost, if the answer is a
    whole <summary> that loses fewer and grows by little more than them; else (a fault, an
    answer cut short, without a summary, no better or far longer) `result` as it was."""
    lost = key_facts.lost(found, result.summary)
    system, messages = build_revision_request(result.summary, [f.text for f in lost])
    request = Request(model=model, system=system, messages=messages, max_tokens=max_tokens)
    try:
        final = await registry.complete(client, request)
    except Exception:  # a provider fault keeps the first summary: it is already a good one
        return result
    spent = result.usage.plus(final.usage)
    summary = brief.clean_summary(final.text) if final.stop_reason != "max_tokens" else None
    # A revision adds the facts: one that grows by much more than them would take the window's
    # room the compaction is for.
    room = len(result.summary) + 2 * sum(len(f.text) + 3 for f in lost) + 200
    if summary is None or len(summary) > room or len(key_facts.lost(found, summary)) >= len(lost):
        return replace(result, usage=spent)
    return replace(result, summary=summary, raw_output=final.text, usage=spent)


async def _first(client, ask: SummaryAsk, on_part: OnPart | None) -> brief.SummaryResult:
    """The summary from the model, falling back to rules on any fault. Never empty.

    Asked over the conversation's prefix when `ask.over_prefix` is given; if what comes back
    holds no usable summary (the model went on with the conversation, or called a tool), asked
    again over a separate transcript (`_over_transcript`). A provider fault falls back to rules
    at once, over what the parts before it have not folded."""
    capabilities = client.capabilities(ask.model)
    if not capabilities.can_summarise:
        # An offline stand-in cannot summarise; rules are the honest answer, not a failure.
        return _by_rules(ask)
    spent = Usage()
    if ask.over_prefix is not None:
        answer = await _answer(client, ask.over_prefix, ask, spent)
        if answer.faulted or answer.result.summariser == "model":
            return answer.result
        spent = answer.result.usage  # the answer not used is paid for all the same
    return await _over_transcript(client, ask, capabilities, spent, on_part)


async def _over_transcript(
    client, ask: SummaryAsk, capabilities: Capabilities, spent: Usage, on_part: OnPart | None
) -> brief.SummaryResult:
    """The summary asked over a separate transcript of the span: in parts when it does not fit
    the summariser's window (the conversation's `budget`, within the model's context window).
    Rules when that window cannot hold a request."""
    window = chunks.summary_window(ask.budget, capabilities.context_window)
    room = chunks.room(window, ask.max_tokens, ask.previous_summary, ask.instructions)
    if room is None:
        error = f"the summariser's window ({window:,} tokens) cannot hold a summary request"
        return _by_rules(ask, error, spent)
    return await _folded(client, ask, room, capabilities.supports_caching, spent, on_part)


async def _folded(
    client,
    ask: SummaryAsk,
    room: chunks.Room,
    caching: bool,
    spent: Usage,
    on_part: OnPart | None,
) -> brief.SummaryResult:
    """The span folded part after part, each part's brief carried into the next as its
    previous summary; the first answer that is not the model's summary ends it."""
    ask = replace(ask, previous_summary=chunks.fitted_brief(ask.previous_summary, room.brief))
    parts = chunks.parts(ask.entries, room.transcript, room.first(ask.previous_summary)) or [[]]
    carried, done = ask.previous_summary, 0
    for number, part in enumerate(parts, start=1):
        if on_part is not None and len(parts) > 1:
            await on_part(number, len(parts))
        request = _part_request(ask, part, chunks.fitted_brief(carried, room.brief), room, caching)
        # What a fallback now covers: the parts not folded yet, over the brief folded so far.
        rest = replace(ask, entries=ask.entries[done:], previous_summary=carried)
        which = f"part {number} of {len(parts)}: " if len(parts) > 1 else ""
        answer = await _answer(client, request, rest, spent, which)
        if answer.result.summariser != "model":
            return answer.result
        carried, done, spent = answer.result.summary, done + len(part), answer.result.usage
    return answer.result


def _part_request(
    ask: SummaryAsk, part: Sequence[Entry], carried: str | None, room: chunks.Room, caching: bool
) -> Request:
    """One part's summary request: its transcript, the brief carried into it."""
    system, messages = build_summary_request(part, carried, ask.instructions)
    return Request(
        model=ask.model,
        system=system,
        messages=messages,
        max_tokens=room.reply,
        # The summariser's instructions are the same every time; the transcript never is.
        cache_head=0 if caching else None,
        cache_latest=False,
    )


class _Answer(NamedTuple):
    result: brief.SummaryResult  # the model's summary, or the rule-based brief saying why not
    faulted: bool  # the call itself failed: the brief is final, no other request is tried


async def _answer(
    client, request: Request, ask: SummaryAsk, spent: Usage, which: str = ""
) -> _Answer:
    """`request` sent and what comes back read: the model's summary, else the rule-based brief
    over `ask` (what is not folded yet) saying why, `which` part it was named first. `spent`:
    what the calls before it cost, counted in."""
    try:
        final = await registry.complete(client, request)
    except Exception as exc:  # provider faults of any kind fall back, never lose the turn
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        return _Answer(_by_rules(ask, f"{which}model summary call failed: {reason}", spent), True)
    spent = spent.plus(final.usage)
    result = brief.from_output(
        final.text,
        final.stop_reason,
        spent,
        ask.entries,
        ask.previous_summary,
        ask.instructions,
        max_chars=ask.max_chars,
    )
    if result.summariser != "model":
        result = replace(result, error=which + result.error)
    return _Answer(result, False)


def _by_rules(ask: SummaryAsk, error: str = "", spent: Usage | None = None) -> brief.SummaryResult:
    return brief.by_rules(
        ask.entries,
        ask.previous_summary,
        ask.instructions,
        max_chars=ask.max_chars,
        error=error,
        usage=spent,
    )


def brief_room(state: WindowState, older: Sequence[Entry]) -> int:
    """Size of the rule-based brief that would replace `older` and revise the summary in force:
    it carries that summary's facts on, so it keeps that summary's room, and the messages it
    folds add 70% of theirs (counting only the messages, a "Compact now" that folds a few
    short ones left the brief less room than the one it revised, and facts were "left out for
    length" with the window far from full)."""
    carried = estimate_text(state.summary) if state.summary else 0
    return fallback_chars(state.budget, sum(e.tokens for e in older), carried)


def fallback_chars(budget: Budget, replaced_tokens: int, carried_tokens: int = 0) -> int:
    """Size of a rule-based summary: well under what it replaces and a small share of the
    budget, so that falling back shrinks the window (a compaction that would not is refused).
    `carried_tokens`: the summary it revises, whose room it keeps."""
    tokens = min(carried_tokens + int(replaced_tokens * 0.7), int(budget.total * 0.15))
    return max(int(tokens * CHARS_PER_TOKEN), 600)
