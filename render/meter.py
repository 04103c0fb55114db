"""The context panel's figures as HTML: the meter, its legend, what the conversation cost, and
the tokens-per-turn chart (the sawtooth), drawn as inline SVG on the server: no chart library.

Redrawn after every reply, so written as plain Python like the bubbles (render/bubbles.py)
rather than as a template partial. Every value here is a number the app computed or a label it
owns, so nothing needs escaping.
"""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import localtime

from chat.figures import Panel, Spend


def money(spend: Spend) -> str:
    return f"${spend.dollars:,.4f}" if spend.dollars is not None else "unknown"


# Where a model has no price (MODEL_PRICES): said, never left blank nor shown as $0.
UNKNOWN_COST = "cost unknown"


def spend_shown(spend: Spend) -> str:
    """What some calls cost, and how much of their input the prompt cache served."""
    shown = money(spend) if spend.dollars is not None else UNKNOWN_COST
    if spend.cached_share is None:
        return shown
    return f"{shown} · {spend.cached_share:.0%} of input from cache"


def _pct(ctx: Panel, value: int) -> str:
    return f"{100 * value / ctx.budget:.1f}" if ctx.budget else "0.0"


def _segments(ctx: Panel) -> list[tuple[str, str, str, str]]:
    """(key, label, tokens, % of the budget) of each part of the window: Files (those the kept
    messages carry) only while there are some, as most conversations never have any."""
    parts = [
        ("system", "System prompt", ctx.system_tokens),
        ("summary", "Summary", ctx.summary_tokens),
        ("history", "Kept history", ctx.history_tokens),
        *([("files", "Files", ctx.files_tokens)] if ctx.files_tokens else []),
        ("reserve", "Reply reserve", ctx.reserve),
    ]
    return [(key, label, f"{value:,}", _pct(ctx, value)) for key, label, value in parts]


def figures_html(ctx: Panel, oob: bool = False) -> SafeString:
    n = {
        "tokens": f"{ctx.tokens:,}",
        "budget": f"{ctx.budget:,}",
        "threshold": f"{ctx.threshold:,}",
    }
    threshold_pct = _pct(ctx, ctx.threshold)
    segments = _segments(ctx)
    # SVG width and x are presentation attributes, not inline styles: the CSP allows them.
    # The reply grows at the end of the window: before the room kept for it.
    meter = "".join(
        (_reply_segment(0, ctx.budget) if key == "reserve" else "")
        + f'<svg class="seg seg-{key}" width="{pct}%" height="100%" aria-hidden="true"><title>'
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
        f'{n["threshold"]} tokens</title><line x1="{threshold_pct}%" '
        f'x2="{threshold_pct}%" y1="0" y2="100%"/></svg></div>',
        f'<p class="meter-figures"><strong id="window-tokens" data-tokens="{ctx.tokens}">'
        f"{n['tokens']}</strong> / {n['budget']} tokens · auto-compacts at {n['threshold']}</p>",
        f'<ul class="legend">{legend}</ul>',
    ]
    spent = ctx.spent
    if spent and spent.total:
        last = (
            spent.last and f'<span class="spend-last">Last turn: {spend_shown(spent.last)}</span>'
        )
        unpriced = ' title="This model has no price set (MODEL_PRICES)"'
        parts.append(
            f'<p class="spend" id="spend"{unpriced if spent.total.dollars is None else ""}>'
            f"{last or ''} "
            f'<span class="spend-total">This conversation: {spend_shown(spent.total)}</span></p>'
        )
    if ctx.paused_until:
        parts.append(
            '<p class="warning">Auto-compaction is paused until '
            f'{localtime(ctx.paused_until):%H:%M} after repeated failures. "Compact now" still '
            "works.</p>"
        )
    latest = " (latest turns)" if ctx.chart_capped else ""
    chart = sawtooth_svg(ctx.per_turn + [ctx.tokens], budget=ctx.budget, threshold=ctx.threshold)
    parts.append(f"<h3>Tokens per turn{latest}</h3>{chart}</div>")
    return mark_safe("\n".join(parts))  # noqa: S308 - numbers and the app's own labels only


