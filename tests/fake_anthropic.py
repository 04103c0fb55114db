"""A local fake of the Anthropic Messages API, for testing the real SDK end to end.

The SDK is not mocked: it makes real HTTP requests to this server, which answers `POST
/v1/messages` from a scripted queue with real server-sent events (chunked transfer encoding, so a
dropped connection looks like one to the client). Tests enqueue what the next requests get, then
assert on `.requests`, the JSON bodies the server received.

    def test_it_streams(fake_anthropic):
        fake_anthropic.enqueue_reply(["Hel", "lo"])
        ...
        assert fake_anthropic.requests[0]["system"] == "Be brief."
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DEFAULT_CHUNKS = ["Hello", " from", " the", " fake", " server."]


@dataclass
class _Script:
    """One scripted answer to one request."""

    kind: str  # "reply" | "json" | "status" | "stream_error" | "drop"
    chunks: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str = "end_turn"
    delay: float = 0.0
    status: int = 200
    error_type: str = ""
    message: str = ""
    report_usage: bool = True  # False: like servers that send no usage at all
    tools: list[dict] = field(default_factory=list)  # {"id", "name", "input_parts"} after the text
    # No usage scripted: report the request's own count, cache reads and writes included.
    counted: bool = False


def _usage(usage: dict[str, int] | None, chunks: list[str]) -> dict[str, int]:
    usage = dict(usage or {})
    usage.setdefault("input_tokens", 10)
    usage.setdefault("output_tokens", max(1, len(chunks)))
    return usage


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    keep_alive = False  # each streamed reply ends its connection
    # Never wait on handler threads at close: a test that stopped reading mid-stream must not
    # hang the teardown while the handler trickles its remaining deltas into a dead socket.
    block_on_close = False
    fake: FakeAnthropic


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        fake = self.server.fake
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self._send_json(404, _error_body("not_found_error", f"no route for {self.path}"))
            return
        problem = invalid_request(body)
        if problem:
            # As the real API does: a request breaking the rules is refused, never answered.
            fake.invalid.append(problem)
            self._send_json(400, _error_body("invalid_request_error", problem))
            return
        try:
            counted = fake.cache.account(body) if fake.cache is not None else {}
        except CacheRuleError as exc:
            fake.invalid.append(str(exc))
            self._send_json(400, _error_body("invalid_request_error", str(exc)))
            return
        script = fake._take(body, dict(self.headers.items()))
        if fake.cache is not None:
            fake.counts.append(counted)
        if script.counted:
            script.usage = {**script.usage, **counted}
        try:
            self._answer(script, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a stop or a disconnect test): nothing to tell it

    def _answer(self, script: _Script, body: dict) -> None:
        model = body.get("model", "fake-model")
        if script.kind == "status":
            self._send_json(script.status, _error_body(script.error_type, script.message))
            return
        if script.kind == "json":
            # A gateway that answers a streaming request with one whole message (LiteLLM does).
            self._send_json(200, _message_json(script, model))
            return
        if not body.get("stream"):
            if script.kind != "reply":
                self._send_json(500, _error_body("api_error", "scripted stream failure"))
                return
            self._send_json(200, _message_json(script, model))
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        if not self.server.keep_alive:
            self.send_header("connection", "close")
            self.close_connection = True
        self.send_header("request-id", "req_fake")
        self.end_headers()
        # With no delay there is nothing to wait for between events: the whole stream goes out in
        # one write (the same bytes, far fewer system calls: a load benchmark's provider is cheap).
        self._batch = [] if script.kind == "reply" and not script.delay else None
        usage = _usage(script.usage, script.chunks)
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
        }
        if script.report_usage:
            message["usage"] = {
                "input_tokens": usage["input_tokens"],
                "output_tokens": 1,
                "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
                "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
            }
        self._event("message_start", {"type": "message_start", "message": message})
        self._event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        self._event("ping", {"type": "ping"})
        for i, chunk in enumerate(script.chunks):
            if i and script.delay:
                time.sleep(script.delay)
            self._event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": chunk},
                },
            )
        if script.kind == "drop":
            # Close the socket without the terminating zero-length chunk: the client sees an
            # incomplete body, exactly like a connection cut mid-reply.
            self.wfile.flush()
            self.connection.shutdown(2)  # SHUT_RDWR
            return
        if script.kind == "stream_error":
            self._event("error", _error_body(script.error_type, script.message))
            self._end_chunks()
            return
        self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
        for index, tool in enumerate(script.tools, start=1):
            self._tool_block(index, tool)
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": script.stop_reason, "stop_sequence": None},
        }
        if script.report_usage:
            delta["usage"] = {"output_tokens": usage["output_tokens"]}
        self._event("message_delta", delta)
        self._event("message_stop", {"type": "message_stop"})
        self._end_chunks()

    def _tool_block(self, index: int, tool: dict) -> None:
        start = {"type": "tool_use", "id": tool["id"], "name": tool["name"], "input": {}}
        self._event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for part in tool["input_parts"]:
            self._event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                },
            )
        self._event("content_block_stop", {"type": "content_block_stop", "index": index})

    _batch: list[bytes] | None = None

    def _write(self, data: bytes) -> None:
        if self._batch is not None:
            self._batch.append(data)
            return
        self.wfile.write(data)
        self.wfile.flush()

    def _event(self, name: str, data: dict) -> None:
        payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        self._write(b"%x\r\n%s\r\n" % (len(payload), payload))

    def _end_chunks(self) -> None:
        self._write(b"0\r\n\r\n")
        if self._batch is not None:
            batch, self._batch = self._batch, None
            self.wfile.write(b"".join(batch))
            self.wfile.flush()

    def _send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.send_header("request-id", "req_fake")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(data)
        self.wfile.flush()


def invalid_request(body: dict) -> str:
    """What the real API would refuse in this request's messages, or "" (the rules the window
    must keep: user first, roles alternating, no empty message, every tool_use answered by a
    tool_result in the very next message, results first, no result without its call)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    has_tools = bool(body.get("tools"))
    previous: dict | None = None
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not content:
            return f"messages.{i}: content must not be empty"
        if role == (previous or {}).get("role", "assistant"):
            return f"messages.{i}: roles must alternate, starting with user"
        for block in content:
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                return f"messages.{i}: text content blocks must be non-empty"
        asked = {
            b["id"] for b in (previous or {}).get("content", []) if b.get("type") == "tool_use"
        }
        results = [b for b in content if b.get("type") == "tool_result"]
        if role == "user":
            if {b.get("tool_use_id") for b in results} - asked:
                return f"messages.{i}: tool_result without a tool_use in the message before"
            if asked - {b.get("tool_use_id") for b in results}:
                return f"messages.{i}: tool_use ids without a tool_result right after them"
            if results and any(b.get("type") != "tool_result" for b in content[: len(results)]):
                return f"messages.{i}: tool_result blocks must come first"
        elif not has_tools and any(b.get("type") == "tool_use" for b in content):
            return f"messages.{i}: tool_use blocks need the tools parameter"
        previous = {"role": role, "content": content}
    last = messages[-1]
    if last.get("role") == "assistant" and any(
        b.get("type") == "tool_use" for b in last.get("content") or []
    ):
        return "the last message holds tool_use blocks without results"
    return ""


