"""What an import keeps of a conversation besides its words: where each message stands among its
versions, which ones are pinned, the compaction boundaries with their summaries, the dates, and
the window's figures the meter reads. Every field is checked as chat/imports/schema.py checks
blocks: its type and its range, the first wrong one refused with a sentence naming it.

This app's export.json numbers its messages 1, 2, 3… in the order listed (its `seq`), and
everything that names a message names that number: a message's `parent`, the `branch_end`, a
boundary's `first_kept_seq` and `cleared_before_seq`. A message's `window_boundary` names a
compaction by the `id` the file gives it. Kept this way, nothing needs the whole file in memory:
a parent is one listed before, and the largest number a boundary names is checked once every
message has been read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.utils import timezone

from chat.imports.reader import ANY, SCALAR, describe
from core.clean import invalid_text
from core.errors import ActionError

# The largest figure a PositiveIntegerField holds on every database.
_MOST = 2**31 - 1
# The latest moment a date may name (year 9999), as seconds since 1970.
_LAST_EPOCH = 253_402_300_799
# The compactions an import restores: the boundaries the transcript shows (a draft or a running
# one belongs to a review or a process of the original's; a failed or discarded one is no
# boundary). Spelled here, not taken from compaction.models, to keep the reader's room plain.
RESTORED = ("committed", "undone")
TRIGGERS = ("manual", "auto")
KINDS = ("summary", "clear")

KEEP_MESSAGE_HISTORY = {
    "seq": SCALAR,
    "parent": SCALAR,
    "pinned": SCALAR,
    "created_at": SCALAR,
    "updated_at": SCALAR,
    "window_tokens": SCALAR,
    "window_head_tokens": SCALAR,
    "window_boundary": SCALAR,
}
KEEP_COMPACTION = (
    {"files": ANY}
    | dict.fromkeys(
        (
            "id",
            "trigger",
            "kind",
            "status",
            "first_kept_seq",
            "cleared_before_seq",
            "cleared_count",
            "pre_tokens",
            "post_tokens",
            "summary",
            "summariser",
            "summary_model",
            "instructions",
            "edited",
            "created_at",
            "updated_at",
        ),
        SCALAR,
    )
    | {"facts": {"total": SCALAR, "kept": SCALAR, "lost": ANY}}
)
KEEP_DATES = {"created_at": SCALAR, "updated_at": SCALAR, "branch_end": SCALAR}


@dataclass(slots=True)
class Said:
    """One message as it will be stored (slots: a ChatGPT tree of 200,000 nodes holds as many
    at once)."""

    role: str
    blocks: list[dict]
    status: str = "complete"
    parent: int | None = None  # None: the message listed before it
    pinned: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None
    window_tokens: int | None = None
    window_head_tokens: int | None = None
    window_boundary: int | None = None  # a compaction's id in the file


@dataclass
class Boundary:
    """One compaction of the file, checked; `restored` says whether it becomes a row."""

    file_id: int | None
    restored: bool
    fields: dict = field(default_factory=dict)  # the row's values, dates included


# --- a message's place, pin, dates and figures ---------------------------------------------------


def message_history(raw: dict, n: int, said: Said) -> Said:
    """`said` with what message `n` of an export says of its place and figures."""
    seq = raw.get("seq")
    if seq is not None and (_integer(seq) is None or seq != n):
        raise ActionError(
            f"Message {n} has seq {_shown(seq)}; messages are numbered 1, 2, 3… in the order "
            "they are listed."
        )
    parent = raw.get("parent")
    if parent is not None and (_integer(parent) is None or not 0 <= parent < n):
        raise ActionError(
            f"Message {n}'s parent is {_shown(parent)}; it must be the seq of a message listed "
            "before it (0: none)."
        )
    said.parent = parent
    said.pinned = _flag(raw.get("pinned"), f"message {n}'s pinned")
    said.created_at = moment(raw.get("created_at"), f"message {n}'s created_at")
    said.updated_at = moment(raw.get("updated_at"), f"message {n}'s updated_at")
    said.window_tokens = count(raw.get("window_tokens"), f"message {n}'s window_tokens")
    said.window_head_tokens = count(
        raw.get("window_head_tokens"), f"message {n}'s window_head_tokens"
    )
    boundary = raw.get("window_boundary")
    if boundary is not None and _integer(boundary) is None:
        raise ActionError(
            f"Message {n}'s window_boundary is {_shown(boundary)}; it must be the id of a "
            "compaction in the file."
        )
    said.window_boundary = boundary
    return said


def branch_end(value, messages: int) -> int | None:
    """The export's `branch_end`, once every message is read: the last message on screen."""
    if value is not None and (_integer(value) is None or not 1 <= value <= messages):
        raise ActionError(
            f"The branch_end is {_shown(value)}; it must be the seq of a message in the file "
            f"(1 to {messages:,})."
        )
    return value


