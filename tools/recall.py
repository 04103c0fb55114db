"""The built-in recall tools: the model searches and reads its conversation's whole transcript,
the compacted part included, so nothing folded into a summary is out of its reach; asked, it
searches and reads the user's other conversations too (never another user's), and is given a
file of theirs again (`read_attachment`: a file cleared from the window or folded into a
summary comes back, for the turn that asks). Only its own
branch: other versions of a message (regenerated replies, edited messages) are not part of the
history it is answering (in another conversation: the branch on the user's screen).

Plain synchronous functions over the database (the engine runs them on a database thread); bad
input raises `ToolError` with a sentence the model can act on.
"""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from chat.attachments import block
from chat.file_blocks import file_ids, label
from chat.models import UNSTARTED, Attachment, Conversation, Message
from chat.transcript import trees
from compaction.prompt import render_block
from search.messages import search_branch
from search.query import marked
from search.semantic import unavailable_notice
from search.values import Hit
from tools.values import Context, ToolError

# search_history's scopes: this conversation (the default), or every one of the user's.
SCOPES = ("conversation", "all")

SEARCH_HISTORY = {
    "name": "search_history",
    "description": (
        "Search this conversation's whole history, including the earlier part that is now only "
        "summarised, for messages about something. Use it when the user refers to something you "
        "cannot see in full (an exact error, a number, a decision, a file). Write the query as "
        "words or a question; quote an exact phrase. Returns the best matches with their message "
        "number (#seq), role, date and a snippet; read a whole message with read_messages. "
        'Scope "all": every conversation of this user\'s (another chat, or nothing here).'
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 20,
                "description": "How many matches to return (default 5).",
            },
            "scope": {
                "type": "string",
                "enum": list(SCOPES),
                "description": (
                    'Default: this one. With "all", hits name their conversation and link to '
                    "the message there."
                ),
            },
        },
        "required": ["query"],
    },
}

READ_MESSAGES = {
    "name": "read_messages",
    "description": (
        "Read messages of this conversation verbatim, by message number (#seq), from from_seq to "
        "to_seq inclusive. Long ranges come in pages: the answer says how to ask for the rest."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "from_seq": {"type": "integer", "minimum": 1},
            "to_seq": {"type": "integer", "minimum": 1},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Characters to skip in the first message (to page through it).",
            },
            "conversation_id": {
                "type": "integer",
                "minimum": 1,
                "description": "Read another conversation of theirs (default: this one).",
            },
        },
        "required": ["from_seq", "to_seq"],
    },
}

READ_ATTACHMENT = {
    "name": "read_attachment",
    "description": (
        "See a file of this user's again (an image, a PDF, a text file) for this turn: one "
        "cleared from your window or folded into the summary, named by a line such as "
        "[image: build-error.png (#12), 1,045 tokens, cleared: read_attachment brings it back]. "
        "Name it by the message number (seq, 12 there) and/or its name, or by attachment_id. "
        "For a long PDF, ask for the pages you need (from_page, to_page): each page costs "
        "tokens."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "attachment_id": {
                "type": "integer",
                "minimum": 1,
                "description": "The file's id, in any conversation of this user's.",
            },
            "seq": {
                "type": "integer",
                "minimum": 1,
                "description": "The number of the message that holds it (#seq).",
            },
            "name": {"type": "string", "description": "The file's name, as the line says it."},
            "conversation_id": {
                "type": "integer",
                "minimum": 1,
                "description": "With seq or name: another conversation of theirs (default: this).",
            },
            "from_page": {"type": "integer", "minimum": 1, "description": "A PDF's first page."},
            "to_page": {"type": "integer", "minimum": 1, "description": "A PDF's last page."},
        },
    },
}

DEFINITIONS = (SEARCH_HISTORY, READ_MESSAGES, READ_ATTACHMENT)


