"""Import conversations: this app's own export.json, or ChatGPT's conversations.json.

Parsing is a plain function over the file's bytes that either returns every conversation it
found or raises `ActionError` with a sentence the user can act on; nothing is written until the
whole file has been read and checked, and then everything is written in one transaction. Real
exports are untidy (a conversation opening with the assistant, two messages of one role in a
row): the transcript keeps them as they were, and the window (compaction/window.py) makes every
request valid. A conversation longer than the budget compacts before its first request, as any
conversation does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from chat.conversations import title_from
from chat.models import Conversation, Message
from chat.search_index import searchable_text
from core.clean import SYSTEM_PROMPT, clean, invalid_text
from core.errors import ActionError
from providers import registry
from providers.tokens import estimate_content

KEPT_STATUSES = {"complete", "error", "interrupted", "cancelled"}
CHATGPT_ROLES = {"user", "assistant"}


@dataclass
class Imported:
    title: str
    messages: list[tuple[str, list[dict], str]] = field(
        default_factory=list
    )  # role, blocks, status
    system_prompt: str | None = None


def check_size(size: int) -> None:
    """Before reading a file at all: a huge upload is refused without loading it."""
    if size > settings.IMPORT_MAX_BYTES:
        raise ActionError(
            f"That file is {size:,} bytes; imports are limited to "
            f"{settings.IMPORT_MAX_BYTES:,} (IMPORT_MAX_BYTES)."
        )


def parse(raw: bytes) -> list[Imported]:
    check_size(len(raw))
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ActionError("That file is not UTF-8 text: import a .json export.") from None
    except json.JSONDecodeError as exc:
        raise ActionError(f"That file is not valid JSON ({exc.msg}, line {exc.lineno}).") from None
    if isinstance(data, dict) and "messages" in data:
        found = [_own(data)]
    elif isinstance(data, dict) and "mapping" in data:
        found = [_chatgpt(data, 1)]
    elif isinstance(data, list) and data and all(isinstance(c, dict) for c in data):
        found = [_chatgpt(c, i) for i, c in enumerate(data, start=1)]
        found = [c for c in found if c.messages]
    else:
        raise ActionError(
            'That file is neither this app\'s export.json (an object with "messages") nor '
            'ChatGPT\'s conversations.json (a list of conversations with "mapping").'
        )
    if not found or not any(c.messages for c in found):
        raise ActionError("That file holds no messages to import.")
    if len(found) > settings.IMPORT_MAX_CONVERSATIONS:
        raise ActionError(
            f"That file holds {len(found):,} conversations; at most "
            f"{settings.IMPORT_MAX_CONVERSATIONS:,} are imported at once."
        )
    return found


def _own(data: dict) -> Imported:
    messages = data["messages"]
    if not isinstance(messages, list):
        raise ActionError('"messages" must be a list.')
    imported = Imported(title=_clean_title(data.get("title")))
    for n, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            raise ActionError(f"Message {n} is not an object with a role and content.")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ActionError(f'Message {n} has role {role!r}; it must be "user" or "assistant".')
        blocks = _blocks(message.get("content"), n)
        status = message.get("status") if message.get("status") in KEPT_STATUSES else "complete"
        imported.messages.append((role, blocks, status))
    system = data.get("system_prompt")
    if system:
        imported.system_prompt = clean(_text(system, "the system prompt"), SYSTEM_PROMPT)
    return imported


def _blocks(content, n: int) -> list[dict]:
    """A message's content: a string, or the API's blocks (kept as they are, checked)."""
    if isinstance(content, str):
        return [{"type": "text", "text": _text(content, f"message {n}")}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise ActionError(f"Message {n}'s content must be text or a list of content blocks.")
    for block in content:
        if not isinstance(block.get("type"), str):
            raise ActionError(f"Message {n} holds a content block without a type.")
        _text(json.dumps(block, ensure_ascii=False), f"message {n}")
    return content


def _chatgpt(conversation: dict, n: int) -> Imported:
    """ChatGPT's tree of messages, read along the branch that was on screen (current_node up to
    the root), keeping what the user and the assistant wrote as text."""
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        raise ActionError(f'Conversation {n} has no "mapping" of messages.')
    node_id = conversation.get("current_node")
    if node_id not in mapping:  # no current node: the last node without children
        leaves = [k for k, v in mapping.items() if isinstance(v, dict) and not v.get("children")]
        node_id = leaves[-1] if leaves else None
    branch, seen = [], set()
    while node_id is not None and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id] if isinstance(mapping[node_id], dict) else {}
        branch.append(node)
        node_id = node.get("parent")
    imported = Imported(title=_clean_title(conversation.get("title")))
    for node in reversed(branch):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        role = (message.get("author") or {}).get("role")
        content = message.get("content") or {}
        parts = content.get("parts") if isinstance(content, dict) else None
        if role not in CHATGPT_ROLES or not isinstance(parts, list):
            continue  # system and tool messages, hidden context
        text = "\n".join(p for p in parts if isinstance(p, str)).strip()
        if text:
            label = f"conversation {n}"
            imported.messages.append(
                (role, [{"type": "text", "text": _text(text, label)}], "complete")
            )
    return imported


def _text(value, where: str) -> str:
    if not isinstance(value, str):
        raise ActionError(f"The text of {where} is not a string.")
    problem = invalid_text(value)
    if problem:
        raise ActionError(f"The text of {where} {problem}.")
    return value


def _clean_title(title) -> str:
    if isinstance(title, str) and title.strip():
        return _text(" ".join(title.split()), "the title")[: settings.MAX_TITLE_CHARS]
    return ""


def store(user, found: list[Imported]) -> list[Conversation]:
    """Write every parsed conversation, or none."""
    created = []
    with transaction.atomic():
        for item in found:
            if not item.messages:
                continue
            first_user = next((b for r, b, _ in item.messages if r == "user"), None)
            title = item.title or (title_from(_plain(first_user)) if first_user else "")
            conversation = Conversation.objects.create(
                owner=user,
                title=title or "Imported conversation",
                # The model this deployment answers with, not the one the file names.
                model=registry.default_model(),
                system_prompt=item.system_prompt
                if item.system_prompt is not None
                else settings.DEFAULT_SYSTEM_PROMPT,
            )
            Message.objects.bulk_create(
                Message(
                    conversation=conversation,
                    seq=seq,
                    role=role,
                    content=blocks,
                    status=status,
                    tokens=estimate_content(blocks),
                    search_text=searchable_text(blocks),
                )
                for seq, (role, blocks, status) in enumerate(item.messages, start=1)
            )
            created.append(conversation)
    return created


def _plain(blocks: list[dict]) -> str:
    return " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
