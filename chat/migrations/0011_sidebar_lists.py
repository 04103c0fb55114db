"""The sidebar's lists (unpinned, pinned, archived), each a partial index in the list's order, so
a keyset page is one range scan on SQLite and on PostgreSQL alike. The one index of 0010 ordered
the unpinned rows only on SQLite: PostgreSQL orders by an index only after columns compared with
=, never after IS NULL, and the pinned and archived rows were a range of stamps in it."""

from django.conf import settings
from django.db import migrations, models

LIVE = (("archived_at__isnull", True), ("deleted_at__isnull", True))
LISTED = models.Q(*LIVE, ("pinned_at__isnull", True))
PINNED = models.Q(*LIVE, ("pinned_at__isnull", False))
ARCHIVED = models.Q(("archived_at__isnull", False), ("deleted_at__isnull", True))


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0010_sidebar_order"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(model_name="conversation", name="conversation_sidebar"),
        *(
            migrations.AddIndex(
                model_name="conversation",
                index=models.Index(
                    fields=["owner", "-updated_at", "-id"], condition=condition, name=name
                ),
            )
            for condition, name in (
                (LISTED, "conversation_listed"),
                (PINNED, "conversation_pinned"),
                (ARCHIVED, "conversation_archived"),
            )
        ),
    ]