def system_text(body: dict) -> str:
    """A request's system prompt as text (sent as a string, or as blocks to mark for caching)."""
    system = body.get("system") or ""
    if isinstance(system, str):
        return system
    return "".join(b.get("text", "") for b in system)


def stripped(value):
    """A request part without its cache marks: what must stay byte-identical."""
    if isinstance(value, list):
        return [stripped(v) for v in value]
    if isinstance(value, dict):
        return {k: stripped(v) for k, v in value.items() if k != "cache_control"}
    return value


def breakpoints(body: dict) -> int:
    """How many blocks of a request carry cache_control."""
    return len(_units(body)[1])


class CacheRuleError(Exception):
    """A request that breaks the prompt-caching rules (the real API answers 400)."""


class PromptCache:
    """Prompt caching as the API does it, closely enough for the figures to mean something.

    A request is a sequence of blocks in the API's order: tools, then system, then each
    message's content blocks. A block with `cache_control` is a breakpoint (at most 4, each
    `{"type": "ephemeral"}`, never on an empty text block). The prefix up to each breakpoint is
    written to the cache (if it has at least `min_tokens`); a later request whose prefix up to
    one of its breakpoints, or one of the 20 block boundaries before it, is byte-identical
    reads it, refreshing its 5-minute life. Usage
    reports the tokens read, written and the rest apart, as `usage.input_tokens` excludes reads
    and writes. Tokens are counted as a quarter of the characters of each block's JSON.
    """

    TTL = 300.0
    MAX_BREAKPOINTS = 4
    LOOKBACK = 20

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._entries: dict[str, float] = {}
        self._lock = threading.Lock()

    def account(self, body: dict) -> dict[str, int]:
        units, marks = _units(body)
        if len(marks) > self.MAX_BREAKPOINTS:
            raise CacheRuleError(
                f"A maximum of {self.MAX_BREAKPOINTS} blocks with cache_control may be "
                f"provided. Found {len(marks)}."
            )
        sizes = [math.ceil(len(text) / 4) for text in units]
        digests, running = [], hashlib.sha256()
        for text in units:
            running.update(text.encode())
            digests.append(running.copy().hexdigest())
        total, now = sum(sizes), time.monotonic()
        read_end = 0  # units [0, read_end) read from the cache
        with self._lock:
            # Like the API, a breakpoint also finds a prefix cached at any of the LOOKBACK
            # block boundaries before it: a moving breakpoint reads what the last request wrote.
            for mark in reversed(marks):
                for end in range(mark, max(-1, mark - self.LOOKBACK), -1):
                    expires = self._entries.get(digests[end])
                    if expires is not None and expires > now:
                        self._entries[digests[end]] = now + self.TTL
                        read_end = end + 1
                        break
                if read_end:
                    break
            written_end = read_end
            for mark in marks:
                if mark + 1 > read_end and sum(sizes[: mark + 1]) >= self.min_tokens:
                    self._entries[digests[mark]] = now + self.TTL
                    written_end = mark + 1
        read = sum(sizes[:read_end])
        written = sum(sizes[read_end:written_end])
        return {
            "input_tokens": max(1, total - read - written),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _units(body: dict) -> tuple[list[str], list[int]]:
    """The request's blocks in cache order, as canonical JSON without their cache_control, and
    the indices of those that carried one."""
    blocks: list[tuple[str, dict]] = [("tool", t) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks += [("system", b) for b in system]
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks += [(f"{i}:{message.get('role')}", b) for b in content or [] if isinstance(b, dict)]
    units, marks = [], []
    for index, (where, block) in enumerate(blocks):
        control = block.get("cache_control")
        if control is not None:
            if not isinstance(control, dict) or control.get("type") != "ephemeral":
                raise CacheRuleError(f"{where}: cache_control must be {{'type': 'ephemeral'}}")
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                raise CacheRuleError(f"{where}: cache_control cannot be set on an empty text block")
            marks.append(index)
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        units.append(where + json.dumps(plain, sort_keys=True, ensure_ascii=False))
    return units, marks


def _error_body(error_type: str, message: str) -> dict:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _message_json(script: _Script, model: str) -> dict:
    usage = _usage(script.usage, script.chunks)
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "".join(script.chunks)}],
        "stop_reason": script.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
        },
    }


