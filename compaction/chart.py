"""The tokens-per-turn chart (the sawtooth), drawn as inline SVG on the server: no chart library."""

from __future__ import annotations


def sawtooth_svg(
    values: list[int], *, budget: int, threshold: int, width: int = 300, height: int = 90
) -> str:
    """A polyline of window tokens per turn, with the budget and auto-compaction lines.

    Only numbers go into the markup, so nothing here needs escaping.
    """
    top = max(budget, *values) if values else budget or 1
    pad = 4
    scale = (height - 2 * pad) / (top or 1)
    step = (width - 2 * pad) / max(len(values) - 1, 1)

    def y(v: int) -> str:
        return f"{height - pad - scale * v:.1f}"

    points = " ".join(f"{pad + i * step:.1f},{y(v)}" for i, v in enumerate(values))
    line = (
        f'<polyline class="chart-line" fill="none" stroke-width="1.5" points="{points}"/>'
        if len(values) > 1
        else ""
    )
    dot = (
        f'<circle class="chart-dot" r="1.8" cx="{pad + (len(values) - 1) * step:.1f}" '
        f'cy="{y(values[-1])}"/>'
        if values
        else ""
    )
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="Window tokens per turn: {len(values)} turns">'
        f'<line class="chart-budget" x1="0" x2="{width}" y1="{y(budget)}" y2="{y(budget)}"/>'
        f'<line class="chart-threshold" x1="0" x2="{width}" y1="{y(threshold)}" '
        f'y2="{y(threshold)}" stroke-dasharray="4 3"/>'
        f"{line}{dot}</svg>"
    )
