"""Build transcripts straight into the database for tests and benchmarks."""

from __future__ import annotations

from chat.models import Conversation, Message
from compaction.models import Compaction
from providers.tokens import estimate_content


def text_block(text: str) -> list[dict]:
    return [{"type": "text", "text": text}]


def add_turns(conversation, count: int, *, words: int = 30, start: int | None = None) -> None:
    """Append `count` complete user/assistant turns, each message about `words` words long."""
    if start is None:
        last = conversation.messages.order_by("-seq").first()
        start = last.seq + 1 if last else 1
    rows = []
    for i in range(count):
        seq = start + 2 * i
        user = text_block(f"Question {seq}: " + " ".join(f"topic{seq}w{j}" for j in range(words)))
        reply = text_block(f"Answer {seq + 1}: " + " ".join(f"fact{seq}w{j}" for j in range(words)))
        rows.append(
            Message(
                conversation=conversation,
                seq=seq,
                role="user",
                content=user,
                tokens=estimate_content(user),
            )
        )
        rows.append(
            Message(
                conversation=conversation,
                seq=seq + 1,
                role="assistant",
                content=reply,
                tokens=estimate_content(reply),
                model="fake-model",
            )
        )
    Message.objects.bulk_create(rows)


def snapshot(conversation) -> list[tuple]:
    return list(
        conversation.messages.order_by("seq").values_list("seq", "role", "content", "status")
    )


def tool_use_ids(entry) -> set[str]:
    return {b["id"] for b in entry.content if b.get("type") == "tool_use" and "id" in b}


def tool_result_ids(entry) -> set[str]:
    return {
        b["tool_use_id"]
        for b in entry.content
        if b.get("type") == "tool_result" and "tool_use_id" in b
    }


def tail_tokens(entries, first_kept_seq: int) -> int:
    """Tokens of the entries a cut at `first_kept_seq` keeps."""
    return sum(e.tokens for e in entries if e.seq >= first_kept_seq)


def committed_boundary(conversation, first_kept_seq: int, **fields) -> Compaction:
    """A committed summary boundary keeping messages from `first_kept_seq` on."""
    values = {
        "trigger": "manual",
        "summary": "## Primary request and intent\nThe earlier turns.",
        "pre_tokens": 900,
        "post_tokens": 300,
        "summariser": "model",
    } | fields
    return Compaction.objects.create(
        conversation=conversation, status="committed", first_kept_seq=first_kept_seq, **values
    )


def chat(owner, texts) -> Conversation:
    """A new conversation of `owner` holding `texts`, alternating user and assistant."""
    conversation = Conversation.objects.create(owner=owner, model="fake-model")
    for seq, text in enumerate(texts, start=1):
        Message.objects.create(
            conversation=conversation,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=[{"type": "text", "text": text}],
        )
    return conversation
