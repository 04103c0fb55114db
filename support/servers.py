"""What tests and benches that start real server processes share: a free port to give one, a
check that it listens, and a logged-in session for a user (the cookie a browser tab would
send)."""

from __future__ import annotations

import socket

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


def session_for(user) -> str:
    """A session logged in as `user` (its key is the `sessionid` cookie); needs Django set up."""
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return session.session_key
