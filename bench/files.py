"""Files bench: what a big file costs from its upload to the reply, and what files do to the
window of a long conversation.

Run by hand (`make bench-files`, or `.venv/bin/python bench/files.py --help`); not a test.

A real server process (uvicorn, a SQLite file and an attachments folder of its own) answered by
the fake Anthropic server in its own process, over HTTP with the real SDK. It measures:

(a) upload to sent: the time from the start of the upload's POST to the reply complete on the
    websocket (the `send` frame carrying the upload's id goes as soon as the POST answers), and
    the server's peak resident set (VmRSS from /proc, sampled every 10 ms) over its resident set
    just before; for a 10 MB PDF (pages of noise, JPEG-encoded by Pillow) and a 20 MB image (a
    photo-like PNG: a gradient under noise, which no encoder shrinks much). Printed as ratios
    against a reference measured in the same run, the same flow with a small text file (the
    bare relay of a message with a file);
(b) window tokens over --turns turns, one in five with a screenshot (1,280 x 800 px: 1,366
    tokens each), as the server counted each reply's window: once on a budget too big to compact
    (the files stay, every one, in every request), once on --budget at the default threshold.
    Its provider is the fake server in this process, reporting the usage the API would: text
    at 4 characters a token, an image by its pixels (width x height / 750, at most 1,600), as
    Anthropic's vision guide counts it (the fake server's own count is by characters, which
    would count an image's base64); the app corrects its estimate by it, as with the API.

Each part starts its own server; (b)'s two runs each a conversation of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
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
from bench.harness.charts import sparkline  # noqa: E402
from bench.harness.processes import HOST, BenchError  # noqa: E402

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
MODEL = "claude-sonnet-4-5"
WORDS = " ".join(f"word{i}" for i in range(60))  # a user message of about 150 tokens


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--turns", type=int, default=50, help="(b)'s turns (default 50)")
    p.add_argument("--screenshots", type=int, default=10, help="(b)'s screenshots (default 10)")
    p.add_argument("--budget", type=int, default=20_000, help="(b)'s budget (default 20000)")
    p.add_argument("--skip-upload", action="store_true", help="leave out (a)")
    p.add_argument("--skip-window", action="store_true", help="leave out (b)")
    return p.parse_args(argv)


# --- files ---------------------------------------------------------------------------------------


def photo(megabytes: float) -> bytes:
    """A photo-like PNG of about `megabytes`: a gradient under gaussian noise, in colour."""
    from PIL import Image, ImageChops

    side = int((megabytes * 1e6 / 2.74) ** 0.5)  # what this noise costs a pixel in a PNG
    gradient = Image.linear_gradient("L").resize((side, side))
    channels = [
        ImageChops.add(gradient.rotate(angle), Image.effect_noise((side, side), 60), 1.0, -64)
        for angle in (0, 90, 180)
    ]
    out = io.BytesIO()
    Image.merge("RGB", channels).save(out, "PNG")
    return out.getvalue()


def scanned_pdf(megabytes: float) -> bytes:
    """A PDF of about `megabytes`: pages of noise, as a scan is, each a JPEG (Pillow's PDF)."""
    from PIL import Image

    pages, page_bytes = [], 0
    while page_bytes * len(pages) < megabytes * 1e6:
        noise = Image.effect_noise((1240, 1754), 80).convert("RGB")
        pages.append(noise)
        if len(pages) == 1:
            probe = io.BytesIO()
            noise.save(probe, "JPEG", quality=90)
            page_bytes = len(probe.getvalue())
    out = io.BytesIO()
    pages[0].save(out, "PDF", save_all=True, append_images=pages[1:], quality=90)
    return out.getvalue()


def screenshot(n: int) -> bytes:
    """A screenshot-like PNG of 1,280 x 800 px: flat colours, a few bars, numbered."""
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (1280, 800), (245, 245, 245))
    draw = ImageDraw.Draw(picture)
    for row in range(0, 800, 40):
        draw.rectangle((40, row + 8, 40 + (row * 7 + n * 97) % 1100, row + 28), fill=(60, 90, 160))
    draw.text((40, 10), f"screenshot {n}", fill=(0, 0, 0))
    out = io.BytesIO()
    picture.save(out, "PNG")
    return out.getvalue()


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


