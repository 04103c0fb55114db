from django.apps import AppConfig


class WebConfig(AppConfig):
    """The web room as a Django app: its signals, and the runtime's renderer."""

    name = "web"
    label = "web"

    def ready(self) -> None:
        from django.core.signals import request_finished

        from core import db, runtime
        from render import frames
        from web import checks, sessions  # noqa: F401 (checks register themselves on import)

        # Every frame the outbox sends is rendered here, in the web room (core/outbox.py).
        runtime.start(render=frames.render)
        request_finished.connect(db.close_after_request, dispatch_uid="chat-close-after-request")
        sessions.connect()
