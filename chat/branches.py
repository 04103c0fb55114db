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


def reached_from(parents: dict[int, int], branch: list[int], seq: int) -> int:
    """Where message `seq` is reached from `branch` (its seqs, oldest first, from the first
    message): `seq` itself when it is on it, else the branch's message at the fork its version
    leaves from, whose ‹ › switcher leads there."""
    on = set(branch)
    child = seq
    while child not in on:
        parent = parents.get(child, 0)
        if parent in on:
            after = branch.index(parent) + 1
            return branch[after] if after < len(branch) else seq
        if parent not in parents:  # a version of the first message
            return branch[0] if branch else seq
        child = parent
    return child


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
