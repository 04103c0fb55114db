"""What a download of an export needs: its file name, and its pieces joined into chunks and
streamed from the request's own thread."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator

from asgiref.sync import sync_to_async
from django.utils.text import slugify

from chat.models import Conversation

# Characters of the title kept in a file name: enough to tell downloads apart at a glance.
NAME_CHARS = 50


def filename(conversation: Conversation, extension: str) -> str:
    """The download's name: the title as a safe slug (ASCII letters, digits and hyphens, so it
    needs no quoting in the header nor on any file system), then the id, which keeps two
    conversations of the same title apart; a title with nothing to keep is "conversation"."""
    slug = slugify(conversation.title)[:NAME_CHARS].strip("-") or "conversation"
    return f"{slug}-{conversation.pk}.{extension}"


STREAM_CHUNK_CHARS = 64_000


def batched(pieces: Iterable[str], size: int = STREAM_CHUNK_CHARS) -> Iterator[str]:
    """Pieces joined into chunks of about `size` characters: fewer, larger writes."""
    buffer: list[str] = []
    held = 0
    for piece in pieces:
        buffer.append(piece)
        held += len(piece)
        if held >= size:
            yield "".join(buffer)
            buffer, held = [], 0
    if buffer:
        yield "".join(buffer)


async def served_async(pieces: Iterator[str]) -> AsyncIterator[str]:
    """A synchronous export as an async stream, for an ASGI server: each chunk is written on
    the request's own thread (its database cursor lives there), without holding the whole
    document in memory. A client that goes away closes the export, and its cursor."""
    chunks = batched(pieces)
    take = sync_to_async(next, thread_sensitive=True)
    try:
        while (chunk := await take(chunks, None)) is not None:
            yield chunk
    finally:
        await sync_to_async(_close, thread_sensitive=True)(chunks, pieces)


def _close(*generators) -> None:
    for generator in generators:
        close = getattr(generator, "close", None)
        if close is not None:
            close()
