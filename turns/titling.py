"""A conversation's generated title: after its first reply, one small request to its model, off
the critical path (the reply is already shown; the title reaches every tab when it lands).

Asked once, at the close that gave the conversation its first-words title: a failed or empty
answer leaves that title, and nothing asks again. The request's usage is counted in the
conversation's cost; a person's rename always wins (chat/conversations.give_generated_title).
"""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings

from chat.conversations import give_generated_title
from chat.events import Renamed
from chat.models import Message
from core import db, outbox, runtime
from providers import registry, titles
from providers.values import LLMError

log = logging.getLogger(__name__)


def start(first_words: str, user_text: str, reply: Message, model: str) -> None:
    """Ask for a title for the exchange `user_text` → `reply` (the first, complete), in the
    background of this event loop; `first_words` is the title it bears until then."""
    if not settings.GENERATED_TITLES or reply.status != Message.Status.COMPLETE:
        return
    conversation_id = reply.conversation_id
    asking = asyncio.get_running_loop().create_task(
        _ask(conversation_id, model, first_words, user_text or first_words, reply.text)
    )
    here = runtime.current().loop()
    here.titles[conversation_id] = asking
    asking.add_done_callback(lambda done: _forget(here.titles, conversation_id, done))


async def _ask(conversation_id: int, model: str, given: str, user_text: str, reply_text: str):
    """Ask, count, and name; any fault leaves the first-words title (logged, never retried)."""
    request = titles.request(model, user_text, reply_text)
    try:
        final = await registry.complete(registry.client_for(model), request)
        named = await db.run(
            give_generated_title,
            conversation_id,
            given=given,
            title=titles.cleaned(final.text),
            usage=final.usage,
        )
        if named is not None:
            await outbox.send(conversation_id, Renamed(named))
    except LLMError as exc:
        log.warning("title for conversation %s not made: %s", conversation_id, exc.reason)
    except Exception:
        log.exception("title for conversation %s failed", conversation_id)


def _forget(asking: dict, conversation_id: int, done: asyncio.Task) -> None:
    if asking.get(conversation_id) is done:
        del asking[conversation_id]
