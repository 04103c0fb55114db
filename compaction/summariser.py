"""Asking a model for the summary: over the conversation's cached prefix while it is warm, else
over a separate transcript, and falling back to the rule-based brief on any fault. Never empty.
A model's summary that leaves out key facts of what it replaces (compaction/key_facts.py) is
sent back once, with them named, to be revised.

The caller gives the client, the window and the tools the conversation's requests offer (so a
request over the prefix matches the chat's byte for byte); nothing here reads the database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

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
from providers.tokens import CHARS_PER_TOKEN, estimate_content
from providers.values import Capabilities, Request, Usage

# The API keeps a cached prefix five minutes after its last use; a minute's margin covers the
# summary call's own start and clocks that differ between processes.
CACHE_WARM_FOR = timedelta(minutes=4)


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


async def summarise(
    client,
    model: str,
    entries: list[Entry],
    previous_summary: str | None,
    instructions: str = "",
    *,
    revise: bool = True,
    budget: int | None = None,
    max_tokens: int = 4096,
    max_chars: int = 6000,
    over_prefix: Request | None = None,
    on_part: Callable[[int, int], Awaitable[None]] | None = None,
) -> brief.SummaryResult:
    """The summary (see `_first`), with one chance back for the key facts it lost: when the
    model wrote it, some facts of what it replaces are missing and `revise` is on, the model
    is asked once to revise it with them (`revised`)."""
    result = await _first(
        client,
        model,
        entries,
        previous_summary,
        instructions,
        budget=budget,
        max_tokens=max_tokens,
        max_chars=max_chars,
        over_prefix=over_prefix,
        on_part=on_part,
    )
    if not revise or result.summariser != "model":
        return result
    found = key_facts.of_span(entries, previous_summary)
    if not key_facts.lost(found, result.summary):
        return result
    return await revised(client, model, result, found, max_tokens)


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


async def _first(
    client,
    model: str,
    entries: list[Entry],
    previous_summary: str | None,
    instructions: str = "",
    *,
    budget: int | None = None,
    max_tokens: int = 4096,
    max_chars: int = 6000,
    over_prefix: Request | None = None,
    on_part: Callable[[int, int], Awaitable[None]] | None = None,
) -> brief.SummaryResult:
    """The summary from the model, falling back to rules on any fault. Never empty.

    Asked over the conversation's prefix when `over_prefix` is given; if what comes back holds
    no usable summary (the model went on with the conversation, or called a tool), asked again
    over a separate transcript: in parts when it does not fit the summariser's window (the
    conversation's `budget`, within the model's context window), each part's brief carried into
    the next, `on_part(number, count)` awaited before each. A provider fault falls back to
    rules at once, over what the parts before it have not folded."""
    capabilities = client.capabilities(model)
    if not capabilities.can_summarise:
        # An offline stand-in cannot summarise; rules are the honest answer, not a failure.
        return brief.by_rules(entries, previous_summary, instructions, max_chars=max_chars)
    spent = Usage()
    if over_prefix is not None:
        try:
            final = await registry.complete(client, over_prefix)
        except Exception as exc:  # provider faults of any kind fall back, never lose the turn
            return _by_rules(entries, previous_summary, instructions, max_chars, exc, spent)
        spent = spent.plus(final.usage)
        result = brief.from_output(
            final.text,
            final.stop_reason,
            spent,
            entries,
            previous_summary,
            instructions,
            max_chars=max_chars,
        )
        if result.summariser == "model":
            return result
    window = chunks.summary_window(budget, capabilities.context_window)
    room = chunks.room(window, max_tokens, previous_summary, instructions)
    if room is None:
        error = f"the summariser's window ({window:,} tokens) cannot hold a summary request"
        return brief.by_rules(
            entries, previous_summary, instructions, max_chars=max_chars, error=error, usage=spent
        )
    previous_summary = chunks.fitted_brief(previous_summary, room.brief)
    parts = chunks.parts(entries, room.transcript, room.first(previous_summary)) or [[]]
    carried, done = previous_summary, 0
    for number, part in enumerate(parts, start=1):
        if on_part is not None and len(parts) > 1:
            await on_part(number, len(parts))
        rest = entries[done:]  # what a fallback now covers: the parts not folded yet
        which = f"part {number} of {len(parts)}: " if len(parts) > 1 else ""
        system, messages = build_summary_request(
            part, chunks.fitted_brief(carried, room.brief), instructions
        )
        request = Request(
            model=model,
            system=system,
            messages=messages,
            max_tokens=room.reply,
            # The summariser's instructions are the same every time; the transcript never is.
            cache_head=0 if capabilities.supports_caching else None,
            cache_latest=False,
        )
        try:
            final = await registry.complete(client, request)
        except Exception as exc:  # provider faults of any kind fall back, never lose the turn
            return _by_rules(rest, carried, instructions, max_chars, exc, spent, which)
        spent = spent.plus(final.usage)
        result = brief.from_output(
            final.text,
            final.stop_reason,
            spent,
            rest,
            carried,
            instructions,
            max_chars=max_chars,
        )
        if result.summariser != "model":
            return replace(result, error=which + result.error)
        carried, done = result.summary, done + len(part)
    return result


def _by_rules(
    entries, previous, instructions, max_chars, exc: Exception, spent: Usage, which: str = ""
) -> brief.SummaryResult:
    reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
    return brief.by_rules(
        entries,
        previous,
        instructions,
        max_chars=max_chars,
        error=f"{which}model summary call failed: {reason}",
        usage=spent,
    )


def fallback_chars(budget: Budget, replaced_tokens: int) -> int:
    """Size of a rule-based summary: well under what it replaces and a small share of the
    budget, so that falling back shrinks the window (a compaction that would not is refused)."""
    tokens = min(int(replaced_tokens * 0.7), int(budget.total * 0.15))
    return max(int(tokens * CHARS_PER_TOKEN), 600)
