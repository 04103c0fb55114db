"""Abuse limits: how often one user, or one address, may do what costs the most.

Counted in Django's cache in fixed windows (a key per window, expiring with it). With REDIS_URL
the cache is Redis, shared by every process; without it the app runs as one process and its
memory is the whole truth. Each limit is a setting; refusals say what the limit is and when to
try again. Async callers run these through `core.db.run`, with their database work: Django's
async cache API would hop to the one thread every request shares.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import redis
from django.conf import settings
from django.core.cache import caches

from core import runtime
from core.errors import ActionError


@dataclass(frozen=True)
class Limit:
    name: str  # in the cache key
    setting: str  # how many per window
    window: int  # seconds
    doing: str  # what is limited, for the message ("sending messages")

    @property
    def allowed(self) -> int:
        return getattr(settings, self.setting)


SENDS = Limit("send", "SENDS_PER_MINUTE", 60, "sending messages")
COMPACTIONS = Limit("compact", "COMPACTIONS_PER_HOUR", 3600, "compacting by hand")
SIGNUPS = Limit("signup", "SIGNUPS_PER_HOUR", 3600, "signing up from this address")
LOGIN_FAILURES = Limit("login", "LOGIN_FAILURES_PER_15_MINUTES", 900, "signing in")
IMPORTS = Limit("import", "IMPORTS_PER_HOUR", 3600, "importing conversations")


class Limited(ActionError):
    """Over a limit: the reason says which and for how long."""

    def __init__(self, limit: Limit, wait: int) -> None:
        minutes = f"{math.ceil(wait / 60)} minute{'s' if wait > 60 else ''}"
        when = f"{wait} seconds" if wait < 60 else minutes
        super().__init__(
            f"Too many attempts at {limit.doing}: the limit is {limit.allowed} "
            f"{_per(limit.window)}. Try again in {when}."
        )
        self.wait = wait


def _per(window: int) -> str:
    return {60: "a minute", 900: "in 15 minutes", 3600: "an hour"}.get(window, f"per {window} s")


def _counts():
    """One cache client for the process, kept on the runtime. `django.core.cache.cache` is one
    per context, and each call on the database threads runs in a fresh copy of its caller's
    context: through it, every count made a client of its own, and with Redis a new connection
    (connected, health-checked) per send. Both backends' clients are safe to share between
    threads."""
    clients = runtime.current().cache_clients
    if "counts" not in clients:
        clients["counts"] = caches.create_connection("default")
    return clients["counts"]


def _redis() -> redis.Redis | None:
    """With REDIS_URL (where the cache is), a client of the counts' own for `hit`: one per
    process, kept on the runtime, safe to share between threads."""
    clients = runtime.current().cache_clients
    if "redis" not in clients:
        clients["redis"] = redis.Redis.from_url(settings.REDIS_URL) if settings.REDIS_URL else None
    return clients["redis"]


def _key(limit: Limit, who, now: float) -> tuple[str, int]:
    start = int(now // limit.window) * limit.window
    return f"limit:{limit.name}:{who}:{start}", start + limit.window


def hit(limit: Limit, who, *, now: float | None = None) -> None:
    """Count one more; Limited if that is over the limit (the refused attempt counts too, so
    hammering does not help)."""
    now = time.time() if now is None else now
    key, ends = _key(limit, who, now)
    cache, shared = _counts(), _redis()
    if shared is not None:
        # One round trip, where the cache API takes three (add; then incr checks the key
        # exists before incrementing it): the window's count is created with its expiry if it
        # is new, then incremented, under the name the cache gives it (`check` reads it there).
        pipe = shared.pipeline(transaction=False)
        named = cache.make_and_validate_key(key)
        pipe.set(named, 0, ex=limit.window, nx=True)
        pipe.incr(named)
        count = pipe.execute()[1]
    else:
        cache.add(key, 0, timeout=limit.window)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between the two calls
            cache.set(key, 1, timeout=limit.window)
            count = 1
    if count > limit.allowed:
        raise Limited(limit, max(1, math.ceil(ends - now)))


def check(limit: Limit, who, *, now: float | None = None) -> None:
    """Limited if the count is already at the limit; counts nothing (failed log-ins are
    counted apart, with `hit`, only when they fail)."""
    now = time.time() if now is None else now
    key, ends = _key(limit, who, now)
    if (_counts().get(key) or 0) >= limit.allowed:
        raise Limited(limit, max(1, math.ceil(ends - now)))
