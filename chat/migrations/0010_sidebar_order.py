"""The sidebar's order as an index: listed or archived, pinned or not, then newest first with
the id breaking ties, so each keyset page (chat/sidebar.py) is one range scan."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0009_sidebar_and_branches"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                fields=["owner", "deleted_at", "archived_at", "pinned_at", "-updated_at", "-id"],
                name="conversation_sidebar",
            ),
        ),
    ]
