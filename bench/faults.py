"""Fault campaign: many turns against two real server processes while everything goes wrong.

Run by hand (`.venv/bin/python bench/faults.py`, `--help` for the flags); not a test.

Two `uvicorn config.asgi:application` processes share a fresh PostgreSQL database and a Redis
channel layer. Clients (one driver per conversation, several conversations per user) talk to
them over real websockets with session cookies, spread over both processes, and meanwhile:

- the model (`bench/fault_provider.py`, its own process) answers with random faults: HTTP 529
  and 429, an `event: error` or a dropped connection after some text, slow first tokens;
- clients press Stop mid-reply (from their tab, or from a tab on the other process), close the
  tab mid-reply and come back later, queue a second message behind a running reply, and ask to
  compact while replies run (with a small budget, so auto-compaction fires often too);
- about every `--restart-every` turns one of the two processes is killed with SIGKILL and a new
  one started on its port;
- every few turns a client tries to read and act on another user's conversations (HTTP and
  websocket), which must be refused.

At the end, once the app's stale-recovery time has passed, it checks the database and the
provider's log and prints four counts that must all be 0: requests the provider refused as
invalid, messages lost or altered, rows left streaming/running, cross-user successes. The exit
status is 1 if any is not; 2 if the run itself failed, or a kind of probe was never shown to work
on the user's own conversation (then its refusals prove nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import html
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import load  # noqa: E402 - process, PostgreSQL and Redis helpers of the load bench
from bench.fault_provider import KEY_RE  # noqa: E402

PYTHON = sys.executable
HOST = "127.0.0.1"
MODEL = "claude-faults"
SYSTEM_PROMPT = "Be brief."
FINAL = {"complete", "interrupted", "error"}
TOOLS = ["search_history", "read_messages"]

# What a client does in one turn, and how often (see `Chat.turn_*`).
SCENARIOS = {
    "plain": 34,
    "stop": 14,
    "tab_close": 12,
    "queue_two": 10,
    "compact_during": 8,
    "compact_then_send": 8,
    "compact_after": 6,
    "stop_then_send": 8,
}
# Wording of the user's messages: characters the page and the JSON must carry verbatim.
PHRASES = [
    "What does the window hold now?",
    "Tell me about <tags> & \"quotes\" & 'apostrophes'.",
    "Explain **markdown** and `code` in one line.",
    "Ça va? Café ☕, naïve résumé, 東京.",
    "Line one\nline two\n\nline four.",
    "Is 3 < 4 > 2? Answer in 5 words.",
    "Summarise what we said so far, briefly.",
    "A longer message, so the window grows: " + "lorem ipsum dolor sit amet " * 6,
]
REPLY_TIMEOUT = 150.0  # a reply a client waits for: retries, a compaction, a stale recovery


# --- command line --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--turns", type=int, default=1000, help="user messages to send (default 1000)")
    p.add_argument("--conversations", type=int, default=20, help="conversations (default 20)")
    p.add_argument("--users", type=int, default=5, help="their owners (default 5)")
    p.add_argument(
        "--restart-every",
        type=int,
        default=200,
        help="kill -9 one server process and start a new one every N turns (default 200)",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--budget", type=int, default=2000, help="CONTEXT_BUDGET_TOKENS (default 2000)")
    p.add_argument("--stale", type=int, default=5, help="TURN_STALE_SECONDS (default 5)")
    p.add_argument("--retries", type=int, default=1, help="LLM_MAX_RETRIES (default 1)")
    p.add_argument(
        "--probe-every",
        type=int,
        default=10,
        help="each client probes another user's conversations about every N turns (default 10)",
    )
    p.add_argument(
        "--pg-url",
        help="PostgreSQL database to create for the run and drop after "
        "(default postgres://postgres@127.0.0.1:5432/chat_faults_<pid>)",
    )
    p.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/12",
        help="Redis database for the channel layer, flushed at start (default: %(default)s)",
    )
    p.add_argument("--logs", metavar="DIR", help="keep the servers' stderr and the provider log")
    p.add_argument("--keep-db", action="store_true", help="do not drop the database at the end")
    p.add_argument("--_setup", help=argparse.SUPPRESS)  # internal: make users and conversations
    args = p.parse_args(argv)
    if args._setup is None:
        if args.turns < 1 or args.conversations < 1 or not 1 <= args.users <= args.conversations:
            p.error("--turns and --conversations must be positive, 1 <= --users <= conversations")
        if (urlsplit(args.redis_url).path.strip("/") or "0") == "0":
            p.error("--redis-url: use a Redis database other than 0 (it is flushed)")
        args.pg_url = args.pg_url or f"postgres://postgres@{HOST}:5432/chat_faults_{os.getpid()}"
    return args


# --- set-up: database, users, server processes ---------------------------------------------------


def server_env(args: argparse.Namespace, provider_url: str) -> dict:
    env = load.base_env()
    env.update(
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="bench-faults-not-a-secret",
        DJANGO_ALLOWED_HOSTS=HOST,
        SECURE_COOKIES="false",  # plain HTTP on localhost: the cookies must travel
        DATABASE_URL=args.pg_url,
        REDIS_URL=args.redis_url,
        LLM_PROVIDER="anthropic",
        ANTHROPIC_BASE_URL=provider_url,
        ANTHROPIC_API_KEY="bench",
        CHAT_MODEL=MODEL,
        LLM_MAX_RETRIES=str(args.retries),
        LLM_TIMEOUT_SECONDS="30",
        CONTEXT_BUDGET_TOKENS=str(args.budget),
        # A dead process's rows are recovered after TURN_STALE_SECONDS; the heartbeat (and the
        # sweep) must come well within it.
        TURN_STALE_SECONDS=str(args.stale),
        TURN_HEARTBEAT_SECONDS="1",
        # The abuse limits would refuse most of this traffic (4 conversations of one user
        # streaming at once, 30 sends a minute): this run is about faults, not about them.
        SENDS_PER_MINUTE="100000",
        REPLIES_AT_ONCE="1000",
        COMPACTIONS_PER_HOUR="100000",
        LOG_LEVEL="WARNING",
    )
    return env


def prepare_database(args: argparse.Namespace, env: dict) -> dict:
    """A fresh database, migrated, with the users, their sessions and conversations."""
    load.fresh_postgres(args.pg_url)
    load.flush_redis(args.redis_url)
    load._run_python(["manage.py", "migrate", "--noinput"], env, "migrate")
    plan = json.dumps({"users": args.users, "conversations": args.conversations})
    out = load._run_python([str(Path(__file__).resolve()), "--_setup", plan], env, "set-up")
    return json.loads(out)


def setup_users(plan: dict) -> None:
    """Internal (`--_setup`): users with a session each, conversations shared out among them."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.contrib.sessions.backends.db import SessionStore

    from chat.models import Conversation

    users = []
    for u in range(plan["users"]):
        user = get_user_model().objects.create(username=f"faults{u}", password=make_password(None))
        session = SessionStore()
        session["_auth_user_id"] = str(user.pk)
        session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
        session["_auth_user_hash"] = user.get_session_auth_hash()
        session.create()
        users.append({"id": user.pk, "session": session.session_key, "user": user})
    conversations = []
    for i in range(plan["conversations"]):
        owner = i % len(users)
        row = Conversation.objects.create(
            owner=users[owner]["user"], model=MODEL, system_prompt=SYSTEM_PROMPT
        )
        conversations.append({"id": row.pk, "owner": owner})
    for user in users:
        del user["user"]
    print(json.dumps({"users": users, "conversations": conversations}))


