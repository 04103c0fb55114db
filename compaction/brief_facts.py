"""The facts section of the rule-based brief (compaction/brief.py): which of the facts it
knows fit in its room, and the lines that say, truthfully, what did not.

The facts the person's instructions ask for (compaction/instructions.py) have the first claim
on the room; the others share what is left, at most MAX_FACTS in all. A line counts the facts
asked for and names, by kind and message, those that did not fit; another names the others left
out, "for length" only when the room ran out (this brief's room: what the briefs before left
out they said on their own boundaries). Plain functions over plain values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compaction import facts
from compaction import instructions as steering
from compaction.entries import Entry

# The facts section's own cap, whatever the room: a brief is read at every turn.
MAX_FACTS = 30


@dataclass(frozen=True)
class Room:
    """The room a facts section has: `budget` characters in all, of which the facts the
    instructions ask for may take up to `claim` (their first claim), in a brief of `total`."""

    total: int
    budget: int
    claim: int


def facts_section(
    carried: str,
    entries: Sequence[Entry],
    extra: list[facts.Fact],
    steer: steering.Steer,
    room: Room,
) -> str:
    """The facts of the brief before (`carried`: its facts section) and of `entries`, merged
    with the key facts (`extra`) the rest of the brief would not state: first those the
    instructions ask for (`steer`), within `room.claim`; then the others, within what is left of
    `room.budget` and MAX_FACTS. A line says how many were asked for and which did not fit;
    another, only when the room ran out, which others were left out for length."""
    found = facts.merged([*facts.parse_lines(carried), *facts.facts_of(entries)])
    # A key fact noted is never one the brief already has in the person's words.
    stated = {fact.key for fact in found}
    known = facts.merged([*found, *(fact for fact in extra if fact.key not in stated)])
    said = {e.seq: e.text for e in entries}
    wanted = {f: steer.wants(f.text, said.get(f.seq, "")) for f in known} if steer else {}
    asked = [f for f in known if wanted.get(f)]
    others = [f for f in known if not wanted.get(f)]
    # The others' note, should any be left out, must still fit after the facts asked for.
    claim = room.claim - (_SHORT_NOTE if others else 0)
    kept, out = _fit(asked, claim, len(asked))
    notes = []
    if asked:
        names = [(steering.SINGULAR.get(wanted[f] or "", "fact"), f.seq) for f in out]
        notes.append(_asked_note(steer.describe(), len(kept), names, room.total))
    left = room.budget - sum(len(line) + 1 for line in [*notes, *(f.line() for f in kept)])
    kept_others, out_others = _fit(others, left, max(MAX_FACTS - len(kept), 0))
    if out_others:
        capped = len(kept) + len(kept_others) >= MAX_FACTS
        names = [(steering.SINGULAR.get(f.kind, f.kind), f.seq) for f in out_others]
        notes.append(
            _left_out_note(names, capped, left - sum(len(f.line()) + 1 for f in kept_others))
        )
    kept = sorted([*kept, *kept_others], key=lambda f: f.seq)
    return "\n".join([*(fact.line() for fact in kept), *notes])


# Room kept for a line that names what did not fit, when something does not; at the least, room
# for the line that only counts them.
_NOTE_ROOM = 150
_SHORT_NOTE = 45


def _fit(found: list[facts.Fact], budget: int, most: int) -> tuple[list, list]:
    """(kept, left out) of `found` within `budget` characters and `most` facts; when some are
    left out, room is made for the line that says so."""
    kept, out = facts.within(found, budget, most)
    if out:
        kept, out = facts.within(found, budget - _NOTE_ROOM, most)
    return kept, out


def _where(names: list[tuple[str, int]], room: int) -> str:
    """Facts named by kind and message, "ports #3, #13; path #7", within `room` characters:
    the rest counted ("and 4 more")."""
    seqs: dict[str, list[int]] = {}
    for kind, seq in names:
        if seq not in seqs.setdefault(kind, []):
            seqs[kind].append(seq)
    items = [(kind, seq) for kind, found in seqs.items() for seq in found]
    for shown in range(len(items), 0, -1):
        groups: dict[str, list[str]] = {}
        for kind, seq in items[:shown]:
            groups.setdefault(kind, []).append(f"#{seq}")
        text = "; ".join(
            f"{kind if len(found) == 1 else steering.plural(kind)} {', '.join(found)}"
            for kind, found in groups.items()
        )
        if shown < len(items):
            text += f" and {len(items) - shown} more"
        if len(text) <= room:
            return text
    return f"{len(items)} of them"


# A note reads as one of key_facts' notes ("- (12 ...)", no parentheses within): never a fact.
def _asked_note(what: str, kept: int, out: list[tuple[str, int]], total: int) -> str:
    """The line that says how many facts above hold what the instructions ask for, and names
    those that did not fit."""
    head = f"- ({kept} facts above are the {what} asked for"
    if not out:
        return f"{head})"
    head += f"; {len(out)} more did not fit in {total:,} characters: "
    return f"{head}{_where(out, max(_NOTE_ROOM - len(head), 20))})"


def _left_out_note(out: list[tuple[str, int]], capped: bool, room: int) -> str:
    """The line that says which other facts were left out and why, within `room` if it can:
    else only how many."""
    if capped:
        head = f"- ({len(out)} more facts not listed, a brief lists at most {MAX_FACTS}"
    else:
        head = f"- ({len(out)} more facts left out for length, this brief is full"
    if room - len(head) < 25:
        return f"{head.split(',')[0]})"
    return f"{head}: {_where(out, min(room, _NOTE_ROOM) - len(head) - 3)})"
