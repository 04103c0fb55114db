"""Shared fixtures: named users (alice owns, bob is denied), conversations, sockets, fake models."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from support.fake_anthropic import FakeAnthropic
from support.fake_model import FakeClient


@pytest.fixture(scope="session", autouse=True)
def close_thread_connections(django_db_setup, django_db_blocker):
    """Async tests reach the database through Django's async ORM, which runs on asgiref's one
    sync thread: close its connection at the end, or PostgreSQL cannot drop the test database."""
    from asgiref.sync import SyncToAsync
    from django.db import connections

    yield
    with django_db_blocker.unblock():
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture(autouse=True)
def fresh_runtime():
    """Each test starts from a fresh runtime: its caches, clients and registered models are the
    test's own. (Tests roll back and flush the database, so ids come back with other rows behind
    them; in production an id is never reused.)"""
    from core import runtime

    yield runtime.reset()


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-password-1")


@pytest.fixture
def conversation(alice):
    from chat.models import Conversation

    return Conversation.objects.create(owner=alice, model="fake-model", system_prompt="Be brief.")


@pytest.fixture
def fake_llm(fresh_runtime):
    """Every turn and compaction, whatever the conversation's model, talks to this fake: it is
    registered for every model, as a real provider is."""
    from providers import registry

    client = FakeClient()
    registry.register(client)
    return client


@pytest.fixture
def fake_anthropic(settings) -> Iterator[FakeAnthropic]:
    """A running fake Anthropic server (support/fake_anthropic.py), scripted by the test, with
    settings pointing the app's Anthropic client at it."""
    server = FakeAnthropic().start()
    settings.LLM_PROVIDER = "anthropic"
    settings.ANTHROPIC_BASE_URL = server.url
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT_SECONDS = 5
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def channel_layer(settings):
    """The configured layer (Redis when REDIS_URL is set), emptied between tests; the engine's
    work in this test's event loop is shut down after it."""
    from channels.layers import channel_layers

    from turns import engine

    if not settings.REDIS_URL:
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "core.channel_layer.InMemoryLayer"}}
    channel_layers.backends.clear()
    yield
    await engine.shutdown()
    if "default" in channel_layers.backends:
        await channel_layers["default"].flush()  # this loop's Redis connections, closed
    channel_layers.backends.clear()


def socket_for(user, conversation_id) -> WebsocketCommunicator:
    """A socket past the auth middleware: the scope carries the user, as AuthMiddleware would."""
    from config.asgi import websocket_urlpatterns

    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation_id}/"
    )
    communicator.scope["user"] = user
    return communicator


def shows(seq: int, status: str):
    """A frame carrying message `seq` rendered with `status` (not merely mentioning both)."""
    pattern = re.compile(rf'<article id="msg-{seq}"[^>]*data-status="{status}"')
    return lambda frame: pattern.search(frame) is not None


async def receive_until(communicator, predicate, *, timeout: float = 5.0) -> list[str]:
    """Collect frames until one satisfies `predicate`; return them all."""
    frames = []
    while True:
        frame = await communicator.receive_from(timeout=timeout)
        frames.append(frame)
        if predicate(frame):
            return frames


def frame(**data) -> str:
    """A websocket frame as htmx's ws extension sends it."""
    return json.dumps({**data, "HEADERS": {"HX-Request": "true"}})


@pytest.fixture
async def long_conversation(conversation, settings):
    """Eight turns on a 2,000-token budget: enough to compact."""
    from asgiref.sync import sync_to_async

    from tests.transcripts import add_turns

    settings.CONTEXT_BUDGET_TOKENS = 2_000
    await sync_to_async(add_turns)(conversation, 8)
    return conversation
