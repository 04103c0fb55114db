"""The one `Usage` (providers/values.py) as a model's columns: a reply's, a summary call's, or a
conversation's running totals.

None in the columns is usage nothing usable was reported for: zero or missing usage is unknown,
never a figure. The models use `UsageColumns`; hand-written SQL and bulk updates use the rest.
"""

from __future__ import annotations

from django.db import models

from providers.values import USAGE_KEYS, Usage

# Column -> the Usage field (and the API's key) it holds, in USAGE_KEYS order. The columns'
# names are shorter than the API's keys for the cache's two.
COLUMNS = dict(
    zip(
        ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"),
        USAGE_KEYS,
        strict=True,
    )
)


class UsageColumns(models.Model):
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_read_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_creation_tokens = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def usage(self) -> Usage | None:
        if self.input_tokens is None:
            return None
        return from_row(getattr(self, column) for column in COLUMNS)

    @usage.setter
    def usage(self, value: Usage | None) -> None:
        known = value is not None and value.known
        for column, number in (column_values(value) if known else dict.fromkeys(COLUMNS)).items():
            setattr(self, column, number)


def column_values(usage: Usage) -> dict[str, int]:
    """The columns' values for a known usage, by column name."""
    return {column: getattr(usage, key) or 0 for column, key in COLUMNS.items()}


def from_row(values) -> Usage:
    """A known usage from its columns' values, in `COLUMNS` order (as hand-written SQL reads
    them)."""
    return Usage(**{key: value or 0 for key, value in zip(COLUMNS.values(), values, strict=True)})
