"""A local fake of the Anthropic Messages API, for driving the real SDK end to end.

The SDK is not mocked: it makes real HTTP requests to this server, which answers `POST
/v1/messages` with real server-sent events (chunked transfer encoding, so a dropped connection
looks like one to the client). Every request is first checked as the API would
(support/messages_api.py): one breaking the rules is refused with a 400 and noted in `.invalid`;
the prompt cache accounts it (`.counts`). Then it is answered in one of three modes:

- scripted (tests): from a queue the `enqueue_*` methods fill, in order; once it is empty, a
  default reply. Tests then assert on `.requests`, the JSON bodies the server received:

      def test_it_streams(fake_anthropic):
          fake_anthropic.enqueue_reply(["Hel", "lo"])
          ...
          assert fake_anthropic.requests[0]["system"] == "Be brief."

- the same reply to every request (`SameReply`: bench/load.py, bench/turn_cpu.py), with
  connections kept for the next request as the API's are;
- random faults (`support.faults.FaultPlanner`: bench/faults.py), each request logged.

Standalone, in its own process (the first line printed is the base URL):

    python -m support.fake_anthropic --port 0 --words 30 [--stream-seconds S]
    python -m support.fake_anthropic --faults --log PATH [--seed N] [--shares JSON]
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from support.messages_api import CacheRuleError, PromptCache, invalid_request, invalid_thinking
from support.scripts import (
    DEFAULT_CHUNKS,
    SameReply,
    Script,
    error_body,
    message_json,
    reply,
    standalone_chunks,
    thinking_events,
    usage_of,
)


class Handler(BaseHTTPRequestHandler):
    """One connection: each request checked, planned by the server's fake, then answered."""

    protocol_version = "HTTP/1.1"
    server: Listener

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:
            # The client died mid-request (a server killed with -9 while sending): the request
            # never arrived whole, so it is not one the API would judge. Nobody reads an answer.
            fake.truncated(len(raw), length)
            self.close_connection = True
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self.send_json(404, error_body("not_found_error", f"no route for {self.path}"))
            return
        problem = invalid_request(body) or invalid_thinking(body, fake.issued)
        if problem:
            # As the real API does: a request breaking the rules is refused, never answered.
            fake.refuse(body, problem)
            self.send_json(400, error_body("invalid_request_error", problem))
            return
        try:
            counted = fake.cache.account(body) if fake.cache is not None else {}
        except CacheRuleError as exc:
            fake.refuse(body, str(exc))
            self.send_json(400, error_body("invalid_request_error", str(exc)))
            return
        script = fake.take(body, dict(self.headers.items()))
        fake.issue(script)
        if fake.cache is not None:
            fake.counts.append(counted)
        if script.counted:
            script.usage = {**script.usage, **counted}
        try:
            self.answer(script, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a stop or a disconnect test): nothing to tell it

    def answer(self, script: Script, body: dict) -> None:
        model = body.get("model", "fake-model")
        if script.kind == "status":
            self.send_json(script.status, error_body(script.error_type, script.message))
            return
        if script.kind == "json":
            # A gateway that answers a streaming request with one whole message (LiteLLM does).
            self.send_json(200, message_json(script, model))
            return
        if not body.get("stream"):
            if script.kind != "reply":
                self.send_json(500, error_body("api_error", "scripted stream failure"))
                return
            self.send_json(200, message_json(script, model))
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
        paced = script.delay or script.first_delay
        self._batch = [] if script.kind == "reply" and not paced else None
        self._first_delay = script.first_delay
        usage = usage_of(script.usage, script.chunks)
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
        self.event("message_start", {"type": "message_start", "message": message})
        self.event("ping", {"type": "ping"})
        for data in thinking_events(script):  # thinking first, its blocks from index 0
            self.event(data["type"], data)
        text_index = len(script.thinking_blocks())
        self.event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": text_index,
                "content_block": {"type": "text", "text": ""},
            },
        )
        for i, chunk in enumerate(script.chunks):
            if i and script.delay:
                time.sleep(script.delay)
            self.event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": text_index,
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
            self.event("error", error_body(script.error_type, script.message))
            self.end_chunks()
            return
        self.event("content_block_stop", {"type": "content_block_stop", "index": text_index})
        for index, tool in enumerate(script.tools, start=text_index + 1):
            self.tool_block(index, tool)
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": script.stop_reason, "stop_sequence": None},
        }
        if script.report_usage:
            delta["usage"] = {"output_tokens": usage["output_tokens"]}
        self.event("message_delta", delta)
        self.event("message_stop", {"type": "message_stop"})
        self.end_chunks()

    def tool_block(self, index: int, tool: dict) -> None:
        start = {"type": "tool_use", "id": tool["id"], "name": tool["name"], "input": {}}
        self.event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for part in tool["input_parts"]:
            self.event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                },
            )
        self.event("content_block_stop", {"type": "content_block_stop", "index": index})

    _batch: list[bytes] | None = None
    _first_delay = 0.0

    def write(self, data: bytes) -> None:
        if self._batch is not None:
            self._batch.append(data)
            return
        self.wfile.write(data)
        self.wfile.flush()

    def event(self, name: str, data: dict) -> None:
        if name == "content_block_delta" and self._first_delay:
            delay, self._first_delay = self._first_delay, 0.0
            time.sleep(delay)  # headers and message_start are out: the model "thinks"
        payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        self.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    def end_chunks(self) -> None:
        self.write(b"0\r\n\r\n")
        if self._batch is not None:
            batch, self._batch = self._batch, None
            self.wfile.write(b"".join(batch))
            self.wfile.flush()

    def send_json(self, status: int, payload: dict) -> None:
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


