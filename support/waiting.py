"""Waiting for the turn engine in tests and in-process benches: by its tasks, never by sleeping."""

from __future__ import annotations

import asyncio

from core import runtime


async def settle(conversation_id: int | None = None, *, timeout: float = 10) -> None:
    """Wait until this process runs nothing more for the conversation (or for any)."""
    async with asyncio.timeout(timeout):
        while True:
            drivers = runtime.current().loop().drivers
            tasks = [
                task
                for cid, tasks in list(drivers.items())
                if conversation_id is None or cid == conversation_id
                for task in tasks
            ]
            if not tasks:
                return
            await asyncio.wait(tasks)
