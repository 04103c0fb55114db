"""Load: N concurrent websocket chats against the app, with a bare Channels relay as the baseline.

Run by hand (`.venv/bin/python bench/load.py`, `--help` for the flags); not a test.

Every chat is one user with one conversation and one websocket. It sends a message, and the
moment the last word of the reply has arrived it sends the next one, until the measured window
ends. The model is `tests/fake_anthropic.py` in its own process: every reply is the same
`--words` words, sent at once (no delay between deltas), so what is measured is the server; with
`--stream-seconds S` the first word comes at once and the rest over S seconds, as a model streams;
`--delta-ms MS` spaces the deltas MS ms apart instead, and `--paced` is `--delta-ms 30` (a model's
pace: the first token at 10 chats is then the critical path, not a wait behind other chats).

The baseline is `bench/relay.py`, served by the same uvicorn with the same settings: a consumer
that relays the provider's stream to its socket and does nothing else. It is measured in the same
run, because the machines are shared and noisy: the figures that matter are ratios and
differences against it (first-token "added" latency, replies/s "x relay").

Per configuration it prints first-token p50/p95 (send to the first text delta of that reply),
replies/s (complete fragments received in the window), lost messages (sent but never completed:
refused, error, interrupted, or still unfinished when replies stop finishing after the window),
and the server's CPU per reply (utime+stime of the uvicorn process and its workers over the
window). The load clients run in their own processes; their CPU, the fake provider's, PostgreSQL's
+ Redis's and the rest of the machine's are printed too, so a reader can judge whether anything
but the server was the bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import html
import json
import os
import platform
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from inprocess import UNLIMITED  # noqa: E402 - bench/ is the script's own directory

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
UVICORN = str(Path(PYTHON).with_name("uvicorn"))
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MODEL = "claude-bench"
FINAL_STATUSES = {"complete", "error", "interrupted", "cancelled"}
PACED_DELTA_MS = 30.0  # --paced: deltas this far apart, as a model streams them

# Targets (see bench/README.md): chats -> checks.
ADDED_P50_MAX_MS = {100: 50.0, 10: 10.0}
RELAY_RATIO_MIN = {100: 0.8}
RELAY_WITHOUT_HISTORY = False  # set from --relay-without-history
TWO_PROCESS_RATIO_MIN = {100: 1.3}
ZERO_LOST_AT = {100}
SATURATED = 0.85  # share of one core above which a client or the provider may be the bottleneck


# --- command line --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--chats",
        type=int,
        nargs="+",
        default=[10, 100],
        metavar="N",
        help="concurrent chats; several values run each (default: 10 100)",
    )
    p.add_argument(
        "--db",
        nargs="+",
        choices=["sqlite", "postgres"],
        default=["sqlite", "postgres"],
        help="databases for the app (default: both). SQLite runs on 1 process with the "
        "in-memory channel layer; PostgreSQL on Redis",
    )
    p.add_argument(
        "--processes",
        type=int,
        nargs="+",
        choices=[1, 2],
        default=[1, 2],
        help="server processes (default: 1 2); 2 is uvicorn --workers 2 on PostgreSQL + Redis",
    )
    p.add_argument("--no-relay", action="store_true", help="skip the relay baseline")
    p.add_argument("--relay-only", action="store_true", help="run only the relay baseline")
    p.add_argument(
        "--relay-without-history",
        action="store_true",
        help="the relay sends only the new message (default: the conversation so far, the "
        "same request the app sends, so both do the same provider work)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every configuration this many times, in alternating order (relay, app, app, "
        "relay, ...), each app run against the relay of its round; the targets are judged on "
        "the median over the rounds (default 1)",
    )
    p.add_argument("--duration", type=float, default=20.0, help="measured window, s (default 20)")
    p.add_argument("--warmup", type=float, default=5.0, help="warm-up before it, s (default 5)")
    p.add_argument(
        "--drain",
        type=float,
        default=10.0,
        help="after the window, wait for outstanding replies until none has finished for this "
        "long, s (default 10)",
    )
    p.add_argument(
        "--drain-max",
        type=float,
        default=60.0,
        help="and at most this long in all, s (default 60)",
    )
    p.add_argument("--words", type=int, default=30, help="words per reply (default 30)")
    p.add_argument(
        "--stream-seconds",
        type=float,
        default=0.0,
        help="the provider streams each reply over this long, its first word at once "
        "(default 0: every word at once)",
    )
    p.add_argument(
        "--delta-ms",
        type=float,
        metavar="MS",
        help="the provider sends each reply's deltas MS ms apart, its first at once (instead of "
        "--stream-seconds: the same as --stream-seconds MS x (words - 1) / 1000)",
    )
    p.add_argument(
        "--paced",
        action="store_true",
        help=f"--delta-ms {PACED_DELTA_MS:g}, as a model streams: the 10-chat first-token target "
        "is then judged on the critical path of a reply (send, request, first frame)",
    )
    p.add_argument(
        "--clients",
        default="auto",
        help="load-client processes: a number, or auto = 1 up to 40 chats, else 2 (default)",
    )
    p.add_argument(
        "--no-deflate",
        action="store_true",
        help="no permessage-deflate on the sockets (browsers negotiate it; default: on)",
    )
    p.add_argument(
        "--pg-url",
        default="postgres://postgres@127.0.0.1:5432/chat_bench",
        help="PostgreSQL database to drop and create for each run (default: %(default)s)",
    )
    p.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/13",
        help="Redis database, flushed before each run (default: %(default)s)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument(
        "--logs",
        metavar="DIR",
        help="keep every server's and client's stderr, and the clients' raw timings, here",
    )
    p.add_argument(
        "--keep-db",
        action="store_true",
        help="leave the PostgreSQL database of the last PostgreSQL run in place, and copy each "
        "SQLite database into --logs DIR, to inspect the rows",
    )
    p.add_argument("--_setup", type=int, help=argparse.SUPPRESS)  # internal: make N chats
    p.add_argument("--_client", action="store_true", help=argparse.SUPPRESS)  # internal: load
    args = p.parse_args(argv)
    if args._setup is None and not args._client:
        if min(args.chats) < 1 or args.duration <= 0 or min(args.warmup, args.drain) < 0:
            p.error("chats must be positive, --duration > 0, --warmup and --drain >= 0")
        if args.rounds < 1:
            p.error("--rounds must be at least 1")
        args.drain_max = max(args.drain_max, args.drain)
        if args.no_relay and args.relay_only:
            p.error("--no-relay and --relay-only exclude each other")
        if args.clients != "auto" and not (args.clients.isdigit() and int(args.clients) >= 1):
            p.error("--clients must be a positive number or auto")
    if args.paced:
        if args.delta_ms is not None and args.delta_ms != PACED_DELTA_MS:
            p.error(f"--paced is --delta-ms {PACED_DELTA_MS:g}")
        args.delta_ms = PACED_DELTA_MS
    if args.delta_ms is not None:
        if args.delta_ms < 0 or args.stream_seconds:
            p.error("--delta-ms must be >= 0, and excludes --stream-seconds")
        args.stream_seconds = args.delta_ms * max(1, args.words - 1) / 1000
    return args


# --- processes -----------------------------------------------------------------------------------

_children: list[subprocess.Popen] = []
_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it if the bench dies (even by SIGKILL)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(cmd: list[str], *, env: dict, stdout=None, stderr=None, stdin=None) -> subprocess.Popen:
    """A child in its own process group (Ctrl-C reaches only us; we stop it), registered so that
    every exit path stops it."""
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=stderr if stderr is not None else subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    _children.append(proc)
    return proc


def stop(proc: subprocess.Popen | None, timeout: float = 8.0) -> None:
    """SIGTERM the child's process group (uvicorn's workers are in it), SIGKILL if it lingers."""
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None and not _group_alive(proc.pid):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
            if proc.poll() is not None and not _group_alive(proc.pid):
                break
    with contextlib.suppress(ValueError):
        _children.remove(proc)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_all() -> None:
    for proc in reversed(list(_children)):
        stop(proc, timeout=5.0)


def _on_signal(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


class BenchError(Exception):
    pass


# --- CPU from /proc ------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, utime+stime+cutime+cstime in ticks); None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    # After the comm: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def tree_cpu(root: int) -> float:
    """CPU seconds of a process and all its descendants, including children they reaped: the sum
    is conserved when a descendant exits (its times move into its parent's cutime/cstime)."""
    stats = {pid: s for pid in _all_pids() if (s := _stat(pid)) is not None}
    if root not in stats:
        return 0.0
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo.extend(kids.get(pid, []))
    return total / CLK_TCK


def service_roots() -> list[int]:
    """PostgreSQL's postmaster and redis-server, when they run here (their CPU is the database's
    share of the work, which the server's own CPU does not include)."""
    roots = []
    for pid in _all_pids():
        comm = _comm(pid)
        if comm == "redis-server":
            roots.append(pid)
        elif comm == "postgres":
            st = _stat(pid)
            if st is not None and _comm(st[0]) != "postgres":
                roots.append(pid)  # the postmaster, not one of its backends
    return roots


@dataclass
class CpuProbe:
    server: list[int]
    clients: list[int]
    provider: int
    services: list[int]

    def sample(self) -> dict:
        return {
            "t": time.monotonic(),
            "server": sum(tree_cpu(p) for p in self.server),
            "clients": [tree_cpu(p) for p in self.clients],
            "provider": tree_cpu(self.provider),
            "services": sum(tree_cpu(p) for p in self.services),
            "machine": machine_busy(),
        }


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


# --- the fake provider ---------------------------------------------------------------------------


def start_provider(
    words: int, stream_seconds: float, workdir: Path
) -> tuple[subprocess.Popen, str]:
    err = workdir / "provider.stderr"
    proc = spawn(
        [PYTHON, "-m", "tests.fake_anthropic", "--port", "0", "--words", str(words)]
        + ["--stream-seconds", str(stream_seconds)],
        env=base_env(),
        stdout=subprocess.PIPE,
        stderr=err.open("wb"),
    )
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline().decode().strip() if ready else ""
    if not line.startswith("http://"):
        stop(proc)
        raise BenchError(f"the fake provider did not start:\n{tail(err)}")
    return proc, line


def expected_reply(words: int) -> str:
    sys.path.insert(0, str(ROOT))
    from tests.fake_anthropic import standalone_chunks

    return "".join(standalone_chunks(max(1, words)))


# --- configurations, databases, servers ----------------------------------------------------------


@dataclass
class Config:
    kind: str  # "relay" | "app"
    processes: int
    db: str = ""  # "sqlite" | "postgres" for the app
    layer: str = "memory"  # "memory" | "redis"

    @property
    def key(self) -> str:
        if self.kind == "relay":
            return f"relay-{self.processes}p"
        return f"{self.db}-{self.processes}p"

    @property
    def label(self) -> str:
        if self.kind == "relay":
            return f"relay, {self.processes} proc ({self.layer})"
        db = "SQLite" if self.db == "sqlite" else "PostgreSQL"
        layer = "in-memory" if self.layer == "memory" else "Redis"
        return f"ours, {self.processes} proc, {db}+{layer}"


def configs_for(args: argparse.Namespace) -> list[Config]:
    out = []
    for processes in sorted(set(args.processes)):
        layer = "memory" if processes == 1 else "redis"
        if not args.no_relay:
            out.append(Config("relay", processes, layer=layer))
        if args.relay_only:
            continue
        for db in ("sqlite", "postgres"):
            if db not in args.db:
                continue
            if db == "sqlite" and processes > 1:
                continue  # not a target configuration (SQLite is for a single process)
            out.append(Config("app", processes, db, "memory" if db == "sqlite" else "redis"))
    return out


def base_env() -> dict:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        PYTHONDONTWRITEBYTECODE="1",
        DJANGO_SETTINGS_MODULE="config.settings",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        **UNLIMITED,
    )
    return env