class Listener(ThreadingHTTPServer):
    """The HTTP server of one fake: a thread per connection."""

    daemon_threads = True
    # Never wait on handler threads at close: a test that stopped reading mid-stream must not
    # hang the teardown while the handler trickles its remaining deltas into a dead socket.
    block_on_close = False

    def __init__(self, address: tuple[str, int], fake: FakeAnthropic) -> None:
        self.fake = fake
        # Kept: connections as the API's, kept for the next request and written to without
        # delay (closed after each reply, every reply cost a load bench's servers a new
        # connection; kept with Nagle's algorithm on, the first event waited behind the headers
        # for the client's delayed ACK). Not kept: each streamed reply ends its connection.
        self.keep_alive = fake.keep_alive
        self.request_queue_size = fake.backlog  # read when the socket starts listening
        super().__init__(address, Handler)

    def get_request(self):
        connection, address = super().get_request()
        if self.keep_alive:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class FakeAnthropic:
    """A fake Anthropic Messages server on 127.0.0.1 and an ephemeral port (`start`), or on the
    given one (`serve`). `planner`: what answers each request (see support/scripts.py); None
    answers from the queue `enqueue_*` fill. `cache`: account the prompt cache (and refuse
    requests breaking its rules); `record`: keep every request's body and headers; `keep_alive`:
    keep connections for the next request; `backlog`: connections waiting to be accepted."""

    def __init__(
        self,
        planner=None,
        *,
        cache: bool = True,
        record: bool = True,
        keep_alive: bool = False,
        backlog: int = 5,
    ) -> None:
        self.planner = planner
        self.record = record
        self.keep_alive = keep_alive
        self.backlog = backlog
        self._queue: deque[Script] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict] = []  # JSON bodies of POST /v1/messages, in arrival order
        self.headers: list[dict[str, str]] = []  # their headers, same order
        self.invalid: list[str] = []  # requests refused with 400, and why
        self.issued: dict[str, list[dict]] = {}  # tool_use id -> the thinking sent with it
        self.cache = PromptCache() if cache else None
        self.counts: list[dict] = []  # each request's input: plain, read from cache, written
        self._server: Listener | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self, host: str = "127.0.0.1", port: int = 0) -> FakeAnthropic:
        """Serve on a thread of this process until `stop`."""
        self._server = Listener((host, port), self)
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

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Serve on this thread until interrupted, after printing the base URL (the first line
        a parent process reads)."""
        self._server = server = Listener((host, port), self)
        print(self.url, flush=True)
        try:
            server.serve_forever(poll_interval=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return host, port

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    # what the handler asks

    def take(self, body: dict, headers: dict[str, str]) -> Script:
        """The answer to a request that passed the checks (recorded first, when recording)."""
        with self._lock:
            if self.record:
                self.requests.append(body)
                self.headers.append({k.lower(): v for k, v in headers.items()})
            if self.planner is not None:
                return self.planner.plan(body)
            if self._queue:
                return self._queue.popleft()
        return reply(DEFAULT_CHUNKS)

    def refuse(self, body: dict, reason: str) -> None:
        """A request refused with a 400: noted, and told to the planner."""
        self.invalid.append(reason)
        if hasattr(self.planner, "refused"):
            self.planner.refused(body, reason)

    def issue(self, script: Script) -> None:
        """Note the thinking an answer carries with its tool calls: the next step must send it
        back unchanged (support/messages_api.invalid_thinking)."""
        with self._lock:
            self.issued.update({tool["id"]: script.thinking_blocks() for tool in script.tools})

    def truncated(self, received: int, length: int) -> None:
        """A request that never arrived whole (its sender died): told to the planner."""
        if hasattr(self.planner, "truncated"):
            self.planner.truncated(received, length)

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
        script = Script("reply", list(chunks), usage_of(usage, chunks), stop_reason, delay=delay)
        script.counted = usage is None
        self.push(script)

    def enqueue_without_usage(self, chunks: list[str]) -> None:
        """A streamed reply whose events carry no usage at all (some compatible servers)."""
        self.push(Script("reply", list(chunks), report_usage=False))

    def enqueue_json(self, chunks: list[str], *, usage: dict[str, int] | None = None) -> None:
        """Answer the streaming request with one whole JSON message instead of events."""
        self.push(Script("json", list(chunks), usage_of(usage, chunks)))

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
        script = Script("reply", list(chunks), usage_of(None, chunks), "tool_use", tools=tools)
        script.counted = True
        self.push(script)

    def enqueue_status(self, status: int, error_type: str, message: str) -> None:
        """An HTTP error with the API's JSON error body, e.g. 529 overloaded_error."""
        self.push(Script("status", status=status, error_type=error_type, message=message))

    def enqueue_stream_error(
        self,
        chunks: list[str],
        error_type: str = "overloaded_error",
        message: str = "Overloaded",
    ) -> None:
        """A 200 stream that sends these deltas, then `event: error`, then ends."""
        self.push(Script("stream_error", list(chunks), error_type=error_type, message=message))

    def enqueue_drop(self, chunks: list[str]) -> None:
        """A stream that sends these deltas, then cuts the connection."""
        self.push(Script("drop", list(chunks)))

    def enqueue_hang(self, seconds: float, *, chunks: int = 20) -> None:
        """A reply that trickles `chunks` deltas over about `seconds` seconds."""
        words = [f"word{i} " for i in range(chunks)]
        self.enqueue_reply(words, delay=seconds / max(1, chunks - 1))

    def push(self, script: Script) -> None:
        """Any script, as the answer to the next request not answered yet."""
        with self._lock:
            self._queue.append(script)


