"""Where a turn's CPU goes: the app's turn against the bare provider exchange, in one process.

Run by hand (`.venv/bin/python bench/turn_cpu.py`, `--help` for the flags); not a test.

`bench/load.py` says how far the app is from a bare relay under load; this says where the
difference goes, without the load's noise. Both halves run in this process, one after the other,
against `support/fake_anthropic.py` (its own process, every reply the same `--words` words at
once):

- the reference: `bench/relay.py`'s consumer, which relays the provider's stream (the official
  SDK, the conversation so far as the request) and does nothing else;
- the app: the real websocket consumer, engine, database (a fresh SQLite file, or
  `--database-url`; the channel layer in memory, or Redis's with `--redis-url`) and SDK, with the
  share spent in its database calls (the functions it hands `core.db.run`: the send's
  transaction, the reply's close; on SQLite they run on the database thread while the event
  loop waits) counted apart. They are timed on the thread running them, from each call's start
  to its return, watched with `sys.monitoring` (PEP 669): nothing of the app is replaced.

Both are driven through the same channels test communicator (standing in for the browser), so
its small cost is in both figures.

Each of `--conversations` conversations runs `--turns` turns, like one chat of a load run; the
first `--warm` of each are not measured. Process CPU covers every thread. The ratio is
`bench/load.py`'s "x relay" without the load: how many replies one core serves.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, not bench/

from bench.harness import processes  # noqa: E402
from bench.harness.inprocess import setup_django, without_background  # noqa: E402

MODEL = "claude-bench"
SYSTEM = "Be brief."  # as bench/relay.py
FINISHED = re.compile(
    r'<article id="msg-\d+" class="message assistant[^>]*data-status="(complete|error|interrupted)"'
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, default=8, help="conversations (default 8)")
    p.add_argument("--turns", type=int, default=40, help="turns in each (default 40)")
    p.add_argument("--warm", type=int, default=10, help="first turns not measured (default 10)")
    p.add_argument("--words", type=int, default=30, help="words per reply (default 30)")
    p.add_argument(
        "--stream-seconds",
        type=float,
        default=0.0,
        help="the provider streams each reply over this long (default 0: all at once)",
    )
    p.add_argument(
        "--database-url",
        default="",
        help="the app's database (default: a fresh SQLite file), e.g. postgres://postgres@127.0.0.1/x",
    )
    p.add_argument(
        "--redis-url",
        default="",
        help="the app's channel layer on this Redis (default: the in-memory layer)",
    )
    return p.parse_args(argv)


def question(i: int) -> str:
    return f"Question number {i} about the thing we discussed"


async def turns(connect, args: argparse.Namespace) -> float:
    """CPU seconds per measured turn over sockets from `connect()` (one per conversation)."""
    spent, measured = 0.0, 0
    for _ in range(args.conversations):
        socket = await connect()
        for i in range(args.turns):
            before = time.process_time()
            await socket.send_to(text_data=json.dumps({"action": "send", "message": question(i)}))
            while not (done := FINISHED.search(await socket.receive_from(timeout=30))):
                pass
            if done.group(1) != "complete":
                raise SystemExit(f"a reply ended {done.group(1)}: is the fake provider up?")
            if i >= args.warm:
                spent += time.process_time() - before
                measured += 1
        await socket.disconnect()
    return spent / measured


async def relay(args: argparse.Namespace) -> float:
    """The reference: bench/relay.py's consumer over the same test sockets."""
    from channels.testing import WebsocketCommunicator

    from bench.relay import RelayConsumer

    async def connect():
        socket = WebsocketCommunicator(RelayConsumer.as_asgi(), "/ws/conversations/1/")
        await socket.connect()
        return socket

    return await turns(connect, args)


