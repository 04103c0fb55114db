"""The client's address and scheme behind the proxies the deployment names (TRUSTED_PROXIES).

Every per-address limit (sign-ups, sign-in failures, password resets) counts against the
connection's address. A proxy in front of the app says who its client was in X-Forwarded-For;
anyone else can send that header too, so it is believed only from a proxy named in
TRUSTED_PROXIES (none by default: the connection's own address counts). The header's hops are
read from the right, skipping the named proxies: the first one that is not is the client (the
left end is whatever the client chose to write). X-Forwarded-Proto is believed from the same
proxies, so a TLS proxy's https reaches CSRF's and the websocket's origin checks.

The server must not rewrite the address itself: `make run` and `make serve` start uvicorn with
--no-proxy-headers, and this middleware does the work for HTTP and websockets alike.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
SCHEMES = {"http": ("http", "ws"), "https": ("https", "wss"), "ws": ("http", "ws")}
SCHEMES["wss"] = SCHEMES["https"]


@lru_cache(maxsize=8)
def networks(proxies: tuple[str, ...]) -> tuple[Network, ...] | None:
    """The named proxies as networks (an address is a network of one); None: "*", any."""
    if "*" in proxies:
        return None
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in proxies)


def trusted(host: str, proxies: tuple[Network, ...] | None) -> bool:
    if proxies is None:
        return True
    try:
        address = ipaddress.ip_address(host.strip().removeprefix("[").removesuffix("]"))
    except ValueError:
        return False  # a name or garbage is never one of the named proxies
    return any(address in network for network in proxies)


def client(peer: str, forwarded_for: str, proxies: tuple[Network, ...] | None) -> str:
    """Who the request came from: the connection's address, or, from a named proxy, the first
    hop from the right of X-Forwarded-For that is not a named proxy."""
    if not peer or not trusted(peer, proxies):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer


class ForwardedAddresses:
    """ASGI middleware: the scope's client and scheme as the named proxies say (see above)."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            proxies = networks(tuple(settings.TRUSTED_PROXIES))
            peer = scope["client"][0]
            if trusted(peer, proxies):
                headers = dict(scope.get("headers") or ())
                forwarded = headers.get(b"x-forwarded-for", b"").decode("latin-1")
                scope = dict(scope, client=(client(peer, forwarded, proxies), 0))
                proto = headers.get(b"x-forwarded-proto", b"").decode("latin-1")
                schemes = SCHEMES.get(proto.split(",")[0].strip().lower())
                if schemes:
                    scope["scheme"] = schemes[scope["type"] == "websocket"]
        return await self.application(scope, receive, send)
