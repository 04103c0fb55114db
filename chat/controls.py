"""A conversation's compaction controls, as its settings form chooses them: when auto-compaction
fires and how much the tail keeps verbatim (percentages of the budget, within the safe bounds of
compaction/policy.py), and the model that writes its summaries (one of the configured models).
Left empty, each is the environment's default (AUTO_COMPACT_AT, KEEP_TAIL_SHARE, SUMMARY_MODEL),
stored as null so a change to the environment still moves it. What a person typed is read here,
and a value out of bounds is refused with a sentence saying why, never stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.conf import settings

from compaction.policy import AUTO_AT_RANGE, KEEP_GAP, MIN_KEEP_SHARE, shares_problem
from compaction.window_state import budget_for
from core.clean import scrubbed
from core.errors import ActionError
from providers import registry
from providers.tokens import estimate_text


@dataclass(frozen=True)
class Controls:
    auto_compact_at: float | None  # a share of the budget; None: AUTO_COMPACT_AT
    keep_tail_share: float | None  # a share of the budget; None: KEEP_TAIL_SHARE
    summary_model: str  # one of the configured models; "": SUMMARY_MODEL, else the chat's own


def read(auto_at: str | None, keep: str | None, summary_model: str | None) -> Controls:
    """The controls a settings form sent (percentages, a model id; empty: the default), checked;
    ActionError saying what is wrong otherwise."""
    low, high = AUTO_AT_RANGE
    controls = Controls(
        _share(auto_at, "Compact at", f"{low:.0%} to {high:.0%}"),
        _share(keep, "Keep verbatim", f"at least {MIN_KEEP_SHARE:.0%}"),
        _model(summary_model),
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
    low: int = round(AUTO_AT_RANGE[0] * 100)
    high: int = round(AUTO_AT_RANGE[1] * 100)
    least_keep: int = round(MIN_KEEP_SHARE * 100)
    most_keep: int = round((AUTO_AT_RANGE[1] - KEEP_GAP) * 100)


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
