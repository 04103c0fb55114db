"""Waiting for the turn engine in tests and in-process benches: by its tasks, never by sleeping."""

from __future__ import annotations

import asyncio

from core import runtime


async def settle(conversation_id: int | None = None, *, timeout: float = 10) -> None:
    """Wait until this process runs nothing more for the conversation (or for any)."""
    async with asyncio.timeout(timeout):
        while True:
            here = runtime.current().loop()
            tasks = [
                task
                for cid, tasks in list(here.drivers.items())
                if conversation_id is None or cid == conversation_id
                for task in tasks
            ]
            # A title asked after a first reply (turns/titling.py) is the conversation's work too.
            tasks += [
                task
                for cid, task in list(here.titles.items())
                if conversation_id is None or cid == conversation_id
            ]
            if not tasks:
                return
            await asyncio.wait(tasks)


async def until(condition, *, timeout: float = 5, every: float = 0.01):
    """Wait until `condition()` (a function, or a coroutine function) returns something true,
    and return it: looked at again every `every` seconds, for at most `timeout`. For what no
    task or frame tells of, such as a row another task writes."""
    async with asyncio.timeout(timeout):
        while True:
            value = condition()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(every)
