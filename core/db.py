"""The one way async code touches the database: `await db.run(function, *args)`.

`function` is a plain synchronous function (usually a whole transaction), run to its end on a
database thread, where Django allows the ORM (it refuses it on a thread that runs an event loop).
Connections are checked and recycled around each call exactly as Django does around a request
(`CONN_MAX_AGE`, `CONN_HEALTH_CHECKS`). How it is waited for depends on the database:

- PostgreSQL (any server database): on a small pool of threads (DB_THREADS), each with its own
  connection, awaited, so users' database work runs side by side while the event loop goes on.
- SQLite: on one thread that the event loop waits for, blocked. SQLite is a library inside this
  process with one writer at a time, and a turn's transactions take a millisecond or two of CPU.
  Awaited, every return from SQLite's C code waited for the interpreter lock held by the busy
  loop: under 100 chats a send's transaction took 52 ms of wall time for 2.7 ms of CPU
  (bench/load.py). With the loop blocked, the thread has the interpreter to itself, and both
  threads on one CPU (`OneThread`).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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


def _is_sqlite() -> bool:
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
    # The context is carried over as sync_to_async would (without its thread-local
    # bookkeeping: nothing here needs it, and this runs a few times every turn).
    call = partial(contextvars.copy_context().run, _call, partial(function, *args, **kwargs))
    threads = runtime.current().database(Threads)
    if threads.one is not None:
        return threads.one.run(call)
    running = asyncio.get_running_loop().run_in_executor(threads.executor, call)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        # A thread cannot be stopped: the call goes on to its end (its transaction commits or
        # rolls back whole). Let it, so a cancelled caller never leaves database work behind
        # it (a shutdown, or a test's teardown, would otherwise race it).
        await asyncio.wait([running])
        raise


class Threads:
    """The database threads: DB_THREADS awaited on a server database; on SQLite one
    (`OneThread`), waited for with the loop blocked."""

    def __init__(self) -> None:
        self.one = OneThread() if _is_sqlite() else None
        self.executor = None
        if self.one is None:
            self.executor = ThreadPoolExecutor(settings.DB_THREADS, thread_name_prefix="db")

    def shutdown(self) -> None:
        if self.one is not None:
            self.one.stop()
        else:
            self.executor.shutdown(wait=False)


class OneThread:
    """SQLite's database thread. A call is handed over and back with two locks (an executor's
    queue and future cost twice as much, and this runs twice a turn), and while it runs, the
    calling thread moves to the database thread's CPU: handed from one core to the other, every
    call ran about twice as long (a query 265 us instead of 130, its data cold in the other
    core's caches; on one CPU, 138)."""

    def __init__(self) -> None:
        self.cpu = _current_cpu()
        self._one_caller = threading.Lock()
        self._go, self._done = threading.Lock(), threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._call: Callable | None = None
        self._outcome: tuple[bool, object] = (True, None)
        threading.Thread(target=self._serve, name="db", daemon=True).start()

    def run[R](self, call: Callable[[], R]) -> R:
        with self._one_caller:
            allowed = os.sched_getaffinity(0) if self.cpu is not None else None
            if allowed == {self.cpu}:  # there already: the process holds to it (core/cpu.py)
                allowed = None
            if allowed is not None:
                os.sched_setaffinity(0, {self.cpu})  # 0: the calling thread
            try:
                self._call = call
                self._go.release()
                self._done.acquire()
            finally:
                # Given back every CPU it had, so nothing it starts later is held to one.
                if allowed is not None:
                    os.sched_setaffinity(0, allowed)
            returned, value = self._outcome
            self._outcome = (True, None)
        if not returned:
            raise value
        return value

    def stop(self) -> None:
        with self._one_caller:
            self._call = None
            self._go.release()

    def _serve(self) -> None:
        if self.cpu is not None:
            os.sched_setaffinity(0, {self.cpu})
        while True:
            self._go.acquire()
            call = self._call
            if call is None:
                return
            try:
                self._outcome = (True, call())
            except BaseException as exc:  # the caller's to raise, whatever it is
                self._outcome = (False, exc)
            self._done.release()


def _current_cpu() -> int | None:
    """The CPU this thread runs on (Linux: the 39th field of its stat; None elsewhere)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        with open("/proc/thread-self/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def as_datetime(value) -> datetime | None:
    """A timestamp column read by hand-written SQL: SQLite hands back the stored text (UTC,
    naive), PostgreSQL an aware datetime."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value
