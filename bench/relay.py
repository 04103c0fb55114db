"""The baseline for bench/load.py: a bare Channels relay of the provider's stream.

Served by the same uvicorn, with the same settings (so the same channel layer) as the app:

    DJANGO_SETTINGS_MODULE=config.settings .venv/bin/uvicorn bench.relay:application --port 8001

It is what any Channels chat has to do at the least, and nothing more: no auth, no database, no
templates. It keeps each socket's conversation in memory and sends the provider the same request
a chat sends (the system prompt and every message so far: the app's window before it compacts),
so both do the same provider work and the difference is the app's own. `RELAY_HISTORY=0` sends
only the new message instead (a relay with no conversation at all).

On a `{"action": "send", "message": ...}` frame it calls the provider with the official SDK (one
`AsyncAnthropic` per process, `messages.create(stream=True)`, raw events) and sends each text
delta to the socket as it arrives, one frame per delta, in the app's format, then a
`data-status="complete"` fragment, with seqs counting like the app's (user message 1, reply 2,
next message 3, ...), so one client parser serves both.

The stream runs inside `receive`: a Channels consumer handles its messages one at a time, so a
message sent while a reply is still finishing waits for it, like the app's queue.
"""

from __future__ import annotations

import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

import anthropic  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import path  # noqa: E402
from django.utils.html import escape  # noqa: E402

_client: anthropic.AsyncAnthropic | None = None
HISTORY = os.environ.get("RELAY_HISTORY", "1") != "0"
SYSTEM = "Be brief."  # the bench's conversations' system prompt


def client() -> anthropic.AsyncAnthropic:
    """One SDK client (one connection pool) per process, made on first use inside the loop."""
    global _client
    if _client is None:
        _client = anthropic.AsyncAnthropic(
            api_key=settings.ANTHROPIC_API_KEY or "relay",
            base_url=settings.ANTHROPIC_BASE_URL or None,
            max_retries=0,
            timeout=float(settings.LLM_TIMEOUT_SECONDS),
        )
    return _client


def final(seq: int, status: str, text: str) -> str:
    return (
        f'<article id="msg-{seq}" class="message assistant" data-seq="{seq}" '
        f'data-status="{status}" hx-swap-oob="outerHTML">'
        f'<div class="text">{escape(text)}</div></article>'
    )


class RelayConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.last_seq = 0
        self.history: list[dict] = []
        await self.accept()

    async def receive(self, text_data=None, bytes_data=None) -> None:
        try:
            frame = json.loads(text_data or "")
        except ValueError:
            return
        if not isinstance(frame, dict) or frame.get("action") != "send":
            return
        seq = self.last_seq + 2  # the reply's; the user message is seq - 1
        self.last_seq = seq
        prefix = f'<span hx-swap-oob="beforeend:#msg-{seq}-text">'
        pieces: list[str] = []
        status = "complete"
        asked = {"role": "user", "content": [{"type": "text", "text": str(frame.get("message"))}]}
        try:
            stream = await client().messages.create(
                model=settings.CHAT_MODEL,
                max_tokens=settings.CHAT_MAX_TOKENS,
                system=SYSTEM,
                messages=[*self.history, asked] if HISTORY else [asked],
                stream=True,
            )
            async with stream:
                async for event in stream:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        text = event.delta.text
                        pieces.append(text)
                        await self.send(text_data=prefix + escape(text) + "</span>")
        except Exception:  # the SDK's errors, and transport errors it leaves unwrapped mid-stream
            status = "error"
        if HISTORY and pieces:
            answer = {"role": "assistant", "content": [{"type": "text", "text": "".join(pieces)}]}
            self.history += [asked, answer]
        await self.send(text_data=final(seq, status, "".join(pieces)))


application = ProtocolTypeRouter(
    {
        "websocket": URLRouter(
            [path("ws/conversations/<int:conversation_id>/", RelayConsumer.as_asgi())]
        )
    }
)
