"""The websocket's origin check: a socket is opened only from a page this server served.

Channels' AllowedHostsOriginValidator compares the Origin's host with ALLOWED_HOSTS and ignores
the scheme and the port, so a page on another port of the same host (another app, a dev server)
could open sockets with the user's cookies. Here the Origin must be the very origin the socket
was requested on (scheme, host and port, as the Host header and the connection say), or one
listed in CSRF_TRUSTED_ORIGINS, and the host must be allowed.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
# What Django itself allows with DEBUG on and ALLOWED_HOSTS empty.
DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def same_origin(scope: dict) -> bool:
    headers = {k.lower(): v for k, v in scope.get("headers", [])}
    origin = headers.get(b"origin", b"").decode("latin-1")
    host = headers.get(b"host", b"").decode("latin-1")
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS or (DEBUG_HOSTS if settings.DEBUG else [])
    if not origin or not domain or not validate_host(domain, allowed):
        return False
    scheme = "https" if scope.get("scheme", "ws") in ("wss", "https") else "http"
    found = _origin(origin)
    trusted = {_origin(o) for o in settings.CSRF_TRUSTED_ORIGINS}
    return found is not None and (found == _origin(f"{scheme}://{host}") or found in trusted)


class SameOriginValidator:
    """ASGI middleware refusing (403 at the handshake) a socket from any other origin."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not same_origin(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
