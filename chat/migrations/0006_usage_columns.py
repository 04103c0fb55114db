"""A reply's usage as columns (from the JSON field it was kept in)."""

from django.db import migrations

from ._usage import columns, fields

class Migration(migrations.Migration):
    dependencies = [("chat", "0005_disabled_tools")]

    operations = [
        *(migrations.AddField("message", name, field) for name, field in fields()),
        migrations.RunPython(columns("Message"), migrations.RunPython.noop),
        migrations.RemoveField("message", "usage"),
    ]
