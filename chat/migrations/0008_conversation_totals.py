"""Running usage totals on each conversation (its replies and summary calls), filled from the
rows so far."""

from django.db import migrations
from django.db.models import Sum

from ._usage import fields


def fill(apps, schema_editor):
    Conversation = apps.get_model("chat", "Conversation")
    sources = [apps.get_model("chat", "Message"), apps.get_model("compaction", "Compaction")]
    for conversation in Conversation.objects.only("id").iterator():
        totals = {}
        for model in sources:
            found = model.objects.filter(
                conversation_id=conversation.pk, input_tokens__isnull=False
            ).aggregate(**{column: Sum(column) for column, _ in fields()})
            for column, value in found.items():
                if value is not None:
                    totals[column] = totals.get(column, 0) + value
        if totals:
            Conversation.objects.filter(pk=conversation.pk).update(**totals)


class Migration(migrations.Migration):
    dependencies = [("chat", "0007_window_tokens"), ("compaction", "0004_usage_columns")]

    operations = [
        *(migrations.AddField("conversation", name, field) for name, field in fields()),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
