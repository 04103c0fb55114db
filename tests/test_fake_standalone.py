"""The benchmarks' model server (`python -m support.fake_anthropic`): connections as the API's,
kept for the next request, so a load run measures the servers and not a connect per reply."""

from __future__ import annotations

import http.client
import json

import pytest

from support import fake_anthropic


@pytest.fixture
def standalone():
    # The server `python -m support.fake_anthropic` serves, built by the same function.
    fake = fake_anthropic.standalone(3).start()
    yield fake.address
    fake.stop()


def _stream(connection: http.client.HTTPConnection) -> str:
    body = {
        "model": "claude-bench",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    connection.request(
        "POST", "/v1/messages", json.dumps(body), {"content-type": "application/json"}
    )
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("connection") != "close"
    return response.read().decode()


def test_two_streamed_replies_come_over_one_connection(standalone):
    connection = http.client.HTTPConnection(*standalone, timeout=10)
    first = _stream(connection)
    socket = connection.sock
    second = _stream(connection)
    assert connection.sock is socket  # not reconnected: the server kept it
    assert "message_stop" in first and first == second
    connection.close()
