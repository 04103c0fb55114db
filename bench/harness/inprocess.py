"""What the in-process benchmarks (sawtooth, recall, cache, turn_cpu) share: Django set up on a
database of their own, the engine without its background heartbeat and sweep, and a fake model
that keeps the usage it reports."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

from bench.harness.texts import summary_answer

ROOT = Path(__file__).resolve().parent.parent.parent
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
    if str(ROOT) not in sys.path:
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


async def run_turn(
    user,
    conversation_id: int,
    text: str,
    *,
    timeout: float = 120,
    sent: Callable[[Any], None] | None = None,
):
    """One turn through the real code, in this event loop, as the websocket's send runs it: the
    message stored and its reply claimed (`turns.actions.send`), the claimed step, if any,
    started on the engine, then awaited until the engine has nothing left to do for the
    conversation (`support.waiting.settle`: a compaction the pre-send check opened, the reply,
    the auto-compaction after it). `sent` is called with the claim between the send and the
    engine's start. Returns the send's claim."""
    from support.waiting import settle
    from turns import actions, engine

    claim = await actions.send(user, conversation_id, text)
    if sent is not None:
        sent(claim)
    if claim.step is not None:
        engine.start(claim.step)
    await settle(conversation_id, timeout=timeout)
    return claim


def without_background() -> None:
    """The engine's heartbeat and sweep run a few queries every few seconds whatever the load:
    not a turn's cost, and they would land in whichever turn their timer hit. Switched off on
    the runtime, as a test that runs the queue's recovery itself does."""
    from core import runtime

    runtime.current().background = False


class UsageModel:
    """A fake model for in-process benches (register it: `providers.registry.register`):
    support.fake_model.FakeClient answers and computes the usage (the app's own estimate of the
    window it was sent); this tells summary requests from chat replies by their system prompt,
    answers a summary with a well-formed one and a reply with `reply()` in a few deltas, and
    keeps each request's reported usage."""

    def __init__(self, reply: Callable[[], str]) -> None:
        from support.fake_model import FakeClient

        self.inner = FakeClient()
        self.reply = reply
        self.chat_usage: list = []  # providers.values.Usage of each reply request
        self.summary_usage: list = []  # ... and of each summary request

    def capabilities(self, model: str):
        return self.inner.capabilities(model)

    async def stream(self, request):
        from compaction.prompt import SECTIONS, SYSTEM_PROMPT
        from providers.values import Final

        is_summary = request.system == SYSTEM_PROMPT
        if is_summary:
            last = request.messages[-1]["content"]
            chunks = [summary_answer("".join(b.get("text", "") for b in last), SECTIONS)]
        else:
            text = self.reply()
            step = max(1, len(text) // 8)  # a few deltas, each relayed like a real stream
            chunks = [text[i : i + step] for i in range(0, len(text), step)]
        self.inner.enqueue(chunks)
        async with aclosing(self.inner.stream(request)) as events:
            async for event in events:
                if isinstance(event, Final):
                    (self.summary_usage if is_summary else self.chat_usage).append(event.usage)
                yield event
        self.inner.calls.clear()  # the fake keeps a copy of every request: not needed here
