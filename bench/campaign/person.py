"""One conversation's client in the fault campaign: a person who sends, waits for replies,
stops them, closes tabs and comes back, queues messages and compacts, turn after turn, over real
websockets on either server process (and now and then tries another user's conversations:
bench/campaign/probes.py)."""

from __future__ import annotations

import asyncio
import contextlib
import html
import random
import time

from bench.campaign.campaign import Campaign
from bench.campaign.probes import Probes
from bench.campaign.tabs import (
    ARTICLE_RE,
    ATTR_RE,
    DELTA_RE,
    FINAL,
    KEY_IN_HTML_RE,
    NOTICE_RE,
    Sent,
    Tab,
    route,
    text_of,
)
from bench.harness.processes import HOST
from support.faults import KEY_RE

# What a client does in one turn, and how often (see `Chat.turn_*`).
SCENARIOS = {
    "plain": 34,
    "stop": 14,
    "tab_close": 12,
    "queue_two": 10,
    "compact_during": 8,
    "compact_then_send": 8,
    "compact_after": 6,
    "stop_then_send": 8,
}
# Wording of the user's messages: characters the page and the JSON must carry verbatim.
PHRASES = [
    "What does the window hold now?",
    "Tell me about <tags> & \"quotes\" & 'apostrophes'.",
    "Explain **markdown** and `code` in one line.",
    "Ça va? Café ☕, naïve résumé, 東京.",
    "Line one\nline two\n\nline four.",
    "Is 3 < 4 > 2? Answer in 5 words.",
    "Summarise what we said so far, briefly.",
    "A longer message, so the window grows: " + "lorem ipsum dolor sit amet " * 6,
]
REPLY_TIMEOUT = 150.0  # a reply a client waits for: retries, a compaction, a stale recovery


