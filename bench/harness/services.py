"""The services a bench runs the app on: a PostgreSQL database dropped and created, a Redis
database flushed, a temporary SQLite file; and the accounts a run needs (users with a session
each, their conversations), made in the run's own database.

`make_accounts` runs this module in the run's environment (its DATABASE_URL), since the
bench's own process is not configured for any one database:

    python -m bench.harness.services --accounts '{"users": 2, "conversations": 4, ...}'
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench.harness.processes import BenchError, run_python


def with_db(url: str, name: str) -> str:
    """The same server's URL for another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def db_connect(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=10)


def fresh_postgres(url: str) -> None:
    """Drop the URL's database (whoever is connected) and create it empty."""
    from psycopg import sql

    name = urlsplit(url).path.lstrip("/")
    if not name:
        raise BenchError(f"--pg-url needs a database name: {url}")
    with db_connect(with_db(url, "postgres")) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_postgres(url: str) -> None:
    import psycopg
    from psycopg import sql

    name = urlsplit(url).path.lstrip("/")
    with contextlib.suppress(psycopg.Error), db_connect(with_db(url, "postgres")) as conn:
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


def temporary_sqlite(workdir: Path, prefix: str = "sqlite-") -> tuple[Path, str]:
    """A new directory under `workdir` and the URL of a SQLite file in it (made on migrate)."""
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=workdir))
    return directory, f"sqlite:///{directory}/bench.sqlite3"


def migrate(env: dict) -> None:
    run_python(["manage.py", "migrate", "--noinput"], env, "migrate")


def make_accounts(
    env: dict,
    *,
    users: int,
    conversations: int,
    model: str,
    system_prompt: str,
    prefix: str,
) -> dict:
    """Users `<prefix>0`, `<prefix>1`, ... with a session each, then the conversations, shared out
    among them in turn, in the database of `env`: {"users": [{"id", "session"}], "conversations":
    [{"id", "owner"}]} (owner: the user's index)."""
    plan = {
        "users": users,
        "conversations": conversations,
        "model": model,
        "system_prompt": system_prompt,
        "prefix": prefix,
    }
    made = run_python(
        ["-m", "bench.harness.services", "--accounts", json.dumps(plan)], env, "creating the chats"
    )
    return json.loads(made)


def _accounts(plan: dict) -> None:
    """In the run's environment: the accounts of `make_accounts`, printed as JSON."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from chat.models import Conversation
    from support.servers import session_for

    users, rows = [], []
    for u in range(plan["users"]):
        user = get_user_model().objects.create(
            username=f"{plan['prefix']}{u}", password=make_password(None)
        )
        rows.append(user)
        users.append({"id": user.pk, "session": session_for(user)})
    conversations = []
    for i in range(plan["conversations"]):
        owner = i % len(users)
        row = Conversation.objects.create(
            owner=rows[owner], model=plan["model"], system_prompt=plan["system_prompt"]
        )
        conversations.append({"id": row.pk, "owner": owner})
    print(json.dumps({"users": users, "conversations": conversations}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Make a bench run's accounts (internal).")
    parser.add_argument("--accounts", required=True, help="JSON: what make_accounts asks for")
    _accounts(json.loads(parser.parse_args().accounts))
