"""Abuse limits: how often one user, or one address, may do what costs the most.

Counted in the database in fixed windows, a row per limit, who and window (`LimitCount`). One
statement counts and returns the new count (an upsert), so the count and the decision are one
atomic step: concurrent requests, in one process or several, cannot both take the last place,
and the limits hold whether Redis is configured, or answering, or not. What is checked before it
is known whether it counts (a password, a sign-up form) takes a place first and gives it back
when it turns out not to count (`release`). Each limit is a setting; refusals say what the limit
is and when to try again. Async callers run these through `core.db.run`, with their database
work.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import F

from chat.models import LimitCount
from core.errors import ActionError


@dataclass(frozen=True)
class Limit:
    name: str  # in the row's key
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
PASSWORD_RESETS = Limit("reset", "PASSWORD_RESETS_PER_HOUR", 3600, "resetting a password")


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


def _window(limit: Limit, who, now: float) -> tuple[str, float]:
    start = int(now // limit.window) * limit.window
    who = str(who)
    if len(who) > 64:  # an email can be 254 characters: the key stays within its column
        who = hashlib.sha256(who.encode()).hexdigest()
    return f"{limit.name}:{start}:{who}", float(start + limit.window)


def _table() -> tuple[str, str]:
    quote = connection.ops.quote_name
    return quote(LimitCount._meta.db_table), quote("key")


def hit(limit: Limit, who, *, now: float | None = None) -> None:
    """Count one more; Limited if that is over the limit. The refused attempt counts too (unless
    the caller's transaction rolls it back), so hammering does not help: the window's count
    never goes down by itself before it ends."""
    now = time.time() if now is None else now
    key, ends = _window(limit, who, now)
    table, key_column = _table()
    with connection.cursor() as cursor:
        # Both SQLite (3.35+) and PostgreSQL take this upsert; each runs it as one statement
        # under the row's lock, so every caller gets a different count.
        cursor.execute(
            f"INSERT INTO {table} ({key_column}, count, ends_at) VALUES (%s, 1, %s) "  # noqa: S608
            f"ON CONFLICT ({key_column}) DO UPDATE SET count = {table}.count + 1 "
            "RETURNING count",
            [key, ends],
        )
        (count,) = cursor.fetchone()
    if count > limit.allowed:
        raise Limited(limit, max(1, math.ceil(ends - now)))


def release(limit: Limit, who, *, now: float | None = None) -> None:
    """Give back a place taken with `hit` for an attempt that turned out not to count (a
    sign-in that succeeded, a sign-up form with a mistake in it)."""
    now = time.time() if now is None else now
    key, _ = _window(limit, who, now)
    LimitCount.objects.filter(key=key, count__gt=0).update(count=F("count") - 1)


def sweep(*, now: float | None = None) -> None:
    """Forget the windows that have ended, so the table stays the size of the windows open now
    (the engine's sweep calls this; indexed, and cheap when nothing has ended)."""
    LimitCount.objects.filter(ends_at__lt=time.time() if now is None else now).delete()
