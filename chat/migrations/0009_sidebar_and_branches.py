"""The sidebar's pin and archive, and versions: each message names the one it follows; the
conversation the end of the branch on screen."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0008_conversation_totals"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="archived_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="conversation",
            name="leaf_seq",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="conversation",
            name="pinned_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="parent_seq",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