def standalone(words: int, stream_seconds: float = 0.0) -> FakeAnthropic:
    """The same-reply server `python -m support.fake_anthropic` serves (not started yet): every
    request answered with `words` words, spread over `stream_seconds`. Many concurrent clients
    (the default backlog of 5 drops SYNs); a load benchmark's provider stays cheap: no
    accounting, no record of requests, connections kept."""
    planner = SameReply(standalone_chunks(max(1, words)), max(0.0, stream_seconds))
    return FakeAnthropic(planner, cache=False, record=False, keep_alive=True, backlog=1024)


def main(argv: list[str] | None = None) -> None:
    """Serve standalone until interrupted; the first line printed is the base URL."""
    p = argparse.ArgumentParser(
        description="Run the fake Anthropic Messages server standalone: the same reply to every "
        "request (default), or random faults (--faults)."
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    p.add_argument("--words", type=int, default=30, help="words in every reply (default 30)")
    p.add_argument(
        "--stream-seconds",
        type=float,
        default=0.0,
        help="from a reply's first delta to its last, evenly spaced (default 0: all at once)",
    )
    faults = p.add_argument_group("random faults (bench/faults.py)")
    faults.add_argument("--faults", action="store_true", help="answer each request at random")
    faults.add_argument("--log", help="one JSON line per request is appended here (required)")
    faults.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    faults.add_argument("--shares", default="{}", help="JSON: shares overriding Faults' defaults")
    args = p.parse_args(argv)
    if args.faults:
        from support.faults import FaultPlanner, Faults

        if not args.log:
            p.error("--faults needs --log PATH")
        planner = FaultPlanner(Faults(**json.loads(args.shares)), args.seed, Path(args.log))
        # Two servers' worth of concurrent requests; the prompt cache's rules are checked too.
        fake = FakeAnthropic(planner, record=False, backlog=256)
    else:
        fake = standalone(args.words, args.stream_seconds)
    fake.serve(args.host, args.port)


if __name__ == "__main__":
    main()