def search_history(context: Context, arguments: dict) -> str:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("Give a query: the words or question to search this conversation for.")
    limit = _integer(arguments, "limit", 5, 1, 20)
    scope = arguments.get("scope", SCOPES[0])
    if scope not in SCOPES:
        raise ToolError(f"scope must be one of {', '.join(map(repr, SCOPES))}, not {scope!r}.")
    everywhere = scope == "all"
    hits = search_branch(
        context.owner,
        query,
        context.conversation_id,
        context.turn_seq,
        limit=limit,
        everywhere=everywhere,
    )
    where = "of your conversations" if everywhere else "of this conversation"
    notice = [notice] if (notice := unavailable_notice()) else []
    if not hits:
        return "\n".join([*notice, f"No message {where} matches {query!r}."])
    lines = [*notice, f"{len(hits)} best matches {where} for {query!r}, best first:"]
    for hit in hits:
        when = hit.created_at.strftime("%Y-%m-%d %H:%M")
        snippet = " ".join(marked(hit.snippet, "**", "**").split())
        head = f"#{hit.seq} · {hit.role} · {when} · score {hit.score:g}"
        if hit.file:
            head += f" · in {hit.file}"  # its words matched: read_attachment gives it whole
        if everywhere:
            head += " · " + _conversation(hit, context)
        lines.append(f"{head}\n  {snippet}")
    lines.append(
        "Read a message whole with read_messages(from_seq, to_seq"
        + (", conversation_id)." if everywhere else ").")
    )
    return "\n".join(lines)


def _conversation(hit: Hit, context: Context) -> str:
    """How a hit names its conversation (the title on one line, quoted) and, in another one, the
    link to its message there: the page's URL that opens at it, as the search page links."""
    if hit.conversation_id == context.conversation_id:
        return f"this conversation ({hit.conversation_id})"
    title = " ".join(hit.conversation_title.split())
    page = reverse("conversation", args=[hit.conversation_id])
    link = f"{page}?at={hit.shown_seq}#msg-{hit.shown_seq}"
    return f"conversation {hit.conversation_id} “{title}” · {link}"


def read_messages(context: Context, arguments: dict) -> str:
    first = _integer(arguments, "from_seq", None, 1, None)
    last = _integer(arguments, "to_seq", None, 1, None)
    offset = _integer(arguments, "offset", 0, 0, None)
    if last < first:
        raise ToolError(f"to_seq ({last}) is before from_seq ({first}).")
    other = _other_conversation(context, arguments)
    if other is not None:
        # Another conversation: its branch on screen, every message of it.
        context = Context(context.owner_id, other)
    if context.turn_seq is not None and first > context.turn_seq:
        raise ToolError(
            f"Messages after #{context.turn_seq} are this turn's own, or not sent yet: read "
            f"up to #{context.turn_seq}."
        )
    page = settings.READ_MESSAGES_PAGE_CHARS
    # Up to its own turn (what follows it is the turn itself, or messages queued behind it),
    # on the branch that leads there.
    high = last if context.turn_seq is None else min(last, context.turn_seq)
    tree = trees([context.conversation_id]).get(context.conversation_id)
    off = tree.off_branch(context.turn_seq, low=first, high=high) if tree else []
    rows = (
        Message.objects.filter(
            conversation_id=context.conversation_id, seq__gte=first, seq__lte=high
        )
        .exclude(status__in=UNSTARTED)
        .exclude(seq__in=off)
        .order_by("seq")[: settings.READ_MESSAGES_PAGE_MESSAGES + 1]
    )
    parts, used, following = [], 0, None
    for i, row in enumerate(rows):
        if i == settings.READ_MESSAGES_PAGE_MESSAGES:
            following = (row.seq, 0)
            break
        text = "\n".join(render_block(b) for b in row.content) or "(no content)"
        skip = offset if i == 0 else 0
        body = text[skip:]
        if used + len(body) > page and parts:
            following = (row.seq, 0)  # a page holds whole messages, but for the first
            break
        if len(body) > page - used:
            cut = page - used
            parts.append(_header(row) + body[:cut])
            following = (row.seq, skip + cut)
            break
        parts.append(_header(row) + body)
        used += len(body)
    if not parts:
        where = "this conversation" if other is None else f"conversation {other}"
        return f"No messages between #{first} and #{last} in {where}."
    if following is not None:
        seq, at = following
        more = f"from_seq={seq}, to_seq={last}" + (f", offset={at}" if at else "")
        more += f", conversation_id={other}" if other is not None else ""
        parts.append(f"(More follows: call read_messages({more}).)")
    return "\n\n".join(parts)


