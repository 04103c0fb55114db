"""Versions and branches, as plain functions over (seq, parent) pairs.

Every message names the one it follows (its parent; 0: none). A regenerated reply, or an edited
message sent again, is a new row with the same parent as the one it replaces: rows with one
parent and one role are versions of each other. The branch on screen runs from the
conversation's chosen end (`Conversation.leaf_seq`, else the newest message) back through the
parents. Nothing is deleted: the other versions stay in the transcript, off the branch.

Versions are made only after the latest compaction boundary, so the branch before it is fixed:
walks stop at the boundary and never grow with the length of the conversation.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass


def parent_of(seq: int, parent_seq: int | None) -> int:
    """Rows from before versions existed name no parent: they follow the row before them."""
    return seq - 1 if parent_seq is None else parent_seq


def on_branch(parents: dict[int, int], leaf: int, first: int = 1) -> list[int]:
    """The seqs of the branch ending at `leaf`, oldest first, from `first` on. `parents` maps
    seq to parent for (at least) every row from `first` on."""
    seqs = []
    seq = leaf
    while seq >= first and seq in parents:
        seqs.append(seq)
        seq = parents[seq]
    return seqs[::-1]


def newest_end(parents: dict[int, int], start: int) -> int:
    """Where the branch through `start` ends: down its newest child, again and again (the
    version most recently made there is the one the user last worked on)."""
    children: dict[int, int] = {}
    for seq, parent in parents.items():
        if seq > children.get(parent, 0):
            children[parent] = seq
    end = start
    while end in children:
        end = children[end]
    return end


def remembered_end(parents: dict[int, int], ends: dict[str, int], start: int) -> int:
    """Where the branch through version `start` ends when it is shown again: where it ended
    when it was last on screen (`ends`, by version), if that message is still below it; else
    down its newest versions."""
    end = ends.get(str(start))
    if end is not None and start in on_branch(parents, end, start):
        return end
    return newest_end(parents, start)


@dataclass(frozen=True)
class Versions:
    """Where one message stands among its versions: "‹ index / count ›"."""

    index: int  # 1-based
    count: int
    previous: int | None  # the seq of the version before it, if any
    next: int | None


def versions(
    rows: Iterable[tuple[int, int, str]], shown: Iterable[tuple[int, int, str]]
) -> dict[int, Versions]:
    """For each shown (seq, parent, role), its place among the rows with the same parent and
    role, oldest first; only messages that have more than one version are listed."""
    groups: dict[tuple[int, str], list[int]] = {}
    for seq, parent, role in rows:
        groups.setdefault((parent, role), []).append(seq)
    found = {}
    for seq, parent, role in shown:
        group = sorted(groups.get((parent, role), ()))
        if len(group) < 2 or seq not in group:
            continue
        i = group.index(seq)
        found[seq] = Versions(
            index=i + 1,
            count=len(group),
            previous=group[i - 1] if i > 0 else None,
            next=group[i + 1] if i + 1 < len(group) else None,
        )
    return found


@dataclass(frozen=True)
class Fork:
    """Where a message off the branch leaves it."""

    shown: int  # the branch's message at the fork: the version on screen, where to go
    switchable: bool  # its ‹ › switcher leads there (not when the fork is compacted)


@dataclass(frozen=True)
class Tree:
    """A conversation with versions: where each message above `base` follows, and the branch on
    screen. Nothing forks at or below `base`: those messages are on every branch."""

    parents: dict[int, int]  # seq -> parent, for every message after `base`
    end: int  # where the branch on screen ends
    base: int = 0
    first_kept: int = 1  # the latest boundary's: versions before it are compacted

    @classmethod
    def of(
        cls,
        pairs: Iterable[tuple[int, int | None]],
        leaf: int | None,
        *,
        base: int = 0,
        first_kept: int = 1,
    ) -> Tree:
        """From (seq, parent_seq) rows and the conversation's `leaf_seq` (None: the newest)."""
        parents = {seq: parent_of(seq, parent) for seq, parent in pairs}
        end = leaf if leaf is not None else max(parents, default=base)
        return cls(parents, end, base, first_kept)

    def branch(self, end: int | None = None) -> list[int]:
        """The branch ending at `end` (None: the one on screen) above `base`, oldest first."""
        return on_branch(self.parents, self.end if end is None else end, self.base + 1)

    def off_branch(
        self, end: int | None = None, *, low: int = 1, high: int | None = None
    ) -> list[int]:
        """The messages not on the branch ending at `end` (None: on screen), from `low` to
        `high`."""
        on = set(self.branch(end))
        top = max(self.parents, default=0) if high is None else high
        return sorted(s for s in self.parents if low <= s <= top and s not in on)

    @functools.cached_property
    def _on_screen(self) -> dict[int, int]:
        return {seq: i for i, seq in enumerate(self.branch())}

    def fork_of(self, seq: int) -> Fork | None:
        """None when message `seq` is on the branch on screen; else where it leaves it."""
        on = self._on_screen
        if seq <= self.base or seq in on:
            return None
        branch = self.branch()
        version = seq  # down to the version that forks from the branch
        while (parent := self.parents.get(version, self.base)) > self.base and parent not in on:
            version = parent
        after = 0 if parent <= self.base else on[parent] + 1
        if after >= len(branch):  # the branch ends at the fork: no version of it on screen
            return Fork(shown=max(parent, 1), switchable=False)
        shown = branch[after]
        return Fork(shown=shown, switchable=min(shown, version) >= self.first_kept)
