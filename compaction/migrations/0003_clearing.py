from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("compaction", "0002_turn_engine")]

    operations = [
        migrations.AddField(
            model_name="compaction",
            name="kind",
            field=models.CharField(
                choices=[("summary", "Summary"), ("clear", "Clear")], default="summary", max_length=8
            ),
        ),
        migrations.AddField(
            model_name="compaction",
            name="cleared_before_seq",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="compaction",
            name="cleared_count",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
