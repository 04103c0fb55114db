"""Counting database queries from every thread: on PostgreSQL the engine does its work on
database threads, so a per-connection capture on the test's thread would see none of it."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

from django.db.backends.utils import CursorWrapper

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


@dataclass(frozen=True)
class Query:
    sql: str
    in_transaction: bool  # run inside an atomic block
    connection: int  # which connection (each thread has its own)


@contextmanager
def all_queries():
    """Yields the list of queries run on any connection, in any thread, meanwhile."""
    seen: list[Query] = []
    lock = threading.Lock()
    execute, executemany = CursorWrapper._execute, CursorWrapper._executemany

    def record(cursor, sql) -> None:
        if sql.startswith(TRANSACTION_CONTROL):
            return  # SQLite's BEGIN IMMEDIATE is a statement; PostgreSQL's BEGIN is implicit
        with lock:
            seen.append(Query(sql, cursor.db.in_atomic_block, id(cursor.db)))

    def counted_execute(self, sql, params, *ignored):
        record(self, sql)
        return execute(self, sql, params, *ignored)

    def counted_executemany(self, sql, param_list, *ignored):
        record(self, sql)
        return executemany(self, sql, param_list, *ignored)

    CursorWrapper._execute = counted_execute
    CursorWrapper._executemany = counted_executemany
    try:
        yield seen
    finally:
        CursorWrapper._execute, CursorWrapper._executemany = execute, executemany
