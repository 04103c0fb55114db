"""The tokens-per-turn chart (the sawtooth), drawn as inline SVG on the server: no chart library."""

from __future__ import annotations


def sawtooth_svg(
    values: list[int], *, budget: int, threshold: int, width: int = 300, height: int = 90
) -> str:
    """A polyline of window tokens per turn, with the budget and auto-compaction lines.

    Only numbers go into the markup, so nothing here needs escaping.
    """
    top = max([budget, *values]) or 1
    pad = 4

    def y(v: int) -> float:
        return round(height - pad - (height - 2 * pad) * v / top, 1)

    step = (width - 2 * pad) / max(len(values) - 1, 1)
    points = " ".join(f"{round(pad + i * step, 1)},{y(v)}" for i, v in enumerate(values))
    line = (
        f'<polyline class="chart-line" fill="none" stroke-width="1.5" points="{points}"/>'
        if len(values) > 1
        else ""
    )
    dots = "".join(
        f'<circle class="chart-dot" r="1.8" cx="{round(pad + i * step, 1)}" cy="{y(v)}"/>'
        for i, v in enumerate(values[-1:])
    )
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="Window tokens per turn: {len(values)} turns">'
        f'<line class="chart-budget" x1="0" x2="{width}" y1="{y(budget)}" y2="{y(budget)}"/>'
        f'<line class="chart-threshold" x1="0" x2="{width}" y1="{y(threshold)}" '
        f'y2="{y(threshold)}" stroke-dasharray="4 3"/>'
        f"{line}{dots}</svg>"
    )