class Running:
    """A server on its own database and folder, answered by the fake provider, with one user
    and `conversations` conversations of theirs."""

    def __init__(self, workdir: Path, provider_url: str, conversations: int, **env: str) -> None:
        directory, url = services.temporary_sqlite(workdir)
        self.env = processes.base_env() | {
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": "bench-files-not-a-secret",
            "DJANGO_ALLOWED_HOSTS": HOST,
            "SECURE_COOKIES": "false",
            "DATABASE_URL": url,
            "ATTACHMENTS_ROOT": str(directory / "attachments"),
            "LLM_PROVIDER": "anthropic",
            "ANTHROPIC_BASE_URL": provider_url,
            "ANTHROPIC_API_KEY": "bench",
            "CHAT_MODEL": MODEL,
            "EMBEDDINGS": "none",
            "LOG_LEVEL": "WARNING",
            **env,
        }
        services.migrate(self.env)
        made = services.make_accounts(
            self.env,
            users=1,
            conversations=conversations,
            model=MODEL,
            system_prompt="Be brief.",
            prefix="files",
        )
        self.session = made["users"][0]["session"]
        self.conversations = [c["id"] for c in made["conversations"]]
        self.port = processes.free_port()
        self.base = f"http://{HOST}:{self.port}"
        self.stderr = workdir / f"server-{self.port}.err"
        cmd = processes.uvicorn("config.asgi:application", self.port, lifespan="on")
        self.proc = processes.start_server(cmd, self.port, self.env, self.stderr)

    def stop(self) -> None:
        processes.stop(self.proc)


class Chat:
    """One conversation's websocket and HTTP client, logged in."""

    def __init__(self, server: Running, conversation: int) -> None:
        self.server, self.conversation, self.seq = server, conversation, 0

    async def __aenter__(self) -> Chat:
        import httpx2 as httpx  # the HTTP client the anthropic SDK installs
        from websockets.asyncio.client import connect

        base = self.server.base
        self.http = httpx.AsyncClient(
            base_url=base, cookies={"sessionid": self.server.session}, timeout=600
        )
        page = await self.http.get("/", follow_redirects=True)
        self.http.headers["X-CSRFToken"] = TOKEN.search(page.text).group(1)
        url = base.replace("http://", "ws://") + f"/ws/conversations/{self.conversation}/"
        headers = {"Cookie": f"sessionid={self.server.session}", "Origin": base}
        self.ws = await connect(url, additional_headers=headers, max_size=None)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.ws.close()
        await self.http.aclose()

    async def upload(self, name: str, data: bytes, media_type: str) -> int:
        answer = await self.http.post(
            f"/conversations/{self.conversation}/attachments/",
            files={"file": (name, data, media_type)},
        )
        if answer.status_code != 201:
            raise BenchError(f"the upload of {name} answered {answer.status_code}: {answer.text}")
        return answer.json()["id"]

    async def send(self, message: str, attachments: list[int]) -> None:
        """Send, and wait for the reply complete (the user's message and its reply: 2 seqs)."""
        self.seq += 2
        done = re.compile(rf'<article id="msg-{self.seq}"[^>]*data-status="(complete|error)"')
        frame = {"action": "send", "message": message, "attachments": attachments}
        await self.ws.send(json.dumps(frame))
        while True:
            found = done.search(await asyncio.wait_for(self.ws.recv(), 600))
            if found:
                if found.group(1) != "complete":
                    raise BenchError(f"reply {self.seq} ended in an error")
                return

    async def export(self) -> dict:
        answer = await self.http.get(f"/conversations/{self.conversation}/export.json")
        return answer.json()


# --- (a) upload to sent --------------------------------------------------------------------------


async def upload_to_sent(server: Running, name: str, data: bytes, media_type: str, n: int):
    """(seconds from the POST's start to the reply complete, the server's RSS just before and
    its peak meanwhile, in MB)."""
    async with Chat(server, server.conversations[n]) as chat:
        idle = rss_mb(server.proc.pid)
        peak = Peak(server.proc.pid)
        peak.start()
        started = time.monotonic()
        upload = await chat.upload(name, data, media_type)
        await chat.send("What is in this file?", [upload])
        took = time.monotonic() - started
        return took, idle, peak.stop()


ROUNDS = 3  # each case, each in a conversation of its own: the median time, the largest peak


def part_a(workdir: Path, provider_url: str) -> None:
    pdf, image = scanned_pdf(10), photo(20)
    cases = [
        ("warm-up", "warm-up.txt", b"warm up\n", "text/plain"),
        ("reference, a small text file", "notes.txt", b"The port is 8443.\n" * 20, "text/plain"),
        (f"PDF, {len(pdf) / 1e6:.1f} MB", "scan.pdf", pdf, "application/pdf"),
        (f"image, {len(image) / 1e6:.1f} MB PNG", "photo.png", image, "image/png"),
    ]
    server = Running(workdir, provider_url, conversations=len(cases) * ROUNDS)
    try:
        print(f"(a) upload to sent; server idle {rss_mb(server.proc.pid):.0f} MB")
        reference = None
        for n, (label, name, data, media_type) in enumerate(cases):
            runs = [
                asyncio.run(upload_to_sent(server, name, data, media_type, n * ROUNDS + r))
                for r in range(ROUNDS)
            ]
            took = statistics.median(t for t, _, _ in runs)
            idle, top = min(i for _, i, _ in runs), max(p for _, _, p in runs)
            if n == 0:
                continue
            reference = reference or (took, top)
            print(
                f"    {label}: {took:.2f} s median of {ROUNDS} ({took / reference[0]:.1f} x the "
                f"reference); peak RSS {top:.0f} MB ({top / reference[1]:.2f} x the reference's), "
                f"+{top - idle:.0f} MB over idle"
            )
    finally:
        server.stop()


