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

The walk is iterative (a chain of any length, no recursion limit) and holds, besides the
messages it makes, only the nodes waiting to be visited: their siblings, not the whole tree.
"""

from __future__ import annotations

from chat.imports.history import Said, epoch
from chat.imports.history import text as _text
from chat.imports.reader import describe
from chat.imports.schema import ROLES, Imported, optional, title
from core.errors import ActionError


def chatgpt(raw, n: int) -> Imported:
    """Conversation `n` of the file, every node checked, its messages numbered in the order
    the walk meets them (a message's parent always before it)."""
    where = f"conversation {n}"
    if not isinstance(raw, dict):
        raise ActionError(f"Conversation {n} is {describe(raw)}; it must be an object.")
    mapping = raw.get("mapping")
    if not isinstance(mapping, dict):
        raise ActionError(f'Conversation {n} has no "mapping" of messages ({describe(mapping)}).')
    roots = _checked_links(mapping, where)
    current = raw.get("current_node")
    if current is not None and not isinstance(current, str):
        raise ActionError(f"The current_node of {where} is {describe(current)}.")
    if current not in mapping:  # no current node: the last node without children
        current = next((k for k in reversed(mapping) if not mapping[k].get("children")), None)
    imported = Imported(
        title=title(raw.get("title"), where),
        created_at=epoch(raw.get("create_time"), f"the create_time of {where}"),
        updated_at=epoch(raw.get("update_time"), f"the update_time of {where}"),
    )
    visited = _walk(mapping, roots, current, imported, where)
    if visited < len(mapping):
        raise ActionError(_unreached(mapping, roots, where))
    if imported.leaf == len(imported.messages):
        imported.leaf = None  # the newest message: as a send leaves the branch on screen
    return imported


def _checked_links(mapping: dict, where: str) -> list[str]:
    """The roots (nodes without a parent), once every node is checked (an object, its parent
    an id, its children a list of ids) and then its links: its parent and each child in the
    mapping, each child naming it as its parent, none listed twice."""
    roots = []
    for key, node in mapping.items():
        at = f"node {_shown(key)} of {where}"
        if not isinstance(node, dict):
            raise ActionError(f"The {at} is {describe(node)}; nodes are objects.")
        if optional(node.get("parent"), str, f"The parent of {at} is", "it must be an id") is None:
            roots.append(key)
        children = node.get("children")
        if children is not None and not (
            isinstance(children, list) and all(isinstance(c, str) for c in children)
        ):
            raise ActionError(f"The children of {at} must be a list of node ids.")
    for key, node in mapping.items():
        at = f"node {_shown(key)} of {where}"
        parent = node.get("parent")
        if parent is not None and parent not in mapping:
            raise ActionError(f"The parent of {at}, {_shown(parent)}, is not in the mapping.")
        children = node.get("children") or []
        if len(set(children)) < len(children):
            raise ActionError(f"The children of {at} name one node twice.")
        for child in children:
            if child not in mapping:
                raise ActionError(f"A child of {at}, {_shown(child)}, is not in the mapping.")
            named = mapping[child].get("parent")
            if named != key:
                says = "has no parent" if named is None else f"names {_shown(named)} as its parent"
                raise ActionError(
                    f"The {at} lists {_shown(child)} as its child, but that node {says}."
                )
    return roots


def _walk(mapping: dict, roots: list[str], current, imported: Imported, where: str) -> int:
    """Walk the tree depth first from its roots, in the order the file lists children (the
    order ChatGPT made the versions), adding each node's message with the number of the
    message above it; set the branch on screen's end. How many nodes it visited."""
    # (node, the number of the nearest message above it: 0, none), next to visit on top.
    waiting = [(key, 0) for key in reversed(roots)]
    visited = 0
    while waiting:
        key, above = waiting.pop()
        visited += 1
        node = mapping[key]
        said = _message(node, f"node {_shown(key)} of {where}")
        if said is not None:
            said.parent = above
            said.created_at = said.created_at or imported.created_at
            imported.messages.append(said)
            above = len(imported.messages)
        if key == current:
            imported.leaf = above or None
        waiting.extend((child, above) for child in reversed(node.get("children") or []))
    return visited


def _unreached(mapping: dict, roots: list[str], where: str) -> str:
    """Why some nodes were never reached from a root (each link already checked both ways from
    the parent's side): one's parent does not list it, or parents loop. Found only for a
    refusal, so its extra memory is spent only then."""
    listed = {c for node in mapping.values() for c in node.get("children") or []}
    for key, node in mapping.items():
        if node.get("parent") is not None and key not in listed:
            parent = _shown(node["parent"])
            return (
                f"The node {_shown(key)} of {where} names {parent} as its parent, "
                f"but {parent} does not list it among its children."
            )
    # Every node is listed by its parent, so the unreached ones hang from a loop of parents.
    reached = set(roots)
    waiting = list(roots)
    while waiting:
        for child in mapping[waiting.pop()].get("children") or []:
            reached.add(child)
            waiting.append(child)
    key = next(k for k in mapping if k not in reached)
    seen = set()
    while key not in seen:
        seen.add(key)
        key = mapping[key]["parent"]
    return (
        f"The nodes of {where} loop: following the parents from {_shown(key)} leads back to "
        "it, so they have no first message."
    )


def _message(node: dict, at: str) -> Said | None:
    """The node's message as it will be stored, or None for one read past (none, not the
    user's or the assistant's, or no text)."""
    message = node.get("message")
    if message is None:
        return None
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
    written = epoch(message.get("create_time"), f"the create_time of {at}")
    if role not in ROLES or not text:
        return None
    blocks = [{"type": "text", "text": _text(text, f"the text of {at}")}]
    return Said(role, blocks, created_at=written)


def _shown(key: str) -> str:
    return repr(key[:40])
