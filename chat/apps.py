from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import request_finished

        from . import db, sessions

        post_migrate.connect(_ensure_search_index, sender=self)
        request_finished.connect(db.close_after_request, dispatch_uid="chat-close-after-request")
        sessions.connect()


def _ensure_search_index(sender, using: str = "default", **kwargs) -> None:
    from django.db import connections

    from search import schema

    schema.ensure(connections[using])
