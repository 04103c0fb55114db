"""A conversation's compaction controls, as its settings form chooses them: when auto-compaction
fires and how much the tail keeps verbatim (percentages of the budget, within the safe bounds of
compaction/policy.py), and the model that writes its summaries (one of the configured models).
The thinking switch and its budget (tokens) are offered for a model declared to think.
Left empty, each is the environment's default (AUTO_COMPACT_AT, KEEP_TAIL_SHARE, SUMMARY_MODEL),
stored as null so a change to the environment still moves it. What a person typed is read here,
and a value out of bounds is refused with a sentence saying why, never stored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from django.conf import settings

from compaction.policy import AUTO_AT_RANGE, KEEP_GAP, MIN_KEEP_SHARE, shares_problem
from compaction.window_state import budget_for
from core.clean import scrubbed
from core.errors import ActionError
from providers import registry
from providers.tokens import estimate_text

# Extended thinking's budget in tokens: the API's least, and a bound well above what a chat needs
# (each request gives it no more than its window leaves, turns/thinking.py).
THINKING_RANGE = (1024, 64_000)
DEFAULT_THINKING_BUDGET = 4096


@dataclass(frozen=True)
class Controls:
    auto_compact_at: float | None  # a share of the budget; None: AUTO_COMPACT_AT
    keep_tail_share: float | None  # a share of the budget; None: KEEP_TAIL_SHARE
    summary_model: str  # one of the configured models; "": SUMMARY_MODEL, else the chat's own
    thinking_budget: int | None = None  # extended thinking's tokens; None: off


def read(
    auto_at: str | None,
    keep: str | None,
    summary_model: str | None,
    *,
    thinking: bool = False,
    thinking_budget: str | None = None,
) -> Controls:
    """The controls a settings form sent (percentages, a model id; empty: the default; the
    thinking switch and its budget), checked; ActionError saying what is wrong otherwise."""
    low, high = AUTO_AT_RANGE
    controls = Controls(
        _share(auto_at, "Compact at", f"{low:.0%} to {high:.0%}"),
        _share(keep, "Keep verbatim", f"at least {MIN_KEEP_SHARE:.0%}"),
        _model(summary_model),
        _thinking_budget(thinking_budget) if thinking else None,
    )
    problem = shares_problem(
        controls.auto_compact_at,
        controls.keep_tail_share,
        default_auto=settings.AUTO_COMPACT_AT,
        default_keep=settings.KEEP_TAIL_SHARE,
    )
    if problem:
        raise ActionError(problem)
    return controls


def _share(raw: str | None, label: str, expected: str) -> float | None:
    """A percentage typed into the form as a share (45 -> 0.45); empty: None, the default."""
    raw = (raw or "").strip().removesuffix("%").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ActionError(f"{label} must be a percentage of the budget ({expected}).")
    return round(value / 100, 4)


def _thinking_budget(raw: str | None) -> int:
    """The thinking budget typed (tokens, "4,096" too); empty: the default."""
    raw = (raw or "").strip().replace(",", "").replace("_", "")
    if not raw:
        return DEFAULT_THINKING_BUDGET
    low, high = THINKING_RANGE
    if not re.fullmatch(r"[0-9]{1,9}", raw) or not low <= int(raw) <= high:
        raise ActionError(
            f"The thinking budget must be a whole number of tokens from {low:,} to {high:,}."
        )
    return int(raw)


def _model(raw: str | None) -> str:
    """A model offered here, or "" for the default; like the new conversation's picker, any
    other is refused naming the ones that are."""
    model = (raw or "").strip()
    return (
        offered_model(model, "write summaries", otherwise=", or leave it to the default")
        if model
        else ""
    )


def offered_model(model, purpose: str, *, otherwise: str = "") -> str:
    """`model` if it is one of the models offered here (the picker's and the summaries');
    else ActionError naming those that are ("There is no model 'x' to `purpose` here. Pick one
    of: …`otherwise`.")."""
    offered = registry.available_models()
    if isinstance(model, str) and model in {m.id for m in offered}:
        return model
    shown = scrubbed(str(model))[:100]
    labels = ", ".join(m.label for m in offered)
    raise ActionError(
        f"There is no model {shown!r} to {purpose} here. Pick one of: {labels}{otherwise}."
    )


@dataclass(frozen=True)
class Form:
    """What the settings form shows: the conversation's choices as percentages ("" when it
    left one to the default), the defaults it would get, and the models for its summaries."""

    auto_at: str
    keep: str
    default_auto: str
    default_keep: str
    summary_model: str
    summary_default: str  # the label of the model that writes them when none is chosen
    models: list[registry.ModelChoice]
    thinks: bool  # its model may think (the switch is shown)
    thinking: bool  # and is asked to
    thinking_budget: int
    low: int = round(AUTO_AT_RANGE[0] * 100)
    high: int = round(AUTO_AT_RANGE[1] * 100)
    least_keep: int = round(MIN_KEEP_SHARE * 100)
    most_keep: int = round((AUTO_AT_RANGE[1] - KEEP_GAP) * 100)
    least_thinking: int = THINKING_RANGE[0]
    most_thinking: int = THINKING_RANGE[1]


def form(conversation) -> Form:
    """The settings form of `conversation`, as it stands."""
    return Form(
        auto_at=_percent(conversation.auto_compact_at),
        keep=_percent(conversation.keep_tail_share),
        default_auto=_percent(settings.AUTO_COMPACT_AT),
        default_keep=_percent(settings.KEEP_TAIL_SHARE),
        summary_model=conversation.summary_model,
        summary_default=registry.model_info(registry.summary_model(conversation.model)).label,
        models=registry.available_models(),
        thinks=registry.thinks(conversation.model),
        thinking=conversation.thinking_budget is not None,
        thinking_budget=conversation.thinking_budget or DEFAULT_THINKING_BUDGET,
    )


def _percent(share: float | None) -> str:
    return "" if share is None else f"{share * 100:.4g}"


def check_prompt_fits(system_prompt: str, model: str) -> None:
    """The system prompt rides in every request: past half the budget it leaves the
    conversation too little room (the tail, the summary, the reply)."""
    tokens, budget = estimate_text(system_prompt), budget_for(model).total
    if tokens > budget // 2:
        raise ActionError(
            f"The system prompt is about {tokens:,} tokens: more than half of this model's "
            f"window budget of {budget:,}, which would leave the conversation too little room. "
            "Shorten it."
        )
