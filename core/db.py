"""The one way async code touches the database: `await db.run(function, *args)`.

`function` is a plain synchronous function (usually a whole transaction), run to its end;
connections are checked and recycled around each call exactly as Django does around a request
(`CONN_MAX_AGE`, `CONN_HEALTH_CHECKS`). Where it runs depends on the database:

- PostgreSQL (any server database): on a small pool of threads (DB_THREADS), each with its own
  connection, so users' database work runs side by side while the event loop goes on.
- SQLite: on the event loop's own thread, start to end. SQLite is a library inside this process
  with one writer at a time, and a turn's transactions take a millisecond or two of CPU. On a
  pool, every return from SQLite's C code waited for the interpreter lock held by the busy loop:
  under 100 chats a send's transaction took 52 ms of wall time for 2.7 ms of CPU. On one thread
  that the loop waits for, each call still paid two thread hand-offs (about 40 us of CPU, more
  of waiting on a busy machine): 0.74x the relay's replies a second against 0.84x here
  (bench/load.py, 100 chats). Django allows the ORM on this thread because the settings say it
  is safe for SQLite (config/settings.py): a plain function cannot await, so nothing
  interleaves with its transaction.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core import runtime


def _call[R](function: Callable[..., R]) -> R:
    # A connection inside a transaction (a test's) is left alone, as Django leaves it.
    in_transaction = connections[DEFAULT_DB_ALIAS].in_atomic_block
    if not in_transaction:
        close_old_connections()
    try:
        return function()
    finally:
        if not in_transaction:
            close_old_connections()


def is_sqlite() -> bool:
    # From the settings, not the connection: where an event loop runs, Django's connections are
    # per task (a context variable), and asking one would set up a connection object per task.
    return connections.settings[DEFAULT_DB_ALIAS]["ENGINE"] == "django.db.backends.sqlite3"


def close_after_request(**kwargs) -> None:
    """At the end of every HTTP request: close its thread's connections. Under ASGI each sync
    view runs on a thread of its own, so a connection kept for CONN_MAX_AGE is never reused:
    it stays open until garbage-collected, and under load the server runs out of connections
    (PostgreSQL's "too many clients"). Only the database threads' connections are kept. A
    connection inside a transaction (a test's) is left alone."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


async def run[**P, R](function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    if is_sqlite():
        return _call(partial(function, *args, **kwargs))
    # The context is carried over as sync_to_async would (without its thread-local
    # bookkeeping: nothing here needs it, and this runs a few times every turn).
    call = partial(contextvars.copy_context().run, _call, partial(function, *args, **kwargs))
    threads = runtime.current().db_threads(settings.DB_THREADS)
    running = asyncio.get_running_loop().run_in_executor(threads, call)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        # A thread cannot be stopped: the call goes on to its end (its transaction commits or
        # rolls back whole). Let it, so a cancelled caller never leaves database work behind
        # it (a shutdown, or a test's teardown, would otherwise race it).
        await asyncio.wait([running])
        raise


def as_datetime(value) -> datetime | None:
    """A timestamp column read by hand-written SQL: SQLite hands back the stored text (UTC,
    naive), PostgreSQL an aware datetime."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value
