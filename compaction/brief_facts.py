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

from compaction import facts, key_facts
from compaction import instructions as steering
from compaction.entries import Entry
from compaction.key_facts import KeyFact

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
    wanted: Sequence[tuple[KeyFact, str]] = (),
    elsewhere: str = "",
) -> str:
    """The facts of the brief before (`carried`: its facts section) and of `entries`, merged
    with the key facts (`extra`) the rest of the brief would not state: first those the
    instructions ask for (`steer`), within `room.claim`; then the others, within what is left of
    `room.budget` and MAX_FACTS. A line counts the key facts asked for (`wanted`,
    compaction/instructions.asked: the list the notice after a compaction counts too) that the
    brief states, this section and the rest of it (`elsewhere`), and names those that did not
    fit; another, only when the room ran out, which others were left out for length."""
    found = facts.merged([*facts.parse_lines(carried), *facts.facts_of(entries)])
    # A key fact noted is never one the brief already has in the person's words.
    stated = {fact.key for fact in found}
    known = facts.merged([*found, *(fact for fact in extra if fact.key not in stated)])
    said = {e.seq: e.text for e in entries}
    claims = {f: steer.wants(f.text, said.get(f.seq, "")) for f in known} if steer else {}
    asked = [f for f in known if claims.get(f)]
    others = [f for f in known if not claims.get(f)]
    asked_for = list(wanted)
    # The notes, should they be written, must still fit after the facts asked for.
    claim = room.claim - (_ASKED_NOTE_ROOM if asked_for else 0) - (_SHORT_NOTE if others else 0)
    kept, _ = _fit(asked, claim, len(asked))

    def asked_note(lines: list[facts.Fact]) -> list[str]:
        if not asked_for:
            return []
        brief = "\n".join([elsewhere, *(f.line() for f in lines)])
        return [_asked_note(steer.describe(), asked_for, brief, room.total)]

    # The note as the facts asked for alone make it: the others can only state more of what
    # it names, so the last note is never longer.
    notes = asked_note(kept)
    left = room.budget - sum(len(line) + 1 for line in [*notes, *(f.line() for f in kept)])
    kept_others, out_others = _fit(others, left, max(MAX_FACTS - len(kept), 0))
    notes = asked_note([*kept, *kept_others])
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
# The line about the facts asked for: its count and what did not fit, named.
_ASKED_NOTE_ROOM = 200


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
def _asked_note(what: str, wanted: list[tuple[KeyFact, str]], brief: str, total: int) -> str:
    """The line that says how many of the key facts asked for `brief` states, and names by
    kind and message those that did not fit."""
    missing = key_facts.lost([fact for fact, _ in wanted], brief)
    if not missing:
        return f"- ({len(wanted)} {what} asked for, all stated)"
    asked_as = {fact.key: kind for fact, kind in wanted}
    names = [(steering.SINGULAR.get(asked_as[f.key], "fact"), f.seq) for f in missing]
    head = (
        f"- ({len(wanted) - len(missing)} of the {len(wanted)} {what} asked for are stated; "
        f"{len(missing)} did not fit in {total:,} characters: "
    )
    return f"{head}{_where(names, max(_ASKED_NOTE_ROOM - len(head) - 1, 20))})"


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
