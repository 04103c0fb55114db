"""A person's settings: what their new conversations start with, and the theme of their pages.

`new_conversation` is the one place deciding a new conversation's model, system prompt and
compaction choices: what the person picked for this one, else their defaults, else the
deployment's. A default no longer offered (the configured models changed since it was saved)
gives way to the deployment's, never refuses a new conversation. What a person types into the
settings form is checked here, as a conversation's own settings are, and refused with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.conf import settings

from chat.controls import Controls, check_prompt_fits, offered_model
from chat.models import Preferences
from core.errors import ActionError
from providers import registry

THEMES = Preferences.Theme


@dataclass(frozen=True)
class Defaults:
    """What a new conversation of the person's starts with (as chat/controls.py's `form` reads a
    conversation: the same attribute names)."""

    model: str
    system_prompt: str
    review_compactions: bool
    auto_compact_at: float | None
    keep_tail_share: float | None
    summary_model: str
    thinking_budget: int | None = None  # chosen per conversation: a new one starts without


def stored(user) -> Preferences:
    """The person's row, or an unsaved one holding every default (no row until they save)."""
    if not user.is_authenticated:
        return Preferences()
    return Preferences.objects.filter(user=user).first() or Preferences(user=user)


def defaults(prefs: Preferences) -> Defaults:
    """The defaults as they apply now: a choice no longer offered falls back to the
    deployment's."""
    offered = {m.id for m in registry.available_models()}
    model = prefs.model if prefs.model in offered else registry.default_model()
    prompt = settings.DEFAULT_SYSTEM_PROMPT if prefs.system_prompt is None else prefs.system_prompt
    return Defaults(
        model=model,
        system_prompt=prompt.strip(),
        review_compactions=prefs.review_compactions,
        auto_compact_at=prefs.auto_compact_at,
        keep_tail_share=prefs.keep_tail_share,
        summary_model=prefs.summary_model if prefs.summary_model in offered else "",
    )


def picker(prefs: Preferences) -> list[registry.ModelChoice]:
    """The models a new conversation may pick, the person's default marked (the pickers
    preselect it)."""
    chosen = defaults(prefs).model
    return [replace(m, default=m.id == chosen) for m in registry.available_models()]


def new_conversation(
    prefs: Preferences, *, model: str | None = None, system_prompt: str | None = None
) -> dict:
    """The fields of a new conversation: `model` and `system_prompt` when given (a picked model
    not offered is refused, ActionError), else the person's defaults."""
    chosen = defaults(prefs)
    return {
        "model": offered_model(model, "choose") if model else chosen.model,
        "system_prompt": chosen.system_prompt if system_prompt is None else system_prompt.strip(),
        "review_compactions": chosen.review_compactions,
        "auto_compact_at": chosen.auto_compact_at,
        "keep_tail_share": chosen.keep_tail_share,
        "summary_model": chosen.summary_model,
    }


def save_defaults(
    user,
    *,
    model: str,
    system_prompt: str,
    review_compactions: bool,
    controls: Controls,
) -> Preferences:
    """Save the person's defaults, `system_prompt` cleaned and `controls` checked by the caller
    (chat/controls.py); ActionError for a model not offered or a prompt too large for it."""
    model = offered_model(model, "choose") if model else ""
    check_prompt_fits(system_prompt, model or registry.default_model())
    prefs = stored(user)
    prefs.model = "" if model == registry.default_model() else model
    # The deployment's own prompt, unchanged, stays the deployment's: a change to it applies.
    prefs.system_prompt = (
        None if system_prompt == settings.DEFAULT_SYSTEM_PROMPT.strip() else system_prompt
    )
    prefs.review_compactions = review_compactions
    prefs.auto_compact_at = controls.auto_compact_at
    prefs.keep_tail_share = controls.keep_tail_share
    prefs.summary_model = controls.summary_model
    prefs.save()
    return prefs


def save_theme(user, theme) -> Preferences:
    """Save the theme: one of THEMES' values, else ActionError naming them."""
    if theme not in THEMES.values:
        names = ", ".join(THEMES.values)
        raise ActionError(f"There is no theme {str(theme)[:40]!r}. Pick one of: {names}.")
    prefs = stored(user)
    prefs.theme = theme
    prefs.save()
    return prefs


@dataclass(frozen=True)
class Theme:
    """How a page is drawn in the person's theme (templates/base.html): `name` on <html>, the
    schemes the browser may draw its own controls in, and when the dark colours apply (the media
    of static/css/dark.css's link: the system's choice, always, or never)."""

    name: str
    color_scheme: str
    dark_media: str


def theme_of(prefs: Preferences) -> Theme:
    return {
        THEMES.LIGHT: Theme("light", "light", "not all"),
        THEMES.DARK: Theme("dark", "dark", "all"),
    }.get(prefs.theme, Theme("system", "light dark", "(prefers-color-scheme: dark)"))
