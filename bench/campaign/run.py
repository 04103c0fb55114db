"""The fault campaign's run: every client (`person.Chat`) at once over the two server slots, and
the PostgreSQL connections watched meanwhile."""

from __future__ import annotations

import asyncio
import time

from bench.campaign.campaign import Campaign
from bench.campaign.person import Chat
from bench.harness.processes import BenchError
from bench.harness.services import db_connect


def share_turns(total: int, chats: int) -> list[int]:
    return [total // chats + (1 if i < total % chats else 0) for i in range(chats)]


async def drive(campaign: Campaign) -> list[Chat]:
    began = time.monotonic()
    await asyncio.gather(*(slot.start() for slot in campaign.slots))
    campaign.phases["servers starting"] = time.monotonic() - began
    began = time.monotonic()
    chats = [
        Chat(campaign, i, conv, n)
        for i, (conv, n) in enumerate(
            zip(
                campaign.conversations,
                share_turns(campaign.args.turns, len(campaign.conversations)),
                strict=True,
            )
        )
    ]
    watching = asyncio.ensure_future(watch_connections(campaign))
    results = await asyncio.gather(*(c.run() for c in chats), return_exceptions=True)
    await campaign.wait_restarts()
    watching.cancel()
    campaign.phases["turns"] = time.monotonic() - began
    for chat, result in zip(chats, results, strict=True):
        if isinstance(result, BaseException):
            raise BenchError(
                f"the client of conversation {chat.conversation_id} failed: "
                f"{type(result).__name__}: {result}"
            )
    return chats


async def watch_connections(campaign: Campaign) -> None:
    """The peak of PostgreSQL connections to the run's database, sampled each second over a
    connection opened first (so the sampling goes on if the servers exhaust max_connections)."""
    conn = await asyncio.to_thread(db_connect, campaign.args.pg_url)
    query = "SELECT count(*) - 1 FROM pg_stat_activity WHERE datname = current_database()"
    try:
        campaign.max_connections = int(conn.execute("SHOW max_connections").fetchone()[0])
        while True:
            (count,) = await asyncio.to_thread(lambda: conn.execute(query).fetchone())
            campaign.db_connections_peak = max(campaign.db_connections_peak, count)
            await asyncio.sleep(1)
    finally:
        conn.close()
