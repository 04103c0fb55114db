"""The sawtooth: tokens per turn as an inline SVG polyline, with the budget and threshold, its
axes and a legend naming each line."""

from __future__ import annotations

import re

from render.meter import sawtooth_svg


def points(svg: str) -> list[tuple[float, float]]:
    found = re.search(r'points="([^"]*)"', svg)
    return [tuple(map(float, p.split(","))) for p in found[1].split()] if found else []


def test_it_draws_one_point_per_turn_scaled_to_the_budget():
    svg = sawtooth_svg([0, 500, 1000], budget=1000, threshold=600)
    drawn = points(svg)
    assert [x for x, _ in drawn] == [38.0, 166.0, 294.0]
    assert [y for _, y in drawn] == [108.0, 57.0, 6.0]  # bottom, middle, top
    assert 'class="chart-threshold" x1="38" x2="294" y1="46.8"' in svg
    assert 'aria-label="Window tokens per turn: 3 turns"' in svg


def test_a_value_over_the_budget_raises_the_top():
    drawn = points(sawtooth_svg([2000, 1000], budget=1000, threshold=600))
    assert drawn[0][1] == 6.0 and drawn[1][1] == 57.0


def test_a_single_point_is_a_dot_and_none_is_an_empty_chart():
    one = sawtooth_svg([700], budget=1000, threshold=600)
    assert "polyline" not in one and 'class="chart-dot"' in one
    empty = sawtooth_svg([], budget=1000, threshold=600)
    assert "polyline" not in empty and "chart-dot" not in empty and "chart-budget" in empty


def test_it_has_axes_with_their_labels_and_a_legend_naming_each_line():
    svg = sawtooth_svg([1200, 2600, 900], budget=5000, threshold=3000)
    assert 'class="chart-axis"' in svg
    labels = re.findall(r'<text class="axis-label"[^>]*>([^<]*)</text>', svg)
    assert labels == ["turn", "tokens"]
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg)
    assert ticks == ["0", "5,000", "1", "3"]  # tokens up the side, the turns along the bottom
    legend = re.findall(r"</span>([^<]*)</li>", svg)
    assert legend == ["Window after each turn", "Budget (5,000)", "Auto-compaction (3,000)"]
