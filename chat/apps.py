from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from chat import attachments
        from chat.models import Attachment

        post_migrate.connect(_ensure_search_index, sender=self)
        # However a file's row goes (the sweep, its conversation's or owner's cascade), its
        # stored file goes with it.
        post_delete.connect(attachments.forget, sender=Attachment)


def _ensure_search_index(sender, using: str = "default", **kwargs) -> None:
    from django.db import connections

    from chat import search_index

    search_index.ensure(connections[using])