# --- (b) window tokens over a long conversation --------------------------------------------------


async def long_conversation(server: Running, turns: int, screenshots: int) -> dict:
    every = max(1, turns // max(1, screenshots))
    async with Chat(server, server.conversations[0]) as chat:
        for turn in range(1, turns + 1):
            files = []
            if turn % every == 0 and turn // every <= screenshots:
                files = [await chat.upload(f"screen-{turn}.png", screenshot(turn), "image/png")]
            await chat.send(f"Turn {turn}: {WORDS}", files)
        return await chat.export()


class UsageAsTheApi:
    """Every request answered alike (a summary's shape, so a summariser takes it), with the
    input tokens the API would count (see the module's docstring)."""

    REPLY = "<summary>\n## Primary request and intent\nThe user's numbered turns.\n</summary>"

    def plan(self, body: dict):
        from support.scripts import Script

        usage = {"input_tokens": input_tokens(body), "output_tokens": 30}
        return Script("reply", [self.REPLY], usage=usage)


def input_tokens(body: dict) -> int:
    chars, images = len(json.dumps(body.get("system", ""))), 0
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            inner = block.get("content") if isinstance(block, dict) else None
            for item in [block, *(inner if isinstance(inner, list) else [])]:
                if isinstance(item, dict) and item.get("type") == "image":
                    images += image_tokens(item["source"]["data"])
                elif item is not block or not isinstance(inner, list):
                    chars += len(json.dumps(item))
    return chars // 4 + images


def image_tokens(data: str) -> int:
    import base64

    from PIL import Image

    width, height = Image.open(io.BytesIO(base64.b64decode(data))).size
    return min(-(-width * height // 750), 1600)


def window_run(workdir: Path, args, budget: int) -> dict:
    from support.fake_anthropic import FakeAnthropic

    fake = FakeAnthropic(UsageAsTheApi(), cache=False, record=False).start()
    server = Running(workdir, fake.url, conversations=1, CONTEXT_BUDGET_TOKENS=str(budget))
    try:
        doc = asyncio.run(long_conversation(server, args.turns, args.screenshots))
    finally:
        server.stop()
        fake.stop()
    windows = [m["window_tokens"] or 0 for m in doc["messages"] if m["role"] == "assistant"]
    images = sum(b.get("type") == "image" for m in doc["window"]["messages"] for b in m["content"])
    return {
        "windows": windows,
        "compactions": doc["compactions"],
        "images": images,
        "refused": list(fake.invalid),
    }


def part_b(workdir: Path, args) -> None:
    print(
        f"(b) window tokens over {args.turns} turns with {args.screenshots} screenshots "
        "(1,280 x 800 px, 1,366 tokens each)"
    )
    runs = [
        ("without compaction (a budget of 100,000,000)", 100_000_000),
        (f"budget {args.budget:,}, the default threshold", args.budget),
    ]
    top = None
    for label, budget in runs:
        run = window_run(workdir, args, budget)
        windows = run["windows"]
        top = top or max(windows)
        kinds = {}
        for c in run["compactions"]:
            key = f"{c['kind']} {c['status']}"
            kinds[key] = kinds.get(key, 0) + 1
        print(
            f"    {label}: last {windows[-1]:,}, largest {max(windows):,}, mean "
            f"{sum(windows) / len(windows):,.0f} tokens; {run['images']} images in the last "
            f"window; compactions: {kinds or 'none'}\n    {sparkline(windows, top + 1)}"
        )
        if run["refused"]:
            print(
                f"      the provider refused {len(run['refused'])} requests as invalid, first: "
                f"{run['refused'][0][:160]}"
            )
        for c in run["compactions"]:
            named = len(set(re.findall(r"screen-\d+\.png", c["summary"])))
            print(
                f"      {c['kind']} {c['status']} by {c['summariser'] or '-'}: "
                f"{c['pre_tokens']:,} -> {c['post_tokens']:,} tokens; files "
                f"{'cleared' if c['kind'] == 'clear' else 'folded'} {len(c.get('files', []))}, "
                f"tool results cleared {c['cleared_count']}; its summary names {named} screenshots"
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    processes.stop_on_signals()
    workdir = Path(tempfile.mkdtemp(prefix="bench-files-"))
    try:
        _, provider_url = processes.start_provider([], workdir / "provider.err")
        print(f"machine: {os.cpu_count()} cores; fake provider {provider_url}")
        if not args.skip_upload:
            part_a(workdir, provider_url)
        if not args.skip_window:
            part_b(workdir, args)
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        for log in workdir.glob("*.err"):
            print(f"--- {log.name}\n{processes.tail(log)}", file=sys.stderr)
        return 2
    finally:
        processes.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
