"""The fault campaign's cross-user probes: a person tries to read and act on another user's
conversation (every page and JSON view, every POST, the search, a websocket, the compaction
actions), which must be refused; the same requests on their own conversation (the controls) must
succeed, or the probes prove nothing. Mixed into the person (bench/campaign/person.py)."""

from __future__ import annotations

import re

from bench.campaign import SYSTEM_PROMPT
from bench.campaign.tabs import DIVIDER_RE, PIN_RE, Tab

TOOLS = ["search_history", "read_messages"]
SEARCH_HIT = re.compile(r'<li class="search-hit">\s*<a href="/conversations/(\d+)/')


class Probes:
    """What a person (`Chat`) does to other users' conversations."""

    async def probe(self) -> None:
        """Try to read and act on another user's conversation; every try must be refused. The
        same requests on this user's own conversation (the controls) must succeed, or the
        probes prove nothing."""
        self.probe_rounds += 1
        await self.harvest()
        if self.probe_rounds == 1:
            await self.controls()
        victims = [c for c in self.campaign.conversations if c["owner"] != self.owner]
        victim = self.rng.choice(victims)
        for kind, method, path, data in self.probes_of(victim):
            response = await self.request(method, path, csrf=method == "POST", data=data)
            if response is not None:
                self.campaign.probe(kind, victim, self._refused(response, victim))
        await self.probe_search(victim)
        await self.probe_socket(victim)
        await self.probe_actions(victim)

    def probes_of(self, victim: dict) -> list[tuple]:
        v = victim["id"]
        base = f"/conversations/{v}"
        out = [
            ("GET page", "GET", f"{base}/", None),
            ("GET transcript part", "GET", f"{base}/?part=transcript", None),
            ("GET older messages", "GET", f"{base}/messages/?before=9999", None),
            ("GET context", "GET", f"{base}/context/", None),
            ("GET window", "GET", f"{base}/window/", None),
            ("GET export.json", "GET", f"{base}/export.json", None),
            ("GET search.json", "GET", f"{base}/search.json?q=answer", None),
            ("GET search page", "GET", f"{base}/search/?q=answer", None),
            ("GET tools", "GET", f"{base}/tools/", None),
            ("POST rename", "POST", f"{base}/rename/", {"title": "probe"}),
            ("POST settings", "POST", f"{base}/settings/", {"system_prompt": "probe"}),
            ("POST tools", "POST", f"{base}/tools/", {"enabled": TOOLS}),
        ]
        pks = sorted(self.campaign.harvested[victim["owner"]]["messages"])
        if pks:
            pk = self.rng.choice(pks)
            out.append(("POST pin", "POST", f"/messages/{pk}/pin/", {"pinned": "1"}))
        out.append(("POST delete", "POST", f"{base}/delete/", None))  # last: it would hide it
        return out

    def _refused(self, response, victim: dict) -> bool | None:
        """True: refused as it must be (404); False: it succeeded; None: neither (an error)."""
        if response.status_code == 404:
            return True
        if response.status_code < 400:
            return False
        if response.status_code >= 500:
            return None  # a server error (counted with every HTTP answer): neither
        self.campaign.probe_errors[f"{response.status_code} {response.request.method}"] += 1
        return None

    async def probe_search(self, victim: dict) -> None:
        """The all-conversations search must not find anything of the victim's when asked for a
        word only their messages hold. Search by meaning answers with the nearest of the
        searcher's own messages whatever the words: a hit counts only in someone else's
        conversation."""
        hits = await self.search_hits(self.campaign.secrets[victim["owner"]])
        if hits is not None:
            own = {c["id"] for c in self.campaign.conversations if c["owner"] == self.owner}
            self.campaign.probe("GET search for their word", victim, hits <= own)

    async def search_hits(self, word: str) -> set[int] | None:
        """The conversations the all-conversations search page's hits link to."""
        response = await self.request("GET", f"/search/?q={word}")
        if response is None or response.status_code != 200:
            return None  # no answer, or a server error (counted with every HTTP answer)
        return {int(found) for found in SEARCH_HIT.findall(response.text)}

    async def probe_socket(self, victim: dict) -> None:
        """A websocket on their conversation must be refused at the handshake."""
        from websockets.exceptions import InvalidStatus

        slot = self.rng.choice(self.campaign.live() or self.campaign.slots)
        try:
            tab = await Tab(self, slot, victim["id"]).open(read=False)
        except InvalidStatus:
            self.campaign.probe("websocket connect", victim, True)
            return
        except Exception:
            return  # the process went away: proves nothing either way
        self.campaign.probe("websocket connect", victim, False)
        await tab.close()

    async def probe_actions(self, victim: dict) -> None:
        """On this user's own socket, name their compaction: approve, discard, regenerate."""
        ids = sorted(self.campaign.harvested[victim["owner"]]["compactions"])
        if not ids:
            return
        compaction = self.rng.choice(ids)
        tab = await self.ensure_tab()
        for action in ("approve", "discard", "regenerate"):
            before = len(tab.notices)
            frame = {"action": action, "compaction": compaction, "summary": "probe"}
            if not await tab.send(frame):
                return
            refused = await self.wait(
                lambda b=before, a=action: any(x == a for x, _ in tab.notices[b:]) or tab.closed,
                10,
            )
            if not tab.closed:
                self.campaign.probe(f"websocket {action}", victim, refused)

    async def harvest(self) -> None:
        """Ids an attacker could learn or guess: this user's message and compaction ids, from
        its own page, for the other users' probes."""
        response = await self.request("GET", f"/conversations/{self.conversation_id}/")
        if response is not None and response.status_code == 200:
            found = self.campaign.harvested[self.owner]
            found["messages"].update(int(pk) for pk in PIN_RE.findall(response.text))
            found["compactions"].update(int(pk) for pk in DIVIDER_RE.findall(response.text))

    async def controls(self) -> None:
        own = {"id": self.conversation_id, "owner": self.owner}
        for kind, method, path, data in self.probes_of(own):
            if kind in ("POST delete", "POST pin"):
                continue  # deleting its own would end its run; its pins are tried below
            if kind == "POST settings":
                data = {"system_prompt": SYSTEM_PROMPT}  # the same: the window does not change
            if kind == "POST rename":
                data = {"title": f"Chat {self.index}"}
            response = await self.request(method, path, csrf=method == "POST", data=data)
            if response is not None:
                self.campaign.control(kind, response.status_code in (200, 302))
        pks = sorted(self.campaign.harvested[self.owner]["messages"])
        if pks:  # pin one of its own messages and unpin it: allowed, and leaves no trace
            for pinned in ("1", "0"):
                response = await self.request(
                    "POST", f"/messages/{pks[0]}/pin/", csrf=True, data={"pinned": pinned}
                )
                if response is not None:
                    self.campaign.control("POST pin", response.status_code == 200)
        if any(s.accepted for s in self.sents):  # its own word is found: the probe can see hits
            hits = await self.search_hits(self.secret)
            if hits is not None:
                self.campaign.control("GET search for own word", bool(hits))
