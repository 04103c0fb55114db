"""The fault campaign as a whole: its users and conversations, the two server slots, and what the
clients did (turns, scenarios, stops, restarts, probes). Its run is `bench/campaign/run.py`."""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from bench.campaign.servers import ServerSlot


@dataclass
class Campaign:
    args: argparse.Namespace
    users: list[dict]
    conversations: list[dict]
    slots: list[ServerSlot]
    secrets: list[str] = field(default_factory=list)
    turns: int = 0
    next_restart: int = 0
    restarts: int = 0
    restart_log: list[str] = field(default_factory=list)
    tab_closes: int = 0
    reconnects: int = 0
    compact_requests: int = 0
    stops: Counter = field(default_factory=Counter)
    scenarios: Counter = field(default_factory=Counter)
    tabs: Counter = field(default_factory=Counter)  # sockets opened, by server slot
    refusals: Counter = field(default_factory=Counter)
    compact_refusals: Counter = field(default_factory=Counter)
    other_notices: Counter = field(default_factory=Counter)
    probes: int = 0
    leaks: list[str] = field(default_factory=list)
    probe_errors: Counter = field(default_factory=Counter)
    controls: Counter = field(default_factory=Counter)
    control_failures: list[str] = field(default_factory=list)
    proven: set[str] = field(default_factory=set)  # control kinds that succeeded at least once
    http_answers: Counter = field(default_factory=Counter)  # every HTTP answer, by 100s
    http_errors: Counter = field(default_factory=Counter)  # 5xx answers, by route
    db_connections_peak: int = 0  # PostgreSQL connections to the run's database, sampled
    max_connections: int = 0
    unsettled: list[str] = field(default_factory=list)
    harvested: dict = field(default_factory=dict)
    _restarting: list[asyncio.Task] = field(default_factory=list)
    _restart_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    phases: dict[str, float] = field(default_factory=dict)  # seconds each part of the run took
    open_at_end: dict[str, int] = field(default_factory=dict)  # rows open when clients finished

    def __post_init__(self) -> None:
        rng = random.Random(self.args.seed)
        self.secrets = [f"zq{rng.randrange(16**6):06x}u{u}" for u in range(len(self.users))]
        self.harvested = {
            u: {"messages": set(), "compactions": set()} for u in range(len(self.users))
        }
        self.next_restart = self.args.restart_every

    def live(self) -> list[ServerSlot]:
        return [s for s in self.slots if s.up]

    def count_turn(self) -> None:
        """A user message is about to be sent; every `restart_every` of them, a restart."""
        self.turns += 1
        every = self.args.restart_every
        if every > 0 and self.turns >= self.next_restart and self.turns < self.args.turns:
            self.next_restart += every
            self._restarting.append(asyncio.ensure_future(self.restart()))

    async def restart(self) -> None:
        """kill -9 one process (each in turn) and start a new one on its port."""
        async with self._restart_lock:  # one at a time: the other process stays up
            slot = self.slots[self.restarts % len(self.slots)]
            self.restarts += 1
            began, turn, at = time.monotonic(), self.turns, time.strftime("%H:%M:%S")
            slot.kill()
            await slot.start()
            self.restart_log.append(
                f"restart at turn {turn}: server {slot.index} killed at {at}, a new one "
                f"listening {time.monotonic() - began:.1f} s later"
            )

    def probe(self, kind: str, victim: dict, refused: bool | None) -> None:
        if refused is None:
            return
        self.probes += 1
        if not refused:
            self.leaks.append(f"{kind} on conversation {victim['id']} succeeded")

    def control(self, kind: str, ok: bool) -> None:
        """A request the user may make on their own conversation: its probe kind is proven by
        one success (a refusal now and then, a server error, is noted, not fatal)."""
        self.controls[ok] += 1
        if ok:
            self.proven.add(kind)
        else:
            self.control_failures.append(kind)

    def unproven(self) -> list[str]:
        return sorted(set(self.control_failures) - self.proven)

    async def wait_restarts(self) -> None:
        for task in self._restarting:
            await task
