"""Messages' vectors for search by meaning: which are missing, and storing them compactly.

A settled message (complete, interrupted, error: no write changes it again) gets one vector of
the configured embedder (providers/embeddings.py), as float16 bytes in `MessageVector`, half the
size of float32 and as good for ranking. Nothing here runs in a turn: the engine's background
task (turns/engine.py) and the `embed_messages` command embed them after the
messages have committed, a batch at a time, and whatever a dying process left unembedded (or a
model change made stale) is simply still pending at the next round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
from django.db import connection

from chat.models import SETTLED, Message, MessageVector
from core import db
from providers import embeddings
from providers.embeddings import Embedder

BATCH = 256


def pack(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float16).tobytes()


def unpack(blobs: list[bytes], dimension: int) -> np.ndarray:
    """Stored vectors as one float32 matrix, a row each."""
    if not blobs:
        return np.zeros((0, dimension), dtype=np.float32)
    return (
        np.frombuffer(b"".join(blobs), dtype=np.float16).reshape(-1, dimension).astype(np.float32)
    )


_SETTLED = [str(status) for status in SETTLED]
# The settled messages with no vector of a model (its name the first value, then `_SETTLED`).
# An import's messages wait for it to commit (chat/imports/importing.py stages them).
_WITHOUT_VECTOR = (
    "FROM chat_message m JOIN chat_conversation c ON c.id = m.conversation_id "
    "LEFT JOIN chat_messagevector v ON v.message_id = m.id AND v.model = %s "
    f"WHERE v.message_id IS NULL AND m.status IN ({', '.join(['%s'] * len(_SETTLED))}) "
    "AND c.importing_id IS NULL"
)


def pending(model: str, limit: int = BATCH, after: int = 0) -> list[tuple[int, str]]:
    """(id, searchable text) of settled messages with no vector of `model`, oldest first, from
    id `after` on: a run of batches goes on where the last ended instead of walking again past
    every message it has just embedded."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.id, m.search_text {_WITHOUT_VECTOR} "  # noqa: S608 - no input
            "AND m.id > %s ORDER BY m.id LIMIT %s",
            [model, *_SETTLED, after, limit],
        )
        return cursor.fetchall()


def remaining(model: str) -> int:
    """How many settled messages have no vector of `model` (the backfill's progress)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) {_WITHOUT_VECTOR}", [model, *_SETTLED])  # noqa: S608
        return cursor.fetchone()[0]


def store(embedder: Embedder, ids: list[int], matrix: np.ndarray) -> None:
    """One row per message (a vector of another model replaced), in one statement."""
    rows = [
        MessageVector(
            message_id=pk, model=embedder.name, dimension=matrix.shape[1], vector=pack(row)
        )
        for pk, row in zip(ids, matrix, strict=True)
    ]
    MessageVector.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["message"],
        update_fields=["model", "dimension", "vector"],
    )


def embed_batches(embedder: Embedder, limit: int = BATCH) -> Iterator[int]:
    """Embed and store every pending message, a batch at a time (the backfill), yielding each
    batch's size."""
    after = 0
    while batch := pending(embedder.name, limit, after):
        store(embedder, [pk for pk, _ in batch], embedder.embed([text for _, text in batch]))
        after = batch[-1][0]
        yield len(batch)


def floor_now() -> int:
    """Every message up to this id is settled or never will be: one before the oldest queued or
    streaming message or message of an import in progress, else the latest id. Cheap: the
    partial indexes on those statuses list their few rows (min(id) over the table would walk it
    in id order looking for one), and the primary key gives the latest."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM chat_message WHERE status = %s "
            "UNION ALL SELECT id FROM chat_message WHERE status = %s",
            [str(Message.Status.QUEUED), str(Message.Status.STREAMING)],
        )
        unsettled = [pk for (pk,) in cursor.fetchall()]
        cursor.execute("SELECT id FROM chat_conversation WHERE importing_id IS NOT NULL")
        importing = [pk for (pk,) in cursor.fetchall()]
        if importing:  # an import in progress: its messages are embedded once it commits
            marks = ", ".join(["%s"] * len(importing))
            cursor.execute(
                f"SELECT min(id) FROM chat_message WHERE conversation_id IN ({marks})",  # noqa: S608
                importing,
            )
            unsettled += [pk for (pk,) in cursor.fetchall() if pk is not None]
        if unsettled:
            return min(unsettled) - 1
        cursor.execute("SELECT max(id) FROM chat_message")
        return cursor.fetchone()[0] or 0


async def embed_round(floor: int = 0) -> tuple[int, int]:
    """Vectors for the messages settled since the last round (the engine's background task),
    from id `floor` on (0: every message): the database's part on its threads, the model's on
    another, so no turn's query waits behind the embedding. Returns how many were embedded,
    and the next round's floor, taken before this round looked: what settles meanwhile is
    above it."""
    embedder = await asyncio.to_thread(embeddings.embedder)  # the first call loads the model
    if embedder is None:
        return 0, 0
    next_floor = await db.run(floor_now)
    done, after = 0, floor
    while batch := await db.run(pending, embedder.name, BATCH, after):
        matrix = await asyncio.to_thread(embedder.embed, [text for _, text in batch])
        await db.run(store, embedder, [pk for pk, _ in batch], matrix)
        done, after = done + len(batch), batch[-1][0]
    return done, next_floor
