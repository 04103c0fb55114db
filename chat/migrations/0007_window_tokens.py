"""The window's size after each reply moves out of the usage columns into its own column, so the
usage columns can hold what a turn of several steps was billed, every step summed."""

from django.db import migrations, models
from django.db.models import F


def fill(apps, schema_editor):
    # Until now a reply's usage was its last step's: input and output are the window after it.
    Message = apps.get_model("chat", "Message")
    Message.objects.filter(input_tokens__isnull=False).update(
        window_tokens=F("input_tokens")
        + F("cache_read_tokens")
        + F("cache_creation_tokens")
        + F("output_tokens")
    )


class Migration(migrations.Migration):
    dependencies = [("chat", "0006_usage_columns")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="window_tokens",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