# The chart's frame, in its viewBox's units: room on the left for the token labels and below for
# the turn numbers.
_LEFT, _RIGHT, _TOP, _BOTTOM = 38, 6, 6, 22


def _reply_segment(tokens: int, budget: int, oob: str = "") -> str:
    """Where a streaming reply grows on the meter, after the kept history and its files (empty
    between replies)."""
    pct = f"{100 * tokens / budget:.1f}" if budget else "0.0"
    return (
        f'<svg id="meter-reply" class="seg-reply" width="{pct}%" height="100%" aria-hidden="true"'
        f"{oob}><title>The reply so far: about {tokens:,} tokens</title></svg>"
    )


def live_html(tokens: int, reply: int, budget: int) -> SafeString:
    """The meter while a reply streams: the window estimated with the reply's text so far."""
    return mark_safe(  # noqa: S308 - numbers only
        f'<span hx-swap-oob="innerHTML:#window-tokens">≈{tokens:,}'
        '<span class="live"> (replying)</span></span>'
        + _reply_segment(reply, budget, ' hx-swap-oob="true"')
    )


def sawtooth_svg(
    values: list[int], *, budget: int, threshold: int, width: int = 300, height: int = 130
) -> str:
    """A polyline of window tokens per turn, with the budget and auto-compaction lines, its
    axes (turn across, tokens up) and a legend naming each line.

    Only numbers go into the markup, so nothing here needs escaping.
    """
    top = max(budget, *values) if values else budget or 1
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    scale = plot_h / (top or 1)
    step = plot_w / max(len(values) - 1, 1)
    bottom = _TOP + plot_h

    def x(i: int) -> str:
        return f"{_LEFT + i * step:.1f}"

    def y(v: int) -> str:
        return f"{bottom - scale * v:.1f}"

    points = " ".join(f"{x(i)},{y(v)}" for i, v in enumerate(values))
    line = (
        f'<polyline class="chart-line" fill="none" stroke-width="1.5" points="{points}"/>'
        if len(values) > 1
        else ""
    )
    dot = (
        f'<circle class="chart-dot" r="1.8" cx="{x(len(values) - 1)}" cy="{y(values[-1])}"/>'
        if values
        else ""
    )
    right = width - _RIGHT
    # Tokens up the left: 0 and the budget; turns along the bottom: the first and the latest.
    y_ticks = "".join(
        f'<text class="tick" x="{_LEFT - 3}" y="{y(v)}" text-anchor="end" '
        f'dominant-baseline="middle">{v:,}</text>'
        for v in (0, budget)
    )
    x_ticks = "".join(
        f'<text class="tick" x="{x(i)}" y="{bottom + 10}" text-anchor="middle">{i + 1}</text>'
        for i in sorted({0, max(len(values) - 1, 0)})
    )
    axes = (
        f'<path class="chart-axis" fill="none" d="M{_LEFT},{_TOP}V{bottom}H{right}"/>'
        f"{y_ticks}{x_ticks}"
        f'<text class="axis-label" x="{(_LEFT + right) / 2:.0f}" y="{height - 2}" '
        'text-anchor="middle">turn</text>'
        f'<text class="axis-label" x="0" y="0" transform="translate(9 {(_TOP + bottom) / 2:.0f}) '
        'rotate(-90)" text-anchor="middle">tokens</text>'
    )
    svg = (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="Window tokens per turn: {len(values)} turns">'
        f"{axes}"
        f'<line class="chart-budget" x1="{_LEFT}" x2="{right}" y1="{y(budget)}" y2="{y(budget)}"/>'
        f'<line class="chart-threshold" x1="{_LEFT}" x2="{right}" y1="{y(threshold)}" '
        f'y2="{y(threshold)}" stroke-dasharray="4 3"/>'
        f"{line}{dot}</svg>"
    )
    legend = (
        '<ul class="chart-legend">'
        '<li><span class="key key-line"></span>Window after each turn</li>'
        f'<li><span class="key key-budget"></span>Budget ({budget:,})</li>'
        f'<li><span class="key key-threshold"></span>Auto-compaction ({threshold:,})</li>'
        "</ul>"
    )
    return svg + legend
