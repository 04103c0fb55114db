"""The one `Usage` (providers/values.py) as a model's columns: a reply's, a summary call's, or a
conversation's running totals.

None in the columns is usage nothing usable was reported for: zero or missing usage is unknown,
never a figure. Imported by models modules only (it defines a Django model).
"""

from __future__ import annotations

from django.db import models

from providers.values import Usage

# Column -> the Usage field (and the API's key) it holds. The columns' names are shorter than
# the API's keys for the cache's two.
COLUMNS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cache_read_input_tokens",
    "cache_creation_tokens": "cache_creation_input_tokens",
}


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
        return Usage(**{key: getattr(self, column) or 0 for column, key in COLUMNS.items()})

    @usage.setter
    def usage(self, value: Usage | None) -> None:
        known = value is not None and value.known
        for column, key in COLUMNS.items():
            setattr(self, column, (getattr(value, key) or 0) if known else None)


def column_values(usage: Usage) -> dict[str, int]:
    """The columns' values for a known usage, by column name."""
    return {column: getattr(usage, key) or 0 for column, key in COLUMNS.items()}


def from_row(values) -> Usage:
    """A known usage from its columns' values, read by hand-written SQL in `COLUMNS` order."""
    return Usage(**{key: value or 0 for key, value in zip(COLUMNS.values(), values, strict=True)})