class DatabaseCalls:
    """CPU seconds in the app's database calls, by function, while in use (`with`).

    Watched with `sys.monitoring` (PEP 669), which observes code without replacing any: when
    `core.db.run` starts, the function it was handed is noted, and from then on that function's
    starts and returns are events; each call made by core/db.py (the outermost, not one nested
    in another function) is timed on its own thread's CPU clock, from its start to its return
    (a call that raised is not counted)."""

    def __init__(self) -> None:
        from core import db

        self.seconds: Counter[str] = Counter()
        self.run_code = db.run.__code__
        self.db_file = self.run_code.co_filename
        self.watched: dict = {}  # code -> names of the functions handed to db.run with it
        self.started = threading.local()  # this thread's call: (its frame, when it started)
        self.tool = sys.monitoring.PROFILER_ID

    def __enter__(self) -> DatabaseCalls:
        events = sys.monitoring.events
        sys.monitoring.use_tool_id(self.tool, "bench/turn_cpu.py")
        sys.monitoring.register_callback(self.tool, events.PY_START, self.on_start)
        sys.monitoring.register_callback(self.tool, events.PY_RETURN, self.on_return)
        sys.monitoring.set_local_events(self.tool, self.run_code, events.PY_START)
        return self

    def __exit__(self, *exc) -> None:
        sys.monitoring.set_local_events(self.tool, self.run_code, 0)
        for code in self.watched:
            sys.monitoring.set_local_events(self.tool, code, 0)
        sys.monitoring.free_tool_id(self.tool)

    def on_start(self, code, offset: int) -> None:
        frame = sys._getframe(1)  # the frame starting: db.run's, or a database call's
        if code is self.run_code:
            function = frame.f_locals.get("function")
            function = getattr(function, "func", function)
            target = getattr(function, "__code__", None)
            if target is not None and target not in self.watched:
                events = sys.monitoring.events
                sys.monitoring.set_local_events(
                    self.tool, target, events.PY_START | events.PY_RETURN
                )
            if target is not None:
                # A manager's methods share one code object: named by the methods seen.
                self.watched.setdefault(target, set()).add(function.__name__)
        elif frame.f_back is not None and frame.f_back.f_code.co_filename == self.db_file:
            self.started.call = (frame, time.thread_time())

    def on_return(self, code, offset: int, value) -> None:
        call = getattr(self.started, "call", None)
        if call is not None and call[0] is sys._getframe(1):
            self.started.call = None
            name = "/".join(sorted(self.watched.get(code) or {code.co_name}))
            self.seconds[name] += time.thread_time() - call[1]


async def app(args: argparse.Namespace) -> tuple[float, dict[str, float]]:
    """The app's CPU seconds per turn, and per turn in its database calls by function."""
    from asgiref.sync import sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth import get_user_model

    from chat.models import Conversation
    from config.asgi import websocket_urlpatterns

    calls = DatabaseCalls()
    user = await sync_to_async(get_user_model().objects.create_user)(
        f"bench-{uuid.uuid4().hex[:8]}", password="bench"
    )

    async def connect():
        conversation = await sync_to_async(Conversation.objects.create)(
            owner=user, model=MODEL, system_prompt=SYSTEM
        )
        socket = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.pk}/"
        )
        socket.scope["user"] = user
        await socket.connect()
        return socket

    with calls:
        per_turn = await turns(connect, args)
    # Every turn's database work, warm-up turns included: divided by all of them.
    every = args.conversations * args.turns
    return per_turn, {name: seconds / every for name, seconds in calls.seconds.items()}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    provider, url = processes.start_provider(
        ["--port", "0", "--words", str(args.words), "--stream-seconds", str(args.stream_seconds)]
    )
    try:
        setup_django(
            {
                "DJANGO_DEBUG": "false",
                "DJANGO_SECRET_KEY": "bench-turn-cpu-not-a-secret",
                "LLM_PROVIDER": "anthropic",
                "ANTHROPIC_BASE_URL": url,
                "ANTHROPIC_API_KEY": "bench",
                "CHAT_MODEL": MODEL,
                "LLM_MAX_RETRIES": "0",
            }
            | ({"REDIS_URL": args.redis_url} if args.redis_url else {}),
            args.database_url,
            prefix="turn-cpu-",
        )
        without_background()
        reference = asyncio.run(relay(args))
        turn, calls = asyncio.run(app(args))
    finally:
        processes.stop(provider)
    measured = args.conversations * (args.turns - args.warm)
    print(
        f"{measured} turns ({args.conversations} conversations, turns {args.warm + 1} to "
        f"{args.turns} of each), replies of {args.words} words; CPU per turn, all threads:"
    )
    print(f"  bench/relay.py's consumer                        {1000 * reference:6.2f} ms")
    print(f"  the app's turn                                   {1000 * turn:6.2f} ms  ", end="")
    print(f"(the app serves {reference / turn:.2f}x the relay's turns per CPU second)")
    for name, seconds in sorted(calls.items(), key=lambda item: -item[1]):
        print(f"    database call: {name:<35} {1000 * seconds:6.2f} ms")
    rest = turn - sum(calls.values())
    print(f"    the rest (event loop: consumer, engine, SDK)   {1000 * rest:6.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
