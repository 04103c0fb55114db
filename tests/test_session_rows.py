"""Session rows say whose they are (web/models.UserSession), so ending a user's sessions reads
an index, not every live session of the site; the sessions signed in before the upgrade are
copied over by its migration."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore as DjangoStore
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.test.utils import CaptureQueriesContext

from turns import engine
from web.models import UserSession
from web.session_store import SessionStore
from web.sessions import end_every_session

pytestmark = pytest.mark.django_db


def test_a_session_row_names_the_user_it_signs_in_and_no_one_once_signed_out(alice):
    client = Client()
    client.get("/accounts/login/")  # a visitor's session, if any, names no one
    assert not UserSession.objects.exclude(user_id=None).exists()
    client.post("/accounts/login/", {"username": "alice", "password": "alice-password-1"})
    key = client.cookies["sessionid"].value
    assert UserSession.objects.get(pk=key).user_id == alice.pk
    client.post("/accounts/logout/")
    assert not UserSession.objects.filter(user_id=alice.pk).exists()


def test_ending_a_users_sessions_costs_the_same_however_many_others_are_signed_in(alice, bob):
    def sessions(user, count):
        for _ in range(count):
            Client().force_login(user)

    counts = []
    for others in (1, 50):
        sessions(alice, 2)
        sessions(bob, others)
        with CaptureQueriesContext(connection) as queries:
            assert end_every_session(alice.pk) == 2
        counts.append(len(queries))
        assert not UserSession.objects.filter(user_id=alice.pk).exists()
    assert counts[0] == counts[1] <= 2
    assert UserSession.objects.filter(user_id=bob.pk).count() == 51


@pytest.mark.django_db(transaction=True)
async def test_the_heartbeat_s_sweep_forgets_expired_sessions_and_keeps_live_ones(alice):
    live, expired = SessionStore(), SessionStore()
    for session in (live, expired):
        session[SESSION_KEY] = str(alice.pk)
    expired.set_expiry(-1)
    for session in (live, expired):
        await sync_to_async(session.create)()
    await engine.sweep()
    assert [key async for key in UserSession.objects.values_list("pk", flat=True)] == [
        live.session_key
    ]


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_copies_the_live_sessions_with_their_users(alice):
    executor = MigrationExecutor(connection)
    executor.migrate([("web", None)])  # before: only Django's own session table
    try:
        signed_in, visitor = DjangoStore(), DjangoStore()
        signed_in[SESSION_KEY] = str(alice.pk)
        signed_in.create()
        visitor["theme"] = "dark"
        visitor.create()
        expired = DjangoStore()
        expired[SESSION_KEY] = str(alice.pk)
        expired.set_expiry(-1)
        expired.create()
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    copied = dict(UserSession.objects.values_list("session_key", "user_id"))
    assert copied == {signed_in.session_key: alice.pk, visitor.session_key: None}
    row = UserSession.objects.get(pk=signed_in.session_key)
    assert SessionStore().decode(row.session_data)[SESSION_KEY] == str(alice.pk)
