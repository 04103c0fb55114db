"""Import bench: what a big import costs the server, and what it costs everyone else.

Run by hand (`.venv/bin/python bench/imports.py`, `--help` for the flags); not a test.

One server process as `make run` starts it (uvicorn, DJANGO_DEBUG=true, a SQLite file of its own,
the demo model), two users made in its database. It measures:

(a) memory: the server's resident set (VmRSS, sampled every 10 ms from /proc) during the import
    of a valid file of --mb megabytes, minus its resident set when idle (after a page and a small
    import have warmed it up); once for this app's export.json (one conversation of many
    messages), once for ChatGPT's conversations.json (1,000 conversations) and once for one
    ChatGPT conversation of --tree-nodes nodes (a regenerated reply every 20), with the resident
    set left once it has ended;
(b) the others' wait: during an import of --messages messages (one conversation, this app's
    export) by one user, another user loads their conversation's page every 0.2 s and sends a
    message on its websocket every 0.5 s; the longest and median time a page took, and a send
    took to come back as the user's own message (written, then broadcast), and how long the
    import took. Both are timed from the other user's side, over real HTTP and websockets.

Targets: (a) under 300 MB over idle; (b) under 1 s for the longest page and send.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout, not bench/

from bench.harness import processes, services  # noqa: E402
from bench.harness.processes import HOST, BenchError  # noqa: E402

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
DAPHNE = str(Path(processes.PYTHON).with_name("daphne"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--mb", type=float, default=49, help="(a)'s file size in MB (default 49)")
    p.add_argument(
        "--messages", type=int, default=1_000_000, help="(b)'s messages (default 1,000,000)"
    )
    p.add_argument(
        "--server",
        choices=["daphne", "uvicorn"],
        default="uvicorn",
        help="(default: uvicorn, as make run; daphne holds the whole upload in memory)",
    )
    p.add_argument(
        "--tree-nodes", type=int, default=200_000, help="(a)'s one tree (default 200,000 nodes)"
    )
    p.add_argument("--skip-memory", action="store_true", help="leave out (a)")
    p.add_argument("--skip-wait", action="store_true", help="leave out (b)")
    return p.parse_args(argv)


# --- files ---------------------------------------------------------------------------------------


def own_export(path: Path, *, messages: int | None = None, size: int | None = None) -> int:
    """This app's export.json: one conversation of `messages` short messages, or of messages of
    about 400 characters up to `size` bytes. Written as it is made; its message count."""
    words = "the quick brown fox jumps over the lazy dog and keeps on running " * 6
    n = 0
    with path.open("w") as f:
        f.write('{"title": "Bench import", "messages": [')
        while (messages is not None and n < messages) or (size is not None and f.tell() < size):
            text = f"m{n}" if messages is not None else f"m{n} {words}"
            role = "user" if n % 2 == 0 else "assistant"
            f.write(("," if n else "") + json.dumps({"role": role, "content": text}))
            n += 1
        f.write("]}")
    return n


def chatgpt_export(path: Path, size: int, conversations: int = 1000) -> int:
    """ChatGPT's conversations.json: `conversations` chains of messages, `size` bytes in all."""
    each = size // conversations
    words = "the quick brown fox jumps over the lazy dog and keeps on running " * 20
    with path.open("w") as f:
        f.write("[")
        for c in range(conversations):
            mapping, parent, start = {}, None, f.tell()
            i = 0
            while f.tell() - start + len(json.dumps(mapping)) < each:
                node = f"c{c}n{i}"
                role = "user" if i % 2 == 0 else "assistant"
                mapping[node] = {
                    "id": node,
                    "parent": parent,
                    "children": [],
                    "message": {"author": {"role": role}, "content": {"parts": [words]}},
                }
                if parent:
                    mapping[parent]["children"].append(node)
                parent, i = node, i + 1
            doc = {"title": f"Chat {c}", "mapping": mapping, "current_node": parent}
            f.write(("," if c else "") + json.dumps(doc))
        f.write("]")
    return conversations


