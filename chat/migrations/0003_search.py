"""Full-text search over messages: the text column, and the database's own index over it
(chat/search_index.py; chat's post_migrate keeps it after later migrations)."""

from django.db import migrations, models

def fill_text(apps, schema_editor):
    from chat.search_index import searchable_text

    Message = apps.get_model("chat", "Message")
    for message in Message.objects.only("id", "content").iterator():
        Message.objects.filter(pk=message.pk).update(search_text=searchable_text(message.content))


def create_index(apps, schema_editor):
    from chat import search_index

    search_index.ensure(schema_editor.connection)


def drop_index(apps, schema_editor):
    from chat import search_index

    search_index.drop(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_turn_engine")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="search_text",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(fill_text, migrations.RunPython.noop),
        migrations.RunPython(create_index, drop_index),
    ]
