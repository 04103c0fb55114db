"""Switching back to a version shows the branch that was on screen under it when it was left,
not merely its newest versions (back at version 1, its reply was once shown at 2/2 though 1/2
had been on screen)."""

from __future__ import annotations

import pytest

from chat.branches import remembered_end
from chat.models import Conversation, Message
from chat.snapshot import read_snapshot
from turns.versions import switch_version

# 1 (you) 2 (reply), 2 asked again as 3, then 1 edited as 4 with its reply 5.
PARENTS = {1: 0, 2: 1, 3: 1, 4: 0, 5: 4}


def test_a_remembered_end_is_followed_while_it_is_still_below_the_version():
    assert remembered_end(PARENTS, {}, 1) == 3  # nothing remembered: the newest below
    assert remembered_end(PARENTS, {"1": 2}, 1) == 2  # where it was left
    assert remembered_end(PARENTS, {"1": 5}, 1) == 3  # 5 is not below 1: not followed
    assert remembered_end(PARENTS, {"1": 2}, 4) == 5


@pytest.mark.django_db
def test_switching_back_to_a_message_shows_the_reply_chosen_under_it_before(alice, conversation):
    for seq, parent in PARENTS.items():
        Message.objects.create(
            conversation=conversation,
            seq=seq,
            parent_seq=parent,
            role="user" if seq in (1, 4) else "assistant",
            content=[{"type": "text", "text": f"m{seq}"}],
        )

    def on_screen() -> list[int]:
        leaf = Conversation.objects.get(pk=conversation.pk).leaf_seq
        return read_snapshot(conversation.pk).branch(leaf)

    assert on_screen() == [4, 5]
    switch_version(alice, conversation.pk, 4, 1)
    assert on_screen() == [1, 3]  # never seen before: its newest reply
    switch_version(alice, conversation.pk, 3, 2)  # the first reply chosen
    assert on_screen() == [1, 2]
    switch_version(alice, conversation.pk, 1, 4)
    assert on_screen() == [4, 5]
    switch_version(alice, conversation.pk, 4, 1)
    assert on_screen() == [1, 2]  # the reply that was on screen under it, 1 / 2
