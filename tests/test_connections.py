"""HTTP requests under ASGI do not pile up database connections: each sync view runs on a thread
of its own, so a connection kept for CONN_MAX_AGE would stay open, unused, until collected."""

from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from chat.models import Conversation
from support.servers import session_for
from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)


def _server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="counts PostgreSQL's connections")
async def test_many_requests_leave_no_connections_behind(alice, fake_anthropic):
    server = Server(fake_anthropic.url, CONN_MAX_AGE="60", DB_THREADS="2").start()
    try:
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        key = await sync_to_async(session_for)(alice)
        url = f"http://127.0.0.1:{server.port}/conversations/{conversation.pk}/export.json"

        def get(_) -> int:
            request = urllib.request.Request(url, headers={"Cookie": f"sessionid={key}"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status

        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(get, range(60)))
        assert statuses == [200] * 60
        # The database threads (2) and the sweep's, at most: not one per request.
        assert await sync_to_async(_server_connections)() <= 4
    finally:
        server.stop()