def server_env(config: Config, database_url: str, redis_url: str, provider_url: str) -> dict:
    env = base_env()
    env.update(
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="bench-load-not-a-secret",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url if config.layer == "redis" else "",
        LLM_PROVIDER="anthropic",
        ANTHROPIC_BASE_URL=provider_url,
        ANTHROPIC_API_KEY="bench",
        CHAT_MODEL=MODEL,
        LLM_MAX_RETRIES="0",
        LOG_LEVEL="WARNING",
        RELAY_HISTORY="0" if RELAY_WITHOUT_HISTORY else "1",
    )
    return env


def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def fresh_postgres(url: str) -> None:
    import psycopg
    from psycopg import sql

    name = urlsplit(url).path.lstrip("/")
    if not name:
        raise BenchError(f"--pg-url needs a database name: {url}")
    with psycopg.connect(_with_db(url, "postgres"), autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_postgres(url: str) -> None:
    import psycopg
    from psycopg import sql

    name = urlsplit(url).path.lstrip("/")
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(_with_db(url, "postgres"), autocommit=True, connect_timeout=10) as conn,
    ):
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def flush_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=10)
    try:
        client.flushdb()
    finally:
        client.close()


def prepare_app(env: dict, chats: int) -> list[tuple[int, str]]:
    """Migrate, then make one user, session and conversation per chat (in a subprocess, since
    each configuration has its own DATABASE_URL)."""
    _run_python(["manage.py", "migrate", "--noinput"], env, "migrate")
    made = _run_python(
        [str(Path(__file__).resolve()), "--_setup", str(chats)], env, "creating the chats"
    )
    return [tuple(pair) for pair in json.loads(made)]