def chatgpt_tree(path: Path, nodes: int) -> int:
    """ChatGPT's conversations.json holding one conversation of `nodes` nodes: a chain of short
    messages with a regenerated reply every 20 (about 210 bytes a node, as a real file)."""
    mapping = {"n0": {"id": "n0", "parent": None, "children": [], "message": None}}
    for i in range(1, nodes):
        parent = f"n{i - 2 if i % 20 == 0 else i - 1}"
        role = "user" if i % 2 else "assistant"
        mapping[f"n{i}"] = {
            "id": f"n{i}",
            "parent": parent,
            "children": [],
            "message": {
                "author": {"role": role},
                "create_time": 1.7e9 + i,
                "content": {"content_type": "text", "parts": [f"message {i} of a long chat"]},
            },
        }
        mapping[parent]["children"].append(f"n{i}")
    doc = {"title": "One long chat", "mapping": mapping, "current_node": f"n{nodes - 1}"}
    path.write_text(json.dumps([doc]))
    return nodes


# --- the server ----------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmRSS for {pid}")


class Peak(threading.Thread):
    """The largest resident set of a process, sampled every 10 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.01)

    def stop(self) -> float:
        self.done.set()
        self.join()
        return self.peak


def import_file(
    base: str, session: str, path: Path, pid: int, url: str = "/conversations/import/"
) -> tuple[int, float, str, float]:
    """POST the file as the sidebar's form does, sampling the server's memory meanwhile (from
    after the form's page: a page holding a big conversation costs memory of its own); (status,
    seconds, the refusal if any, the peak resident set in MB)."""
    import httpx2 as httpx  # the HTTP client the anthropic SDK installs

    with httpx.Client(base_url=base, cookies={"sessionid": session}, timeout=3600) as client:
        token = TOKEN.search(client.get("/search/").text).group(1)
        peak = Peak(pid)
        peak.start()
        started = time.monotonic()
        with path.open("rb") as f:
            answer = client.post(
                url,
                data={"csrfmiddlewaretoken": token},
                files={"file": (path.name, f, "application/json")},
            )
        took = time.monotonic() - started
        top = peak.stop()
        reason = re.search(r"Nothing was imported: ([^<]+)", answer.text)
        return answer.status_code, took, reason.group(1) if reason else "", top


async def others(base: str, session: str, conversation: int, stop: threading.Event) -> dict:
    """Another user, while `stop` is not set: their page every 0.2 s, a send every 0.5 s."""
    import httpx2 as httpx
    from websockets.asyncio.client import connect

    pages, sends = [], []
    ws_url = base.replace("http://", "ws://") + f"/ws/conversations/{conversation}/"
    headers = {"Cookie": f"sessionid={session}", "Origin": base}
    async with (
        httpx.AsyncClient(base_url=base, cookies={"sessionid": session}, timeout=120) as client,
        connect(ws_url, additional_headers=headers, max_size=None) as ws,
    ):

        async def load_pages() -> None:
            while not stop.is_set():
                started = time.monotonic()
                answer = await client.get(f"/conversations/{conversation}/")
                if answer.status_code != 200:
                    raise BenchError(f"the other user's page answered {answer.status_code}")
                pages.append((started, time.monotonic() - started))
                await asyncio.sleep(0.2)

        async def send() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                mark = f"ping{n}x"
                started = time.monotonic()
                await ws.send(json.dumps({"action": "send", "message": mark}))
                while mark not in await asyncio.wait_for(ws.recv(), 120):
                    pass
                sends.append((started, time.monotonic() - started))
                await asyncio.sleep(0.5)

        await asyncio.gather(load_pages(), send())
    return {"pages": pages, "sends": sends}


def figures(timed: list[tuple[float, float]], start: float, end: float, origin: float) -> str:
    """Longest, 99th percentile and median of the waits that began during [start, end], and
    when the three longest began (seconds after `origin`, the import's start)."""
    during = sorted((d, t - origin) for t, d in timed if start <= t <= end)
    if not during:
        return "none"
    waits = [d for d, _ in during]
    p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    worst = ", ".join(f"{d * 1000:.0f} ms at {at:.1f} s" for d, at in reversed(during[-3:]))
    return (
        f"longest {waits[-1] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, median "
        f"{statistics.median(waits) * 1000:.0f} ms of {len(waits)} (worst: {worst})"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    processes.stop_on_signals()
    workdir = Path(tempfile.mkdtemp(prefix="bench-imports-"))
    directory, url = services.temporary_sqlite(workdir)
    env = processes.base_env() | {
        "DATABASE_URL": url,
        "DJANGO_DEBUG": "true",  # as `make run`
        "LLM_PROVIDER": "demo",
        "DEMO_WORD_DELAY_MS": "0",
        "IMPORTS_PER_HOUR": "1000",
        "LOG_LEVEL": "WARNING",
    }
    port = processes.free_port()
    base = f"http://{HOST}:{port}"
    stderr = workdir / "server.err"
    try:
        services.migrate(env)
        made = services.make_accounts(
            env, users=2, conversations=2, model="demo", system_prompt="", prefix="bench"
        )
        alice, bob = (u["session"] for u in made["users"])
        bobs = next(c["id"] for c in made["conversations"] if c["owner"] == 1)
        cmd = [DAPHNE, "-b", HOST, "-p", str(port), "config.asgi:application"]
        if args.server == "uvicorn":
            cmd = processes.uvicorn("config.asgi:application", port, lifespan="on")
        server = processes.start_server(cmd, port, env, stderr)
        small = workdir / "small.json"
        own_export(small, messages=10)
        status, _, reason, _ = import_file(base, alice, small, server.pid)
        if status != 302:
            raise BenchError(f"a small import answered {status}: {reason}")
        print(
            f"server: {args.server}, SQLite, DEBUG on; idle after warm-up "
            f"{rss_mb(server.pid):.0f} MB"
        )
        if not args.skip_memory:
            for name, unit, make in (
                ("export.json", "messages", lambda p: own_export(p, size=int(args.mb * 1e6))),
                (
                    "conversations.json",
                    "conversations",
                    lambda p: chatgpt_export(p, int(args.mb * 1e6)),
                ),
                ("tree.json", "nodes in one tree", lambda p: chatgpt_tree(p, args.tree_nodes)),
            ):
                path = workdir / name
                count = make(path)
                idle = rss_mb(server.pid)
                status, took, reason, top = import_file(base, alice, path, server.pid)
                if status != 302:
                    raise BenchError(f"the {name} import answered {status}: {reason}")
                time.sleep(1)
                print(
                    f"(a) {name} {path.stat().st_size / 1e6:.1f} MB ({count:,} {unit}): imported "
                    f"in {took:.1f} s; peak RSS {top:.0f} MB, idle {idle:.0f} MB: "
                    f"+{top - idle:.0f} MB (target < 300; one tree < 100), "
                    f"+{rss_mb(server.pid) - idle:.0f} MB after"
                )
                if name == "conversations.json":
                    # The server's own share: the same upload to a URL that does not exist
                    # (the body is received, then a 404, no import).
                    idle = rss_mb(server.pid)
                    status, _, _, top = import_file(
                        base, alice, path, server.pid, url="/no-such-page/"
                    )
                    print(
                        f"    the same upload to a missing page ({status}): peak RSS {top:.0f} "
                        f"MB, idle {idle:.0f} MB: +{top - idle:.0f} MB (the server's buffering)"
                    )
                path.unlink()
        if not args.skip_wait:
            path = workdir / "million.json"
            count = own_export(path, messages=args.messages)
            stop = threading.Event()
            result: dict = {}

            def other_user() -> None:
                result.update(asyncio.run(others(base, bob, bobs, stop)))

            watcher = threading.Thread(target=other_user)
            watcher.start()
            time.sleep(2)  # the other user's first loads and sends, before the import
            began = time.monotonic()
            try:
                status, took, reason, _ = import_file(base, alice, path, server.pid)
            finally:
                ended = time.monotonic()
                time.sleep(3)  # and after it, for comparison
                stop.set()
                watcher.join()
            if status != 302:
                raise BenchError(f"the {count:,}-message import answered {status}: {reason}")
            print(
                f"(b) {count:,} messages ({path.stat().st_size / 1e6:.1f} MB) imported in "
                f"{took:.1f} s; meanwhile the other user's page: "
                f"{figures(result['pages'], began, ended, began)}; their send, back as their "
                f"message: {figures(result['sends'], began, ended, began)} (target < 1 s)"
            )
            after = ended + 3
            print(
                f"    before it, the page: {figures(result['pages'], 0, began, began)}; the send: "
                f"{figures(result['sends'], 0, began, began)}\n    after it, the page: "
                f"{figures(result['pages'], ended, after, began)}; the send: "
                f"{figures(result['sends'], ended, after, began)}"
            )
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        print(processes.tail(stderr), file=sys.stderr)
        return 2
    finally:
        processes.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
