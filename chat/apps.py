from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_ensure_search_index, sender=self)


def _ensure_search_index(sender, using: str = "default", **kwargs) -> None:
    from django.db import connections

    from chat import search_index

    search_index.ensure(connections[using])
