"""What tests and benches that start real server processes share: a free port to give one, a
check that it listens, a redis-server to stop and start, and a logged-in session for a user (the
cookie a browser tab would send)."""

from __future__ import annotations

import socket
import subprocess
import time

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def listening(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """Whether something accepts connections on the port now."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


class Redis:
    """A redis-server of the test's own, on a port kept across a stop and a start."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Redis:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", HOST]
            + ["--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not listening(self.port):
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def session_for(user) -> str:
    """A session logged in as `user` (its key is the `sessionid` cookie); needs Django set up."""
    from web.session_store import SessionStore

    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return session.session_key
