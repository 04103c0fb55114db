"""What the in-process benchmarks (sawtooth, recall, cache) share: Django set up on a database
of their own, and the engine without its background heartbeat and sweep."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A benchmark's scripted users send, compact and connect far faster than people: the abuse
# limits (chat/limits.py) would refuse them, and limits are not what is measured.
UNLIMITED = {
    name: "1000000"
    for name in ("SENDS_PER_MINUTE", "REPLIES_AT_ONCE", "COMPACTIONS_PER_HOUR", "SIGNUPS_PER_HOUR")
}


def setup_django(
    env: dict[str, str], database_url: str = "", prefix: str = "bench-"
) -> tuple[str, str | None]:
    """The environment first (settings read it at import), then setup and migrate. Without a
    `database_url`, a fresh SQLite file in a temporary directory. Returns the database URL
    used and that directory (the caller deletes it), if one was made."""
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ.setdefault("DJANGO_DEBUG", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # Broadcasts go to the in-memory layer with no listeners: the benchmarks measure the rest.
    os.environ.pop("REDIS_URL", None)
    os.environ.update(UNLIMITED | env)
    tmp = None
    if not database_url:
        tmp = tempfile.mkdtemp(prefix=prefix)
        database_url = f"sqlite:///{tmp}/bench.sqlite3"
    os.environ["DATABASE_URL"] = database_url

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return database_url, tmp


async def _idle() -> None:
    pass


def without_background() -> None:
    """The engine's heartbeat and sweep run a few queries every few seconds whatever the load:
    not a turn's cost, and they would land in whichever turn their timer hit."""
    from chat import engine

    engine._background = _idle
