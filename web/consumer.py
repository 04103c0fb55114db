"""The websocket of one conversation: parse a frame, call an action, hand work to the engine.

Thin on purpose: validation, writes and what every tab is told live in the actions
(turns/actions.py, turns/compacting.py), the turn in turns/engine.py. Every
refusal is a notice for this socket only.
"""

from __future__ import annotations

import json
import logging
import time

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from chat.models import Conversation
from core import channel_layer, db, runtime
from core.errors import ActionError
from render import frames
from turns import actions, active_users, compacting, engine
from turns.tasks import hold

log = logging.getLogger(__name__)

# A frame is the message plus htmx's headers; anything far beyond the message limit is refused
# before it is parsed.
FRAME_OVERHEAD = 8_192
# The close code when the user's session ended elsewhere (4000-4999 are the application's).
SESSION_ENDED = 4401
# "Try again later": the channel layer (Redis) is down. An open socket is closed with it; a new
# one is refused at the handshake (the browser sees 1006). Either way the page shows its banner,
# reconnects by itself once the layer is back (htmx reconnects after 1006, 1011, 1012 and 1013
# only), and fetches the transcript again, so it misses nothing.
LAYER_DOWN = 1013
LAYER_DOWN_NOTICE = (
    "Live updates are paused: the server cannot reach Redis, which carries replies to your "
    "tabs. What you did here is saved, and a reply is still written. This page reconnects by "
    "itself when Redis is back and shows everything that happened meanwhile."
)


class MalformedFrames(logging.Filter):
    """On the server's logger (uvicorn.error): a text frame that is not UTF-8 never reaches the
    consumer; the server closes the socket (1007) and logs an ERROR with a traceback, for what
    is a client's mistake. One WARNING line instead, like a frame that is not JSON."""

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Invalid UTF-8 sequence received from client"):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = "refused a frame that was not valid UTF-8 (closed 1007)", ()
            record.exc_info = record.exc_text = None
        return True


