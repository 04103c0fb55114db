"""HTTP and websocket entry point.

Websockets go through the origin check (scheme, host and port: web/origin.py) and the
session-based auth middleware, so a socket is only ever opened by a logged-in user from our own
pages.
"""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from turns.engine import lifespan  # noqa: E402
from web.consumer import ConversationConsumer  # noqa: E402
from web.forwarded import ForwardedAddresses  # noqa: E402
from web.origin import SameOriginValidator  # noqa: E402

websocket_urlpatterns = [
    path("ws/conversations/<int:conversation_id>/", ConversationConsumer.as_asgi()),
]

# Addresses and schemes first, as the proxies the deployment names say (web/forwarded.py).
application = ForwardedAddresses(
    ProtocolTypeRouter(
        {
            "http": django_asgi_app,
            "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
            # Servers that speak it (uvicorn): start-up recovery, and a clean shutdown that closes
            # this process's replies at once.
            "lifespan": lifespan,
        }
    )
)

# What is loaded by now (Django, the apps, their modules) lives as long as the process: out of the
# collector's way, a full collection looks only at what was made since. With a hundred chats open
# that pause went from about 180 ms to about 25 ms (bench/load.py, collections timed by gc's
# callbacks); the collector's total CPU drops by about a quarter.
gc.freeze()
