"""The one way async code touches the database: `await db.run(function, *args)`.

`function` is a plain synchronous function (usually a whole transaction). It runs on a small pool
of database threads, each with its own connection, so users' database work runs side by side
instead of queueing on the single thread that `sync_to_async`'s default (thread-sensitive) mode
and Django's async ORM methods share process-wide. Connections are checked and recycled around
each call exactly as Django does around a request (`CONN_MAX_AGE`, `CONN_HEALTH_CHECKS`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from django.conf import settings
from django.db import close_old_connections, connections

_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=settings.DB_THREADS, thread_name_prefix="db")
    return _executor


def _call[R](function: Callable[..., R]) -> R:
    close_old_connections()
    try:
        return function()
    finally:
        close_old_connections()


def close_after_request(**kwargs) -> None:
    """At the end of every HTTP request: close its thread's connections. Under ASGI each sync
    view runs on a thread of its own, so a connection kept for CONN_MAX_AGE is never reused:
    it stays open until garbage-collected, and under load the server runs out of connections
    (PostgreSQL's "too many clients"). Only the database threads here keep theirs. A
    connection inside a transaction (a test's) is left alone."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


async def run[**P, R](function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    # The executor directly, not asgiref's sync_to_async: nothing here needs its thread-local
    # bookkeeping, and this runs a few times every turn. The context is carried over as
    # sync_to_async would.
    call = partial(contextvars.copy_context().run, _call, partial(function, *args, **kwargs))
    running = asyncio.get_running_loop().run_in_executor(_pool(), call)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        # A thread cannot be stopped: the call goes on to its end (its transaction commits or
        # rolls back whole). Let it, so a cancelled caller never leaves database work behind
        # it (a shutdown, or a test's teardown, would otherwise race it).
        await asyncio.wait([running])
        raise
