"""Search never fails because embeddings do: with the embeddings server refusing connections, or
accepting them and never answering, every search answers at once with the lexical hits and says
that search by meaning is unavailable (the pages, the JSON, the model's recall tool); a failed
server is not asked again for a while; the background rounds say once that it went down and
once that it is back, with no traceback."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import numpy as np
import pytest

from chat.models import Conversation, MessageVector
from providers import embeddings
from providers.values import LLMError
from search.semantic import UNAVAILABLE
from support.servers import free_port
from tests.transcripts import chat
from tools import recall
from tools.values import Context
from turns import engine

pytestmark = pytest.mark.django_db(transaction=True)


def chat_about_the_harbour(owner) -> Conversation:
    return chat(
        owner, ["The ferry leaves the harbour at nine.", "Noted.", "And the train?", "At ten."]
    )


@pytest.fixture
def silent_server():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/embeddings"
    listener.close()


@pytest.fixture
def refused_url():
    return f"http://127.0.0.1:{free_port()}/v1/embeddings"


@pytest.mark.parametrize("down", ["refused_url", "silent_server"])
def test_every_search_answers_at_once_by_words_and_says_so(
    down, request, settings, fresh_runtime, alice, client
):
    settings.EMBEDDINGS, settings.EMBEDDINGS_MODEL = request.getfixturevalue(down), "m"
    conversation = chat_about_the_harbour(alice)
    client.force_login(alice)
    for url in (
        "/search.json?q=ferry+harbour",
        f"/conversations/{conversation.pk}/search.json?q=ferry+harbour",
        "/search.json?q=ferry+harbour",  # again: the server is not asked while it is down
    ):
        started = time.monotonic()
        response = client.get(url)
        assert time.monotonic() - started < 1.0, url
        assert response.status_code == 200
        found = response.json()
        assert found["notice"] == UNAVAILABLE
        assert [hit["seq"] for hit in found["hits"]][:1] == [1]
    page = client.get(f"/conversations/{conversation.pk}/search/?q=ferry")
    assert page.status_code == 200
    assert UNAVAILABLE in page.content.decode() and "harbour" in page.content.decode()


def test_the_recall_tool_answers_by_words_and_says_so(settings, fresh_runtime, alice, refused_url):
    settings.EMBEDDINGS, settings.EMBEDDINGS_MODEL = refused_url, "m"
    conversation = chat_about_the_harbour(alice)
    started = time.monotonic()
    found = recall.search_history(
        Context(alice.pk, conversation.pk, turn_seq=5), {"query": "ferry"}
    )
    assert time.monotonic() - started < 1.0
    assert found.startswith(UNAVAILABLE + "\n")
    assert "#1 · user · " in found and "**ferry**" in found


def test_a_search_says_nothing_of_the_kind_while_the_embedder_answers(fresh_runtime, alice, client):
    embeddings.register(Flaky(failures=0))
    conversation = chat_about_the_harbour(alice)
    client.force_login(alice)
    assert "notice" not in client.get("/search.json?q=ferry").json()
    found = recall.search_history(
        Context(alice.pk, conversation.pk, turn_seq=5), {"query": "ferry"}
    )
    assert found.split("\n")[0].endswith("best first:")


def test_a_failed_server_is_not_asked_again_until_its_retry_time(refused_url):
    server = embeddings.ServerEmbedder(refused_url, "m", retry_after=30)
    with pytest.raises(LLMError):
        server.embed(["a"], quick=True)
    assert server.down
    with pytest.raises(embeddings.Unavailable):
        server.embed(["a"])  # refused at once, nothing sent
    server.retry_at = 0.0
    assert not server.down


class Flaky:
    """An embedder whose server is down for its first `failures` calls."""

    name, dimension, down = "flaky", 2, False

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def embed(self, texts: list[str], *, quick: bool = False) -> np.ndarray:
        if self.failures:
            self.failures -= 1
            raise LLMError("The embeddings server did not answer: refused")
        return np.ones((len(texts), 2), dtype=np.float32) / np.sqrt(2)


async def test_the_rounds_say_once_it_went_down_and_once_it_is_back(
    settings, fresh_runtime, alice, caplog
):
    settings.TURN_HEARTBEAT_SECONDS = 0  # rounds one after the other
    conversation = await asyncio.to_thread(chat_about_the_harbour, alice)
    embeddings.register(Flaky(failures=3))
    caplog.set_level(logging.INFO, logger="turns.engine")
    rounds = asyncio.ensure_future(engine._embedding())
    try:
        # Until the round that wrote the vectors has said so: it logs after its write, so
        # waiting on the vectors alone could stop the rounds between the two.
        for _ in range(500):
            await asyncio.sleep(0.01)
            if any("back" in r.getMessage() for r in caplog.records if r.name == "turns.engine"):
                break
    finally:
        rounds.cancel()
        await asyncio.gather(rounds, return_exceptions=True)
    assert await asyncio.to_thread(_vectors_of, conversation) == 4
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "turns.engine"]
    assert [level for level, _ in said] == ["WARNING", "WARNING"], said
    assert "does not answer" in said[0][1] and "back" in said[1][1]
    assert not any(r.exc_info for r in caplog.records)


def _vectors_of(conversation) -> int:
    return MessageVector.objects.filter(message__conversation=conversation).count()
