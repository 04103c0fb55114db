"""ChatGPT imports keep every version: a regenerated reply and an edited message of the `mapping`
tree become versions here, the branch `current_node` names is the one on screen, the others are
a switch away; a chain of any length imports; a tree that contradicts itself is refused with a
reason, nothing left."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import transcript
from chat.models import Conversation, Message
from tests.conftest import frame, receive_until, socket_for

pytestmark = pytest.mark.django_db(transaction=True)


def upload(client, payload):
    raw = json.dumps(payload).encode()
    return client.post(
        "/conversations/import/", {"file": SimpleUploadedFile("conversations.json", raw)}
    )


def node(key, parent, children, role=None, text=""):
    message = None
    if role is not None:
        message = {"author": {"role": role}, "content": {"parts": [text]}, "create_time": 1.7e9}
    return {"id": key, "parent": parent, "children": children, "message": message}


def tree(*nodes, current=None) -> dict:
    return {"title": "Trip", "mapping": {n["id"]: n for n in nodes}, "current_node": current}


# A hidden root and system message; the first reply regenerated (a1b); the second question
# edited (u2b), its answer after a tool step. The person last saw the edited branch.
TRIP = tree(
    node("root", None, ["sys"]),
    node("sys", "root", ["u1"], "system", ""),
    node("u1", "sys", ["a1", "a1b"], "user", "Plan a trip"),
    node("a1", "u1", ["u2", "u2b"], "assistant", "Lisbon."),
    node("u2", "a1", ["a2"], "user", "And the hotel?"),
    node("a2", "u2", [], "assistant", "Alfama."),
    node("u2b", "a1", ["tool"], "user", "And the food?"),
    node("tool", "u2b", ["a2b"], "tool", "search results"),
    node("a2b", "tool", [], "assistant", "Bacalhau."),
    node("a1b", "u1", [], "assistant", "Porto."),
    current="a2b",
)


def texts(conversation: Conversation) -> list[str]:
    page = transcript.page(conversation, before=None, limit=50)
    return [item.message.text for item in page.items if item.kind == "message"]


@pytest.mark.usefixtures("channel_layer")
async def test_a_regenerated_reply_and_an_edited_message_import_as_versions(client, alice):
    await sync_to_async(client.force_login)(alice)
    response = await sync_to_async(upload)(client, TRIP)
    assert response.status_code == 302
    imported = await Conversation.objects.aget(owner=alice)
    rows = [
        (m.seq, m.parent, m.role, m.text)
        async for m in Message.objects.filter(conversation=imported).order_by("seq")
    ]
    # Every message, each after its parent (0: none); the system and tool nodes read past.
    assert rows == [
        (1, 0, "user", "Plan a trip"),
        (2, 1, "assistant", "Lisbon."),
        (3, 2, "user", "And the hotel?"),
        (4, 3, "assistant", "Alfama."),
        (5, 2, "user", "And the food?"),
        (6, 5, "assistant", "Bacalhau."),
        (7, 1, "assistant", "Porto."),
    ]
    # The branch on screen is the one current_node names, each fork showing its place.
    assert imported.leaf_seq == 6
    page = (await sync_to_async(client.get)(f"/conversations/{imported.pk}/")).content.decode()
    assert "Bacalhau." in page and "Alfama." not in page and "Porto." not in page
    assert "1 / 2" in page and "2 / 2" in page
    assert await sync_to_async(texts)(imported) == [
        "Plan a trip",
        "Lisbon.",
        "And the food?",
        "Bacalhau.",
    ]

    # The other versions are a switch away, through the real consumer.
    ws = socket_for(alice, imported.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="switch", message=5, to=3))
    frames = await receive_until(ws, lambda f: 'innerHTML:#transcript"' in f)
    assert "Alfama." in frames[-1] and "Bacalhau." not in frames[-1] and "1 / 2" in frames[-1]
    await ws.send_to(text_data=frame(action="switch", message=2, to=7))
    frames = await receive_until(ws, lambda f: 'innerHTML:#transcript"' in f)
    assert "Porto." in frames[-1] and "Lisbon." not in frames[-1] and "2 / 2" in frames[-1]
    await ws.disconnect()
    imported = await Conversation.objects.aget(pk=imported.pk)
    assert await sync_to_async(texts)(imported) == ["Plan a trip", "Porto."]


def test_an_edited_first_message_is_a_version_of_it(client, alice):
    """Two messages opening the conversation (their node's parent is read past) are versions
    of each other; with no current_node, the branch on screen ends at the last node listed
    without children."""
    edited = tree(
        node("root", None, ["q1", "q2"]),
        node("q1", "root", ["r1"], "user", "Hi"),
        node("r1", "q1", [], "assistant", "Hello."),
        node("q2", "root", ["r2"], "user", "Hi there"),
        node("r2", "q2", [], "assistant", "Hello again."),
    )
    client.force_login(alice)
    assert upload(client, [edited]).status_code == 302
    imported = Conversation.objects.get(owner=alice)
    assert [(m.seq, m.parent) for m in imported.messages.order_by("seq")] == [
        (1, 0),
        (2, 1),
        (3, 0),
        (4, 3),
    ]
    assert imported.leaf_seq is None  # the newest message: r2
    assert texts(imported) == ["Hi there", "Hello again."]
    assert "2 / 2" in client.get(f"/conversations/{imported.pk}/").content.decode()


def test_a_chain_of_ten_thousand_nodes_imports(client, alice):
    count = 10_000
    nodes = [node("n0", None, ["n1"], "user", "message 0")]
    for i in range(1, count):
        role = "user" if i % 2 == 0 else "assistant"
        children = [f"n{i + 1}"] if i + 1 < count else []
        nodes.append(node(f"n{i}", f"n{i - 1}", children, role, f"message {i}"))
    client.force_login(alice)
    assert upload(client, tree(*nodes, current=f"n{count - 1}")).status_code == 302
    imported = Conversation.objects.get(owner=alice)
    assert imported.messages.count() == count and imported.leaf_seq is None
    assert imported.messages.get(seq=count).text == f"message {count - 1}"
    assert not imported.messages.exclude(parent_seq=None).exists()  # each follows the one before


GOOD = [node("r", None, ["a"], "user", "hi"), node("a", "r", [], "assistant", "hello")]


@pytest.mark.parametrize(
    ("nodes", "reason"),
    [
        (
            [*GOOD, node("x", "y", [], "user", "x"), node("y", "x", [], "user", "y")],
            "The node 'x' of conversation 2 names 'y' as its parent, but 'y' does not list it",
        ),
        (
            [*GOOD, node("x", "y", ["y"], "user", "x"), node("y", "x", ["x"], "user", "y")],
            "The nodes of conversation 2 loop: following the parents from 'x' leads back to it",
        ),
        (
            [*GOOD, node("x", "gone", [], "user", "x")],
            "The parent of node 'x' of conversation 2, 'gone', is not in the mapping.",
        ),
        (
            [node("r", None, ["a", "gone"], "user", "hi"), GOOD[1]],
            "A child of node 'r' of conversation 2, 'gone', is not in the mapping.",
        ),
        (
            [node("r", None, ["a"], "user", "hi"), node("a", None, [], "assistant", "x")],
            "The node 'r' of conversation 2 lists 'a' as its child, but that node has no parent.",
        ),
        (
            [node("r", None, ["a", "a"], "user", "hi"), GOOD[1]],
            "The children of node 'r' of conversation 2 name one node twice.",
        ),
    ],
    ids=["unlisted", "cycle", "missing-parent", "unknown-child", "other-parent", "twice"],
)
def test_a_tree_that_contradicts_itself_is_refused_and_leaves_nothing(client, alice, nodes, reason):
    client.force_login(alice)
    response = upload(client, [tree(*GOOD), tree(*nodes)])
    assert response.status_code == 400
    assert reason in response.content.decode().replace("&#x27;", "'")
    assert not Conversation.objects.exists() and not Message.objects.exists()
