"""What a model call costs: a price table per model, and usage priced with it.

Prices are US dollars per million tokens, input and output, by model-name prefix (the longest
matching prefix wins), from MODEL_PRICES (settings). Cache reads are billed at a tenth of the
input price and cache writes (5-minute) at 1.25 times it, as the API bills them.
"""

from __future__ import annotations

from django.conf import settings

from providers.values import Usage

CACHE_READ_FACTOR = 0.1
CACHE_WRITE_FACTOR = 1.25


def price_of(model: str) -> tuple[float, float] | None:
    """(input, output) dollars per million tokens, or None for a model with no price (the
    offline demo, an unknown local model): its cost is unknown, not zero."""
    matches = [p for p in settings.MODEL_PRICES if model.startswith(p)]
    if not matches:
        return None
    return tuple(settings.MODEL_PRICES[max(matches, key=len)])


def cost(usage: Usage | None, model: str) -> float | None:
    """Dollars for some usage (one call's, or a running total), or None when unknown."""
    price = price_of(model)
    if usage is None or not usage.known or price is None:
        return None
    per_input, per_output = (p / 1_000_000 for p in price)
    return (
        (usage.input_tokens or 0) * per_input
        + (usage.cache_read_input_tokens or 0) * per_input * CACHE_READ_FACTOR
        + (usage.cache_creation_input_tokens or 0) * per_input * CACHE_WRITE_FACTOR
        + (usage.output_tokens or 0) * per_output
    )
