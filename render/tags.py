"""The chat templates' tags and filters (`{% load chat_tags %}`, registered in the settings'
TEMPLATES). A message's HTML is written in render/bubbles.py; model text goes through
markdown + sanitiser, everything else is escaped."""

from __future__ import annotations

from django import template
from django.conf import settings
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from chat.figures import Spend
from render import bubbles, meter
from render.markdown import render_markdown
from search.query import marked

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))  # noqa: S308 - sanitised by nh3 in render_markdown


@register.simple_tag
def bubble(item, oob: str = "") -> SafeString:
    """A message's bubble: bubbles.py writes it for the page and for the turn's frames."""
    return bubbles.message_html(item, oob)


@register.simple_tag
def figures(ctx, oob: bool = False) -> SafeString:
    """The context panel's meter, legend, spend and chart (meter.py)."""
    return meter.figures_html(ctx, bool(oob))


@register.filter
def search_marks(snippet: str) -> SafeString:
    """A search snippet with its matched words in <mark>: escaped first, then marked."""
    return mark_safe(marked(escape(snippet), "<mark>", "</mark>"))  # noqa: S308 - escaped


@register.simple_tag
def limit(setting: str) -> int:
    """A field's limit (core/clean.py), in any fragment: the same number the server enforces."""
    return getattr(settings, setting)


@register.filter
def cost(row, model: str) -> str:
    """What a compaction's summary call cost, in dollars ("" when no call was made or no usage
    was reported), at the price of the model that wrote it (else `model`, the conversation's)."""
    spend = Spend.of(row.usage, row.summary_model or model)
    return meter.money(spend) if spend else ""


@register.filter
def kilobytes(size: int) -> str:
    """A file's size as its chip says it (static/js/files.js says it the same): decimal kB,
    then MB with one decimal."""
    if size < 1_000_000:
        return f"{max(1, int(size / 1000 + 0.5))} kB"  # halves up, as JavaScript's round
    return f"{size / 1_000_000:.1f} MB"
