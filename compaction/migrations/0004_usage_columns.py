"""A summary call's usage as columns (from the JSON field it was kept in)."""

from django.db import migrations

from chat.migrations import _usage


class Migration(migrations.Migration):
    dependencies = [("compaction", "0003_clearing"), ("chat", "0006_usage_columns")]

    operations = [
        *(migrations.AddField("compaction", name, field) for name, field in _usage.fields()),
        migrations.RunPython(_usage.columns("Compaction"), migrations.RunPython.noop),
        migrations.RemoveField("compaction", "usage"),
    ]
