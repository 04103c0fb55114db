"""Moving usage from a JSON field into columns, for the chat and compaction migrations."""

from django.db import models

KEYS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cache_read_input_tokens",
    "cache_creation_tokens": "cache_creation_input_tokens",
}


def columns(model_name: str):
    def copy(apps, schema_editor):
        app = "chat" if model_name == "Message" else "compaction"
        model = apps.get_model(app, model_name)
        for row in model.objects.filter(usage__isnull=False).only("id", "usage").iterator():
            usage = row.usage if isinstance(row.usage, dict) else {}
            if sum(int(usage.get(k) or 0) for k in KEYS.values() if k != "output_tokens") <= 0:
                continue  # zero or missing usage is unknown, never a figure
            model.objects.filter(pk=row.pk).update(
                **{column: int(usage.get(key) or 0) for column, key in KEYS.items()}
            )

    return copy


def fields():
    return [
        (name, models.PositiveIntegerField(null=True, blank=True))
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
    ]