def start_provider(args: argparse.Namespace, workdir: Path) -> tuple[subprocess.Popen, str, Path]:
    log = workdir / "provider.jsonl"
    err = workdir / "provider.stderr"
    proc = load.spawn(
        [PYTHON, "-m", "bench.fault_provider", "--seed", str(args.seed), "--log", str(log)],
        env=load.base_env(),
        stdout=subprocess.PIPE,
        stderr=err.open("wb"),
    )
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline().decode().strip() if ready else ""
    if not line.startswith("http://"):
        raise load.BenchError(f"the fault provider did not start:\n{load.tail(err)}")
    return proc, line, log


class ServerSlot:
    """One of the two server processes: a port, and whichever process serves it now."""

    def __init__(self, index: int, env: dict, workdir: Path) -> None:
        self.index = index
        self.port = load.free_port()
        self.env = env
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.up = False
        self.generation = 0
        self.stderr_paths: list[Path] = []

    async def start(self) -> None:
        self.generation += 1
        err = self.workdir / f"server-{self.index}-{self.generation}.stderr"
        self.stderr_paths.append(err)
        cmd = [PYTHON, "-m", "uvicorn", "config.asgi:application", "--host", HOST]
        cmd += ["--port", str(self.port), "--lifespan", "on", "--no-access-log"]
        cmd += ["--log-level", "warning"]
        self.proc = load.spawn(cmd, env=self.env, stderr=err.open("wb"))
        deadline = time.monotonic() + 60
        while not await _listening(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise load.BenchError(f"server {self.index} did not start:\n{load.tail(err)}")
            await asyncio.sleep(0.1)
        self.up = True

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, what it was doing is left for the other to recover."""
        self.up = False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        load.stop(self.proc)  # forget it

    def stop(self) -> None:
        self.up = False
        load.stop(self.proc)


async def _listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection(HOST, port)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


# --- the client side: tabs, messages, frames -----------------------------------------------------

DELTA_RE = re.compile(r'hx-swap-oob="beforeend:#msg-(\d+)-text"')
ARTICLE_RE = re.compile(r"<article\b([^>]*)>")
NOTICE_RE = re.compile(r'<div id="notice"([^>]*)>(.*?)</div>', re.S)
ATTR_RE = re.compile(r'([\w-]+)="([^"]*)"')
KEY_IN_HTML_RE = re.compile(r"\b(k\d+t\d+):")
PIN_RE = re.compile(r'hx-post="/messages/(\d+)/pin/"')
DIVIDER_RE = re.compile(r'id="compaction-(\d+)"')


@dataclass
class Sent:
    """One user message a client sent, and what it learnt of its fate."""

    key: str
    text: str
    at: float
    accepted: bool = False  # the server answered the send with `send-accepted`
    refused: str = ""  # ... or with a notice
    socket_lost: str = ""  # the socket closed before either: how, and how soon
    scenario: str = ""
    user_seq: int | None = None
    started: bool = False
    final: str = ""  # the reply's final status, as a client saw it
    final_via: str = ""  # "frame", or "export.json" (a tab that was away when it came)
    answered_in: float | None = None  # seconds from the send to `send-accepted`

    @property
    def reply_seq(self) -> int | None:
        return None if self.user_seq is None else self.user_seq + 1


class Tab:
    """A browser tab: one websocket on one conversation, on one server process."""

    def __init__(self, chat: Chat, slot: ServerSlot, conversation_id: int | None = None) -> None:
        self.chat = chat
        self.slot = slot
        self.conversation_id = conversation_id or chat.conversation_id
        self.ws = None
        self.awaiting: deque[Sent] = deque()  # sends not answered yet, in order
        self.notices: list[tuple[str, str]] = []  # (action refused, text)
        self.closed = False
        self.closing = False  # this side closed it (a tab closed), not the server
        self.generation = slot.generation  # which process of the slot it talked to
        self.reader: asyncio.Task | None = None

    async def open(self, *, read: bool = True) -> Tab:
        from websockets.asyncio.client import connect

        origin = f"http://{HOST}:{self.slot.port}"
        self.ws = await connect(
            f"ws://{HOST}:{self.slot.port}/ws/conversations/{self.conversation_id}/",
            origin=origin,
            additional_headers={"Cookie": f"sessionid={self.chat.session}"},
            open_timeout=20,
            ping_interval=None,
            max_size=2**24,
            proxy=None,
        )
        if read:
            self.reader = asyncio.ensure_future(self._read())
            self.chat.campaign.tabs[self.slot.index] += 1
        return self

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if isinstance(frame, str):
                    self.chat.on_frame(self, frame)
        except Exception:  # noqa: S110 - closed by the server, killed, or reset: all the same here
            pass
        finally:
            self.closed = True
            for sent in self.awaiting:
                sent.socket_lost = f"{self.how_closed()} {time.monotonic() - sent.at:.3f} s later"
            self.awaiting.clear()
            self.chat.changed.set()

    async def send(self, frame: dict) -> bool:
        if self.closed:
            return False
        try:
            await self.ws.send(json.dumps(frame))
        except Exception:
            return False
        return True

    def how_closed(self) -> str:
        if self.closing:
            return "the client closed the socket"
        if self.slot.generation != self.generation or not self.slot.up:
            return f"server {self.slot.index} was killed"
        return f"server {self.slot.index} closed the socket"

    async def close(self) -> None:
        self.closing = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), 5)
        if self.reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.reader, 5)


# --- one conversation's client -------------------------------------------------------------------


class Chat:
    """A person on one conversation: sends, waits for replies, stops, closes tabs, compacts, and
    now and then tries another user's conversations."""

    def __init__(self, campaign: Campaign, index: int, conv: dict, turns: int) -> None:
        self.campaign = campaign
        self.index = index
        self.conversation_id = conv["id"]
        self.owner = conv["owner"]
        self.session = campaign.users[self.owner]["session"]
        self.secret = campaign.secrets[self.owner]
        self.turns = turns
        self.rng = random.Random(campaign.args.seed * 1000 + index)
        self.sents: list[Sent] = []
        self.by_key: dict[str, Sent] = {}
        self.by_user_seq: dict[int, Sent] = {}
        self.tab: Tab | None = None
        self.changed = asyncio.Event()
        self.http = None
        self.probe_rounds = 0
        self.scenario = ""

    # --- driving ---------------------------------------------------------------------------

    async def run(self) -> None:
        import httpx2

        self.http = httpx2.AsyncClient(
            cookies={"sessionid": self.session}, trust_env=False, timeout=30
        )
        self.reopening = asyncio.Lock()
        try:
            await asyncio.sleep(self.rng.uniform(0, 2))  # people do not all start at once
            await self.reopen()
            while len(self.sents) < self.turns:
                names, weights = zip(*SCENARIOS.items(), strict=True)
                scenario = self.rng.choices(names, weights)[0]
                if scenario in ("queue_two", "stop_then_send") and self.turns - len(self.sents) < 2:
                    scenario = "plain"
                self.campaign.scenarios[scenario] += 1
                self.scenario = scenario
                await getattr(self, f"turn_{scenario}")()
                if self.rng.random() < 1 / max(1, self.campaign.args.probe_every):
                    await self.probe()
                await asyncio.sleep(self.rng.uniform(0, 0.3))  # reading the reply
            for sent in self.sents:  # nothing outstanding when the driver stops
                await self.settle(sent)
        finally:
            if self.tab is not None:
                await self.tab.close()
            await self.http.aclose()

    async def turn_plain(self) -> None:
        await self.settle(await self.send())

    async def turn_stop(self) -> None:
        """Stop mid-reply (sometimes before it even started: queued, or a slow first token)."""
        sent = await self.send()
        if self.rng.random() < 0.75:
            await self.wait(lambda: sent.started or sent.final, 10)
        await asyncio.sleep(self.rng.uniform(0, 1.2))
        if not sent.final:
            await self.stop(sent)
        await self.settle(sent)

    async def turn_tab_close(self) -> None:
        """Close the tab mid-reply (sometimes before the send was even answered), come back."""
        sent = await self.send(wait_accepted=self.rng.random() < 0.6)
        await asyncio.sleep(self.rng.uniform(0, 1.2))
        self.campaign.tab_closes += 1
        await self.tab.close()
        await asyncio.sleep(self.rng.uniform(0.3, 3.0))
        await self.reopen()
        await self.settle(sent)

    async def turn_queue_two(self) -> None:
        """A second message typed while the first reply runs: it waits its turn."""
        first = await self.send(wait_accepted=False)
        second = await self.send()
        await self.settle(first)
        await self.settle(second)

    async def turn_stop_then_send(self) -> None:
        first = await self.send()
        await self.wait(lambda: first.started or first.final, 10)
        await asyncio.sleep(self.rng.uniform(0, 0.6))
        if not first.final:
            await self.stop(first)
        second = await self.send()
        await self.settle(first)
        await self.settle(second)

    async def turn_compact_during(self) -> None:
        """Compact while the reply runs (refused, or it lands between two steps)."""
        sent = await self.send()
        await self.wait(lambda: sent.started or sent.final, 10)
        await asyncio.sleep(self.rng.uniform(0, 0.6))
        await self.compact()
        await self.settle(sent)

    async def turn_compact_then_send(self) -> None:
        """Compact and send at once, possibly from two processes: the message queues behind."""
        _, sent = await asyncio.gather(self.compact(), self.send())
        await self.settle(sent)

    async def turn_compact_after(self) -> None:
        """Compact the moment a reply ends: races the auto-compaction that reply may open."""
        await self.settle(await self.send())
        await self.compact()

    # --- actions ---------------------------------------------------------------------------

    async def send(self, *, wait_accepted: bool = True) -> Sent:
        number = len(self.sents) + 1
        key = f"k{self.index:02d}t{number:03d}"
        phrase = self.rng.choice(PHRASES)
        sent = Sent(key, f"{key}: {phrase} ({self.secret})", time.monotonic())
        sent.scenario = self.scenario
        self.sents.append(sent)
        self.by_key[key] = sent
        self.campaign.count_turn()
        tab = await self.ensure_tab()
        tab.awaiting.append(sent)
        if not await tab.send({"action": "send", "message": sent.text}):
            sent.socket_lost = f"{tab.how_closed()} before the send"  # never went out
            with contextlib.suppress(ValueError):
                tab.awaiting.remove(sent)
        if wait_accepted:
            await self.wait(lambda: sent.accepted or sent.refused or sent.socket_lost, 30)
        return sent

    async def stop(self, sent: Sent) -> None:
        """Stop, naming the reply when its number is known; from this tab or, 40% of the time,
        from a tab on another process (Stop must reach the process running the reply)."""
        frame = {"action": "stop"}
        if sent.reply_seq is not None:
            frame["message"] = sent.reply_seq
        if self.rng.random() < 0.4:
            sent_from = "another tab" if await self.from_other_tab(frame) else ""
        else:
            sent_from = "the same tab" if await (await self.ensure_tab()).send(frame) else ""
        if sent_from:
            self.campaign.stops[sent_from] += 1

    async def compact(self) -> None:
        frame = {"action": "compact"}
        if self.rng.random() < 0.3:
            frame["instructions"] = "Keep every message key."
        self.campaign.compact_requests += 1
        if self.rng.random() < 0.5:
            await self.from_other_tab(frame)
        else:
            await (await self.ensure_tab()).send(frame)

    async def from_other_tab(self, frame: dict) -> bool:
        """Send one frame from a second tab, on the other process when it is up."""
        slots = [s for s in self.campaign.live() if self.tab is None or s is not self.tab.slot]
        slot = self.rng.choice(slots or self.campaign.live() or self.campaign.slots)
        try:
            tab = await Tab(self, slot).open()
        except Exception:
            return False  # its process was just killed: a tab that never opened sends nothing
        sent = await tab.send(frame)
        await asyncio.sleep(0.3)  # its refusal, if any, comes on this tab
        await tab.close()
        return sent

    # --- waiting ---------------------------------------------------------------------------

    async def wait(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
        return True

    async def settle(self, sent: Sent) -> None:
        """Wait for the reply's final status: from the frames, or from export.json after a
        reconnect or a quiet spell (frames sent while the tab was away are not sent again)."""
        if sent.refused or sent.final:
            return
        deadline = time.monotonic() + REPLY_TIMEOUT
        synced_at = time.monotonic()
        unconfirmed_since = time.monotonic() if not sent.accepted else None
        while not sent.final:
            now = time.monotonic()
            if now > deadline:
                self.campaign.unsettled.append(f"conversation {self.conversation_id} {sent.key}")
                return
            if self.tab is None or self.tab.closed:
                await self.reopen()
                await self.sync()
                synced_at = time.monotonic()
                continue
            await self.wait(lambda: sent.final or self.tab.closed, 2.0)
            if sent.final:
                return
            if time.monotonic() - synced_at > 3:
                await self.sync()
                synced_at = time.monotonic()
            if sent.accepted or sent.user_seq is not None:
                unconfirmed_since = None
            elif unconfirmed_since is not None and time.monotonic() - unconfirmed_since > 15:
                return  # the socket closed before the send was answered, and it was not stored

    async def ensure_tab(self) -> Tab:
        if self.tab is None or self.tab.closed:
            await self.reopen(only_if_closed=True)
        return self.tab

    async def reopen(self, *, only_if_closed: bool = False) -> None:
        """A tab (re)connects to a live process, as the page's websocket does."""
        async with self.reopening:  # a send and a compact at once open one tab, not two
            if only_if_closed and self.tab is not None and not self.tab.closed:
                return
            if self.tab is not None:
                await self.tab.close()
                self.campaign.reconnects += 1
            deadline = time.monotonic() + 90
            while True:
                slot = self.rng.choice(self.campaign.live() or self.campaign.slots)
                try:
                    self.tab = await Tab(self, slot).open()
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.3)

    async def sync(self) -> None:
        """What the server has: each sent message's number and its reply's status."""
        response = await self.request("GET", f"/conversations/{self.conversation_id}/export.json")
        if response is None or response.status_code != 200:
            return
        statuses = {}
        for m in response.json()["messages"]:
            statuses[m["seq"]] = m["status"]
            if m["role"] == "user":
                keys = KEY_RE.findall(_text(m["content"]))
                if keys and keys[0] in self.by_key:
                    self._numbered(self.by_key[keys[0]], m["seq"])
        for seq, sent in self.by_user_seq.items():
            if statuses.get(seq + 1) in FINAL and not sent.final:
                sent.final, sent.final_via = statuses[seq + 1], "export.json"
        self.changed.set()

    # --- frames ----------------------------------------------------------------------------

    def on_frame(self, tab: Tab, frame: str) -> None:
        if 'id="send-accepted"' in frame and tab.awaiting:
            sent = tab.awaiting.popleft()
            sent.accepted, sent.answered_in = True, time.monotonic() - sent.at
        for m in NOTICE_RE.finditer(frame):
            self.on_notice(tab, dict(ATTR_RE.findall(m[1])), html.unescape(m[2]).strip())
        for m in ARTICLE_RE.finditer(frame):
            attrs = dict(ATTR_RE.findall(m[1]))
            seq, status = int(attrs.get("data-seq", 0)), attrs.get("data-status", "")
            if "user" in attrs.get("class", "").split():
                end = frame.find("</article>", m.end())
                key = KEY_IN_HTML_RE.search(frame, m.end(), end if end > 0 else len(frame))
                if key and key[1] in self.by_key:
                    self._numbered(self.by_key[key[1]], seq)
            elif (sent := self.by_user_seq.get(seq - 1)) is not None:
                sent.started = sent.started or status == "streaming"
                if status in FINAL and not sent.final:
                    sent.final, sent.final_via = status, "frame"
        for m in DELTA_RE.finditer(frame):
            if (sent := self.by_user_seq.get(int(m[1]) - 1)) is not None:
                sent.started = True
        self.changed.set()

    def on_notice(self, tab: Tab, attrs: dict, text: str) -> None:
        if not text:
            return
        about = attrs.get("data-about", "")
        tab.notices.append((about, text))
        if about == "send" and tab.awaiting:
            sent = tab.awaiting.popleft()
            sent.refused = text
            self.campaign.refusals[text[:90]] += 1
        elif about == "compact":
            self.campaign.compact_refusals[text[:90]] += 1
        elif about in ("", "stop") and "error" in attrs.get("class", ""):
            self.campaign.other_notices[text[:90]] += 1

    def _numbered(self, sent: Sent, seq: int) -> None:
        sent.user_seq = seq
        self.by_user_seq[seq] = sent

    # --- HTTP --------------------------------------------------------------------------------

    async def request(self, method: str, path: str, *, csrf: bool = False, **kwargs):
        """One HTTP request to a live process (the other one if this one is down); None if
        none answered."""
        import httpx2

        for _ in range(6):
            slot = self.rng.choice(self.campaign.live() or self.campaign.slots)
            headers = {}
            if csrf:  # as the page's forms do: the cookie's token, from this origin
                headers = {"X-CSRFToken": self.csrf_token(), "Origin": f"http://{HOST}:{slot.port}"}
            try:
                response = await self.http.request(
                    method, f"http://{HOST}:{slot.port}{path}", headers=headers, **kwargs
                )
            except httpx2.TransportError:
                await asyncio.sleep(0.5)
                continue
            self.campaign.http_answers[response.status_code // 100 * 100] += 1
            if response.status_code >= 500:
                self.campaign.http_errors[f"{response.status_code} {method} {_route(path)}"] += 1
            return response
        return None

    def csrf_token(self) -> str:
        for cookie in self.http.cookies.jar:
            if cookie.name == "csrftoken":
                return cookie.value
        return ""

    # --- cross-user probes ---------------------------------------------------------------------

    async def probe(self) -> None:
        """Try to read and act on another user's conversation; every try must be refused. The
        same requests on this user's own conversation (the controls) must succeed, or the
        probes prove nothing."""
        self.probe_rounds += 1
        await self.harvest()
        if self.probe_rounds == 1:
            await self.controls()
        victims = [c for c in self.campaign.conversations if c["owner"] != self.owner]
        victim = self.rng.choice(victims)
        for kind, method, path, data in self.probes_of(victim):
            response = await self.request(method, path, csrf=method == "POST", data=data)
            if response is not None:
                self.campaign.probe(kind, victim, self._refused(response, victim))
        await self.probe_search(victim)
        await self.probe_socket(victim)
        await self.probe_actions(victim)

    def probes_of(self, victim: dict) -> list[tuple]:
        v = victim["id"]
        base = f"/conversations/{v}"
        out = [
            ("GET page", "GET", f"{base}/", None),
            ("GET transcript part", "GET", f"{base}/?part=transcript", None),
            ("GET older messages", "GET", f"{base}/messages/?before=9999", None),
            ("GET context", "GET", f"{base}/context/", None),
            ("GET window", "GET", f"{base}/window/", None),
            ("GET export.json", "GET", f"{base}/export.json", None),
            ("GET search.json", "GET", f"{base}/search.json?q=answer", None),
            ("GET search page", "GET", f"{base}/search/?q=answer", None),
            ("GET tools", "GET", f"{base}/tools/", None),
            ("POST rename", "POST", f"{base}/rename/", {"title": "probe"}),
            ("POST settings", "POST", f"{base}/settings/", {"system_prompt": "probe"}),
            ("POST tools", "POST", f"{base}/tools/", {"enabled": TOOLS}),
        ]
        pks = sorted(self.campaign.harvested[victim["owner"]]["messages"])
        if pks:
            pk = self.rng.choice(pks)
            out.append(("POST pin", "POST", f"/messages/{pk}/pin/", {"pinned": "1"}))
        out.append(("POST delete", "POST", f"{base}/delete/", None))  # last: it would hide it
        return out

    def _refused(self, response, victim: dict) -> bool | None:
        """True: refused as it must be (404); False: it succeeded; None: neither (an error)."""
        if response.status_code == 404:
            return True
        if response.status_code < 400:
            return False
        if response.status_code >= 500:
            return None  # a server error (counted with every HTTP answer): neither
        self.campaign.probe_errors[f"{response.status_code} {response.request.method}"] += 1
        return None

    async def probe_search(self, victim: dict) -> None:
        """The all-conversations search must not find a word only the victim's messages hold."""
        hits = await self.search_hits(self.campaign.secrets[victim["owner"]])
        if hits is not None:
            self.campaign.probe("GET search for their word", victim, hits == 0)

    async def search_hits(self, word: str) -> int | None:
        """Hits of the all-conversations search page (which repeats the query: count hits)."""
        response = await self.request("GET", f"/search/?q={word}")
        if response is None or response.status_code != 200:
            return None  # no answer, or a server error (counted with every HTTP answer)
        return response.text.count('class="search-hit"')

    async def probe_socket(self, victim: dict) -> None:
        """A websocket on their conversation must be refused at the handshake."""
        from websockets.exceptions import InvalidStatus

        slot = self.rng.choice(self.campaign.live() or self.campaign.slots)
        try:
            tab = await Tab(self, slot, victim["id"]).open(read=False)
        except InvalidStatus:
            self.campaign.probe("websocket connect", victim, True)
            return
        except Exception:
            return  # the process went away: proves nothing either way
        self.campaign.probe("websocket connect", victim, False)
        await tab.close()

    async def probe_actions(self, victim: dict) -> None:
        """On this user's own socket, name their compaction: approve, discard, regenerate."""
        ids = sorted(self.campaign.harvested[victim["owner"]]["compactions"])
        if not ids:
            return
        compaction = self.rng.choice(ids)
        tab = await self.ensure_tab()
        for action in ("approve", "discard", "regenerate"):
            before = len(tab.notices)
            frame = {"action": action, "compaction": compaction, "summary": "probe"}
            if not await tab.send(frame):
                return
            refused = await self.wait(
                lambda b=before, a=action: any(x == a for x, _ in tab.notices[b:]) or tab.closed,
                10,
            )
            if not tab.closed:
                self.campaign.probe(f"websocket {action}", victim, refused)

    async def harvest(self) -> None:
        """Ids an attacker could learn or guess: this user's message and compaction ids, from
        its own page, for the other users' probes."""
        response = await self.request("GET", f"/conversations/{self.conversation_id}/")
        if response is not None and response.status_code == 200:
            found = self.campaign.harvested[self.owner]
            found["messages"].update(int(pk) for pk in PIN_RE.findall(response.text))
            found["compactions"].update(int(pk) for pk in DIVIDER_RE.findall(response.text))

    async def controls(self) -> None:
        own = {"id": self.conversation_id, "owner": self.owner}
        for kind, method, path, data in self.probes_of(own):
            if kind in ("POST delete", "POST pin"):
                continue  # deleting its own would end its run; its pins are tried below
            if kind == "POST settings":
                data = {"system_prompt": SYSTEM_PROMPT}  # the same: the window does not change
            if kind == "POST rename":
                data = {"title": f"Chat {self.index}"}
            response = await self.request(method, path, csrf=method == "POST", data=data)
            if response is not None:
                self.campaign.control(kind, response.status_code in (200, 302))
        pks = sorted(self.campaign.harvested[self.owner]["messages"])
        if pks:  # pin one of its own messages and unpin it: allowed, and leaves no trace
            for pinned in ("1", "0"):
                response = await self.request(
                    "POST", f"/messages/{pks[0]}/pin/", csrf=True, data={"pinned": pinned}
                )
                if response is not None:
                    self.campaign.control("POST pin", response.status_code == 200)
        if any(s.accepted for s in self.sents):  # its own word is found: the probe can see hits
            hits = await self.search_hits(self.secret)
            if hits is not None:
                self.campaign.control("GET search for own word", hits > 0)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


# --- the campaign --------------------------------------------------------------------------------


@dataclass
class Campaign:
    args: argparse.Namespace
    users: list[dict]
    conversations: list[dict]
    slots: list[ServerSlot]
    secrets: list[str] = field(default_factory=list)
    turns: int = 0
    next_restart: int = 0
    restarts: int = 0
    restart_log: list[str] = field(default_factory=list)
    tab_closes: int = 0
    reconnects: int = 0
    compact_requests: int = 0
    stops: Counter = field(default_factory=Counter)
    scenarios: Counter = field(default_factory=Counter)
    tabs: Counter = field(default_factory=Counter)  # sockets opened, by server slot
    refusals: Counter = field(default_factory=Counter)
    compact_refusals: Counter = field(default_factory=Counter)
    other_notices: Counter = field(default_factory=Counter)
    probes: int = 0
    leaks: list[str] = field(default_factory=list)
    probe_errors: Counter = field(default_factory=Counter)
    controls: Counter = field(default_factory=Counter)
    control_failures: list[str] = field(default_factory=list)
    proven: set[str] = field(default_factory=set)  # control kinds that succeeded at least once
    http_answers: Counter = field(default_factory=Counter)  # every HTTP answer, by 100s
    http_errors: Counter = field(default_factory=Counter)  # 5xx answers, by route
    db_connections_peak: int = 0  # PostgreSQL connections to the run's database, sampled
    max_connections: int = 0
    unsettled: list[str] = field(default_factory=list)
    harvested: dict = field(default_factory=dict)
    _restarting: list[asyncio.Task] = field(default_factory=list)
    _restart_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    phases: dict[str, float] = field(default_factory=dict)  # seconds each part of the run took
    open_at_end: dict[str, int] = field(default_factory=dict)  # rows open when clients finished

    def __post_init__(self) -> None:
        rng = random.Random(self.args.seed)
        self.secrets = [f"zq{rng.randrange(16**6):06x}u{u}" for u in range(len(self.users))]
        self.harvested = {
            u: {"messages": set(), "compactions": set()} for u in range(len(self.users))
        }
        self.next_restart = self.args.restart_every

    def live(self) -> list[ServerSlot]:
        return [s for s in self.slots if s.up]

    def count_turn(self) -> None:
        """A user message is about to be sent; every `restart_every` of them, a restart."""
        self.turns += 1
        every = self.args.restart_every
        if every > 0 and self.turns >= self.next_restart and self.turns < self.args.turns:
            self.next_restart += every
            self._restarting.append(asyncio.ensure_future(self.restart()))

    async def restart(self) -> None:
        """kill -9 one process (each in turn) and start a new one on its port."""
        async with self._restart_lock:  # one at a time: the other process stays up
            slot = self.slots[self.restarts % len(self.slots)]
            self.restarts += 1
            began, turn, at = time.monotonic(), self.turns, time.strftime("%H:%M:%S")
            slot.kill()
            await slot.start()
            self.restart_log.append(
                f"restart at turn {turn}: server {slot.index} killed at {at}, a new one "
                f"listening {time.monotonic() - began:.1f} s later"
            )

    def probe(self, kind: str, victim: dict, refused: bool | None) -> None:
        if refused is None:
            return
        self.probes += 1
        if not refused:
            self.leaks.append(f"{kind} on conversation {victim['id']} succeeded")

    def control(self, kind: str, ok: bool) -> None:
        """A request the user may make on their own conversation: its probe kind is proven by
        one success (a refusal now and then, a server error, is noted, not fatal)."""
        self.controls[ok] += 1
        if ok:
            self.proven.add(kind)
        else:
            self.control_failures.append(kind)

    def unproven(self) -> list[str]:
        return sorted(set(self.control_failures) - self.proven)

    async def wait_restarts(self) -> None:
        for task in self._restarting:
            await task


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
            raise load.BenchError(
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


# --- checks: the database and the provider's log -------------------------------------------------


def db_connect(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=10)


def open_rows(url: str) -> dict[str, list]:
    """Replies still streaming or queued, compactions still running (or waiting as drafts)."""
    with db_connect(url) as conn:
        messages = conn.execute(
            "SELECT conversation_id, seq, status, now() - heartbeat_at FROM chat_message "
            "WHERE status IN ('streaming', 'queued') ORDER BY conversation_id, seq"
        ).fetchall()
        compactions = conn.execute(
            "SELECT conversation_id, id, status, now() - heartbeat_at FROM compaction_compaction "
            "WHERE status IN ('running', 'draft') ORDER BY conversation_id, id"
        ).fetchall()
    return {
        "streaming": [r for r in messages if r[2] == "streaming"],
        "queued": [r for r in messages if r[2] == "queued"],
        "running": [r for r in compactions if r[2] == "running"],
        "draft": [r for r in compactions if r[2] == "draft"],
    }


def settle_rows(campaign: Campaign) -> dict:
    """Once the clients are done, wait past the stale-recovery time (and a sweep after it), then
    until nothing is open or twice that time has passed: what is still open then is stuck."""
    url, stale = campaign.args.pg_url, campaign.args.stale
    began = time.monotonic()
    campaign.open_at_end = {k: len(v) for k, v in open_rows(url).items()}
    earliest, deadline = began + stale + 2, began + 2 * stale + 15
    while True:
        rows = open_rows(url)
        now = time.monotonic()
        if (now >= earliest and not any(rows.values())) or now > deadline:
            campaign.phases["settling"] = now - began
            return rows
        time.sleep(1)


def read_provider_log(path: Path) -> list[dict]:
    entries = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entries.append(json.loads(line))
    return sorted(entries, key=lambda e: e["n"])


def read_transcripts(url: str) -> tuple[dict[int, list[tuple]], list[tuple]]:
    with db_connect(url) as conn:
        messages = conn.execute(
            "SELECT conversation_id, seq, role, status, content, error FROM chat_message "
            "ORDER BY conversation_id, seq"
        ).fetchall()
        compactions = conn.execute(
            "SELECT conversation_id, status, trigger, kind, summariser, error "
            "FROM compaction_compaction"
        ).fetchall()
    by_conversation: dict[int, list[tuple]] = {}
    for row in messages:
        by_conversation.setdefault(row[0], []).append(row[1:])
    return by_conversation, compactions


def delivered_by_key(entries: list[dict]) -> dict[str, list[dict]]:
    """Each turn's chat and tool-step requests, in the order they came."""
    out: dict[str, list[dict]] = {}
    for e in entries:
        if e.get("key") and e["step"] in ("chat", "tool") and e["outcome"] != "invalid":
            out.setdefault(e["key"], []).append(e)
    return out


def check_conversation(chat: Chat, rows: list[tuple], streams: dict[str, list[dict]]) -> list[str]:
    """Everything that was lost or altered in one conversation, one line each."""
    where = f"conversation {chat.conversation_id}"
    problems = []
    seqs = [r[0] for r in rows]
    if seqs != list(range(1, len(seqs) + 1)):
        missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
        doubled = sorted(s for s, n in Counter(seqs).items() if n > 1)
        problems.append(f"{where}: seqs not gap-free (missing {missing}, doubled {doubled})")
    by_seq = {r[0]: r for r in rows}
    stored: dict[str, int] = {}
    for seq, role, _, content, _ in rows:
        if role != "user":
            if seq - 1 not in by_seq or by_seq[seq - 1][1] != "user":
                problems.append(f"{where} seq {seq}: a reply with no user message before it")
            continue
        text = _text(content)
        keys = KEY_RE.findall(text)
        sent = chat.by_key.get(keys[0]) if keys else None
        if sent is None:
            problems.append(f"{where} seq {seq}: a user message nobody sent: {text[:80]!r}")
            continue
        if sent.key in stored:
            problems.append(
                f"{where} seq {seq}: {sent.key} stored twice (also seq {stored[sent.key]})"
            )
        stored[sent.key] = seq
        if text != sent.text:
            problems.append(
                f"{where} seq {seq}: {sent.key} altered: {text!r} != sent {sent.text!r}"
            )
        reply = by_seq.get(seq + 1)
        if reply is None or reply[1] != "assistant":
            problems.append(f"{where} seq {seq}: {sent.key} has no reply row after it")
        else:
            problems += check_reply(where, sent, reply, streams.get(sent.key, []))
    accepted = [s for s in chat.sents if s.accepted]
    problems += [
        f"{where}: {s.key} was accepted by the server but is not in the database"
        for s in accepted
        if s.key not in stored
    ]
    order = [stored[s.key] for s in sorted(accepted, key=lambda s: s.at) if s.key in stored]
    if order != sorted(order):
        problems.append(f"{where}: accepted messages stored out of order: seqs {order}")
    return problems


def check_reply(where: str, sent: Sent, reply: tuple, stream: list[dict]) -> list[str]:
    """A reply ends final, keeping exactly the text its provider streams delivered (a prefix of
    it when stopped or cut off by a dying process)."""
    seq, _, status, content, error = reply
    if status == "streaming":
        return []  # counted with the stuck rows
    text = _text(content)
    delivered = "".join(e["text"] for e in stream)
    outcomes = ",".join(e["outcome"] for e in stream) or "no request"
    say = f"{where} seq {seq} ({sent.key}, {status}, provider: {outcomes})"
    if status not in FINAL:
        return [f"{say}: the reply did not end in a final status"]
    if not delivered.startswith(text):
        return [
            f"{say}: stored text {text[:60]!r}... is not what the provider sent {delivered[:60]!r}"
        ]
    if status in ("complete", "error") and text != delivered:
        lost = delivered[len(text) :]
        return [
            f"{say}: {len(lost)} characters the provider delivered were not kept: {lost[:60]!r}"
        ]
    return []


@dataclass
class Findings:
    invalid: list[dict]
    lost: list[str]
    stuck: dict
    leaks: list[str]
    unconfirmed: list[str] = field(default_factory=list)  # not counted: see `unconfirmed`

    def counts(self) -> tuple[int, int, int, int]:
        stuck = len(self.stuck["streaming"]) + len(self.stuck["running"])
        return len(self.invalid), len(self.lost), stuck, len(self.leaks)


def check(campaign: Campaign, chats: list[Chat], provider_log: Path, stuck: dict):
    entries = read_provider_log(provider_log)
    transcripts, compactions = read_transcripts(campaign.args.pg_url)
    streams = delivered_by_key(entries)
    lost = []
    for chat in chats:
        lost += check_conversation(chat, transcripts.get(chat.conversation_id, []), streams)
    # (Replies left queued are among the lost above: not in a final status.)
    lost += [f"conversation {c} compaction {i}: left as a draft" for c, i, _, _ in stuck["draft"]]
    invalid = [e for e in entries if e["outcome"] == "invalid"]
    findings = Findings(invalid, lost, stuck, campaign.leaks)
    findings.unconfirmed = unconfirmed(chats, transcripts)
    return findings, entries, transcripts, compactions


def unconfirmed(chats: list[Chat], transcripts: dict) -> list[str]:
    """Messages whose socket closed before the server answered the send and that are not in
    the database: allowed (nothing was promised), but listed, with how soon the socket went."""
    out = []
    for chat in chats:
        rows = transcripts.get(chat.conversation_id, [])
        stored = {k for r in rows if r[1] == "user" for k in KEY_RE.findall(_text(r[3]))[:1]}
        out += [
            f"conversation {chat.conversation_id} {s.key} ({s.scenario}): {s.socket_lost}; "
            "not stored"
            for s in chat.sents
            if s.socket_lost and not s.accepted and not s.refused and s.key not in stored
        ]
    return out


# --- report --------------------------------------------------------------------------------------


def report(campaign, chats, findings, entries, transcripts, compactions) -> None:
    args = campaign.args
    invalid, lost, stuck, leaks = findings.counts()
    print()
    print(
        f"Fault campaign: {args.turns:,} turns over {len(chats)} conversations of "
        f"{len(campaign.users)} users, 2 uvicorn processes on PostgreSQL + Redis, seed {args.seed}"
    )
    print(
        f"  budget {args.budget:,} tokens, TURN_STALE_SECONDS {args.stale}, LLM_MAX_RETRIES "
        f"{args.retries}, a restart every {args.restart_every} turns"
    )
    print("\nChecks (each must be 0):")
    print(f"  {'requests the provider refused as invalid':<48} {invalid:>6}")
    print(f"  {'messages lost or altered':<48} {lost:>6}")
    print(
        f"  {'rows left streaming / running after settling':<48} {stuck:>6}  "
        f"({len(findings.stuck['streaming'])} streaming, {len(findings.stuck['running'])} running)"
    )
    print(
        f"  {'cross-user reads or actions that succeeded':<48} {leaks:>6}  "
        f"(of {campaign.probes:,} probes)"
    )
    print("\nTotals:")
    for label, value in totals(campaign, chats, entries, transcripts, compactions):
        print(f"  {label:<26} {value}")
    details(campaign, findings)


def totals(campaign, chats, entries, transcripts, compactions) -> list[tuple]:
    sents = [s for c in chats for s in c.sents]
    stored = {
        KEY_RE.findall(_text(r[3]))[0]
        for rows in transcripts.values()
        for r in rows
        if r[1] == "user" and KEY_RE.findall(_text(r[3]))
    }
    unanswered = [s for s in sents if not s.accepted and not s.refused]
    replies = Counter(r[2] for rows in transcripts.values() for r in rows if r[1] == "assistant")
    answered = [e for e in entries if e["outcome"] not in ("invalid", "truncated")]
    requests = Counter(e["step"] for e in answered)
    injected = [e for e in answered if e["outcome"] not in ("ok", "tool_call")]
    faults = Counter(e["outcome"] for e in injected)
    by_step = Counter((e["outcome"], e["step"] == "summary") for e in injected)
    cut = [
        time.strftime("%H:%M:%S", time.localtime(e["t"]))
        for e in entries
        if e["outcome"] == "truncated"
    ]
    committed = Counter(c[2] for c in compactions if c[1] == "committed")
    statuses = Counter(c[1] for c in compactions)
    names = {
        "overloaded": "529 overloaded",
        "rate_limited": "429 rate limit",
        "stream_error": "error mid-stream",
        "dropped": "dropped mid-stream",
        "slow_first_token": "slow first token",
    }
    fault_text = ", ".join(
        f"{names[k]} {n} ({by_step[(k, True)]} in summaries)" for k, n in faults.most_common()
    )
    return [
        (
            "turns attempted",
            f"{len(sents):,} (accepted {sum(s.accepted for s in sents):,}, refused "
            f"{sum(bool(s.refused) for s in sents)}, socket gone before the answer "
            f"{len(unanswered)}: {sum(s.key in stored for s in unanswered)} of them stored)",
        ),
        ("scenarios", ", ".join(f"{k} {n}" for k, n in campaign.scenarios.most_common())),
        (
            "final status seen",
            ", ".join(f"by {k} {n}" for k, n in Counter(s.final_via for s in sents).items() if k)
            + f"; never {sum(not s.final for s in sents if s.accepted)} of the accepted",
        ),
        ("replies", ", ".join(f"{k} {n:,}" for k, n in replies.most_common())),
        (
            "provider requests",
            f"{sum(requests.values()):,} (chat {requests['chat']:,}, tool step "
            f"{requests['tool']:,}, summary {requests['summary']:,}); tool calls "
            f"{sum(e['outcome'] == 'tool_call' for e in entries)}; cut off mid-send by a "
            f"killed server {len(cut)}" + (f" (at {', '.join(cut)})" if cut else ""),
        ),
        ("faults injected", f"{sum(faults.values()):,}: {fault_text}"),
        (
            "stops",
            f"{sum(campaign.stops.values())} ("
            + ", ".join(f"{k} {n}" for k, n in campaign.stops.items())
            + ")",
        ),
        (
            "HTTP answers",
            ", ".join(f"{k // 100}xx {n:,}" for k, n in sorted(campaign.http_answers.items()))
            + f"; PostgreSQL connections to the run's database peaked at "
            f"{campaign.db_connections_peak} (max_connections {campaign.max_connections})",
        ),
        ("sends answered", _spread(sorted(s.answered_in for s in sents if s.answered_in))),
        ("tab closes", f"{campaign.tab_closes} (reconnects in all: {campaign.reconnects})"),
        (
            "sockets opened",
            ", ".join(f"server {i} {n}" for i, n in sorted(campaign.tabs.items())),
        ),
        ("restarts (kill -9)", f"{campaign.restarts}"),
        (
            "compactions",
            f"{sum(committed.values())} committed (auto {committed['auto']}, manual "
            f"{committed['manual']}); {statuses['failed']} failed; {campaign.compact_requests} "
            f"compact requests, {sum(campaign.compact_refusals.values())} refused",
        ),
        (
            "cross-user probes",
            f"{campaign.probes:,}; controls on own conversations "
            f"{campaign.controls[True]}/{sum(campaign.controls.values())} allowed",
        ),
        (
            "open when clients ended",
            ", ".join(f"{n} {k}" for k, n in campaign.open_at_end.items())
            + f" (then past TURN_STALE_SECONDS={campaign.args.stale} until none was)",
        ),
        (
            "wall time",
            f"{campaign.phases['wall']:.0f} s ("
            + ", ".join(f"{k} {v:.0f} s" for k, v in campaign.phases.items() if k != "wall")
            + ")",
        ),
    ]


def _route(path: str) -> str:
    """A path with its ids blanked: /conversations/#/export.json."""
    return re.sub(r"\d+", "#", path.split("?")[0])


def _spread(seconds: list[float]) -> str:
    """p50 / p95 / max of sorted durations, in ms."""
    if not seconds:
        return "none"
    p95 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.95))]
    return (
        f"p50 {seconds[len(seconds) // 2] * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"max {seconds[-1] * 1000:.0f} ms (send to send-accepted)"
    )


