"""ChatGPT's conversations.json: each conversation a tree of nodes (`mapping`: a node names its
`parent` and its `children`, and may hold a `message`), with `current_node` the node the person
last saw. The whole tree is imported: a regenerated reply, or an edited message, is a child of
the same node as the one it replaces, so it becomes a version of it here (a message with the
same parent and role, chat/branches.py), and the branch on screen is the one ending at
`current_node`.

Only what the user and the assistant wrote is kept, as text. A node without a message, or with
a system or tool message or no text, is read past: its children follow the nearest message
above it (none: they open the conversation).

A tree that contradicts itself is refused with the node it goes wrong at, never guessed at: a
parent or a child that is not in the mapping, a child that names another parent, a node listed
twice, a node whose parent does not list it, and parents that loop. ChatGPT writes each link
both ways, so a file failing these was altered, and any guess would import a conversation
nobody saw.

Memory stays bounded by what the tree must hold: each node is kept compact from the moment it
is read (a `Node`: its parent, its children and its message's role, text and date, each node id
one shared string), never as the file's dicts; the walk is iterative (a chain of any length, no
recursion limit) and hands each message over as it reaches it, to be written in batches, so the
messages are never all built at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from chat.imports.history import Said, epoch
from chat.imports.history import text as _text
from chat.imports.reader import ANY, SCALAR, Each, describe
from chat.imports.schema import ROLES, Imported, optional, title
from core.errors import ActionError


class Node(NamedTuple):
    """One node of the tree, checked and compact: a 200,000-node tree holds as many, so its
    message is flat in it and its date the file's number (made a date when it is walked)."""

    parent: str | None
    children: tuple[str, ...]
    role: str | None  # None: no message, or one read past
    text: str = ""
    written: float | None = None  # seconds since 1970, checked


def compactor():
    """The reducer for one conversation's mapping (reader.Each): each node checked and made a
    `Node`, its ids shared with the mapping's keys. A node that fails a check is kept as the
    file gave it, so `chatgpt` refuses it with its place in words."""
    ids: dict[str, str] = {}

    def compact(key: str, raw) -> tuple[str, object]:
        key = ids.setdefault(key, key)
        try:
            node = _node(raw, "")
        except ActionError:
            return key, raw
        parent = None if node.parent is None else ids.setdefault(node.parent, node.parent)
        children = tuple(ids.setdefault(c, c) for c in node.children)
        return key, node._replace(parent=parent, children=children)

    return compact


# What the reader builds of a conversation (chat/imports/reader.py): these keys, the rest read past.
_KEEP_NODE = {
    "parent": SCALAR,
    "children": ANY,
    "message": {"author": {"role": SCALAR}, "content": {"parts": ANY}, "create_time": SCALAR},
}
KEEP_CONVERSATION = {
    "title": SCALAR,
    "current_node": SCALAR,
    "mapping": Each(_KEEP_NODE, compactor),
    "create_time": SCALAR,
    "update_time": SCALAR,
}


def chatgpt(raw, n: int) -> tuple[Imported, Iterator[Said]]:
    """Conversation `n` of the file, every link checked: its title and dates, and its messages
    as the walk meets them (a message's parent always before it). The branch on screen's end
    (`leaf`) is set once the walk has ended, which also refuses nodes it never reached."""
    where = f"conversation {n}"
    if not isinstance(raw, dict):
        raise ActionError(f"Conversation {n} is {describe(raw)}; it must be an object.")
    mapping = raw.get("mapping")
    if not isinstance(mapping, dict):
        raise ActionError(f'Conversation {n} has no "mapping" of messages ({describe(mapping)}).')
    for key, node in mapping.items():
        if not isinstance(node, Node):  # failed a check when read, or read whole at the top
            mapping[key] = _node(node, f"node {_shown(key)} of {where}")
    roots = _checked_links(mapping, where)
    current = raw.get("current_node")
    if current is not None and not isinstance(current, str):
        raise ActionError(f"The current_node of {where} is {describe(current)}.")
    if current not in mapping:  # no current node: the last node without children
        current = next((k for k in reversed(mapping) if not mapping[k].children), None)
    imported = Imported(
        title=title(raw.get("title"), where),
        created_at=epoch(raw.get("create_time"), f"the create_time of {where}"),
        updated_at=epoch(raw.get("update_time"), f"the update_time of {where}"),
    )
    return imported, _walk(mapping, roots, current, imported, where)


def _node(raw, at: str) -> Node:
    """A node of the file checked (an object, its parent an id, its children a list of ids,
    its message's parts text) and made compact."""
    if not isinstance(raw, dict):
        raise ActionError(f"The {at} is {describe(raw)}; nodes are objects.")
    parent = optional(raw.get("parent"), str, f"The parent of {at} is", "it must be an id")
    children = raw.get("children")
    if children is not None and not (
        isinstance(children, list) and all(isinstance(c, str) for c in children)
    ):
        raise ActionError(f"The children of {at} must be a list of node ids.")
    return Node(parent, tuple(children or ()), *_message(raw, at))


