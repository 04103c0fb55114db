"""Sessions that say whose they are (web/models.UserSession), and the sessions signed in before
it copied over, so an upgrade signs nobody out."""

from django.db import migrations, models
from django.utils import timezone


def copy_live_sessions(apps, schema_editor):
    """Each live row of Django's own session table, with the user its data signs in (read
    with the session engine's own decoding: the data is signed with the site's key)."""
    from django.contrib.auth import SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    alias = schema_editor.connection.alias
    old = apps.get_model("sessions", "Session")
    new = apps.get_model("web", "UserSession")
    store = SessionStore()
    live = old.objects.using(alias).filter(expire_date__gt=timezone.now())
    batch = []
    for row in live.iterator(chunk_size=2000):
        user = str(store.decode(row.session_data).get(SESSION_KEY, ""))
        batch.append(
            new(
                session_key=row.session_key,
                session_data=row.session_data,
                expire_date=row.expire_date,
                user_id=int(user) if user.isdigit() else None,
            )
        )
        if len(batch) == 2000:
            new.objects.using(alias).bulk_create(batch, ignore_conflicts=True)
            batch = []
    new.objects.using(alias).bulk_create(batch, ignore_conflicts=True)


class Migration(migrations.Migration):
    initial = True

    dependencies = [("sessions", "0001_initial")]

    operations = [
        migrations.CreateModel(
            name="UserSession",
            fields=[
                (
                    "session_key",
                    models.CharField(
                        max_length=40, primary_key=True, serialize=False, verbose_name="session key"
                    ),
                ),
                ("session_data", models.TextField(verbose_name="session data")),
                ("expire_date", models.DateTimeField(db_index=True, verbose_name="expire date")),
                ("user_id", models.BigIntegerField(db_index=True, null=True)),
            ],
            options={
                "verbose_name": "session",
                "verbose_name_plural": "sessions",
                "db_table": "web_session",
                "abstract": False,
            },
        ),
        migrations.RunPython(copy_live_sessions, migrations.RunPython.noop, elidable=True),
    ]