def details(campaign: Campaign, findings: Findings, limit: int = 25) -> None:
    notes = []
    for e in findings.invalid[:limit]:
        notes.append(
            f"invalid request #{e['n']} ({e['step']}, turn {e['key']}): {e['invalid']}; "
            f"messages: {e['shape']}"
        )
    notes += findings.lost[:limit]
    for kind in ("streaming", "running"):
        for c, n, status, age in findings.stuck[kind][:limit]:
            what = "seq" if kind == "streaming" else "compaction"
            notes.append(f"conversation {c} {what} {n} left {status} (heartbeat {age} ago)")
    notes += findings.leaks[:limit]
    notes += findings.unconfirmed[:limit]
    notes += [f"client gave up waiting for the reply to {u}" for u in campaign.unsettled[:limit]]
    if campaign.control_failures:
        notes.append(
            "controls failed on the user's own conversation: "
            f"{Counter(campaign.control_failures).most_common()}; never succeeded (those probes "
            f"prove nothing): {campaign.unproven() or 'none'}"
        )
    notes += [f"HTTP {k} x{n}" for k, n in campaign.http_errors.most_common(limit)]
    notes += [
        f"probe answered neither 404 nor 2xx/3xx: {k} x{n}"
        for k, n in campaign.probe_errors.items()
    ]
    notes += [f"send refused x{n}: {t}" for t, n in campaign.refusals.most_common(5)]
    notes += [f"compact refused x{n}: {t}" for t, n in campaign.compact_refusals.most_common(5)]
    notes += [f"notice x{n}: {t}" for t, n in campaign.other_notices.most_common(5)]
    notes += campaign.restart_log
    for slot in campaign.slots:
        for path in slot.stderr_paths:
            # Django logs each 404 the probes met: expected, so not listed.
            lines = [(t, n) for t, n in load.log_summary(path) if not t.startswith("Not Found:")]
            notes += [f"{path.stem} stderr x{n}: {line}" for line, n in lines[:4]]
    if notes:
        print("\nNotes:")
        print("\n".join(f"  {n}" for n in notes))


