"""The load client: a process of websocket chats, each one user on one conversation, sending the
next message the moment the last word of the reply is in (no think time).

The bench starts it (`python -m bench.harness.client`), writes its configuration as one JSON
line on stdin and waits for `READY` (every socket connected); then `GO <t0>` starts the chats,
spread over the first second of the warm-up. After the measured window it waits for the replies
still out while they keep finishing (`drain`, at most `drain_max`), and writes every message's
timings to `result_path`.

Its CPU is not the server's and not the bench's: that is why it is a process of its own (asyncio
on uvloop, the `websockets` client, permessage-deflate as browsers negotiate it).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.processes import HOST, PYTHON, BenchError, base_env, spawn, tail

FINAL_STATUSES = {"complete", "error", "interrupted", "cancelled"}

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
    """In the client process: the configuration as one JSON line on stdin, then `GO <t0>`."""
    conf = json.loads(sys.stdin.readline())
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        result = runner.run(client_main(conf))
    Path(conf["result_path"]).write_text(json.dumps(result))


# --- the bench's side ---------------------------------------------------------------------------


def files(base: Path, i: int) -> tuple[Path, Path]:
    """Client i's stderr and result files: `<base>-<i>.stderr` and `<base>-<i>.json`."""
    return Path(f"{base}-{i}.stderr"), Path(f"{base}-{i}.json")


def start_all(base: Path, pairs: list, processes: int, conf: dict) -> list[subprocess.Popen]:
    """Load clients sharing out the chats (`pairs`: a conversation and a session key each) in
    turn, each with `conf` (port, expected, warmup, duration, drain, drain_max, compression)."""
    clients = []
    for g in range(processes):
        share = [[i, *pairs[i]] for i in range(len(pairs)) if i % processes == g]
        stderr, result = files(base, g)
        proc = spawn(
            [PYTHON, "-m", "bench.harness.client"],
            env=base_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr.open("wb"),
        )
        mine = {**conf, "chats": share, "total_chats": len(pairs), "result_path": str(result)}
        proc.stdin.write((json.dumps(mine) + "\n").encode())
        proc.stdin.flush()
        clients.append(proc)
    return clients


def wait_ready(
    clients: list[subprocess.Popen],
    base: Path,
    server: subprocess.Popen,
    server_err: Path,
    timeout: float = 180,
) -> None:
    """Until every client has connected all its chats."""
    deadline = time.monotonic() + timeout
    for i, proc in enumerate(clients):
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline().decode().strip()
                if line == "READY":
                    break
                raise BenchError(
                    f"load client {i} failed to connect: {line or '(no output)'}\n"
                    f"{tail(files(base, i)[0])}\n"
                    f"server stderr:\n{tail(server_err)}"
                )
            if server.poll() is not None:
                raise BenchError(f"the server exited while clients connected:\n{tail(server_err)}")
            if time.monotonic() > deadline:
                raise BenchError(f"load clients did not connect in {timeout:g} s")


def go(clients: list[subprocess.Popen], t0: float) -> None:
    """Start every client's chats at monotonic time `t0` (the same clock in every process)."""
    for proc in clients:
        proc.stdin.write(f"GO {t0!r}\n".encode())
        proc.stdin.flush()


def collect(clients: list[subprocess.Popen], base: Path, deadline: float) -> list[dict]:
    """Every client's result, once it has finished (by monotonic time `deadline`)."""
    results = []
    for i, proc in enumerate(clients):
        stderr, result = files(base, i)
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise BenchError(f"load client {i} did not finish") from None
        try:
            results.append(json.loads(result.read_text()))
        except (OSError, ValueError):
            raise BenchError(
                f"load client {i} gave no result (status {proc.returncode}):\n{tail(stderr)}"
            ) from None
    return results


if __name__ == "__main__":
    run_client()