# --- compactions ---------------------------------------------------------------------------------


def compaction(raw, n: int) -> Boundary:
    """Compaction `n` of an export, or ActionError naming what is wrong."""
    where = f"compaction {n}"
    if not isinstance(raw, dict):
        raise ActionError(f"Compaction {n} is {describe(raw)}; a compaction is an object.")
    file_id = raw.get("id")
    if file_id is not None and _integer(file_id) is None:
        raise ActionError(f"The id of {where} is {_shown(file_id)}; it must be a whole number.")
    status = _choice(raw.get("status"), f"the status of {where}", None)
    trigger = _choice(raw.get("trigger"), f"the trigger of {where}", TRIGGERS)
    kind = _choice(raw.get("kind", "summary"), f"the kind of {where}", KINDS)
    first_kept = raw.get("first_kept_seq")
    if _integer(first_kept) is None or first_kept < 1:
        raise ActionError(
            f"The first_kept_seq of {where} is {_shown(first_kept)}; it must be the seq of a "
            "message in the file."
        )
    cleared_before = raw.get("cleared_before_seq")
    if cleared_before is not None and (_integer(cleared_before) is None or cleared_before < 1):
        raise ActionError(
            f"The cleared_before_seq of {where} is {_shown(cleared_before)}; it must be the seq "
            "of a message in the file, or null."
        )
    fields = {
        "trigger": trigger,
        "kind": kind,
        "status": status,
        "first_kept_seq": first_kept,
        "cleared_before_seq": cleared_before,
        "cleared_count": count(raw.get("cleared_count"), f"the cleared_count of {where}") or 0,
        "files": _boundary_files(raw.get("files"), where),
        "pre_tokens": count(raw.get("pre_tokens"), f"the pre_tokens of {where}") or 0,
        "post_tokens": count(raw.get("post_tokens"), f"the post_tokens of {where}") or 0,
        "summary": _words(raw.get("summary"), f"the summary of {where}"),
        "summariser": _words(raw.get("summariser"), f"the summariser of {where}")[:32],
        "summary_model": _words(raw.get("summary_model"), f"the summary_model of {where}")[:100],
        "instructions": _words(raw.get("instructions"), f"the instructions of {where}"),
        "edited": _flag(raw.get("edited"), f"the edited of {where}"),
        **_facts(raw.get("facts"), where),
        "created_at": moment(raw.get("created_at"), f"the created_at of {where}"),
        "updated_at": moment(raw.get("updated_at"), f"the updated_at of {where}"),
    }
    if status == "committed" and kind == "summary" and not fields["summary"].strip():
        raise ActionError(
            f"Compaction {n} is committed with an empty summary: the model would lose every "
            "message before it."
        )
    return Boundary(file_id, status in RESTORED, fields)