def _checked_links(mapping: dict[str, Node], where: str) -> list[str]:
    """The roots (nodes without a parent), once each node's links are checked: its parent and
    each child in the mapping, each child naming it as its parent, none listed twice."""
    roots = []
    for key, node in mapping.items():
        at = f"node {_shown(key)} of {where}"
        if node.parent is None:
            roots.append(key)
        elif node.parent not in mapping:
            raise ActionError(f"The parent of {at}, {_shown(node.parent)}, is not in the mapping.")
        if len(set(node.children)) < len(node.children):
            raise ActionError(f"The children of {at} name one node twice.")
        for child in node.children:
            if child not in mapping:
                raise ActionError(f"A child of {at}, {_shown(child)}, is not in the mapping.")
            named = mapping[child].parent
            if named != key:
                says = "has no parent" if named is None else f"names {_shown(named)} as its parent"
                raise ActionError(
                    f"The {at} lists {_shown(child)} as its child, but that node {says}."
                )
    return roots


def _walk(
    mapping: dict[str, Node], roots: list[str], current, imported: Imported, where: str
) -> Iterator[Said]:
    """Walk the tree depth first from its roots, in the order the file lists children (the
    order ChatGPT made the versions), handing over each node's message with the number of the
    message above it; then set the branch on screen's end, or refuse nodes never reached.
    Holds only the nodes waiting to be visited: their siblings, not the whole tree."""
    # (node, the number of the nearest message above it: 0, none), next to visit on top.
    waiting = [(key, 0) for key in reversed(roots)]
    visited = made = 0
    while waiting:
        key, above = waiting.pop()
        visited += 1
        node = mapping[key]
        if node.role is not None:
            made += 1
            written = epoch(node.written, "a create_time")  # checked when read
            yield Said(
                node.role,
                [{"type": "text", "text": node.text}],
                parent=above,
                created_at=written or imported.created_at,
            )
            above = made
        if key == current:
            imported.leaf = above or None
        waiting.extend((child, above) for child in reversed(node.children))
    if visited < len(mapping):
        raise ActionError(_unreached(mapping, roots, where))


def _unreached(mapping: dict[str, Node], roots: list[str], where: str) -> str:
    """Why some nodes were never reached from a root (each link already checked both ways from
    the parent's side): one's parent does not list it, or parents loop. Found only for a
    refusal, so its extra memory is spent only then."""
    listed = {c for node in mapping.values() for c in node.children}
    for key, node in mapping.items():
        if node.parent is not None and key not in listed:
            parent = _shown(node.parent)
            return (
                f"The node {_shown(key)} of {where} names {parent} as its parent, "
                f"but {parent} does not list it among its children."
            )
    # Every node is listed by its parent, so the unreached ones hang from a loop of parents.
    reached = set(roots)
    waiting = list(roots)
    while waiting:
        for child in mapping[waiting.pop()].children:
            reached.add(child)
            waiting.append(child)
    key = next(k for k in mapping if k not in reached)
    seen = set()
    while key not in seen:
        seen.add(key)
        key = mapping[key].parent
    return (
        f"The nodes of {where} loop: following the parents from {_shown(key)} leads back to "
        "it, so they have no first message."
    )


def _message(node: dict, at: str) -> tuple[str | None, str, float | None]:
    """The node's message as (role, text, written), or a role of None for one read past (none,
    not the user's or the assistant's, or no text)."""
    message = node.get("message")
    if message is None:
        return None, "", None
    if not isinstance(message, dict):
        raise ActionError(f"The message of {at} is {describe(message)}; it must be an object.")
    author = optional(message.get("author"), dict, f"The author of {at} is", "it must be an object")
    role = (author or {}).get("role")
    role = optional(role, str, f"The author's role in {at} is", "it must be a string")
    content = message.get("content")
    content = optional(content, dict, f"The content of {at} is", "it must be an object")
    parts = (content or {}).get("parts")
    parts = optional(parts, list, f"The parts of {at} are", "they must be a list")
    for i, part in enumerate(parts or [], start=1):
        if not isinstance(part, str | dict):  # text, or an attachment (an image) left out
            raise ActionError(f"Part {i} of {at} is {describe(part)}; it must be text.")
    text = "\n".join(p for p in parts or [] if isinstance(p, str)).strip()
    written = message.get("create_time")
    epoch(written, f"the create_time of {at}")
    if role not in ROLES or not text:
        return None, "", None
    return next(r for r in ROLES if r == role), _text(text, f"the text of {at}"), written


def _shown(key: str) -> str:
    return repr(key[:40])
