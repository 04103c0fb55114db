"""Which file a hit was found in: a sent message's search text holds its files' names and words
after its own (chat/search_index.py), so a hit on a message with files may have matched one of
them, and then names it ("in notes.md, #3").

The snippet says where: it is cut from the message's search text, and a file begins on a line
of its own, so a line of the snippet holding a matched word lies in the message's own words or
in one file's. A hit found by meaning, or through its neighbours, matched no word of its own
and names no file. One query for every hit's files, the owner's only.
"""

from __future__ import annotations

import re
from dataclasses import replace

from django.db.models import Q

from chat.models import Attachment
from chat.search_index import MARK_CLOSE, MARK_OPEN, file_section
from search.values import Hit


def named(user, hits: list[Hit]) -> list[Hit]:
    """`hits`, each found in a file naming it."""
    keys = {(h.conversation_id, h.seq) for h in hits}
    if not keys:
        return hits
    wanted = Q()
    for conversation_id, seq in keys:
        wanted |= Q(message__conversation_id=conversation_id, message__seq=seq)
    rows = Attachment.objects.filter(wanted, owner=user).values_list(
        "message__conversation_id", "message__seq", "name", "text"
    )
    by_message: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for conversation_id, seq, name, text in rows.order_by("pk"):
        by_message.setdefault((conversation_id, seq), []).append((name, file_section(name, text)))
    return [
        replace(hit, file=found)
        if (found := found_in(hit.snippet, by_message.get((hit.conversation_id, hit.seq), [])))
        else hit
        for hit in hits
    ]


def found_in(snippet: str, files: list[tuple[str, str]]) -> str:
    """The name of the first of `files` (name and searched words) holding a line of the snippet
    with a matched word in it; "" when none does (the message's own words matched)."""
    for piece in re.split(r"[…\n]", snippet):
        line = piece.replace(MARK_OPEN, "").replace(MARK_CLOSE, "").strip()
        if MARK_OPEN in piece and line:
            for name, words in files:
                if line in words:
                    return name
    return ""
