"""Build the model-facing window: system prompt, latest summary, kept tail of the transcript.

Everything here is a pure function over plain values: the caller loads the entries and the latest
boundary, this module only shapes them into a request the Messages API accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.entries import Entry
from compaction.prompt import neutralise_tags, render_entry
from providers.blocks import (
    answered_ids,
    call_ids,
    file_of,
    of_type,
    text_of,
    tool_results,
    type_of,
    without_thinking,
)

# The summary re-enters the window as a user/assistant pair at the head of `messages`, so roles
# keep alternating and the prefix stays byte-identical (cacheable) until the next compaction.
SUMMARY_INTRO = "This conversation continues from an earlier part, summarised here:"
SUMMARY_ACK = (
    "Understood. I have the summary of our earlier conversation and will continue from it."
)
PINNED_HEADING = "Pinned messages (kept verbatim at the user's request):"
# The summarised messages are not gone: the recall tools reach them (tools/recall.py). Always the
# same words, so the window's head stays byte-identical between compactions.
RECALL_NOTE = (
    "The summarised messages are kept: (#12) is message 12. If you have search_history and "
    "read_messages, use them to read earlier messages verbatim."
)


@dataclass(frozen=True)
class Window:
    """Exactly what the next model request contains (minus model name and max_tokens)."""

    system: str
    messages: list[dict] = field(hash=False)
    # Leading messages that stay byte-identical until the next compaction (the summary pair):
    # the end of a cacheable prefix (providers/caching.py).
    head: int = 0

    def as_request(self) -> dict:
        return {"system": self.system, "messages": self.messages}


def assemble(
    system: str,
    summary: str | None,
    kept: Sequence[Entry],
    pinned: Sequence[Entry] = (),
) -> Window:
    """The window for the next request.

    `kept` are the transcript entries from the boundary's first_kept_seq on; `pinned` are entries
    the user pinned that lie before the cut (they ride inside the summary message). The system
    prompt only ever travels as `system`, never as a message, and is never summarised.
    """
    head = summary_pair(summary or "", pinned) if summary is not None or pinned else []
    body: list[dict] = []
    for entry in kept:
        body += entry_messages(entry)
    messages = normalise(head + body)
    # The pair survives normalising as it is (the body after it starts with a user message).
    intact = head and messages[: len(head)] == head
    return Window(system=system, messages=messages, head=len(head) if intact else 0)


def summary_pair(summary: str, pinned: Sequence[Entry] = ()) -> list[dict]:
    """The user/assistant pair that carries the summary (and pinned messages) into the window."""
    text = {"type": "text", "text": _summary_text(summary, pinned)}
    # A pinned message's files ride verbatim too, as the blocks they are (quoted, the message
    # names each by its label): after the text, in the order of the messages.
    pinned_files = [b for e in sorted(pinned, key=lambda e: e.seq) for b in e.content if file_of(b)]
    return [
        {"role": "user", "content": [text, *pinned_files]},
        {"role": "assistant", "content": [{"type": "text", "text": SUMMARY_ACK}]},
    ]


def _summary_text(summary: str, pinned: Sequence[Entry]) -> str:
    # Neutralised so a summary quoting "</summary>" (say, a verbatim user message) cannot end the
    # block early and leave the rest looking like a fresh instruction.
    body = neutralise_tags(summary.strip()) or "(no summary text)"
    text = f"{SUMMARY_INTRO}\n\n<summary>\n{body}\n</summary>\n{RECALL_NOTE}"
    if pinned:
        quoted = "\n\n".join(render_entry(e) for e in sorted(pinned, key=lambda e: e.seq))
        text += f"\n\n{PINNED_HEADING}\n\n{quoted}"
    return text


def summary_parts(text: str) -> tuple[str, str, str] | None:
    """The summary message read back into its intro, its summary (neutralised, as sent) and
    what follows (the recall note, pinned messages): to show it, not to send it. None: `text`
    is not a summary message."""
    head = f"{SUMMARY_INTRO}\n\n<summary>\n"
    if not text.startswith(head):
        return None
    # The summary's own tags were neutralised (`_summary_text`): the first end tag is the end.
    body, end, rest = text[len(head) :].partition("\n</summary>\n")
    return (SUMMARY_INTRO, body, rest) if end else None


def entry_messages(entry: Entry) -> list[dict]:
    """One transcript entry as API messages. A reply that used tools is one entry holding its
    whole turn, as the API's blocks in order: each run of tool_result blocks is the user message
    between two assistant steps, so it becomes one here, and every other run an assistant one."""
    # Not copied here: normalise() copies every block on the way in (_cleaned).
    if entry.role != "assistant":
        return [{"role": entry.role, "content": entry.content}]
    # An earlier turn's thinking is not sent: the API strips it (only the turn in progress
    # sends its own back, turns/reply.py); a reply left empty is dropped by normalise().
    content = without_thinking(entry.content)
    if not entry.is_tool_result:
        return [{"role": entry.role, "content": content}]
    return turn_messages(content)


def turn_messages(blocks: Sequence[dict]) -> list[dict]:
    """A reply's blocks (its steps and their tool results) as alternating API messages."""
    messages: list[dict] = []
    for block in blocks:
        role = "user" if type_of(block) == "tool_result" else "assistant"
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})
    return messages