class FakeAnthropic:
    """A scriptable Anthropic Messages server on 127.0.0.1 and an ephemeral port."""

    def __init__(self) -> None:
        self._queue: deque[_Script] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict] = []  # JSON bodies of POST /v1/messages, in arrival order
        self.headers: list[dict[str, str]] = []  # their headers, same order
        self.invalid: list[str] = []  # requests refused with 400, and why
        self.cache = PromptCache()
        self.counts: list[dict] = []  # each request's input: plain, read from cache, written
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> FakeAnthropic:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # scripting

    def enqueue_reply(
        self,
        chunks: list[str],
        *,
        usage: dict[str, int] | None = None,
        stop_reason: str = "end_turn",
        delay: float = 0.0,
    ) -> None:
        """A complete streamed reply: one text_delta per chunk, `delay` seconds between them.
        Without `usage`, it reports the request's own count (cache reads and writes apart)."""
        script = _Script("reply", list(chunks), _usage(usage, chunks), stop_reason, delay=delay)
        script.counted = usage is None
        self._push(script)

    def enqueue_without_usage(self, chunks: list[str]) -> None:
        """A streamed reply whose events carry no usage at all (some compatible servers)."""
        self._push(_Script("reply", list(chunks), report_usage=False))

    def enqueue_json(self, chunks: list[str], *, usage: dict[str, int] | None = None) -> None:
        """Answer the streaming request with one whole JSON message instead of events."""
        self._push(_Script("json", list(chunks), _usage(usage, chunks)))

    def enqueue_tool_use(
        self, chunks: list[str], *, tool_id: str, name: str, input_parts: list[str]
    ) -> None:
        """Text, then a tool_use block whose input streams as `input_json_delta` parts."""
        self.enqueue_tool_calls(chunks, [(tool_id, name, input_parts)])

    def enqueue_tool_calls(self, chunks: list[str], calls: list[tuple]) -> None:
        """Text, then one tool_use block per (id, name, input) (parallel calls); the input is a
        dict, or a list of `input_json_delta` parts as it should stream."""
        tools = [
            {
                "id": tool_id,
                "name": name,
                "input_parts": list(arguments)
                if isinstance(arguments, list)
                else [json.dumps(arguments)],
            }
            for tool_id, name, arguments in calls
        ]
        script = _Script("reply", list(chunks), _usage(None, chunks), "tool_use", tools=tools)
        script.counted = True
        self._push(script)

    def enqueue_status(self, status: int, error_type: str, message: str) -> None:
        """An HTTP error with the API's JSON error body, e.g. 529 overloaded_error."""
        self._push(_Script("status", status=status, error_type=error_type, message=message))

    def enqueue_stream_error(
        self,
        chunks: list[str],
        error_type: str = "overloaded_error",
        message: str = "Overloaded",
    ) -> None:
        """A 200 stream that sends these deltas, then `event: error`, then ends."""
        self._push(_Script("stream_error", list(chunks), error_type=error_type, message=message))

    def enqueue_drop(self, chunks: list[str]) -> None:
        """A stream that sends these deltas, then cuts the connection."""
        self._push(_Script("drop", list(chunks)))

    def enqueue_hang(self, seconds: float, *, chunks: int = 20) -> None:
        """A reply that trickles `chunks` deltas over about `seconds` seconds."""
        words = [f"word{i} " for i in range(chunks)]
        self.enqueue_reply(words, delay=seconds / max(1, chunks - 1))

    def _push(self, script: _Script) -> None:
        with self._lock:
            self._queue.append(script)

    def _take(self, body: dict, headers: dict[str, str]) -> _Script:
        with self._lock:
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in headers.items()})
            if self._queue:
                return self._queue.popleft()
        script = _Script("reply", list(DEFAULT_CHUNKS), _usage(None, DEFAULT_CHUNKS))
        script.counted = True
        return script


