"""The sawtooth: tokens per turn as an inline SVG polyline, with the budget and threshold."""

from __future__ import annotations

import re

from chat.render.meter import sawtooth_svg


def points(svg: str) -> list[tuple[float, float]]:
    found = re.search(r'points="([^"]*)"', svg)
    return [tuple(map(float, p.split(","))) for p in found[1].split()] if found else []


def test_it_draws_one_point_per_turn_scaled_to_the_budget():
    svg = sawtooth_svg([0, 500, 1000], budget=1000, threshold=600)
    drawn = points(svg)
    assert [x for x, _ in drawn] == [4.0, 150.0, 296.0]
    assert [y for _, y in drawn] == [86.0, 45.0, 4.0]  # bottom, middle, top
    assert 'class="chart-threshold" x1="0" x2="300" y1="36.8"' in svg
    assert 'aria-label="Window tokens per turn: 3 turns"' in svg


def test_a_value_over_the_budget_raises_the_top():
    drawn = points(sawtooth_svg([2000, 1000], budget=1000, threshold=600))
    assert drawn[0][1] == 4.0 and drawn[1][1] == 45.0


def test_a_single_point_is_a_dot_and_none_is_an_empty_chart():
    one = sawtooth_svg([700], budget=1000, threshold=600)
    assert "polyline" not in one and 'class="chart-dot"' in one
    empty = sawtooth_svg([], budget=1000, threshold=600)
    assert "polyline" not in empty and "chart-dot" not in empty and "chart-budget" in empty
