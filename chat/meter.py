"""The context panel's figures as HTML: the meter, its legend, the spend and the chart.

Redrawn after every reply, so written as plain Python like the bubbles (chat/bubbles.py) rather
than as a template partial. Every value here is a number the app computed or a label it owns;
the chart is SVG built by compaction/chart.py from numbers.
"""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import localtime

from compaction.loading import Panel


def figures_html(ctx: Panel, oob: bool = False) -> SafeString:
    n = ctx.numbers
    segments = ctx.segments
    # SVG width and x are presentation attributes, not inline styles: the CSP allows them.
    meter = "".join(
        f'<svg class="seg seg-{key}" width="{pct}%" height="100%" aria-hidden="true"><title>'
        f"{label}: {value} tokens</title></svg>"
        for key, label, value, pct in segments
    )
    legend = "".join(
        f'<li><span class="swatch seg-{key}"></span>{label} <span class="num">{value}</span></li>'
        for key, label, value, _ in segments
    )
    swap = ' hx-swap-oob="true"' if oob else ""
    parts = [
        f'<div id="context-figures"{swap}>',
        f'<div class="meter" role="meter" aria-valuemin="0" aria-valuemax="{ctx.budget}" '
        f'aria-valuenow="{ctx.tokens}" aria-label="Window tokens">{meter}'
        f'<svg class="threshold-mark" aria-hidden="true"><title>Auto-compaction at '
        f'{n["threshold"]} tokens</title><line x1="{ctx.threshold_pct}%" '
        f'x2="{ctx.threshold_pct}%" y1="0" y2="100%"/></svg></div>',
        f'<p class="meter-figures"><strong id="window-tokens" data-tokens="{ctx.tokens}">'
        f"{n['tokens']}</strong> / {n['budget']} tokens · auto-compacts at {n['threshold']}</p>",
        f'<ul class="legend">{legend}</ul>',
    ]
    spent = ctx.spent
    if spent and spent.total and spent.total.dollars is not None:
        last = spent.last and f'<span class="spend-last">Last turn: {spent.last.shown}</span>'
        parts.append(
            f'<p class="spend" id="spend">{last or ""} '
            f'<span class="spend-total">This conversation: {spent.total.shown}</span></p>'
        )
    if ctx.paused_until:
        parts.append(
            '<p class="warning">Auto-compaction is paused until '
            f'{localtime(ctx.paused_until):%H:%M} after repeated failures. "Compact now" still '
            "works.</p>"
        )
    latest = " (latest turns)" if ctx.chart_capped else ""
    parts.append(f"<h3>Tokens per turn{latest}</h3>{ctx.chart}</div>")
    return mark_safe("\n".join(parts))  # noqa: S308 - numbers and the app's own labels only
