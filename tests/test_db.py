"""`core.db.run`: where a turn's database work runs. On SQLite, on its one database thread while
the event loop waits (on that thread's CPU); on PostgreSQL, on the pool of database threads,
each with its own connection, where the statements a turn repeats are prepared."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from django.db import connection, transaction

from chat.models import Conversation
from chat.snapshot import read_snapshot
from core import db

pytestmark = pytest.mark.django_db(transaction=True)

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="SQLite uses one thread the loop waits for"
)
# The loop's thread moves to the database thread's CPU while it waits, where the platform can
# set a thread's CPUs (Linux).
with_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="no os.sched_setaffinity on this platform"
)
server_only = pytest.mark.skipif(connection.vendor == "sqlite", reason="a server uses the pool")


def _where() -> tuple[int, str]:
    return threading.get_ident(), threading.current_thread().name


def _titles(owner_id: int) -> list[str]:
    with transaction.atomic():
        return list(Conversation.objects.filter(owner_id=owner_id).values_list("title", flat=True))


def _fail() -> None:
    raise ValueError("inside")


@sqlite_only
@with_affinity
async def test_on_sqlite_the_work_runs_on_one_thread_while_the_loop_waits(alice):
    await Conversation.objects.acreate(owner=alice, model="claude-test", title="Kept")
    allowed = os.sched_getaffinity(0)
    ident, name = await db.run(_where)
    assert ident != threading.get_ident() and name.startswith("db")
    assert (await db.run(_where))[0] == ident  # always the same one: SQLite's one writer
    # The loop waited: nothing else it runs moved while the call did.
    ticks = []

    async def tick():
        while True:
            ticks.append(1)
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    before = len(ticks)
    assert await db.run(_titles, alice.pk) == ["Kept"]
    assert len(ticks) == before
    ticker.cancel()
    with pytest.raises(ValueError, match="inside"):
        await db.run(_fail)  # a failure inside is the caller's
    # The loop's thread is given back every CPU it had, and Django still refuses the ORM on it.
    assert os.sched_getaffinity(0) == allowed
    with pytest.raises(Exception, match="async context"):
        list(Conversation.objects.all())


@server_only
async def test_on_a_server_database_the_work_runs_on_the_pool(alice):
    ident, name = await db.run(_where)
    assert ident != threading.get_ident()
    assert name.startswith("db")
    # Where the loop runs, Django still refuses the ORM outside a call.
    with pytest.raises(Exception, match="async context"):
        list(Conversation.objects.all())


def _snapshot_prepared(conversation_id: int, times: int) -> bool:
    """Run the window snapshot `times` times; is it now prepared on this connection?"""
    for _ in range(times):
        with transaction.atomic():
            read_snapshot(conversation_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return any("WITH b AS" in statement for (statement,) in cursor.fetchall())


@server_only
async def test_on_a_server_database_the_turns_statements_are_prepared_once_repeated(alice):
    """The window snapshot (every send and every close) took PostgreSQL longer to plan than to
    run: on a connection that has run it a few times, it is prepared, planned no more."""
    conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
    # One call, so one connection, running the statement again and again: by the sixth time it
    # is prepared (`prepare_threshold`). Without prepared statements it never is.
    assert await db.run(_snapshot_prepared, conversation.pk, 6)
