"""The fault campaign's client side: a browser tab (one websocket on one conversation, on one
server process, logged in with a session cookie), the messages a person sent and what they learnt
of each, and the patterns the tabs read the server's frames with."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from bench.campaign.campaign import Campaign
from bench.campaign.servers import ServerSlot
from bench.harness.processes import HOST

FINAL = {"complete", "interrupted", "error"}

DELTA_RE = re.compile(r'hx-swap-oob="beforeend:#msg-(\d+)-text"')
ARTICLE_RE = re.compile(r"<article\b([^>]*)>")
NOTICE_RE = re.compile(r'<div id="notice"([^>]*)>(.*?)</div>', re.S)
ATTR_RE = re.compile(r'([\w-]+)="([^"]*)"')
KEY_IN_HTML_RE = re.compile(r"\b(k\d+t\d+):")
PIN_RE = re.compile(r'hx-post="/messages/(\d+)/pin/"')
DIVIDER_RE = re.compile(r'id="compaction-(\d+)"')


@dataclass
class Sent:
    """One user message a client sent, and what it learnt of its fate."""

    key: str
    text: str
    at: float
    accepted: bool = False  # the server answered the send with `send-accepted`
    refused: str = ""  # ... or with a notice
    socket_lost: str = ""  # the socket closed before either: how, and how soon
    scenario: str = ""
    user_seq: int | None = None
    started: bool = False
    final: str = ""  # the reply's final status, as a client saw it
    final_via: str = ""  # "frame", or "export.json" (a tab that was away when it came)
    answered_in: float | None = None  # seconds from the send to `send-accepted`

    @property
    def reply_seq(self) -> int | None:
        return None if self.user_seq is None else self.user_seq + 1


class Person(Protocol):
    """What a tab needs of the person using it (`person.Chat` is one): their session, their
    conversation, where to hand each frame and whom to wake, and the campaign's tally of tabs."""

    campaign: Campaign
    session: str
    conversation_id: int
    changed: asyncio.Event

    def on_frame(self, tab: Tab, frame: str) -> None: ...


class Tab:
    """A browser tab: one websocket on one conversation, on one server process."""

    def __init__(self, chat: Person, slot: ServerSlot, conversation_id: int | None = None) -> None:
        self.chat = chat
        self.slot = slot
        self.conversation_id = conversation_id or chat.conversation_id
        self.ws = None
        self.awaiting: deque[Sent] = deque()  # sends not answered yet, in order
        self.notices: list[tuple[str, str]] = []  # (action refused, text)
        self.closed = False
        self.closing = False  # this side closed it (a tab closed), not the server
        self.generation = slot.generation  # which process of the slot it talked to
        self.reader: asyncio.Task | None = None

    async def open(self, *, read: bool = True) -> Tab:
        from websockets.asyncio.client import connect

        origin = f"http://{HOST}:{self.slot.port}"
        self.ws = await connect(
            f"ws://{HOST}:{self.slot.port}/ws/conversations/{self.conversation_id}/",
            origin=origin,
            additional_headers={"Cookie": f"sessionid={self.chat.session}"},
            open_timeout=20,
            ping_interval=None,
            max_size=2**24,
            proxy=None,
        )
        if read:
            self.reader = asyncio.ensure_future(self._read())
            self.chat.campaign.tabs[self.slot.index] += 1
        return self

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if isinstance(frame, str):
                    self.chat.on_frame(self, frame)
        except Exception:  # noqa: S110 - closed by the server, killed, or reset: all the same here
            pass
        finally:
            self.closed = True
            for sent in self.awaiting:
                sent.socket_lost = f"{self.how_closed()} {time.monotonic() - sent.at:.3f} s later"
            self.awaiting.clear()
            self.chat.changed.set()

    async def send(self, frame: dict) -> bool:
        if self.closed:
            return False
        try:
            await self.ws.send(json.dumps(frame))
        except Exception:
            return False
        return True

    def how_closed(self) -> str:
        if self.closing:
            return "the client closed the socket"
        if self.slot.generation != self.generation or not self.slot.up:
            return f"server {self.slot.index} was killed"
        return f"server {self.slot.index} closed the socket"

    async def close(self) -> None:
        self.closing = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), 5)
        if self.reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.reader, 5)


def text_of(content) -> str:
    """A message's text, from its content (a string, or blocks)."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def route(path: str) -> str:
    """A path with its ids blanked: /conversations/#/export.json."""
    return re.sub(r"\d+", "#", path.split("?")[0])