def _run_python(args: list[str], env: dict, what: str) -> str:
    done = subprocess.run(
        [PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode:
        raise BenchError(f"{what} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return done.stdout


def setup_chats(count: int) -> None:
    """Internal (`--_setup N`): users, sessions and conversations, printed as JSON."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.contrib.sessions.backends.db import SessionStore

    from chat.models import Conversation

    user_model = get_user_model()
    out = []
    for i in range(count):
        user = user_model.objects.create(username=f"bench{i}", password=make_password(None))
        session = SessionStore()
        session["_auth_user_id"] = str(user.pk)
        session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
        session["_auth_user_hash"] = user.get_session_auth_hash()
        session.create()
        conversation = Conversation.objects.create(
            owner=user, model=MODEL, system_prompt="Be brief."
        )
        out.append([conversation.pk, session.session_key])
    print(json.dumps(out))


def start_server(config: Config, env: dict, port: int, workdir: Path) -> tuple:
    app = "bench.relay:application" if config.kind == "relay" else "config.asgi:application"
    cmd = [UVICORN, app, "--host", HOST, "--port", str(port)]
    cmd += ["--log-level", "warning", "--no-access-log"]
    if config.processes > 1:
        cmd += ["--workers", str(config.processes)]
    err = workdir / f"server-{config.key}-{port}.stderr"  # the port makes it unique per run
    proc = spawn(cmd, env=env, stderr=err.open("wb"))
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise BenchError(
                f"the server ({' '.join(cmd)}) exited with status {proc.returncode}:\n{tail(err)}"
            )
        try:
            socket.create_connection((HOST, port), timeout=0.5).close()
            break
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop(proc)
            raise BenchError(f"the server did not listen on port {port} in 60 s:\n{tail(err)}")
        time.sleep(0.1)
    return proc, err


# --- the load client (a separate process) --------------------------------------------------------

DELTA_RE = re.compile(r'<span hx-swap-oob="beforeend:#msg-(\d+)-text">(.*?)</span>', re.S)
MSG_RE = re.compile(r'\bid="msg-(\d+)"')
NOTICE_RE = re.compile(r'\bid="notice"')
STATUS_RE = re.compile(r'\bdata-status="([\w-]+)"')
CLASS_RE = re.compile(r'\bclass="([^"]*)"')


@dataclass(slots=True)
class Turn:
    chat: int
    t_send: float
    user_seq: int
    reply_seq: int
    acked: bool = False
    t_first: float | None = None
    t_last: float | None = None
    t_done: float | None = None
    # complete | error | interrupted | cancelled (final fragments) | refused | disconnected |
    # unsent | "" (never final: reported as unfinished)
    status: str = ""
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    text_ok: bool | None = None

    def row(self) -> list:
        return [
            self.chat,
            self.t_send,
            self.t_first,
            self.t_last,
            self.t_done,
            self.status or "unfinished",
            self.text_ok,
        ]


class Chat:
    """One user on one socket: send, and send again when the reply's last word is in."""

    def __init__(self, index: int, conf: dict, stats: dict) -> None:
        self.index = index
        self.conf = conf
        self.stats = stats
        self.expected: str = conf["expected"]
        self.ws = None
        self.turns: list[Turn] = []
        self.by_reply: dict[int, Turn] = {}
        self.unacked: list[Turn] = []
        self.next_user_seq = 1
        self.stopped = False
        self.idle_refusals = 0
        self.want_send = False
        self.resend_when_idle = False
        self.sending = False

    async def connect(self, conversation_id: int, session_key: str) -> None:
        from websockets.asyncio.client import connect

        port = self.conf["port"]
        self.ws = await connect(
            f"ws://{HOST}:{port}/ws/conversations/{conversation_id}/",
            origin=f"http://{HOST}:{port}",
            additional_headers={"Cookie": f"sessionid={session_key}"},
            compression=self.conf["compression"],
            proxy=None,
            open_timeout=120,
            ping_interval=None,
            max_size=2**24,
            max_queue=None,
        )

    def outstanding(self) -> bool:
        return any(not t.status for t in self.by_reply.values()) or bool(self.unacked)

    async def run(self, first_send_at: float, window_end: float) -> None:
        self.window_end = window_end
        await asyncio.sleep(max(0.0, first_send_at - time.monotonic()))
        await self.send()
        from websockets.exceptions import ConnectionClosed

        try:
            async for frame in self.ws:
                if isinstance(frame, str):
                    self.on_frame(frame, time.monotonic())
                if self.want_send:
                    self.want_send = False
                    await self.send()
                if self.stopped and not self.outstanding():
                    break
        except ConnectionClosed:
            pass
        if not (self.stopped and not self.outstanding()):
            self.stats["disconnects"] += 1  # the server closed the socket: nothing more will come
            for turn in self.turns:
                if not turn.status:
                    turn.status = "disconnected"

    async def send(self) -> None:
        if self.stopped:
            return
        if self.sending:  # a delayed retry and a trigger at once: send after the next frame
            self.want_send = True
            return
        now = time.monotonic()
        if now >= self.window_end:
            self.stopped = True
            if not self.outstanding():
                asyncio.ensure_future(self.ws.close())
            return
        user_seq = self.next_user_seq
        turn = Turn(self.index, now, user_seq, user_seq + 1)
        self.next_user_seq += 2
        self.turns.append(turn)
        self.by_reply[turn.reply_seq] = turn
        self.unacked.append(turn)
        text = f"Message {len(self.turns)} from chat {self.index}: answer briefly, please."
        self.sending = True
        try:
            await self.ws.send(json.dumps({"action": "send", "message": text}))
        except Exception:
            turn.status = "unsent"
            self.stats["send_errors"] += 1
        finally:
            self.sending = False

    def trigger(self) -> None:
        """The reply's last word is in (or it ended): the user types the next message now."""
        self.want_send = True

    # frames --------------------------------------------------------------------------------

    def on_frame(self, frame: str, now: float) -> None:
        if 'id="' not in frame:  # deltas only: the common case
            for m in DELTA_RE.finditer(frame):
                self.on_delta(int(m[1]), m[2], now)
            return
        events = [(m.start(), "delta", m) for m in DELTA_RE.finditer(frame)]
        events += [(m.start(), "msg", m) for m in MSG_RE.finditer(frame)]
        events += [(m.start(), "notice", m) for m in NOTICE_RE.finditer(frame)]
        events.sort(key=lambda e: e[0])
        for pos, kind, m in events:
            if kind == "delta":
                self.on_delta(int(m[1]), m[2], now)
                continue
            start = frame.rfind("<", 0, pos)
            end = frame.find(">", m.end())
            tag = frame[start:end]
            cls = CLASS_RE.search(tag)
            classes = cls[1].split() if cls else []
            if kind == "msg":
                status = STATUS_RE.search(tag)
                self.on_message(int(m[1]), classes, status[1] if status else "", now)
            else:
                close = frame.find("</", end)
                text = html.unescape(frame[end + 1 : close if close >= 0 else None]).strip()
                if "error" in classes and text and " hidden" not in tag:
                    self.on_refusal(text)

    def _ack(self, turn: Turn) -> None:
        if not turn.acked:
            turn.acked = True
            with contextlib.suppress(ValueError):
                self.unacked.remove(turn)

    def on_message(self, seq: int, classes: list[str], status: str, now: float) -> None:
        if "user" in classes:
            if any(
                t.user_seq == seq and t.acked and t.status != "refused" for t in self.turns[-8:]
            ):
                return  # a message we already know, shown again (a status change)
            if not self.unacked:
                self.stats["unmatched_user"] += 1
                return
            turn = self.unacked[0]
            if seq != turn.user_seq:
                # The server numbered it differently from our prediction: follow the server.
                self.stats["seq_resyncs"] += 1
                self.by_reply.pop(turn.reply_seq, None)
                turn.user_seq, turn.reply_seq = seq, seq + 1
                self.by_reply[turn.reply_seq] = turn
                self.next_user_seq = seq + 2
            self._ack(turn)
            return
        turn = self.by_reply.get(seq)
        if turn is None or turn.status:
            return
        self._ack(turn)
        if status not in FINAL_STATUSES:
            return  # streaming, queued: not final yet
        turn.status = status
        self.stats["last_final"] = now
        turn.t_done = now
        if turn.chars:
            # The final fragment carries the whole text (a coalescing server need not send what
            # was still pending as a delta): the deltas must be its beginning, nothing dropped
            # in between, doubled or out of order.
            turn.text_ok = self.expected.startswith("".join(turn.parts))
        if turn.t_last is None:
            turn.t_last = now
            self.trigger()
        if self.resend_when_idle and not self.outstanding():
            self.resend_when_idle = False
            self.trigger()

    def on_delta(self, seq: int, escaped: str, now: float) -> None:
        turn = self.by_reply.get(seq)
        if turn is None or turn.status:
            self.stats["unmatched_deltas"] += 1
            return
        self._ack(turn)
        text = html.unescape(escaped) if "&" in escaped else escaped
        if turn.t_first is None:
            turn.t_first = now
        turn.parts.append(text)
        turn.chars += len(text)
        if (
            turn.t_last is None
            and turn.chars >= len(self.expected)
            and "".join(turn.parts) == self.expected
        ):
            turn.t_last = now
            self.idle_refusals = 0
            self.trigger()

    def on_refusal(self, text: str) -> None:
        notices = self.stats["notices"]
        notices[text[:120]] = notices.get(text[:120], 0) + 1
        if not self.unacked:
            return  # a notice about something else (a compaction, say)
        turn = self.unacked.pop(0)
        turn.acked = True
        turn.status = "refused"
        self.by_reply.pop(turn.reply_seq, None)
        self.next_user_seq = turn.user_seq  # its seqs were never used
        if self.outstanding():
            self.resend_when_idle = True  # try again once the reply in the way is done
        else:
            self.idle_refusals += 1
            delay = min(1.0, 0.05 * self.idle_refusals)
            asyncio.get_running_loop().call_later(delay, lambda: asyncio.ensure_future(self.send()))


async def _loop_lag(lags: list[float], start: float, end: float) -> None:
    """How late the client's event loop wakes up: a loaded client shows up here."""
    period = 0.05
    while True:
        before = time.monotonic()
        await asyncio.sleep(period)
        after = time.monotonic()
        if start <= before < end:
            lags.append(after - before - period)


async def client_main(conf: dict) -> dict:
    stats = {
        "last_final": 0.0,  # when a reply last became final (for the drain; not reported)
        "disconnects": 0,
        "send_errors": 0,
        "unmatched_deltas": 0,
        "unmatched_user": 0,
        "seq_resyncs": 0,
        "notices": {},
    }
    chats = [Chat(index, conf, stats) for index, _, _ in conf["chats"]]
    limit = asyncio.Semaphore(25)

    async def connect(chat: Chat, conversation_id: int, key: str) -> None:
        async with limit:
            await chat.connect(conversation_id, key)

    try:
        await asyncio.gather(
            *(connect(c, cid, key) for c, (_, cid, key) in zip(chats, conf["chats"], strict=True))
        )
    except Exception as exc:
        print(json.dumps({"error": f"connect failed: {type(exc).__name__}: {exc}"}), flush=True)
        raise SystemExit(1) from None
    print("READY", flush=True)
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    t0 = float(line.split()[1])
    warm_end = t0 + conf["warmup"]
    window_end = warm_end + conf["duration"]
    lags: list[float] = []
    lag_task = asyncio.ensure_future(_loop_lag(lags, warm_end, window_end))
    spread = min(1.0, conf["warmup"] / 2)
    n = max(1, conf["total_chats"])
    tasks = [
        asyncio.ensure_future(c.run(t0 + spread * (c.index % n) / n, window_end)) for c in chats
    ]
    # Drain: after the window, wait while replies keep finishing (a slow server is not a lossy
    # one), until none has for `drain` seconds or `drain_max` has passed.
    pending = set(tasks)
    while pending:
        now = time.monotonic()
        quiet_since = max(window_end, stats["last_final"])
        if now >= window_end + conf["drain_max"] or (
            now >= window_end and now - quiet_since >= conf["drain"]
        ):
            break
        _, pending = await asyncio.wait(pending, timeout=0.2)
    drained = max(0.0, time.monotonic() - window_end)
    del stats["last_final"]
    for task in tasks:
        task.cancel()
    lag_task.cancel()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(
            asyncio.gather(*(c.ws.close() for c in chats), return_exceptions=True), timeout=5
        )
    return {
        "turns": [t.row() for c in chats for t in c.turns],
        "stats": stats,
        "lags": lags,
        "drained": drained,
    }


def run_client() -> None:
    """Internal (`--_client`): the configuration as one JSON line on stdin, then `GO <t0>`."""
    conf = json.loads(sys.stdin.readline())
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        result = runner.run(client_main(conf))
    Path(conf["result_path"]).write_text(json.dumps(result))


# --- one run -------------------------------------------------------------------------------------


def client_count(args: argparse.Namespace, chats: int) -> int:
    if args.clients == "auto":
        return 1 if chats <= 40 else 2
    return max(1, min(int(args.clients), chats))


def run_one(
    args: argparse.Namespace,
    config: Config,
    chats: int,
    provider: subprocess.Popen,
    provider_url: str,
    expected: str,
    workdir: Path,
) -> dict:
    print(f"  {config.label}, {chats} chats ...", end="", flush=True)
    sqlite_dir = None
    server = None
    clients: list[subprocess.Popen] = []
    try:
        if config.kind == "app" and config.db == "sqlite":
            sqlite_dir = Path(tempfile.mkdtemp(prefix="load-sqlite-", dir=workdir))
            database_url = f"sqlite:///{sqlite_dir}/bench.sqlite3"
        elif config.kind == "app":
            fresh_postgres(args.pg_url)
            database_url = args.pg_url
        else:
            database_url = f"sqlite:///{workdir}/relay-unused.sqlite3"  # never opened
        if config.layer == "redis":
            flush_redis(args.redis_url)
        env = server_env(config, database_url, args.redis_url, provider_url)
        if config.kind == "app":
            pairs = prepare_app(env, chats)
        else:
            pairs = [(i + 1, "") for i in range(chats)]
        port = free_port()
        server, server_err = start_server(config, env, port, workdir)

        run_id = f"{config.key}-{chats}chats-{port}"
        groups = client_count(args, chats)
        shares = [[[i, *pairs[i]] for i in range(chats) if i % groups == g] for g in range(groups)]
        for share in shares:
            proc = spawn(
                [PYTHON, str(Path(__file__).resolve()), "--_client"],
                env=base_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=(workdir / f"client-{run_id}-{len(clients)}.stderr").open("wb"),
            )
            conf = {
                "port": port,
                "chats": share,
                "total_chats": chats,
                "expected": expected,
                "warmup": args.warmup,
                "duration": args.duration,
                "drain": args.drain,
                "drain_max": args.drain_max,
                "compression": None if args.no_deflate else "deflate",
                "result_path": str(workdir / f"client-{run_id}-{len(clients)}.json"),
            }
            proc.stdin.write((json.dumps(conf) + "\n").encode())
            proc.stdin.flush()
            clients.append(proc)
        deadline = time.monotonic() + 180
        for i, proc in enumerate(clients):
            while True:
                ready, _, _ = select.select([proc.stdout], [], [], 0.5)
                if ready:
                    line = proc.stdout.readline().decode().strip()
                    if line == "READY":
                        break
                    raise BenchError(
                        f"load client {i} failed to connect: {line or '(no output)'}\n"
                        f"{tail(workdir / f'client-{run_id}-{i}.stderr')}\n"
                        f"server stderr:\n{tail(server_err)}"
                    )
                if server.poll() is not None:
                    raise BenchError(
                        f"the server exited while clients connected:\n{tail(server_err)}"
                    )
                if time.monotonic() > deadline:
                    raise BenchError("load clients did not connect in 180 s")
        probe = CpuProbe([server.pid], [c.pid for c in clients], provider.pid, service_roots())
        t0 = time.monotonic() + 0.3
        for proc in clients:
            proc.stdin.write(f"GO {t0!r}\n".encode())
            proc.stdin.flush()
        warm_end = t0 + args.warmup
        window_end = warm_end + args.duration
        _sleep_until(warm_end, server, server_err)
        before = probe.sample()
        _sleep_until(window_end, server, server_err)
        after = probe.sample()
        results = []
        for i, proc in enumerate(clients):
            remaining = window_end + args.drain_max + 60 - time.monotonic()
            try:
                proc.wait(timeout=max(1.0, remaining))
            except subprocess.TimeoutExpired:
                raise BenchError(f"load client {i} did not finish") from None
            try:
                results.append(json.loads((workdir / f"client-{run_id}-{i}.json").read_text()))
            except (OSError, ValueError):
                raise BenchError(
                    f"load client {i} gave no result (status {proc.returncode}):\n"
                    f"{tail(workdir / f'client-{run_id}-{i}.stderr')}"
                ) from None
        server_alive = server.poll() is None
    finally:
        for proc in clients:
            stop(proc, timeout=3)
        stop(server)
        if sqlite_dir is not None:
            if args.keep_db and args.logs:
                Path(args.logs).mkdir(parents=True, exist_ok=True)
                for path in sqlite_dir.iterdir():
                    shutil.copy(path, Path(args.logs) / f"{config.key}-{chats}chats-{path.name}")
            shutil.rmtree(sqlite_dir, ignore_errors=True)
        if config.kind == "app" and config.db == "postgres" and not args.keep_db:
            drop_postgres(args.pg_url)
    result = summarise(config, chats, args, results, before, after, warm_end, window_end)
    result["clients"] = len(clients)
    result["server_stderr"] = tail(server_err, 40)
    result["server_log_lines"] = log_summary(server_err)
    result["server_alive_at_end"] = server_alive
    print(
        f" {result['replies_per_s']:.1f} replies/s, first token p50 {_ms(result['ft_p50_ms'])}, "
        f"lost {result['lost']}/{result['sent']}",
        flush=True,
    )
    return result


def log_summary(path: Path) -> list[tuple[str, int]]:
    """The server's stderr without traceback frames: each distinct line and how often, most
    frequent first (exceptions and log messages, not the stack that led to them)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    skip = ("Traceback", "During handling", "The above exception")
    counts: dict[str, list] = {}  # the line with its numbers blanked -> [first such line, count]
    for line in text.splitlines():
        if not line.strip() or line[0].isspace() or line.startswith(skip):
            continue
        entry = counts.setdefault(re.sub(r"\d+", "#", line[:160]), [line[:160], 0])
        entry[1] += 1
    return sorted(((first, n) for first, n in counts.values()), key=lambda kv: -kv[1])


def _sleep_until(t: float, server: subprocess.Popen, server_err: Path) -> None:
    while True:
        left = t - time.monotonic()
        if left <= 0:
            return
        if server.poll() is not None:
            raise BenchError(f"the server exited mid-run:\n{tail(server_err)}")
        time.sleep(min(left, 0.2))


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


def summarise(
    config: Config,
    chats: int,
    args: argparse.Namespace,
    results: list[dict],
    before: dict,
    after: dict,
    w0: float,
    w1: float,
) -> dict:
    turns = [row for r in results for row in r["turns"]]
    stats: dict = {}
    for r in results:
        for k, v in r["stats"].items():
            if isinstance(v, dict):
                merged = stats.setdefault(k, {})
                for text, n in v.items():
                    merged[text] = merged.get(text, 0) + n
            else:
                stats[k] = stats.get(k, 0) + v
    lags = [lag for r in results for lag in r["lags"]]
    # chat, t_send, t_first, t_last, t_done, status, text_ok
    in_window = [t for t in turns if w0 <= t[1] < w1]
    first = [
        (t[2] if t[2] is not None else t[4]) - t[1]
        for t in in_window
        if t[2] is not None or (t[4] is not None and t[5] == "complete")
    ]
    last = [t[3] - t[1] for t in in_window if t[3] is not None and t[5] == "complete"]
    whole = [t[4] - t[1] for t in in_window if t[5] == "complete"]
    done_in_window = sum(1 for t in turns if t[5] == "complete" and w0 <= t[4] < w1)
    window = after["t"] - before["t"]
    statuses: dict[str, int] = {}
    for t in turns:
        statuses[t[5]] = statuses.get(t[5], 0) + 1
    completed = statuses.get("complete", 0)
    server_cpu = after["server"] - before["server"]
    client_cpu = [a - b for a, b in zip(after["clients"], before["clients"], strict=True)]
    return {
        "config": config.key,
        "label": config.label,
        "kind": config.kind,
        "db": config.db,
        "processes": config.processes,
        "layer": config.layer,
        "chats": chats,
        "window_s": round(window, 3),
        "drain_s": args.drain,
        "drained_s": round(max(r["drained"] for r in results), 2),
        "sent": len(turns),
        "sent_in_window": len(in_window),
        "completed": completed,
        "lost": len(turns) - completed,
        "statuses": statuses,
        "replies_in_window": done_in_window,
        "replies_per_s": done_in_window / args.duration,
        "ft_p50_ms": _ms_value(_pct(first, 50)),
        "ft_p95_ms": _ms_value(_pct(first, 95)),
        "ft_samples": len(first),
        "last_word_p50_ms": _ms_value(_pct(last, 50)),
        "turn_p50_ms": _ms_value(_pct(whole, 50)),
        "turn_p95_ms": _ms_value(_pct(whole, 95)),
        "text_mismatches": sum(1 for t in turns if t[5] == "complete" and t[6] is False),
        "server_cpu_s": server_cpu,
        "server_cpu_ms_per_reply": server_cpu * 1000 / done_in_window if done_in_window else None,
        "server_cpu_share": server_cpu / window,
        "client_cpu_share": [c / window for c in client_cpu],
        "provider_cpu_share": (after["provider"] - before["provider"]) / window,
        "services_cpu_share": (after["services"] - before["services"]) / window,
        # Everything else the machine did meanwhile (other users of a shared machine, the kernel's
        # own work): high values mean the run competed for the cores.
        "other_cpu_share": max(
            0.0,
            (after["machine"] - before["machine"])
            - server_cpu
            - sum(client_cpu)
            - (after["provider"] - before["provider"])
            - (after["services"] - before["services"]),
        )
        / window,
        "services_cpu_ms_per_reply": (after["services"] - before["services"])
        * 1000
        / done_in_window
        if done_in_window
        else None,
        "client_loop_lag_p99_ms": _ms_value(_pct(lags, 99)),
        "client_stats": stats,
    }


def _ms_value(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} ms"


# --- report --------------------------------------------------------------------------------------


def compare(results: list[dict]) -> None:
    """Add the baseline columns: added latency and replies/s ratio against the relay with the
    same processes and chats (the 1-process relay if that one was not run), and for 2 processes
    the ratio against 1 process of the same database."""
    by = {(r["config"], r["chats"], r["round"]): r for r in results}
    for r in results:
        if r["kind"] != "app":
            continue
        n = r["round"]
        relay = by.get((f"relay-{r['processes']}p", r["chats"], n)) or by.get(
            ("relay-1p", r["chats"], n)
        )
        if relay:
            r["baseline"] = relay["config"]
            r["added_p50_ms"] = _diff(r["ft_p50_ms"], relay["ft_p50_ms"])
            r["added_p95_ms"] = _diff(r["ft_p95_ms"], relay["ft_p95_ms"])
            r["x_relay"] = (
                r["replies_per_s"] / relay["replies_per_s"] if relay["replies_per_s"] else None
            )
        if r["processes"] > 1:
            one = by.get((f"{r['db']}-1p", r["chats"], n))
            if one:
                r["x_one_process"] = (
                    r["replies_per_s"] / one["replies_per_s"] if one["replies_per_s"] else None
                )


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 2)


def _num(value, fmt: str, suffix: str = "") -> str:
    return "—" if value is None else format(value, fmt) + suffix


def _lost(row: dict) -> str:
    return f"{row['lost']}/{row['sent']}"


def table(results: list[dict]) -> str:
    head = (
        f"{'configuration':<34} {'chats':>5} {'ft p50':>8} {'ft p95':>8} {'+p50':>8} "
        f"{'+p95':>8} {'rep/s':>7} {'xrelay':>6} {'x1proc':>6} {'lost/sent':>11} "
        f"{'srv ms/rep':>10} {'srv CPU':>7} {'db CPU':>6} {'client CPU':>10} {'prov CPU':>8} "
        f"{'other':>5}"
    )
    lines = [head, "-" * len(head)]
    several = len({r["round"] for r in results}) > 1
    for r in results:
        clients = "+".join(f"{c:.0%}" for c in r["client_cpu_share"])
        name = f"{r['label']}, #{r['round']}" if several else r["label"]
        lines.append(
            f"{name:<34} {r['chats']:>5} {_num(r['ft_p50_ms'], '.1f'):>8} "
            f"{_num(r['ft_p95_ms'], '.1f'):>8} {_num(r.get('added_p50_ms'), '+.1f'):>8} "
            f"{_num(r.get('added_p95_ms'), '+.1f'):>8} {r['replies_per_s']:>7.1f} "
            f"{_num(r.get('x_relay'), '.2f'):>6} {_num(r.get('x_one_process'), '.2f'):>6} "
            f"{_lost(r):>11} "
            f"{_num(r['server_cpu_ms_per_reply'], '.2f'):>10} {r['server_cpu_share']:>7.0%} "
            f"{r['services_cpu_share']:>6.0%} {clients:>10} {r['provider_cpu_share']:>8.0%} "
            f"{r['other_cpu_share']:>5.0%}"
        )
    return "\n".join(lines)


# The figures the targets are judged on; with several rounds, their medians.
JUDGED = ("added_p50_ms", "added_p95_ms", "x_relay", "x_one_process")


def medians(results: list[dict]) -> list[dict]:
    """One row per app configuration and chat count: the median of each judged figure over the
    rounds (each round's against the relay of that round), lost and sent summed, and the rounds
    themselves under `rounds`."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        if r["kind"] == "app":
            groups.setdefault((r["config"], r["chats"]), []).append(r)
    out = []
    for rows in groups.values():
        row = {k: rows[0][k] for k in ("config", "label", "kind", "db", "processes", "chats")}
        for key in JUDGED:
            values = [r[key] for r in rows if r.get(key) is not None]
            row[key] = statistics.median(values) if values else None
        row["lost"] = sum(r["lost"] for r in rows)
        row["sent"] = sum(r["sent"] for r in rows)
        row["rounds"] = rows
        out.append(row)
    return out


def medians_table(rows: list[dict]) -> str:
    head = (
        f"{'configuration':<34} {'chats':>5} {'+p50':>8} {'+p95':>8} {'xrelay':>6} "
        f"{'x1proc':>6} {'lost/sent':>11}  each round: +p50 ms / xrelay"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        each = ", ".join(
            f"{_num(x.get('added_p50_ms'), '+.1f')}/{_num(x.get('x_relay'), '.2f')}"
            for x in r["rounds"]
        )
        lines.append(
            f"{r['label']:<34} {r['chats']:>5} {_num(r['added_p50_ms'], '+.1f'):>8} "
            f"{_num(r['added_p95_ms'], '+.1f'):>8} {_num(r['x_relay'], '.2f'):>6} "
            f"{_num(r['x_one_process'], '.2f'):>6} {_lost(r):>11}"
            f"  {each}"
        )
    return "\n".join(lines)


def verdicts(results: list[dict]) -> list[str]:
    """A line per target. Given `medians()` rows, each judges the median and says in how many
    rounds the target held on its own."""
    out = []

    def line(row: dict, holds, text: str) -> None:
        ok = holds(row)
        mark = "n/a " if ok is None else ("PASS" if ok else "FAIL")
        rounds = row.get("rounds")
        if rounds and ok is not None:
            met = sum(bool(holds(x)) for x in rounds)
            text += f"; median of {len(rounds)} rounds, met in {met}"
        out.append(f"  [{mark}] {text}")

    def at_most(key: str, limit: float):
        return lambda row: None if row.get(key) is None else row[key] <= limit

    def at_least(key: str, limit: float):
        return lambda row: None if row.get(key) is None else row[key] >= limit

    for r in results:
        if r["kind"] != "app":
            continue
        name = f"{r['chats']} chats, {r['label']}"
        if r["processes"] == 1:
            limit = ADDED_P50_MAX_MS.get(r["chats"])
            if limit is not None:
                line(
                    r,
                    at_most("added_p50_ms", limit),
                    f"{name}: first-token p50 added {_num(r.get('added_p50_ms'), '+.1f', ' ms')} "
                    f"over the relay (target <= {limit:g} ms)",
                )
            ratio_min = RELAY_RATIO_MIN.get(r["chats"])
            if ratio_min is not None:
                line(
                    r,
                    at_least("x_relay", ratio_min),
                    f"{name}: replies/s {_num(r.get('x_relay'), '.2f', 'x')} the relay "
                    f"(target >= {ratio_min:g}x)",
                )
        else:
            ratio_min = TWO_PROCESS_RATIO_MIN.get(r["chats"])
            if ratio_min is not None:
                line(
                    r,
                    at_least("x_one_process", ratio_min),
                    f"{name}: replies/s {_num(r.get('x_one_process'), '.2f', 'x')} one process "
                    f"on the same database and layer (target >= {ratio_min:g}x)",
                )
        if r["chats"] in ZERO_LOST_AT:
            line(
                r,
                lambda row: row["lost"] == 0,
                f"{name}: {r['lost']} of {r['sent']} messages lost (target 0)",
            )
    return out


def warnings_for(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        name = f"{r['label']}, {r['chats']} chats"
        busy = [c for c in r["client_cpu_share"] if c >= SATURATED]
        if busy:
            out.append(
                f"  {name}: a load client used {max(busy):.0%} of a core; it may have been the "
                "bottleneck (try --clients 2)"
            )
        lag = r["client_loop_lag_p99_ms"]
        if lag is not None and lag > 20:
            out.append(f"  {name}: the client event loop ran {lag:.0f} ms late (p99)")
        if r["other_cpu_share"] >= 0.25:
            out.append(
                f"  {name}: the rest of the machine used {r['other_cpu_share']:.0%} of a core "
                "meanwhile (a shared machine): trust the ratios more than the absolute figures"
            )
        if r["provider_cpu_share"] >= SATURATED:
            out.append(
                f"  {name}: the fake provider used {r['provider_cpu_share']:.0%} of a core; it "
                "may have been the bottleneck"
            )
        if r["lost"]:
            kinds = ", ".join(
                f"{n} {status}"
                for status, n in sorted(r["statuses"].items())
                if status != "complete"
            )
            why = ""
            if "unfinished" in r["statuses"]:
                why = f" (unfinished: no final fragment after a {r['drained_s']:.1f} s drain)"
            out.append(f"  {name}: lost {r['lost']} = {kinds}{why}")
        if r["text_mismatches"]:
            out.append(
                f"  {name}: {r['text_mismatches']} completed replies whose streamed deltas were "
                "not the beginning of the provider's text (deltas lost, doubled or reordered)"
            )
        if not r["server_alive_at_end"]:
            out.append(f"  {name}: the server was not running at the end of the run")
        s = r["client_stats"]
        odd = {k: v for k, v in s.items() if k != "notices" and v}
        if odd:
            out.append(f"  {name}: client saw {odd}")
        for text, n in sorted(s.get("notices", {}).items(), key=lambda kv: -kv[1])[:3]:
            out.append(f"  {name}: notice x{n}: {text}")
        for text, n in r["server_log_lines"][:4]:
            out.append(f"  {name}: server stderr x{n}: {text}")
    return out


def report(
    results: list[dict],
    median_rows: list[dict],
    judged: list[dict],
    args: argparse.Namespace,
    expected: str,
) -> None:
    """Every run's row, then the medians over the rounds (if any), then the targets, judged on
    `judged` (the medians, or each run)."""
    print()
    print(
        f"Window {args.duration:g} s after {args.warmup:g} s warm-up; replies of "
        f"{len(expected.split())} words ({len(expected)} chars), {pace(args)}; "
        f"{os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.2f}."
    )
    print(
        "ft = first token (send -> first text delta), ms; +p50/+p95 = ours minus the relay; "
        "xrelay = replies/s over the relay's; x1proc = 2 processes over 1 process; CPU columns "
        "are shares of one core over the window (db = PostgreSQL + Redis; other = the rest of "
        "the machine: other users, the kernel)."
    )
    print()
    print(table(results))
    if median_rows:
        print(f"\nMedians over {args.rounds} rounds (each round's app run against its relay):\n")
        print(medians_table(median_rows))
    lines = verdicts(judged)
    if lines:
        print("\nTargets:")
        print("\n".join(lines))
    notes = warnings_for(results)
    if notes:
        print("\nNotes:")
        print("\n".join(notes))


def pace(args: argparse.Namespace) -> str:
    if not args.stream_seconds:
        return "at once"
    gap = args.stream_seconds * 1000 / max(1, args.words - 1)
    return f"streamed over {args.stream_seconds:g} s (deltas {gap:.3g} ms apart)"


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    global RELAY_WITHOUT_HISTORY
    args = parse_args(argv)
    RELAY_WITHOUT_HISTORY = args.relay_without_history
    if args._setup is not None:
        setup_chats(args._setup)
        return 0
    if args._client:
        run_client()
        return 0
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    expected = expected_reply(args.words)
    configs = configs_for(args)
    if not configs:
        print("Nothing to run: check --db, --processes and --no-relay.", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="bench-load-"))
    results: list[dict] = []
    failures: list[str] = []
    status = 0
    started = time.time()
    try:
        provider, provider_url = start_provider(args.words, args.stream_seconds, workdir)
        print(f"Fake provider at {provider_url}, {args.words} words per reply, {pace(args)}.")
        for chats in args.chats:
            print(f"{chats} chats:")
            for round_ in range(1, args.rounds + 1):
                if args.rounds > 1:
                    print(f" round {round_} of {args.rounds}:")
                # Every other round in reverse (relay, app | app, relay | ...): a drift of the
                # machine's speed over the rounds then favours neither side.
                for config in configs if round_ % 2 else configs[::-1]:
                    if provider.poll() is not None:
                        raise BenchError(
                            f"the fake provider died:\n{tail(workdir / 'provider.stderr')}"
                        )
                    try:
                        result = run_one(
                            args, config, chats, provider, provider_url, expected, workdir
                        )
                    except BenchError as exc:  # this configuration failed: go on
                        print(" FAILED", flush=True)
                        print(f"{config.label}, {chats} chats FAILED: {exc}", file=sys.stderr)
                        failures.append(f"{config.label}, {chats} chats, round {round_}")
                        status = 1
                    else:
                        results.append({**result, "round": round_})
    except BenchError as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        print("\nInterrupted: stopping the servers and clients.", file=sys.stderr)
        status = 130
    finally:
        stop_all()
        if args.logs:
            logs = Path(args.logs)
            logs.mkdir(parents=True, exist_ok=True)
            for path in [*workdir.glob("*.stderr"), *workdir.glob("client-*.json")]:
                shutil.copy(path, logs / path.name)
        shutil.rmtree(workdir, ignore_errors=True)
    compare(results)
    # With several rounds the targets are judged on the medians (none with --relay-only).
    median_rows = medians(results) if args.rounds > 1 else []
    judged = median_rows or results
    if results:
        report(results, median_rows, judged, args, expected)
    if failures:
        print(f"\nFailed runs: {'; '.join(failures)}")
    if results:
        if args.json:
            payload = {
                "started": started,
                "machine": {
                    "cores": os.cpu_count(),
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                },
                "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
                "expected_reply": expected,
                "results": results,
                "medians": [{k: v for k, v in row.items() if k != "rounds"} for row in median_rows],
                "targets": verdicts(judged),
                "failed": failures,
            }
            Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
            print(f"\nWrote {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
