"""The websocket of one conversation: parse a frame, call an action, reply with fragments.

Thin on purpose: validation and writes live in `chat.actions`, the turn in `chat.turns`,
compaction in `compaction.service`. Every refusal is an error fragment for this socket only.
"""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from compaction import service as compaction

from . import actions, broadcast, render, turns
from .llm import get_client

# A frame is the message plus htmx's headers; anything far beyond the message limit is refused
# before it is parsed.
FRAME_OVERHEAD = 8_192


class ConversationConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.conversation_id = None
        try:
            conversation = await database_sync_to_async(actions.get_conversation)(
                self.user, self.scope["url_route"]["kwargs"]["conversation_id"]
            )
        except actions.ActionError:
            await self.close(code=4404)  # before accept: the handshake is refused (403)
            return
        self.conversation_id = conversation.pk
        self.group = broadcast.group_name(conversation.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code) -> None:
        # The reply task is not ours to cancel: it finishes and saves without us.
        if self.conversation_id is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        if text_data is None:
            return await self.refuse("Only text frames are understood.")
        if len(text_data) > settings.MAX_MESSAGE_CHARS * 4 + FRAME_OVERHEAD:
            return await self.refuse(
                f"That message is too long; the limit is {settings.MAX_MESSAGE_CHARS:,} characters."
            )
        try:
            frame = json.loads(text_data)
        except ValueError:
            return await self.refuse("That frame was not valid JSON.")
        if not isinstance(frame, dict):
            return await self.refuse("That frame was not a JSON object.")
        action = frame.get("action")
        handler = self.ACTIONS.get(action) if isinstance(action, str) else None
        if handler is None:
            return await self.refuse(f"Unknown action {str(frame.get('action'))[:40]!r}.")
        try:
            await handler(self, frame)
        except (actions.ActionError, compaction.CompactionRefused) as exc:
            await self.refuse(exc.reason)

    async def refuse(self, reason: str) -> None:
        await self.send(text_data=render.notice(reason))

    # --- actions ---------------------------------------------------------------------------

    async def on_send(self, frame: dict) -> None:
        message, reply = await database_sync_to_async(actions.append_user_message)(
            self.user, self.conversation_id, frame.get("message"), model=get_client().model
        )
        await broadcast.html(self.conversation_id, render.appended_message(message))
        turns.start(self.conversation_id, reply)
        if message.seq == 1:  # the first message named the conversation
            conversation = await database_sync_to_async(actions.get_conversation)(
                self.user, self.conversation_id
            )
            await broadcast.html(self.conversation_id, render.title(conversation))
        await self.send(text_data=render.notice(""))

    async def on_stop(self, frame: dict) -> None:
        await broadcast.stop(self.conversation_id)

    async def on_compact(self, frame: dict) -> None:
        if turns.is_running(self.conversation_id):
            return await self.refuse("Wait for the reply to finish, then compact.")
        instructions = str(frame.get("instructions") or "")[: settings.MAX_MESSAGE_CHARS]
        if (
            turns.start_compaction(self.conversation_id, "manual", instructions=instructions)
            is None
        ):
            await self.refuse("A compaction is already running for this conversation.")

    async def on_approve(self, frame: dict) -> None:
        row = await database_sync_to_async(compaction.approve_draft)(
            self.user, self.conversation_id, frame.get("compaction"), frame.get("summary")
        )
        await broadcast.html(
            self.conversation_id, await sync_to_async(render.compaction_outcome)(row)
        )

    async def on_discard(self, frame: dict) -> None:
        row = await database_sync_to_async(compaction.discard_draft)(
            self.user, self.conversation_id, frame.get("compaction")
        )
        await broadcast.html(
            self.conversation_id, await sync_to_async(render.compaction_outcome)(row)
        )

    async def on_regenerate(self, frame: dict) -> None:
        instructions = str(frame.get("instructions") or "")[: settings.MAX_MESSAGE_CHARS]
        draft = await database_sync_to_async(compaction.discard_draft)(
            self.user, self.conversation_id, frame.get("compaction")
        )
        turns.start_compaction(self.conversation_id, draft.trigger, instructions=instructions)

    async def on_undo(self, frame: dict) -> None:
        row = await database_sync_to_async(compaction.undo_latest)(self.user, self.conversation_id)
        await broadcast.html(
            self.conversation_id, await sync_to_async(render.compaction_outcome)(row)
        )

    ACTIONS = {
        "send": on_send,
        "stop": on_stop,
        "compact": on_compact,
        "approve": on_approve,
        "discard": on_discard,
        "regenerate": on_regenerate,
        "undo": on_undo,
    }

    # --- group events ------------------------------------------------------------------------

    async def chat_html(self, event: dict) -> None:
        await self.send(text_data=event["html"])
