"""The benchmarks' model server (`python -m tests.fake_anthropic`): connections as the API's,
kept for the next request, so a load run measures the servers and not a connect per reply."""

from __future__ import annotations

import http.client
import json
import threading

import pytest

from tests.fake_anthropic import _Handler, _Standalone, _StandaloneServer, standalone_chunks


@pytest.fixture
def standalone():
    server = _StandaloneServer(("127.0.0.1", 0), _Handler)
    server.fake = _Standalone(standalone_chunks(3))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield server.server_address
    server.shutdown()
    server.server_close()
    thread.join()


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
