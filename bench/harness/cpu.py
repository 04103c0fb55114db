"""CPU seconds from /proc: a process and its descendants, the database services, the machine."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, utime+stime+cutime+cstime in ticks); None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    # After the comm: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def tree_cpu(root: int) -> float:
    """CPU seconds of a process and all its descendants, including children they reaped: the sum
    is conserved when a descendant exits (its times move into its parent's cutime/cstime)."""
    stats = {pid: s for pid in _all_pids() if (s := _stat(pid)) is not None}
    if root not in stats:
        return 0.0
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo.extend(kids.get(pid, []))
    return total / CLK_TCK


def service_roots() -> list[int]:
    """PostgreSQL's postmaster and redis-server, when they run here (their CPU is the database's
    share of the work, which the server's own CPU does not include)."""
    roots = []
    for pid in _all_pids():
        comm = _comm(pid)
        if comm == "redis-server":
            roots.append(pid)
        elif comm == "postgres":
            st = _stat(pid)
            if st is not None and _comm(st[0]) != "postgres":
                roots.append(pid)  # the postmaster, not one of its backends
    return roots


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


@dataclass
class CpuProbe:
    """The CPU of a run's parts, sampled at the start and the end of its window."""

    server: list[int]
    clients: list[int]
    provider: int
    services: list[int]

    def sample(self) -> dict:
        return {
            "t": time.monotonic(),
            "server": sum(tree_cpu(p) for p in self.server),
            "clients": [tree_cpu(p) for p in self.clients],
            "provider": tree_cpu(self.provider),
            "services": sum(tree_cpu(p) for p in self.services),
            "machine": machine_busy(),
        }