class Chat(Probes):
    """A person on one conversation: sends, waits for replies, stops, closes tabs, compacts, and
    now and then tries another user's conversations."""

    def __init__(self, campaign: Campaign, index: int, conv: dict, turns: int) -> None:
        self.campaign = campaign
        self.index = index
        self.conversation_id = conv["id"]
        self.owner = conv["owner"]
        self.session = campaign.users[self.owner]["session"]
        self.secret = campaign.secrets[self.owner]
        self.turns = turns
        self.rng = random.Random(campaign.args.seed * 1000 + index)
        self.sents: list[Sent] = []
        self.by_key: dict[str, Sent] = {}
        self.by_user_seq: dict[int, Sent] = {}
        self.tab: Tab | None = None
        self.changed = asyncio.Event()
        self.http = None
        self.probe_rounds = 0
        self.scenario = ""

    # --- driving ---------------------------------------------------------------------------

    async def run(self) -> None:
        import httpx2

        self.http = httpx2.AsyncClient(
            cookies={"sessionid": self.session}, trust_env=False, timeout=30
        )
        self.reopening = asyncio.Lock()
        try:
            await asyncio.sleep(self.rng.uniform(0, 2))  # people do not all start at once
            await self.reopen()
            while len(self.sents) < self.turns:
                names, weights = zip(*SCENARIOS.items(), strict=True)
                scenario = self.rng.choices(names, weights)[0]
                if scenario in ("queue_two", "stop_then_send") and self.turns - len(self.sents) < 2:
                    scenario = "plain"
                self.campaign.scenarios[scenario] += 1
                self.scenario = scenario
                await getattr(self, f"turn_{scenario}")()
                if self.rng.random() < 1 / max(1, self.campaign.args.probe_every):
                    await self.probe()
                await asyncio.sleep(self.rng.uniform(0, 0.3))  # reading the reply
            for sent in self.sents:  # nothing outstanding when the driver stops
                await self.settle(sent)
        finally:
            if self.tab is not None:
                await self.tab.close()
            await self.http.aclose()

    async def turn_plain(self) -> None:
        await self.settle(await self.send())

    async def turn_stop(self) -> None:
        """Stop mid-reply (sometimes before it even started: queued, or a slow first token)."""
        sent = await self.send()
        if self.rng.random() < 0.75:
            await self.wait(lambda: sent.started or sent.final, 10)
        await asyncio.sleep(self.rng.uniform(0, 1.2))
        if not sent.final:
            await self.stop(sent)
        await self.settle(sent)

    async def turn_tab_close(self) -> None:
        """Close the tab mid-reply (sometimes before the send was even answered), come back."""
        sent = await self.send(wait_accepted=self.rng.random() < 0.6)
        await asyncio.sleep(self.rng.uniform(0, 1.2))
        self.campaign.tab_closes += 1
        await self.tab.close()
        await asyncio.sleep(self.rng.uniform(0.3, 3.0))
        await self.reopen()
        await self.settle(sent)

    async def turn_queue_two(self) -> None:
        """A second message typed while the first reply runs: it waits its turn."""
        first = await self.send(wait_accepted=False)
        second = await self.send()
        await self.settle(first)
        await self.settle(second)

    async def turn_stop_then_send(self) -> None:
        first = await self.send()
        await self.wait(lambda: first.started or first.final, 10)
        await asyncio.sleep(self.rng.uniform(0, 0.6))
        if not first.final:
            await self.stop(first)
        second = await self.send()
        await self.settle(first)
        await self.settle(second)

    async def turn_compact_during(self) -> None:
        """Compact while the reply runs (refused, or it lands between two steps)."""
        sent = await self.send()
        await self.wait(lambda: sent.started or sent.final, 10)
        await asyncio.sleep(self.rng.uniform(0, 0.6))
        await self.compact()
        await self.settle(sent)

    async def turn_compact_then_send(self) -> None:
        """Compact and send at once, possibly from two processes: the message queues behind."""
        _, sent = await asyncio.gather(self.compact(), self.send())
        await self.settle(sent)

    async def turn_compact_after(self) -> None:
        """Compact the moment a reply ends: races the auto-compaction that reply may open."""
        await self.settle(await self.send())
        await self.compact()

    # --- actions ---------------------------------------------------------------------------

    async def send(self, *, wait_accepted: bool = True) -> Sent:
        number = len(self.sents) + 1
        key = f"k{self.index:02d}t{number:03d}"
        phrase = self.rng.choice(PHRASES)
        sent = Sent(key, f"{key}: {phrase} ({self.secret})", time.monotonic())
        sent.scenario = self.scenario
        self.sents.append(sent)
        self.by_key[key] = sent
        self.campaign.count_turn()
        tab = await self.ensure_tab()
        tab.awaiting.append(sent)
        if not await tab.send({"action": "send", "message": sent.text}):
            sent.socket_lost = f"{tab.how_closed()} before the send"  # never went out
            with contextlib.suppress(ValueError):
                tab.awaiting.remove(sent)
        if wait_accepted:
            await self.wait(lambda: sent.accepted or sent.refused or sent.socket_lost, 30)
        return sent

    async def stop(self, sent: Sent) -> None:
        """Stop, naming the reply when its number is known; from this tab or, 40% of the time,
        from a tab on another process (Stop must reach the process running the reply)."""
        frame = {"action": "stop"}
        if sent.reply_seq is not None:
            frame["message"] = sent.reply_seq
        if self.rng.random() < 0.4:
            sent_from = "another tab" if await self.from_other_tab(frame) else ""
        else:
            sent_from = "the same tab" if await (await self.ensure_tab()).send(frame) else ""
        if sent_from:
            self.campaign.stops[sent_from] += 1

    async def compact(self) -> None:
        frame = {"action": "compact"}
        if self.rng.random() < 0.3:
            frame["instructions"] = "Keep every message key."
        self.campaign.compact_requests += 1
        if self.rng.random() < 0.5:
            await self.from_other_tab(frame)
        else:
            await (await self.ensure_tab()).send(frame)

    async def from_other_tab(self, frame: dict) -> bool:
        """Send one frame from a second tab, on the other process when it is up."""
        slots = [s for s in self.campaign.live() if self.tab is None or s is not self.tab.slot]
        slot = self.rng.choice(slots or self.campaign.live() or self.campaign.slots)
        try:
            tab = await Tab(self, slot).open()
        except Exception:
            return False  # its process was just killed: a tab that never opened sends nothing
        sent = await tab.send(frame)
        await asyncio.sleep(0.3)  # its refusal, if any, comes on this tab
        await tab.close()
        return sent

    # --- waiting ---------------------------------------------------------------------------

    async def wait(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
        return True

    async def settle(self, sent: Sent) -> None:
        """Wait for the reply's final status: from the frames, or from export.json after a
        reconnect or a quiet spell (frames sent while the tab was away are not sent again)."""
        if sent.refused or sent.final:
            return
        deadline = time.monotonic() + REPLY_TIMEOUT
        synced_at = time.monotonic()
        unconfirmed_since = time.monotonic() if not sent.accepted else None
        while not sent.final:
            now = time.monotonic()
            if now > deadline:
                self.campaign.unsettled.append(f"conversation {self.conversation_id} {sent.key}")
                return
            if self.tab is None or self.tab.closed:
                await self.reopen()
                await self.sync()
                synced_at = time.monotonic()
                continue
            await self.wait(lambda: sent.final or self.tab.closed, 2.0)
            if sent.final:
                return
            if time.monotonic() - synced_at > 3:
                await self.sync()
                synced_at = time.monotonic()
            if sent.accepted or sent.user_seq is not None:
                unconfirmed_since = None
            elif unconfirmed_since is not None and time.monotonic() - unconfirmed_since > 15:
                return  # the socket closed before the send was answered, and it was not stored

    async def ensure_tab(self) -> Tab:
        if self.tab is None or self.tab.closed:
            await self.reopen(only_if_closed=True)
        return self.tab

    async def reopen(self, *, only_if_closed: bool = False) -> None:
        """A tab (re)connects to a live process, as the page's websocket does."""
        async with self.reopening:  # a send and a compact at once open one tab, not two
            if only_if_closed and self.tab is not None and not self.tab.closed:
                return
            if self.tab is not None:
                await self.tab.close()
                self.campaign.reconnects += 1
            deadline = time.monotonic() + 90
            while True:
                slot = self.rng.choice(self.campaign.live() or self.campaign.slots)
                try:
                    self.tab = await Tab(self, slot).open()
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.3)

    async def sync(self) -> None:
        """What the server has: each sent message's number and its reply's status."""
        response = await self.request("GET", f"/conversations/{self.conversation_id}/export.json")
        if response is None or response.status_code != 200:
            return
        statuses = {}
        for m in response.json()["messages"]:
            statuses[m["seq"]] = m["status"]
            if m["role"] == "user":
                keys = KEY_RE.findall(text_of(m["content"]))
                if keys and keys[0] in self.by_key:
                    self._numbered(self.by_key[keys[0]], m["seq"])
        for seq, sent in self.by_user_seq.items():
            if statuses.get(seq + 1) in FINAL and not sent.final:
                sent.final, sent.final_via = statuses[seq + 1], "export.json"
        self.changed.set()

    # --- frames ----------------------------------------------------------------------------

    def on_frame(self, tab: Tab, frame: str) -> None:
        if 'id="send-accepted"' in frame and tab.awaiting:
            sent = tab.awaiting.popleft()
            sent.accepted, sent.answered_in = True, time.monotonic() - sent.at
        for m in NOTICE_RE.finditer(frame):
            self.on_notice(tab, dict(ATTR_RE.findall(m[1])), html.unescape(m[2]).strip())
        for m in ARTICLE_RE.finditer(frame):
            attrs = dict(ATTR_RE.findall(m[1]))
            seq, status = int(attrs.get("data-seq", 0)), attrs.get("data-status", "")
            if "user" in attrs.get("class", "").split():
                end = frame.find("</article>", m.end())
                key = KEY_IN_HTML_RE.search(frame, m.end(), end if end > 0 else len(frame))
                if key and key[1] in self.by_key:
                    self._numbered(self.by_key[key[1]], seq)
            elif (sent := self.by_user_seq.get(seq - 1)) is not None:
                sent.started = sent.started or status == "streaming"
                if status in FINAL and not sent.final:
                    sent.final, sent.final_via = status, "frame"
        for m in DELTA_RE.finditer(frame):
            if (sent := self.by_user_seq.get(int(m[1]) - 1)) is not None:
                sent.started = True
        self.changed.set()

    def on_notice(self, tab: Tab, attrs: dict, text: str) -> None:
        if not text:
            return
        about = attrs.get("data-about", "")
        tab.notices.append((about, text))
        if about == "send" and tab.awaiting:
            sent = tab.awaiting.popleft()
            sent.refused = text
            self.campaign.refusals[text[:90]] += 1
        elif about == "compact":
            self.campaign.compact_refusals[text[:90]] += 1
        elif about in ("", "stop") and "error" in attrs.get("class", ""):
            self.campaign.other_notices[text[:90]] += 1

    def _numbered(self, sent: Sent, seq: int) -> None:
        sent.user_seq = seq
        self.by_user_seq[seq] = sent

    # --- HTTP --------------------------------------------------------------------------------

    async def request(self, method: str, path: str, *, csrf: bool = False, **kwargs):
        """One HTTP request to a live process (the other one if this one is down); None if
        none answered."""
        import httpx2

        for _ in range(6):
            slot = self.rng.choice(self.campaign.live() or self.campaign.slots)
            headers = {}
            if csrf:  # as the page's forms do: the cookie's token, from this origin
                headers = {"X-CSRFToken": self.csrf_token(), "Origin": f"http://{HOST}:{slot.port}"}
            try:
                response = await self.http.request(
                    method, f"http://{HOST}:{slot.port}{path}", headers=headers, **kwargs
                )
            except httpx2.TransportError:
                await asyncio.sleep(0.5)
                continue
            self.campaign.http_answers[response.status_code // 100 * 100] += 1
            if response.status_code >= 500:
                self.campaign.http_errors[f"{response.status_code} {method} {route(path)}"] += 1
            return response
        return None

    def csrf_token(self) -> str:
        for cookie in self.http.cookies.jar:
            if cookie.name == "csrftoken":
                return cookie.value
        return ""
