import logging

from django.apps import AppConfig


class WebConfig(AppConfig):
    """The web room as a Django app: its signals, and the runtime's renderer."""

    name = "web"
    label = "web"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in
        from django.core.signals import request_finished

        from core import db, runtime
        from render import frames
        from web import checks, device_cookies, sessions  # noqa: F401 (checks register themselves on import)
        from web.consumer import MalformedFrames

        # Every frame the outbox sends is rendered here, in the web room (core/outbox.py).
        runtime.start(render=frames.render)
        request_finished.connect(db.close_after_request, dispatch_uid="chat-close-after-request")
        sessions.connect()
        user_logged_in.connect(device_cookies.signed_in, dispatch_uid="device-cookie")
        # A client's malformed frame is one line, not an ERROR with a traceback (web/consumer.py).
        logging.getLogger("uvicorn.error").addFilter(MalformedFrames())