def _other_conversation(context: Context, arguments: dict) -> int | None:
    """The conversation_id asked for, when it is another of the user's (None: this one)."""
    if arguments.get("conversation_id") is None:
        return None
    wanted = _integer(arguments, "conversation_id", None, 1, None)
    if wanted == context.conversation_id:
        return None
    # The same answer for another user's conversation as for none: nothing to learn from it.
    if not Conversation.objects.owned_by(context.owner).filter(pk=wanted).exists():
        raise ToolError(f"There is no conversation {wanted} of this user's to read.")
    return wanted


def read_attachment(context: Context, arguments: dict) -> list[dict]:
    """The tool result's content: a line saying what comes back, and the file's block (the
    stored reference; the request resolves it to the API's block, a PDF cut to its pages)."""
    row = _attachment(context, arguments)
    found = block(row, _pages(row, arguments))
    where = f"message #{row.message.seq}"
    if row.conversation_id != context.conversation_id:
        where += f" of conversation {row.conversation_id}"
    line = f"Here again, for this turn: {label(found)} ({where}, attachment_id {row.pk})."
    return [{"type": "text", "text": line}, found]


def _attachment(context: Context, arguments: dict) -> Attachment:
    """The file asked for, of this user's only, in a conversation of theirs not deleted and
    sent with a message (another user's reads as none at all)."""
    mine = Attachment.objects.filter(
        owner_id=context.owner_id,
        message__isnull=False,
        conversation__in=Conversation.objects.owned_by(context.owner),
    ).select_related("message")
    if arguments.get("attachment_id") is not None:
        wanted = _integer(arguments, "attachment_id", None, 1, None)
        found = mine.filter(pk=wanted).first()
        if found is None:
            raise ToolError(f"There is no file {wanted} of this user's (attachment_id not found).")
        return found
    seq = None if arguments.get("seq") is None else _integer(arguments, "seq", None, 1, None)
    name = arguments.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ToolError("name must be the file's name, as the line that names it says it.")
    name = name.strip() if name is not None else None
    if seq is None and name is None:
        raise ToolError("Name the file: attachment_id, or seq (its message number) and/or name.")
    conversation_id = _other_conversation(context, arguments) or context.conversation_id
    here = conversation_id == context.conversation_id
    where = "this conversation" if here else f"conversation {conversation_id}"
    rows = mine.filter(conversation_id=conversation_id)
    if seq is not None:
        # The ids its message names: the files sent with it, or given back by a tool in it.
        message = Message.objects.filter(conversation_id=conversation_id, seq=seq).first()
        rows = rows.filter(pk__in=file_ids(message.content) if message is not None else [])
    if name is not None:
        rows = rows.filter(name=name)
    found = list(rows.order_by("-pk")[:10])
    said = " and ".join([f"#{seq}"] * (seq is not None) + [repr(name)] * (name is not None))
    if not found:
        raise ToolError(f"No file of {where} matches {said} (not found).")
    if len(found) > 1:
        listed = "; ".join(f"attachment_id {r.pk}: {r.name} (#{r.message.seq})" for r in found)
        raise ToolError(f"Several files of {where} match {said}: {listed}. Give attachment_id.")
    return found[0]


def _pages(row: Attachment, arguments: dict) -> tuple[int, int] | None:
    """The PDF pages asked for (None: the whole file)."""
    if arguments.get("from_page") is None and arguments.get("to_page") is None:
        return None
    if not row.pages:
        raise ToolError(f"{row.name} is not a PDF: it has no pages to choose; leave out the pages.")
    first = _integer(arguments, "from_page", 1, 1, row.pages)
    last = _integer(arguments, "to_page", row.pages, 1, row.pages)
    if last < first:
        raise ToolError(f"to_page ({last}) is before from_page ({first}).")
    return None if (first, last) == (1, row.pages) else (first, last)


def _header(row: Message) -> str:
    when = row.created_at.strftime("%Y-%m-%d %H:%M")
    return f"#{row.seq} · {row.role} · {when}\n"


def _integer(arguments: dict, key: str, default, low: int, high: int | None) -> int:
    value = arguments.get(key, default)
    if value is None:
        raise ToolError(f"Give {key}, a whole number.")
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ToolError(f"{key} must be a whole number, not {value!r}.")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ToolError(f"{key} must be {bound}, not {value}.")
    return value
