"""The one way async code touches the database: `await db.run(function, *args)`.

`function` is a plain synchronous function (usually a whole transaction). Where it runs depends
on the database:

- PostgreSQL (any server database): on a small pool of database threads, each with its own
  connection, so users' database work runs side by side while the event loop goes on, instead of
  queueing on the single thread that `sync_to_async`'s default (thread-sensitive) mode and
  Django's async ORM methods share process-wide.
- SQLite: on the event loop's own thread, start to end. SQLite is a library inside this process
  with one writer at a time, and a turn's transactions take a millisecond or two of CPU, so a
  pool only added waiting: under 100 chats a send's transaction took 52 ms of wall time for
  2.7 ms of CPU (every return from SQLite's C code waited for the interpreter lock, and writers
  slept in SQLite's busy handler while the lock sat free), after waiting 1.4 s for a free thread
  (bench/load.py; see the README's figures).

Connections are checked and recycled around each call exactly as Django does around a request
(`CONN_MAX_AGE`, `CONN_HEALTH_CHECKS`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections

_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=settings.DB_THREADS, thread_name_prefix="db")
    return _executor


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


def _on_this_thread[R](function: Callable[..., R]) -> R:
    """Run `function` on the event loop's thread. Django refuses database work where an event
    loop runs, because an `await` inside could interleave other work with a transaction; a
    plain synchronous function cannot await, so for its duration this thread is not running
    the loop."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        return _call(function)
    finally:
        asyncio.events._set_running_loop(loop)


def _is_sqlite() -> bool:
    # From the settings, not the connection: where an event loop runs, Django's connections are
    # per task (a context variable), and asking one would set up a connection object per task.
    return connections.settings[DEFAULT_DB_ALIAS]["ENGINE"] == "django.db.backends.sqlite3"


def close_after_request(**kwargs) -> None:
    """At the end of every HTTP request: close its thread's connections. Under ASGI each sync
    view runs on a thread of its own, so a connection kept for CONN_MAX_AGE is never reused:
    it stays open until garbage-collected, and under load the server runs out of connections
    (PostgreSQL's "too many clients"). Only async code's connections (the database threads',
    or on SQLite the event loop thread's) are kept. A connection inside a transaction (a
    test's) is left alone."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


async def run[**P, R](function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    if _is_sqlite():
        return _on_this_thread(partial(function, *args, **kwargs))
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
