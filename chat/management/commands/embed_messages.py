"""Give every settled message its vector now (after an upgrade, an import of many messages, or a
change of EMBEDDINGS), a batch at a time, with a progress bar on stderr. The server does the
same in the background; this is for a backlog one would rather not wait for. Safe to stop and
run again: what was stored stays, and the rest is still pending."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from chat import vectors
from providers import embeddings

BAR = 30


class Command(BaseCommand):
    help = "Embed the messages that have no vector of the configured model yet."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch", type=int, default=vectors.BATCH, help="messages per batch")

    def handle(self, *args, batch: int, **options) -> None:
        embedder = embeddings.embedder()
        if embedder is None:
            raise CommandError("EMBEDDINGS is none: there is no model to embed with.")
        if batch < 1:
            raise CommandError("--batch must be at least 1.")
        total = vectors.remaining(embedder.name)
        started, done = time.monotonic(), 0
        for count in vectors.embed_batches(embedder, batch):
            done += count
            self.stderr.write(progress(done, total, time.monotonic() - started), ending="")
            self.stderr.flush()
        if done:
            self.stderr.write("")
        seconds = time.monotonic() - started
        self.stdout.write(f"Embedded {done:,} messages with {embedder.name} in {seconds:.1f} s.")


def progress(done: int, total: int, seconds: float) -> str:
    """One line, redrawn in place: [#####.....] 1,024/10,000 messages, 3,400/s."""
    total = max(total, done)  # messages settled meanwhile are embedded too
    filled = BAR * done // total if total else BAR
    rate = done / seconds if seconds > 0 else 0
    return f"\r[{'#' * filled}{'.' * (BAR - filled)}] {done:,}/{total:,} messages, {rate:,.0f}/s"
