from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chat", "0004_tool_runs")]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="disabled_tools",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