# --- main ----------------------------------------------------------------------------------------


def _on_signal(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._setup is not None:
        setup_users(json.loads(args._setup))
        return 0
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    workdir = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    started = time.monotonic()
    status = 0
    slots: list[ServerSlot] = []
    try:
        _, provider_url, provider_log = start_provider(args, workdir)
        env = server_env(args, provider_url)
        made = prepare_database(args, env)
        slots = [ServerSlot(i, env, workdir) for i in range(2)]
        campaign = Campaign(args, made["users"], made["conversations"], slots)
        campaign.phases["set-up"] = time.monotonic() - started
        print(
            f"{args.turns} turns, {args.conversations} conversations, {args.users} users; "
            f"servers on ports {slots[0].port} and {slots[1].port}; provider {provider_url}; "
            f"database {args.pg_url}",
            flush=True,
        )
        chats = asyncio.run(drive(campaign))
        stuck = settle_rows(campaign)
        campaign.phases["wall"] = time.monotonic() - started
        findings, entries, transcripts, compactions = check(campaign, chats, provider_log, stuck)
        report(campaign, chats, findings, entries, transcripts, compactions)
        status = 1 if any(findings.counts()) else 2 if campaign.unproven() else 0
    except load.BenchError as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        status = 2
    except KeyboardInterrupt:
        print("\nInterrupted: stopping the servers.", file=sys.stderr)
        status = 130
    finally:
        for slot in slots:
            if slot.proc is not None:
                slot.stop()
        load.stop_all()
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            for path in [*workdir.glob("*.stderr"), *workdir.glob("*.jsonl")]:
                shutil.copy(path, Path(args.logs) / path.name)
        shutil.rmtree(workdir, ignore_errors=True)
        if not args.keep_db and args._setup is None:
            load.drop_postgres(args.pg_url)
    return status


if __name__ == "__main__":
    sys.exit(main())
