from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chat", "0003_search")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="tool_runs",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
