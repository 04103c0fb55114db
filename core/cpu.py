"""One CPU per server process: its event loop and its database threads share one core.

A server process runs Python on one thread at a time (the interpreter lock), yet its threads
were spread over every core: on PostgreSQL each statement's return is a database thread taking
the lock from the event loop, and taken across cores every hand-off is a wake-up on the other
core and the turn's data cold in its caches. Held to one core, one process on PostgreSQL + Redis
under 100 chats (bench/load.py) took about a fifth less CPU a reply, and its voluntary context
switches fell from about 97 a reply to about 24 (bench/RESULTS.md). The interpreter could not use
a second core anyway; processes are how this app uses more than one (`make serve`'s WORKERS).

Each process takes a CPU no other server process of this user on this machine holds: an
exclusive lock on a file per CPU, held while the process lives (the kernel lets it go when the
process dies, however it dies). The last allowed CPU is never taken: the database, the proxy and
any further server process need somewhere the kernel can move them, and held to every core, two
processes on two cores served no more than free ones, and in some runs a tenth less
(bench/RESULTS.md). A process that finds no CPU to take, or has only one, is left where the
kernel puts it.

Processes that cannot see each other's lock files (containers, systemd's PrivateTmp) would all
take the same first CPU: that is why it is `make serve`'s choice (ONE_CPU_PER_PROCESS), not the
settings' default.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)


def lock_dir() -> Path:
    """Where this machine's server processes of one user meet, whatever their checkout: they
    share its cores."""
    return Path(tempfile.gettempdir()) / f"chat-cpus-{os.getuid()}"


def take_one(directory: Path) -> tuple[int, IO] | None:
    """Hold this process to one of its allowed CPUs, all but the last, that no other process
    holding a lock in `directory` has: (the CPU, the open lock file to keep open for the
    process's life), or None when there is nothing to choose or every such CPU is taken."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    for cpu in allowed[:-1]:
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
            held = _lock(directory / f"cpu-{cpu}.lock")
        except OSError as error:  # a directory it may not write
            log.warning("could not hold this server process to one CPU: %s", error)
            return None
        if held is None:
            continue
        try:
            _hold_every_thread({cpu})
        except OSError as error:  # no /proc, or the allowed CPUs changed under it
            held.close()
            with contextlib.suppress(OSError):
                _hold_every_thread(set(allowed))
            log.warning("could not hold this server process to one CPU: %s", error)
            return None
        return cpu, held
    log.info("every CPU but the last is held by another server process: this one is left free")
    return None


def _lock(path: Path) -> IO | None:
    handle = open(path, "a")  # noqa: SIM115 - kept open: the lock lasts as long as the file
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _hold_every_thread(cpus: set[int]) -> None:
    # sched_setaffinity sets one thread's CPUs; threads started later take their starter's.
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except ProcessLookupError:  # a thread that has just ended
            pass
