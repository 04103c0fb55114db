"""The chat templates' tags and filters. A message's HTML is written in chat/bubbles.py; model text
goes through markdown + sanitiser, everything else is escaped."""

from __future__ import annotations

from django import template
from django.conf import settings
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from chat import bubbles, meter
from chat.markdown import render_markdown
from compaction.loading import Spend
from search.text import marked

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))  # noqa: S308 - sanitised by nh3 in render_markdown


register.filter("blocks", bubbles.blocks)


@register.simple_tag
def bubble(item, oob: str = "") -> SafeString:
    """A message's bubble: chat/bubbles.py writes it for the page and for the turn's fragments."""
    return bubbles.message_html(item, oob)


@register.simple_tag
def figures(ctx, oob: bool = False) -> SafeString:
    """The context panel's meter, legend, spend and chart (chat/meter.py)."""
    return meter.figures_html(ctx, bool(oob))


@register.filter
def search_marks(snippet: str) -> SafeString:
    """A search snippet with its matched words in <mark>: escaped first, then marked."""
    return mark_safe(marked(escape(snippet), "<mark>", "</mark>"))  # noqa: S308 - escaped


@register.simple_tag
def limit(setting: str) -> int:
    """A field's limit (chat/clean.py), in any fragment: the same number the server enforces."""
    return getattr(settings, setting)


@register.filter
def spend(row, model: str):
    """What a reply's turn or a compaction's summary call cost (None: no call, or no usage
    reported)."""
    return Spend.of(row.usage, model)