class ConversationConsumer(AsyncWebsocketConsumer):
    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except Exception as exc:
            # The layer names this socket's channel before `connect` runs: with Redis down that
            # fails first. Refuse the handshake as `connect` would, rather than with a 500 and
            # a traceback per retry of every tab. A failure to reach Redis says so itself (a
            # hung Redis is not asked twice); anything else is checked with one round trip.
            if channel_layer.failure_of(exc) is not None:
                channel_layer.outage(exc)
            elif isinstance(exc, OSError):  # the browser went away while it was sent a frame
                log.debug("a socket closed under a send: %s", exc)
                return
            elif await channel_layer.reachable():
                raise
            log.debug("refused a socket: the channel layer is not reachable")
            await send({"type": "websocket.close", "code": LAYER_DOWN})

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.conversation_id = None
        try:
            conversation = await db.run(
                Conversation.objects.owned,
                self.user,
                self.scope["url_route"]["kwargs"]["conversation_id"],
            )
        except ActionError:
            await self.close(code=4404)  # before accept: the handshake is refused (403)
            return
        self.conversation_id = conversation.pk
        self.user_checked_at = time.monotonic()  # the handshake found the user active
        self.group = channel_layer.conversation_group(conversation.pk)
        self.user_group = channel_layer.user_group(self.user.pk)
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
            await self.channel_layer.group_add(self.user_group, self.channel_name)
        except Exception:  # Redis is down: the page keeps trying, and reconnects when it is back
            self.conversation_id = None
            await self.close(code=LAYER_DOWN)
            return
        await self.accept()
        runtime.current().loop().sockets.add(self)
        engine.ensure_started()  # servers without an ASGI lifespan start it on first use

    async def dispatch(self, message) -> None:
        # Channels closes stale database connections before every message it dispatches, a hop
        # to the one sync thread that every socket of the process shares. This consumer does
        # no database work on that thread (its work runs on core.db's threads, which look after
        # their own connections), so every frame and fragment skips the hop.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def disconnect(self, code) -> None:
        # The reply is not this socket's to cancel: it finishes and saves without it.
        runtime.current().loop().sockets.discard(self)
        if self.conversation_id is not None:
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
                await self.channel_layer.group_discard(self.user_group, self.channel_name)
            except Exception as exc:  # Redis is down: its groups' members expire there
                channel_layer.outage(exc)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        if text_data is None:
            return await self.refuse("Only text frames are understood.")
        if len(text_data) > settings.MAX_MESSAGE_CHARS * 4 + FRAME_OVERHEAD:
            return await self.refuse(
                f"That message is too long; the limit is {settings.MAX_MESSAGE_CHARS:,} characters."
            )
        try:
            frame = json.loads(text_data)
        except ValueError as exc:
            log.warning("refused a frame that was not valid JSON (user %s): %s", self.user.pk, exc)
            return await self.refuse("That frame was not valid JSON.")
        if not isinstance(frame, dict):
            return await self.refuse("That frame was not a JSON object.")
        action = frame.get("action")
        handler = self.ACTIONS.get(action) if isinstance(action, str) else None
        if handler is None:
            return await self.refuse(f"Unknown action {str(frame.get('action'))[:40]!r}.")
        # The action's own work is in the database and goes ahead either way; only what it
        # tells the tabs travels through the layer. If that is down, this tab is told so and
        # dropped, and catches up when it reconnects.
        if not await self.user_active():
            return await self.user_gone()
        layer_up = await channel_layer.reachable()
        try:
            await handler(self, frame)
        except ActionError as exc:
            await self.refuse(exc.reason, about=action)
        if not layer_up:
            await self.layer_down()

    async def missed(self) -> None:
        """Frames to this socket may have been lost (turns/engine.py): fetch again."""
        await self.send(text_data=frames.missed())

    async def layer_down(self) -> None:
        """The channel layer is down: say so, and close (turns/engine.py calls this for
        every socket of the process, when its heartbeat finds the layer down)."""
        await self.refuse(LAYER_DOWN_NOTICE, about="layer")
        await self.close(code=LAYER_DOWN)

    async def user_active(self) -> bool:
        """Whether the user may still act: deactivated or deleted by a query sends no signal
        (turns/active_users.py). One query at most every RECHECK_SECONDS."""
        if time.monotonic() - self.user_checked_at < active_users.RECHECK_SECONDS:
            return True
        if not await db.run(active_users.active, [self.user.pk]):
            return False
        self.user_checked_at = time.monotonic()
        return True

    async def user_gone(self) -> None:
        """The user was deactivated or deleted: closed as a session that ended (the page
        reconnects, and is refused)."""
        await self.close(code=SESSION_ENDED)

    async def refuse(self, reason: str, *, about: str = "") -> None:
        await self.send(text_data=frames.notice(reason, about=about))

    # --- actions ---------------------------------------------------------------------------

    async def on_send(self, frame: dict) -> None:
        claim = await hold(
            actions.send(
                self.user, self.conversation_id, frame.get("message"), frame.get("attachments")
            )
        )
        engine.start(claim.step)
        await self.send(text_data=frames.accepted())

    async def on_cancel(self, frame: dict) -> None:
        await actions.cancel(self.user, self.conversation_id, frame.get("message"))

    async def on_stop(self, frame: dict) -> None:
        if await actions.stop(self.user, self.conversation_id, frame.get("message")):
            engine.kick(self.conversation_id)  # its process had died: run what waits behind

    async def on_compact(self, frame: dict) -> None:
        engine.start(
            await hold(
                compacting.compact_now(self.user, self.conversation_id, frame.get("instructions"))
            )
        )

    async def on_approve(self, frame: dict) -> None:
        await compacting.approve_and_tell(
            self.user, self.conversation_id, frame.get("compaction"), frame.get("summary")
        )

    async def on_discard(self, frame: dict) -> None:
        await compacting.discard_and_tell(self.user, self.conversation_id, frame.get("compaction"))

    async def on_regenerate(self, frame: dict) -> None:
        engine.start(
            await hold(
                compacting.regenerate(
                    self.user,
                    self.conversation_id,
                    frame.get("compaction"),
                    frame.get("instructions"),
                )
            )
        )

    async def on_undo(self, frame: dict) -> None:
        await compacting.undo_and_tell(self.user, self.conversation_id)

    async def on_reply_again(self, frame: dict) -> None:
        claim = await hold(
            actions.new_version(self.user, self.conversation_id, frame.get("message"))
        )
        engine.start(claim.step)

    async def on_edit(self, frame: dict) -> None:
        claim = await hold(
            actions.new_version(
                self.user, self.conversation_id, frame.get("message"), frame.get("text", "")
            )
        )
        engine.start(claim.step)

    async def on_switch(self, frame: dict) -> None:
        await actions.switch_version(
            self.user, self.conversation_id, frame.get("message"), frame.get("to")
        )

    ACTIONS = {
        "send": on_send,
        "cancel": on_cancel,
        "stop": on_stop,
        "compact": on_compact,
        "approve": on_approve,
        "discard": on_discard,
        "regenerate": on_regenerate,
        "undo": on_undo,
        "reply_again": on_reply_again,
        "edit": on_edit,
        "switch": on_switch,
    }

    # --- group events ------------------------------------------------------------------------

    async def chat_html(self, event: dict) -> None:
        await self.send(text_data=event["html"])

    async def session_end(self, event: dict) -> None:
        await self.close(code=SESSION_ENDED)
