"""export.json: the whole conversation for programs, which importing it gives back; and every
conversation of a person's in one file, a list of such objects, which importing takes back whole
(chat/imports/bundle.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Exists, OuterRef

from chat.file_blocks import for_export, labelled, rows_for
from chat.models import Conversation, Message, Pin
from chat.transcript import current_branch
from chat.window_loading import load_window
from compaction.models import Compaction


def conversation_json(conversation: Conversation) -> dict:
    """The whole conversation for programs: every message, every compaction (whatever its
    status) and the exact window the next request would carry. Compactions come before the
    messages, which name them (`window_boundary`), so an import reads each once, in order
    (chat/imports/history.py). Each file is the API's block, its bytes in it (base64, or a text
    file's text: chat/file_blocks.py), in the messages and in the window alike. At most six
    queries, whatever its length."""
    state = load_window(conversation)
    branch = current_branch(conversation)
    pinned = set(Pin.objects.filter(conversation=conversation).values_list("message_id", flat=True))
    window = state.window().as_request()
    messages = conversation.messages.order_by("seq")
    # The files named anywhere in it, found first (its contents read as a stream), in one query.
    files = rows_for(messages.values_list("content", flat=True).iterator(), conversation.owner_id)
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "model": conversation.model,
        "system_prompt": conversation.system_prompt,
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
        # Every version is listed; the ones on the user's screen are `on_branch`, which ends at
        # `branch_end`.
        "branch_end": max(branch, default=None),
        "compactions": [
            {
                "id": c.pk,
                "trigger": c.trigger,
                "kind": c.kind,
                "status": c.status,
                "imported": c.imported,
                "pre_tokens": c.pre_tokens,
                "post_tokens": c.post_tokens,
                "first_kept_seq": c.first_kept_seq,
                "cleared_before_seq": c.cleared_before_seq,
                "cleared_count": c.cleared_count,
                "files": c.files,  # the files it cleared or folded: {id, name, kind, seq}
                "summary": c.summary,
                "summariser": c.summariser,
                "summary_model": c.summary_model,  # the model that wrote it ("" for rules)
                "instructions": c.instructions,
                "edited": c.edited,
                # The key facts of what the summary replaced: how many it kept, which it lost.
                "facts": {"total": c.facts_total, "kept": c.facts_kept, "lost": c.facts_lost},
                "created_at": c.created_at.isoformat(),
                "updated_at": c.updated_at.isoformat(),
            }
            for c in Compaction.objects.filter(conversation=conversation).order_by("id")
        ],
        "messages": [
            {
                "seq": m.seq,
                "parent": m.parent,
                "on_branch": m.seq in branch,
                "pinned": m.pk in pinned,
                "role": m.role,
                "content": _with_files(m.content, files),
                "status": m.status,
                "tokens": m.tokens,
                "usage": m.usage.as_dict() if m.usage else None,
                # The window once this reply was in it, as the server counted it, and the
                # boundary it was sent under: the meter and the chart read them.
                "window_tokens": m.window_tokens,
                "window_head_tokens": m.window_head_tokens,
                "window_boundary": m.window_boundary_id,
                "created_at": m.created_at.isoformat(),
                "updated_at": m.updated_at.isoformat(),
            }
            for m in messages.iterator()
        ],
        "window": {**_window_with_files(window), "tokens": state.tokens},
    }


def _with_files(content, files: dict) -> object:
    return for_export(content, files) if files and isinstance(content, list) else content


def _window_with_files(request: dict) -> dict:
    """The window with each file as its one-line label: its bytes are in the messages already
    (a second copy would double the file, past what an import takes back), and an import reads
    the window from the messages, never from here."""
    messages = [{**m, "content": labelled(m.get("content"))} for m in request.get("messages", [])]
    return {**request, "messages": messages}


def everything_json(user) -> Iterator[str]:
    """Every conversation of the person's that holds a message (archived ones too; deleted ones
    not), oldest first, as a JSON list of `conversation_json` objects: written one conversation
    at a time, so only one is ever in memory."""
    yield "["
    held = Message.objects.filter(conversation=OuterRef("pk"))
    owned = Conversation.objects.owned_by(user).filter(Exists(held))
    # The ids first (a short list), then each conversation read whole as its own export does.
    pks = list(owned.order_by("created_at", "pk").values_list("pk", flat=True))
    written = 0
    for pk in pks:
        conversation = Conversation.objects.owned_by(user).filter(pk=pk).first()
        if conversation is None:  # deleted while the file was being written
            continue
        whole = json.dumps(
            conversation_json(conversation), cls=DjangoJSONEncoder, ensure_ascii=False
        )
        yield ("\n" if not written else ",\n") + whole
        written += 1
    yield "\n]\n"