# --- normalisation -------------------------------------------------------------------------------
#
# A transcript is append-only history, so it can hold shapes the API rejects: an assistant reply
# that failed before any text (empty content), two user messages in a row (the failed reply
# between them), a tool_use whose result never arrived. Each pass below removes one kind of fault;
# removing can expose another (an emptied message lets two same-role neighbours meet), so the
# passes repeat until nothing changes. Every pass only removes or merges, so this terminates.


def normalise(messages: list[dict]) -> list[dict]:
    """Make `messages` valid for the Messages API without inventing any content."""
    current, plain = _cleaned(messages)
    if plain or _valid(current):
        return current  # the common case, checked in one pass
    return repair(current)


def _cleaned(messages: list[dict]) -> tuple[list[dict], bool]:
    """Each message with only role and content, without the text blocks the API rejects as
    empty; and whether the result is plainly valid (no tool blocks, no message empty, roles
    alternating from a user message: anything else is for `_valid` to judge). One pass: this
    runs on every request, over the whole window.

    Blocks are copied (one level: nothing here or in the SDK changes what is inside a block):
    the window is handed to callers that may change it, while the entries are the transcript.
    """
    cleaned, plain, previous = [], True, "assistant"
    for message in messages:
        content, role = message.get("content", []), message["role"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = []
        for block in content:
            kind = type_of(block)
            if kind == "text":
                if not text_of(block).strip():
                    continue  # the API rejects text blocks that are empty or whitespace only
            elif kind == "tool_use" or kind == "tool_result":
                plain = False
            blocks.append(block.copy())
        if not blocks or role == previous:
            plain = False
        previous = role
        cleaned.append({"role": role, "content": blocks})
    return cleaned, plain


def repair(current: list[dict]) -> list[dict]:
    """Apply the passes until nothing changes."""
    while True:
        nxt = _drop_empty(current)
        nxt = _drop_leading_assistant(nxt)
        nxt = _merge_same_role(nxt)
        nxt = _pair_tools(nxt)
        if nxt == current:
            return nxt
        current = nxt


def _valid(messages: list[dict]) -> bool:
    """Whether the passes below would change nothing: no empty message, a user message first,
    roles alternating, every tool_use answered in the next message and every tool_result asked
    for in the one before, results before text."""
    previous = None
    for i, message in enumerate(messages):
        role, content = message["role"], message["content"]
        if not content or role == (previous["role"] if previous else "assistant"):
            return False
        after = messages[i + 1] if i + 1 < len(messages) else None
        if role == "assistant":
            asked = call_ids(content)
            if asked and not asked <= _ids(after, "user", "tool_result", "tool_use_id"):
                return False
        else:
            results = tool_results(content)
            if results:
                if not answered_ids(results) <= _ids(previous, "assistant", "tool_use", "id"):
                    return False
                if any(type_of(b) != "tool_result" for b in content[: len(results)]):
                    return False
        previous = message
    return True


def _drop_empty(messages: list[dict]) -> list[dict]:
    return [m for m in messages if m["content"]]


def _drop_leading_assistant(messages: list[dict]) -> list[dict]:
    start = 0
    while start < len(messages) and messages[start]["role"] != "user":
        start += 1
    return messages[start:]


def _merge_same_role(messages: list[dict]) -> list[dict]:
    merged: list[dict] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {
                "role": message["role"],
                "content": merged[-1]["content"] + message["content"],
            }
        else:
            merged.append(message)
    # The API wants a user message's tool_result blocks before any text in it; merging a typed
    # message onto a tool-result message can put text first, so restore that order.
    return [_results_first(m) for m in merged]


def _results_first(message: dict) -> dict:
    if message["role"] != "user":
        return message
    results = tool_results(message["content"])
    others = [b for b in message["content"] if type_of(b) != "tool_result"]
    return {"role": "user", "content": results + others}


def _pair_tools(messages: list[dict]) -> list[dict]:
    """Drop every tool_use without its result in the next message, and every orphaned result."""
    fixed = []
    for i, message in enumerate(messages):
        before = messages[i - 1] if i > 0 else None
        after = messages[i + 1] if i + 1 < len(messages) else None
        if message["role"] == "assistant":
            answered = _ids(after, "user", "tool_result", "tool_use_id")
            keep = [b for b in message["content"] if not _unmatched(b, "tool_use", "id", answered)]
        else:
            asked = _ids(before, "assistant", "tool_use", "id")
            keep = [
                b
                for b in message["content"]
                if not _unmatched(b, "tool_result", "tool_use_id", asked)
            ]
        fixed.append({"role": message["role"], "content": keep})
    return fixed


def _ids(message: dict | None, role: str, kind: str, key: str) -> set[str]:
    if message is None or message["role"] != role:
        return set()
    return {b.get(key) for b in of_type(message["content"], kind)}


def _unmatched(block: dict, kind: str, key: str, partners: set[str]) -> bool:
    return type_of(block) == kind and block.get(key) not in partners