@pytest.fixture
def fake_anthropic(settings) -> Iterator[FakeAnthropic]:
    """A running fake server, with settings pointing the app's Anthropic client at it."""
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


# --- standalone (bench/load.py runs it in its own process) -------------------------------------

# Early words carry characters the app must escape (& ' < >), so a client checks its unescaping.
BENCH_WORDS = (
    "Sure & here's a short <answer>: the reply streams word by word, each delta is relayed to "
    "the browser as it arrives, and the saved message matches what was shown. That is all."
).split()


def standalone_chunks(words: int) -> list[str]:
    """The reply the standalone server sends: `words` words, one text delta each."""
    return [("" if i == 0 else " ") + BENCH_WORDS[i % len(BENCH_WORDS)] for i in range(words)]


class _StandaloneServer(_Server):
    """For the benchmarks, connections as the API's: kept for the next request, and written to
    without delay. Closed after each reply, every reply cost both the app and the relay a new
    connection; kept but with Nagle's algorithm on, the first event waited behind the headers for
    the client's delayed ACK (about 30 ms more to the relay's first token under load)."""

    request_queue_size = 1024  # many concurrent clients: the default backlog of 5 drops SYNs
    keep_alive = True

    def get_request(self):
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class _Standalone(FakeAnthropic):
    """Answers every request with the same reply, its first delta at once and the last one
    `stream_seconds` later (0: all at once); keeps no record of requests."""

    def __init__(self, chunks: list[str], stream_seconds: float = 0.0) -> None:
        super().__init__()
        self._chunks = chunks
        self._delay = stream_seconds / max(1, len(chunks) - 1)
        self.cache = None  # a load benchmark's provider stays cheap: no accounting

    def _take(self, body: dict, headers: dict[str, str]) -> _Script:
        chunks = list(self._chunks)
        return _Script("reply", chunks, _usage(None, chunks), delay=self._delay)


def main(argv: list[str] | None = None) -> None:
    """`python -m tests.fake_anthropic --port 0 --words 30 [--stream-seconds S]`: serve until
    interrupted; the first line printed is the base URL."""
    import argparse

    p = argparse.ArgumentParser(description="Run the fake Anthropic Messages server standalone.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    p.add_argument("--words", type=int, default=30, help="words in every reply (default 30)")
    p.add_argument(
        "--stream-seconds",
        type=float,
        default=0.0,
        help="from a reply's first delta to its last, evenly spaced (default 0: all at once)",
    )
    args = p.parse_args(argv)
    server = _StandaloneServer((args.host, args.port), _Handler)
    server.fake = _Standalone(standalone_chunks(max(1, args.words)), max(0.0, args.stream_seconds))
    serve(server)


def serve(server: ThreadingHTTPServer) -> None:
    """Print the base URL (the first line a parent process reads), then serve until
    interrupted."""
    host, port = server.server_address[:2]
    print(f"http://{host}:{port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
