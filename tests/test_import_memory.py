"""A ChatGPT import's memory grows with what the tree must hold, not with the file's dicts: each
node is kept compact from the moment it is read, and the messages are handed to the writer as the
walk reaches them, never all built at once (issue 40: a 200,000-node file cost a worker 448 MB).
Measured with tracemalloc (Python's own allocations, so the figure is the same on any machine)."""

from __future__ import annotations

import json
import tracemalloc
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import TemporaryUploadedFile

from chat.imports.importing import import_upload
from chat.models import Conversation, Message

pytestmark = pytest.mark.django_db(transaction=True)

NODES = 20_000
# What the tree and a batch of messages may cost per node: about 540 bytes now (ids shared, a
# tuple of its links and its message's text); the file's dicts and every message built at once
# cost 1,800.
MOST_PER_NODE = 900


def conversations_json(nodes: int) -> bytes:
    """One conversation: a chain of alternating messages with a regenerated reply every 20."""
    ids = [str(uuid.UUID(int=i + 1)) for i in range(nodes)]
    mapping = {ids[0]: {"id": ids[0], "message": None, "parent": None, "children": []}}
    for i in range(1, nodes):
        parent = ids[i - 2] if i % 20 == 0 else ids[i - 1]
        mapping[ids[i]] = {
            "id": ids[i],
            "parent": parent,
            "children": [],
            "message": {
                "id": ids[i],
                "author": {"role": "user" if i % 2 else "assistant", "metadata": {}},
                "create_time": 1.7e9 + i,
                "content": {"content_type": "text", "parts": [f"message {i} about the trip"]},
                "status": "finished_successfully",
                "metadata": {"model_slug": "gpt-4o", "finish_details": {"type": "stop"}},
            },
        }
        mapping[parent]["children"].append(ids[i])
    return json.dumps([{"title": "Big", "mapping": mapping, "current_node": ids[-1]}]).encode()


def test_a_big_tree_is_imported_in_memory_that_grows_with_its_nodes_not_its_dicts(settings):
    settings.IMPORT_MAX_BYTES = 50_000_000
    user = get_user_model().objects.create_user("walker", password="pw-walker-1")
    # As Django hands over an upload this big: on disk, read in chunks.
    upload = TemporaryUploadedFile("conversations.json", "application/json", 0, None)
    upload.write(conversations_json(NODES))
    upload.size = upload.tell()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        first, count = import_upload(user, upload)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert count == 1
    assert Message.objects.filter(conversation_id=first).count() == NODES - 1
    assert Conversation.objects.get(pk=first).leaf_seq is None  # the newest message's branch
    assert peak / NODES < MOST_PER_NODE, f"{peak / NODES:,.0f} bytes a node"
