"""Versions and branches: regenerate, retry, edit and switch, within the window."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat import transcript
from chat.branches import Fork, Tree, Versions, newest_end, on_branch, parent_of, versions
from chat.models import Conversation, Message
from chat.snapshot import read_snapshot
from chat.window_loading import load_window
from compaction.models import Compaction
from compaction.prompt import SYSTEM_PROMPT
from support.waiting import settle
from tests.conftest import frame, receive_until, shows, socket_for
from tests.transcripts import committed_boundary

# --- the plain functions ---------------------------------------------------------------------


def test_rows_from_before_versions_follow_the_row_before_them():
    assert parent_of(7, None) == 6
    assert parent_of(7, 2) == 2
    assert parent_of(1, None) == 0


def test_the_branch_walks_parents_from_its_end_and_stops_at_the_boundary():
    # 1 2 3 4, then message 3 edited as 5 (after 2) with its reply 6.
    parents = {1: 0, 2: 1, 3: 2, 4: 3, 5: 2, 6: 5}
    assert on_branch(parents, 6) == [1, 2, 5, 6]
    assert on_branch(parents, 4) == [1, 2, 3, 4]
    assert on_branch(parents, 6, first=2) == [2, 5, 6]


def test_switching_follows_the_newest_version_below():
    parents = {1: 0, 2: 1, 3: 2, 4: 3, 5: 2, 6: 5, 7: 5}  # 7: 6 asked again
    assert newest_end(parents, 3) == 4
    assert newest_end(parents, 5) == 7
    assert newest_end(parents, 7) == 7


def test_another_version_is_reached_from_the_branch_where_it_forks():
    # 1 2 3 4, then 3 edited as 5 with its reply 6, and message 1 edited as 7 with its reply 8.
    pairs = [(1, None), (2, None), (3, None), (4, None), (5, 2), (6, None), (7, 0), (8, None)]
    tree = Tree.of(pairs, leaf=6)
    assert tree.branch() == [1, 2, 5, 6] and tree.off_branch() == [3, 4, 7, 8]
    assert tree.fork_of(2) is None  # on the branch
    assert tree.fork_of(4) == Fork(shown=5, switchable=True)  # 4 follows 3, a version of 5
    assert tree.fork_of(8) == Fork(shown=1, switchable=True)  # down from a version of message 1
    assert Tree.of(pairs, leaf=8).fork_of(6) == Fork(shown=7, switchable=True)
    # Compacted up to 6: the versions at 2 are folded away, no switcher leads there.
    assert Tree.of(pairs, leaf=6, first_kept=6).fork_of(4) == Fork(shown=5, switchable=False)
    # Loaded above the first fork (base 2): messages up to it are on every branch.
    above = Tree.of([p for p in pairs if p[0] > 2 and p[0] < 7], leaf=6, base=2)
    assert above.branch() == [5, 6] and above.fork_of(1) is None and above.fork_of(2) is None
    assert above.fork_of(4) == Fork(shown=5, switchable=True)
    assert above.branch(4) == [3, 4] and above.off_branch(4, high=5) == [5]


def test_versions_count_siblings_of_one_role_oldest_first():
    rows = [(1, 0, "user"), (2, 1, "assistant"), (3, 1, "assistant"), (4, 1, "assistant")]
    found = versions(rows, [(3, 1, "assistant"), (1, 0, "user")])
    assert found == {3: Versions(index=2, count=3, previous=2, next=4)}


# --- over the websocket --------------------------------------------------------------------


async def turn(ws, conversation, text: str, reply_seq: int) -> None:
    await ws.send_to(text_data=frame(action="send", message=text))
    await receive_until(ws, shows(reply_seq, "complete"))
    await settle(conversation.pk)


async def rows(conversation) -> list[tuple[int, int, str, str]]:
    return [
        (m.seq, m.parent, m.role, m.status)
        async for m in Message.objects.filter(conversation=conversation).order_by("seq")
    ]


@sync_to_async
def window_seqs(conversation_id: int) -> list[int]:
    conversation = Conversation.objects.get(pk=conversation_id)
    return [e.seq for e in load_window(conversation).entries]


@sync_to_async
def page_of(conversation_id: int, **kwargs) -> transcript.Page:
    conversation = Conversation.objects.get(pk=conversation_id)
    return transcript.page(conversation, before=None, limit=50, **kwargs)


def shown(page: transcript.Page) -> list[int]:
    return [item.message.seq for item in page.items if item.kind == "message"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_regenerate_adds_a_version_and_the_window_follows_it(alice, conversation, fake_llm):
    fake_llm.enqueue(["First answer."])
    fake_llm.enqueue(["Second answer."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await turn(ws, conversation, "hi", 2)
    await ws.send_to(text_data=frame(action="reply_again", message=2))
    frames = await receive_until(ws, shows(3, "complete"))
    await settle(conversation.pk)
    joined = "".join(frames)
    # Every tab drops the old version from the screen, then streams the new one after "hi".
    assert 'hx-swap-oob="innerHTML:#transcript"' in joined
    branch = joined.split('hx-swap-oob="innerHTML:#transcript"')[1].split("hx-swap-oob")[0]
    assert 'id="msg-1"' in branch and 'id="msg-2"' not in branch
    assert 'afterend:#msg-1"' in joined
    assert "2 / 2" in frames[-1]
    assert await rows(conversation) == [
        (1, 0, "user", "complete"),
        (2, 1, "assistant", "complete"),
        (3, 1, "assistant", "complete"),
    ]
    # The model was asked with the first message alone, not the reply it replaces.
    assert [m["role"] for m in fake_llm.calls[1].messages] == ["user"]
    assert await window_seqs(conversation.pk) == [1, 3]
    page = await page_of(conversation.pk)
    assert shown(page) == [1, 3]
    assert page.items[-1].versions == Versions(index=2, count=2, previous=2, next=None)
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_switching_versions_moves_the_branch_and_the_window(alice, conversation, fake_llm):
    for text in ["A1.", "A2.", "Next answer."]:
        fake_llm.enqueue([text])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await turn(ws, conversation, "hi", 2)
    await ws.send_to(text_data=frame(action="reply_again", message=2))
    await receive_until(ws, shows(3, "complete"))
    await settle(conversation.pk)

    await ws.send_to(text_data=frame(action="switch", message=3, to=2))
    frames = await receive_until(ws, lambda f: 'innerHTML:#transcript"' in f)
    assert 'id="msg-2"' in frames[-1] and 'id="msg-3"' not in frames[-1]
    assert "1 / 2" in frames[-1]
    assert 'id="context"' in frames[-1]  # the meter follows the window
    assert (await Conversation.objects.aget(pk=conversation.pk)).leaf_seq == 2
    assert await window_seqs(conversation.pk) == [1, 2]

    # A message sent now continues the branch on screen, and becomes its end.
    await turn(ws, conversation, "go on", 5)
    assert (await rows(conversation))[3:] == [
        (4, 2, "user", "complete"),
        (5, 4, "assistant", "complete"),
    ]
    assert [m["content"][0]["text"] for m in fake_llm.calls[2].messages] == ["hi", "A1.", "go on"]
    assert (await Conversation.objects.aget(pk=conversation.pk)).leaf_seq is None
    assert await window_seqs(conversation.pk) == [1, 2, 4, 5]

    # Back to the second version: its branch ends where it did.
    await ws.send_to(text_data=frame(action="switch", message=2, to=3))
    await receive_until(ws, lambda f: 'innerHTML:#transcript"' in f)
    assert shown(await page_of(conversation.pk)) == [1, 3]
    await ws.send_to(text_data=frame(action="switch", message=3, to=2))
    await receive_until(ws, lambda f: 'innerHTML:#transcript"' in f)
    assert shown(await page_of(conversation.pk)) == [1, 2, 4, 5]
    assert (await Conversation.objects.aget(pk=conversation.pk)).leaf_seq is None
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_an_edited_message_is_sent_again_as_a_new_version(alice, conversation, fake_llm):
    for text in ["One.", "Two.", "Two, edited."]:
        fake_llm.enqueue([text])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await turn(ws, conversation, "first", 2)
    await turn(ws, conversation, "second", 4)
    await ws.send_to(text_data=frame(action="edit", message=3, text="second, better"))
    frames = await receive_until(ws, shows(6, "complete"))
    await settle(conversation.pk)
    assert (await rows(conversation))[4:] == [
        (5, 2, "user", "complete"),
        (6, 5, "assistant", "complete"),
    ]
    texts = [m["content"][0]["text"] for m in fake_llm.calls[2].messages]
    assert texts == ["first", "One.", "second, better"]
    assert "2 / 2" in "".join(frames)  # the edited message shows its place among versions
    assert await window_seqs(conversation.pk) == [1, 2, 5, 6]
    page = await page_of(conversation.pk)
    assert shown(page) == [1, 2, 5, 6]
    assert page.items[2].versions == Versions(index=2, count=2, previous=3, next=None)
    # The original is kept, with its reply: switching back shows both.
    await ws.send_to(text_data=frame(action="switch", message=5, to=3))
    await receive_until(ws, lambda f: 'innerHTML:#transcript"' in f)
    assert shown(await page_of(conversation.pk)) == [1, 2, 3, 4]
    assert await window_seqs(conversation.pk) == [1, 2, 3, 4]
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_the_first_message_can_be_edited(alice, conversation, fake_llm):
    fake_llm.enqueue(["Yes."])
    fake_llm.enqueue(["Sure."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await turn(ws, conversation, "hello", 2)
    await ws.send_to(text_data=frame(action="edit", message=1, text="hello again"))
    await receive_until(ws, shows(4, "complete"))
    await settle(conversation.pk)
    assert [m["content"][0]["text"] for m in fake_llm.calls[1].messages] == ["hello again"]
    assert await window_seqs(conversation.pk) == [3, 4]
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_a_failed_reply_is_retried_in_place(alice, conversation, fake_llm):
    fake_llm.enqueue_error("The model API is overloaded right now.", after_chunks=["Par"])
    fake_llm.enqueue(["Whole answer."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="send", message="hi"))
    frames = await receive_until(ws, shows(2, "error"))
    assert "Retry</button>" in frames[-1]
    await settle(conversation.pk)
    await ws.send_to(text_data=frame(action="reply_again", message=2))
    await receive_until(ws, shows(3, "complete"))
    await settle(conversation.pk)
    assert await window_seqs(conversation.pk) == [1, 3]
    failed = await Message.objects.aget(conversation=conversation, seq=2)
    assert (failed.status, failed.text) == ("error", "Par")  # kept, off the branch
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_versions_are_refused_with_a_reason(alice, conversation, fake_llm):
    import asyncio

    gate = asyncio.Event()
    fake_llm.enqueue(["One."])
    fake_llm.enqueue(["Two."])
    fake_llm.enqueue(["slow"], gate=gate, gate_at=0)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await turn(ws, conversation, "first", 2)
    await turn(ws, conversation, "second", 4)

    async def refused(action: str, **fields) -> str:
        await ws.send_to(text_data=frame(action=action, **fields))
        found = await receive_until(ws, lambda f: 'id="notice"' in f)
        return found[-1]

    assert "Only your own messages can be edited" in await refused("edit", message=2, text="x")
    assert "Only a reply can be asked again" in await refused("reply_again", message=1)
    assert "Type a message first" in await refused("edit", message=3, text="  ")
    assert "not on the branch" in await refused("reply_again", message=99)
    assert "Say which message" in await refused("reply_again", message="two")
    assert "not a version of message 2" in await refused("switch", message=2, to=4)

    await sync_to_async(committed_boundary)(conversation, 3)
    assert "read-only" in await refused("edit", message=1, text="changed")

    # While a reply streams, versions wait.
    await ws.send_to(text_data=frame(action="send", message="third"))
    await receive_until(ws, lambda f: "beforeend:#msg-6-text" in f or 'id="msg-6"' in f)
    assert "Wait for the reply in progress" in await refused("reply_again", message=4)
    gate.set()
    await receive_until(ws, shows(6, "complete"))
    await settle(conversation.pk)
    assert len(await rows(conversation)) == 6  # nothing was added by the refusals
    await ws.disconnect()


@pytest.mark.django_db
def test_a_page_skips_a_long_abandoned_branch_in_a_few_queries(alice, conversation):
    # 200 messages, then message 3 edited: the branch on screen is 1 2 203 204.
    Message.objects.bulk_create(
        Message(
            conversation=conversation,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=[{"type": "text", "text": f"m{seq}"}],
        )
        for seq in range(1, 201)
    )
    Message.objects.create(
        conversation=conversation,
        seq=201,
        parent_seq=2,
        role="user",
        content=[{"type": "text", "text": "edited"}],
    )
    Message.objects.create(
        conversation=conversation,
        seq=202,
        parent_seq=201,
        role="assistant",
        content=[{"type": "text", "text": "reply"}],
    )
    with CaptureQueriesContext(connection) as queries:
        page = transcript.page(conversation, before=None, limit=50)
    assert shown(page) == [1, 2, 201, 202]
    assert page.oldest_seq is None
    assert len(queries) <= 7
    assert page.items[2].versions == Versions(index=2, count=2, previous=3, next=None)
    # Older pages along the branch: asked before 201, the walk goes on from its parent.
    older = transcript.page(conversation, before=201, limit=1)
    assert shown(older) == [2] and older.oldest_seq == 2
    assert shown(transcript.page(conversation, before=2, limit=1)) == [1]


def _edited_conversation(conversation) -> None:
    """1 2 3 4, then message 3 edited as 5 with its reply 6: the branch is 1 2 5 6."""
    for seq in range(1, 5):
        Message.objects.create(
            conversation=conversation,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=[{"type": "text", "text": f"m{seq}"}],
        )
    Message.objects.create(
        conversation=conversation,
        seq=5,
        parent_seq=2,
        role="user",
        content=[{"type": "text", "text": "edited"}],
    )
    Message.objects.create(
        conversation=conversation,
        seq=6,
        parent_seq=5,
        role="assistant",
        content=[{"type": "text", "text": "answer"}],
    )


@pytest.mark.django_db
def test_the_state_knows_which_messages_have_an_older_version(conversation):
    _edited_conversation(conversation)
    assert read_snapshot(conversation.pk).later_versions() == {5}  # 6 answers 5: no other version
    Conversation.objects.filter(pk=conversation.pk).update(leaf_seq=4)  # switched back to 3
    conversation.refresh_from_db()
    assert read_snapshot(conversation.pk).later_versions() == {5}  # 3 is the older one still
    committed_boundary(conversation, first_kept_seq=5)
    assert read_snapshot(conversation.pk).later_versions() == set()  # 3 is before the boundary


@pytest.mark.django_db
def test_a_compaction_does_not_cut_at_an_edited_message(conversation, settings):
    from django.db import transaction

    from chat import compactions
    from chat.window_loading import state_of

    settings.CONTEXT_BUDGET_TOKENS, settings.KEEP_TAIL_SHARE = 2_000, 0.25  # keep 500
    _edited_conversation(conversation)
    for seq, role in [(7, "user"), (8, "assistant")]:
        Message.objects.create(
            conversation=conversation, seq=seq, role=role, content=[{"type": "text", "text": "x"}]
        )
    for seq, tokens in {1: 400, 2: 400, 5: 100, 6: 100, 7: 100, 8: 100}.items():
        Message.objects.filter(conversation=conversation, seq=seq).update(tokens=tokens)
    # The tail from 5 (400 tokens) would fit, but would leave 3, its older version, behind.
    with transaction.atomic():
        locked = Conversation.objects.locked(conversation.pk)
        state = read_snapshot(locked.pk)
        opened = compactions.open_locked(
            locked,
            state_of(locked, state),
            state.later_versions(),
            trigger=Compaction.Trigger.MANUAL,
        )
    assert opened.row.first_kept_seq == 7


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_a_reply_asked_again_after_making_room_shows_under_its_message(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 20_000
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    for n in range(1, 5):
        fake_llm.enqueue([f"Reply {n}: " + "noted " * 60])
        await turn(ws, conversation, f"Turn {n} " + "word " * 120, 2 * n)
    # A smaller budget now: asked again, the last reply's window no longer fits as it is.
    settings.CONTEXT_BUDGET_TOKENS = 1_000
    fake_llm.enqueue_text("<summary>## Primary request and intent\nFour turns of words.</summary>")
    fake_llm.enqueue(["Again, in brief."])
    await ws.send_to(text_data=frame(action="reply_again", message=8))
    frames = await receive_until(ws, shows(9, "complete"))
    await settle(conversation.pk)
    joined = "".join(frames)
    assert "Compacted" in joined  # room was made first
    assert 'afterend:#msg-7"' in joined  # then the new version streamed under its message
    assert (await Message.objects.aget(conversation=conversation, seq=9)).parent == 7
    # Its switcher shows from its first frame, as the page shows it.
    started = next(f for f in frames if 'id="msg-9"' in f)
    assert '<span class="version-count">2 / 2</span>' in started
    page = await page_of(conversation.pk)
    assert page.items[-1].versions == Versions(index=2, count=2, previous=8, next=None)
    await ws.disconnect()


async def _four_long_turns(ws, conversation, fake_llm, settings) -> None:
    settings.CONTEXT_BUDGET_TOKENS = 20_000
    for n in range(1, 5):
        fake_llm.enqueue([f"Reply {n}: " + "noted " * 240])
        await turn(ws, conversation, f"Turn {n} " + "word " * 480, 2 * n)
    # A version now waits for a compaction first (its summary requests fit this budget too).
    settings.CONTEXT_BUDGET_TOKENS = 4_000


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
@pytest.mark.parametrize("action", ["reply_again", "edit"])
async def test_a_version_taken_back_while_queued_gives_the_earlier_one_back(
    alice, conversation, fake_llm, settings, action
):
    import asyncio

    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await _four_long_turns(ws, conversation, fake_llm, settings)
    gate = asyncio.Event()
    fake_llm.enqueue_text("<summary>## Primary request\nWords.</summary>", gate=gate, gate_at=0)
    for _ in range(5):  # the span may be folded in parts: each asks for its brief
        fake_llm.enqueue_text("<summary>## Primary request\nWords.</summary>")
    if action == "edit":
        await ws.send_to(text_data=frame(action="edit", message=7, text="Turn 4, shorter."))
        cancel = 9  # the edited message, with its reply 10
    else:
        await ws.send_to(text_data=frame(action="reply_again", message=8))
        cancel = 7  # shown as queued: the message the new reply answers
    await receive_until(ws, lambda f: "Compacting" in f)
    await ws.send_to(text_data=frame(action="cancel", message=cancel))
    await receive_until(ws, lambda f: f'id="msg-{cancel}"' in f)
    gate.set()
    await settle(conversation.pk)
    statuses = {m.seq: m.status async for m in Message.objects.filter(conversation=conversation)}
    if action == "edit":
        assert (statuses[9], statuses[10]) == ("cancelled", "cancelled")
    else:
        assert (statuses[7], statuses[9]) == ("complete", "cancelled")
    # The branch on screen is the one before the version again, ending at reply 8.
    assert (await Conversation.objects.aget(pk=conversation.pk)).leaf_seq == 8
    assert shown(await page_of(conversation.pk))[-2:] == [7, 8]
    # Four turns and the summary's requests: the version was never sent.
    assert [c.system == SYSTEM_PROMPT for c in fake_llm.calls[4:]] == [True] * (
        len(fake_llm.calls) - 4
    ) and len(fake_llm.calls) > 4
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_versions_wait_for_a_draft_summary_to_be_reviewed(alice, conversation, fake_llm):
    fake_llm.enqueue(["One."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await turn(ws, conversation, "first", 2)
    await sync_to_async(Compaction.objects.create)(
        conversation=conversation, trigger="manual", status="draft", first_kept_seq=1
    )
    await ws.send_to(text_data=frame(action="reply_again", message=2))
    found = await receive_until(ws, lambda f: 'id="notice"' in f)
    assert "draft summary is waiting for your review" in found[-1]
    await ws.disconnect()
