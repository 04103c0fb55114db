"""Real server processes for tests: uvicorn serving the app on the test database, and a
websocket client that logs in with a session cookie (support.servers.session_for), as a browser
tab would."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

from support.servers import free_port, listening

ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    """The test database, as a URL another process can open."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Server:
    """One `uvicorn config.asgi:application` process (the production server, lifespan on)."""

    def __init__(self, provider_url: str, *, cpus: set[int] | None = None, **env: str) -> None:
        self.port = free_port()
        self.cpus = cpus  # the CPUs it may run on (all of the test's by default)
        self.log = tempfile.NamedTemporaryFile(prefix="server-", suffix=".log", delete=False)
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,  # the sessions the test makes must verify
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_COOKIES": "false",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL or "",
            "CONN_MAX_AGE": "0",
            "LLM_PROVIDER": "anthropic",
            "ANTHROPIC_BASE_URL": provider_url,
            "ANTHROPIC_API_KEY": "test-key",
            "LLM_MAX_RETRIES": "0",
            "LOG_LEVEL": "WARNING",
            # Words only, as in the test process (config/test_settings.py): no background
            # embedding round for a search's ranking to depend on, no model to load.
            "EMBEDDINGS": "none",
            # As in the test process: no title request after a first reply, taking a reply the
            # test queued for its own turn.
            "GENERATED_TITLES": "false",
            **env,
        }
        self.process: subprocess.Popen | None = None

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> Server:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1"]
            + ["--port", str(self.port), "--lifespan", "on", "--no-access-log"]
            # As `make serve`: addresses are the app's to read (web/forwarded.py).
            + ["--no-proxy-headers"],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=None if self.cpus is None else lambda: os.sched_setaffinity(0, self.cpus),
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited at start:\n{self.output()}")
            if listening(self.port):
                return self
            time.sleep(0.1)
        raise RuntimeError(f"the server did not start in {timeout} s:\n{self.output()}")

    def signal(self, sig: int = signal.SIGKILL, timeout: float = 30) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-4000:]


class Tab:
    """A browser tab's websocket on one conversation, logged in with a session cookie."""

    def __init__(self, server: Server, conversation_id: int, session_key: str) -> None:
        self.url = f"{server.ws_url}/ws/conversations/{conversation_id}/"
        self.headers = {
            "Cookie": f"sessionid={session_key}",
            "Origin": f"http://127.0.0.1:{server.port}",
        }
        self.frames: list[str] = []
        self.socket = None

    async def open(self) -> Tab:
        from websockets.asyncio.client import connect

        self.socket = await connect(self.url, additional_headers=self.headers)
        return self

    async def send(self, **frame) -> None:
        await self.socket.send(json.dumps(frame))

    async def until(self, predicate, timeout: float = 30) -> str:
        """The first frame (seen before or arriving now) that satisfies `predicate`."""
        for frame in self.frames:
            if predicate(frame):
                return frame
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.socket.recv()
                self.frames.append(frame)
                if predicate(frame):
                    return frame

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()


async def wait_for(check, *, timeout: float, every: float = 0.2):
    """Poll `check` (an async function) until it returns something true; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true after {timeout} s")
        await asyncio.sleep(every)
