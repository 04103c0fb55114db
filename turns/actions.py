"""What a person does to a conversation's queue over its websocket: send a message, take back a
queued one, stop a reply, make a new version or switch to another one.

Each validates and writes in one transaction on the database threads (`core.db.run`), then sends
what happened to every tab (`core.outbox`). Every one takes the requesting user and scopes its
queries to them, so no caller can reach another user's data. A returned claim's step is what the
engine runs (`engine.start`).
"""

from __future__ import annotations

from django.conf import settings

from chat import transcript
from chat.events import BranchShown, MessageAdded, MessageChanged, Progress
from chat.figures import load_panel
from chat.models import Conversation, Message
from core import channel_layer, db, outbox
from core.clean import MESSAGE, clean, number
from core.errors import ActionError
from turns import places, recovery, transitions, versions
from turns.tasks import show_recovered


async def send(user, conversation_id, text, attachments=None) -> transitions.Claim:
    """Store the user's message, with the files uploaded for it (`attachments`: their ids, in
    the order they go); it runs now or waits its turn, never refused for being early."""
    files = _files(attachments)
    text = _typed(text, has_files=bool(files))
    claim = await db.run(transitions.append, user, conversation_id, text, files)
    await _show_sent(claim)
    await show_recovered(claim.recovered)
    return claim


def _typed(text, *, has_files: bool = False) -> str:
    """What a person typed, checked before anything is stored ("" only beside files)."""
    if has_files and (text is None or (isinstance(text, str) and not text.strip())):
        return ""
    if not isinstance(text, str) or not text.strip():
        raise ActionError("Type a message first: an empty message cannot be sent.")
    return clean(text, MESSAGE, required=True)


def _files(ids) -> list[int]:
    """The frame's "attachments": upload ids, each once, at most ATTACHMENTS_PER_MESSAGE."""
    if ids is None or ids == []:
        return []
    if not isinstance(ids, list) or any(number(i) is None for i in ids):
        raise ActionError("The files of this message are not a list of upload ids.")
    files = list(dict.fromkeys(number(i) for i in ids))
    if len(files) > settings.ATTACHMENTS_PER_MESSAGE:
        raise ActionError(
            f"This message has {len(files)} files: the limit is "
            f"{settings.ATTACHMENTS_PER_MESSAGE} a message (ATTACHMENTS_PER_MESSAGE)."
        )
    return files


async def _show_sent(claim: transitions.Claim) -> None:
    """The user's message, unless the reply to it starts now: that shows it, in the same frame
    as its own bubble."""
    if claim.message is None:
        return
    if isinstance(claim.step, transitions.Turn) and claim.step.message is claim.message:
        return
    await outbox.send(
        claim.message.conversation_id, MessageAdded(claim.message, queued=claim.queued)
    )


async def cancel(user, conversation_id, seq) -> None:
    """Take back a queued message before it is sent."""
    message = await db.run(transitions.cancel, user, conversation_id, seq)
    await outbox.send(message.conversation_id, MessageChanged(message))
    if places.forget(message.conversation_id):
        # Its "Waiting: …" line goes; a message still waiting behind it says so again at the
        # next heartbeat (the sweep tries its queue).
        await outbox.send(message.conversation_id, Progress(""))


async def stop(user, conversation_id, seq=None) -> tuple[Message, ...]:
    """Stop the streaming reply (the one numbered `seq`, if given: a second Stop aimed at a
    reply that has ended must not stop the next one), wherever it runs. Returns replies closed
    because their process had died (the caller restarts the queue behind them)."""
    seq = number(seq)
    recovered = await db.run(recovery.request_stop, user, conversation_id, seq)
    conversation_id = number(conversation_id)
    await channel_layer.stop(conversation_id, seq)
    await show_recovered(recovered)
    return recovered


async def new_version(user, conversation_id, seq, text=None) -> transitions.Claim:
    """Ask a reply again (regenerate, or retry one that failed), or, with `text`, send an edited
    version of the user's message `seq`. Every tab drops the branch below it and shows the new
    version there; the earlier ones stay switchable."""
    if text is not None:
        text = _typed(text)
    made = await db.run(versions.new_version, user, conversation_id, seq, text)
    await outbox.send(made.conversation.pk, await db.run(_branch, made.conversation, made.after))
    await _show_sent(made.claim)
    return made.claim


async def switch_version(user, conversation_id, seq, to) -> None:
    """Show another version of message `seq`: every tab shows that branch, and the window (and
    its meter) follows it."""
    conversation = await db.run(versions.switch_version, user, conversation_id, seq, to)
    await outbox.send(conversation.pk, await db.run(_branch, conversation))


def _branch(conversation: Conversation, leaf: int | None = None) -> BranchShown:
    """The transcript's newest page along the branch ending at `leaf` (None: the one on
    screen), and the context panel it makes."""
    panel = load_panel(conversation)
    page = transcript.page(
        conversation,
        before=None,
        limit=settings.PAGE_MESSAGES,
        leaf=leaf,
        first_kept=panel.first_kept_seq,
    )
    return BranchShown(page, conversation, panel)