def _boundary_files(raw, where: str) -> list[dict]:
    """The files a compaction cleared or folded, as its divider lists them: each one's name,
    kind and message. Not its upload's id: the import gives each file a new one (the divider
    names it without a link)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(f, dict) for f in raw):
        raise ActionError(f"The files of {where} are {describe(raw)}; they are a list of objects.")
    return [
        {
            "id": None,
            "name": _words(f.get("name"), f"a file's name in {where}")[:200] or "file",
            "kind": _words(f.get("kind"), f"a file's kind in {where}")[:20] or "file",
            "seq": count(f.get("seq"), f"a file's seq in {where}"),
        }
        for f in raw
    ]


def _facts(raw, where: str) -> dict:
    """The key facts a compaction's summary kept and lost, as its row stores them (none: an
    export from before boundaries counted them)."""
    if raw is None:
        return {"facts_total": 0, "facts_kept": 0, "facts_lost": []}
    if not isinstance(raw, dict):
        raise ActionError(f"The facts of {where} are {describe(raw)}; they are an object.")
    total = count(raw.get("total"), f"the facts total of {where}") or 0
    kept = count(raw.get("kept"), f"the facts kept of {where}") or 0
    lost = raw.get("lost") or []
    if not isinstance(lost, list) or kept + len(lost) != total:
        raise ActionError(
            f'The facts of {where} say {kept:,} kept of {total:,}; "lost" must list the '
            "others, one string each."
        )
    return {
        "facts_total": total,
        "facts_kept": kept,
        "facts_lost": [text(fact, f"a lost fact of {where}") for fact in lost],
    }


@dataclass
class Order:
    """The boundaries of one conversation so far, to refuse one out of order: a committed
    boundary never keeps less than the one in force before it did, and none is dated before
    the one listed before it."""

    kept_from: int = 1
    last_at: datetime | None = None
    ids: set[int] = field(default_factory=set)
    largest_seq: int = 0  # the largest seq a boundary names, checked once messages are read

    def check(self, boundary: Boundary, n: int) -> None:
        fields = boundary.fields
        if boundary.file_id is not None:
            if boundary.file_id in self.ids:
                raise ActionError(f"Compaction {n} has the id {boundary.file_id} of another one.")
            self.ids.add(boundary.file_id)
        at = fields["created_at"]
        if at is not None and self.last_at is not None and at < self.last_at:
            raise ActionError(
                f"Compaction {n} is dated before the one listed before it: compactions are "
                "listed in the order they were made."
            )
        self.last_at = at or self.last_at
        if fields["status"] == "committed":
            if fields["first_kept_seq"] < self.kept_from:
                raise ActionError(
                    f"Compaction {n} keeps messages from #{fields['first_kept_seq']}, before "
                    f"#{self.kept_from} where the boundary in force before it kept them: "
                    "compactions are listed in the order they were made."
                )
            self.kept_from = fields["first_kept_seq"]
        self.largest_seq = max(
            self.largest_seq, fields["first_kept_seq"], fields["cleared_before_seq"] or 0
        )

    def check_named(self, messages: int) -> None:
        """Once every message is read: no boundary names one the file does not hold."""
        if self.largest_seq > messages:
            raise ActionError(
                f"A compaction names message #{self.largest_seq}, and the file holds "
                f"{messages:,} messages: a boundary must name a message in the file."
            )


# --- values --------------------------------------------------------------------------------------


def moment(value, what: str) -> datetime | None:
    """An ISO 8601 date and time (none: null), in UTC when it names no zone; one in the future
    is taken as now (a clock ahead would keep a conversation at the top of the list)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ActionError(f"{_cap(what)} is {describe(value)}; it must be a date such as {_ISO}.")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ActionError(
            f"{_cap(what)} is {_shown(value)}; it must be a date such as {_ISO}."
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return min(parsed, timezone.now())


def epoch(value, what: str) -> datetime | None:
    """Seconds since 1970, as ChatGPT's create_time and update_time are (none: null)."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= _LAST_EPOCH
    ):
        raise ActionError(
            f"{_cap(what)} is {_shown(value)}; it must be a number of seconds since 1970."
        )
    return min(datetime.fromtimestamp(value, UTC), timezone.now())


def count(value, what: str) -> int | None:
    """A figure of tokens or rows: a whole number from 0 (none: null)."""
    if value is None:
        return None
    if _integer(value) is None or not 0 <= value <= _MOST:
        raise ActionError(
            f"{_cap(what)} is {_shown(value)}; it must be a whole number from 0 to {_MOST:,}."
        )
    return value


_ISO = "2024-05-01T12:00:00+00:00"


def _integer(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(value, what: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ActionError(f"{_cap(what)} is {describe(value)}; it must be true or false.")
    return value


def _choice(value, what: str, allowed: tuple[str, ...] | None) -> str:
    """One of `allowed`, or (None) any text."""
    if allowed is None:
        return text(value, what)
    if not isinstance(value, str) or value not in allowed:
        shown = _shown(value) if isinstance(value, str) else describe(value)
        named = " or ".join(f'"{a}"' for a in allowed)
        raise ActionError(f"{_cap(what)} is {shown}; it must be {named}.")
    return value


def _words(value, what: str) -> str:
    return "" if value is None else text(value, what)


def text(value, what: str) -> str:
    """Text as it will be stored: a string, with no NUL and no lone surrogate."""
    if not isinstance(value, str):
        raise ActionError(f"{_cap(what)} is {describe(value)}; it must be a string.")
    problem = invalid_text(value)
    if problem:
        raise ActionError(f"{_cap(what)} {problem}.")
    return value


def _shown(value) -> str:
    if isinstance(value, str):
        return repr(value[:40])
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)[:40]
    return describe(value)


def _cap(what: str) -> str:
    return what[0].upper() + what[1:]
