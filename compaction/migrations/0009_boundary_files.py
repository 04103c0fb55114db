from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("compaction", "0008_summary_model"),
    ]

    operations = [
        migrations.AddField(
            model_name="compaction",
            name="files",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
