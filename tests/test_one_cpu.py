"""Each server process holds its threads to one CPU of its own (core/cpu.py): checked on real
processes, as the kernel sees their threads."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import cpu
from tests.servers import Server

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

pytestmark = pytest.mark.skipif(len(ALLOWED) < 2, reason="one CPU: nothing to choose")

# A process that starts a thread, then takes a CPU, says which and what every thread of it may
# run on, and lives until its input closes.
TAKER = """
import os, sys, threading
from pathlib import Path
from core import cpu
done = threading.Event()
threading.Thread(target=done.wait, daemon=True).start()
held = cpu.take_one(Path(sys.argv[1]))
threads = {tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}
print(held[0] if held else None, sorted(threads), flush=True)
sys.stdin.read()
"""


def taker(directory: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-c", TAKER, str(directory)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


def test_each_process_takes_a_cpu_no_other_holds_and_the_cpu_is_free_again_when_it_dies(tmp_path):
    takers = [taker(tmp_path) for _ in ALLOWED[:-1]]
    try:
        said = [line for _, line in takers]
        # Every thread of each process, the one started before too, on that process's CPU.
        assert said == [f"{n} [({n},)]" for n in ALLOWED[:-1]]
        # The last CPU is the kernel's to use for everything else: the next process is left
        # where the kernel puts it.
        extra, line = taker(tmp_path)
        assert line == f"None [{tuple(ALLOWED)}]"
        extra.communicate("")
        # A process killed outright lets its CPU go.
        first = takers[0][0]
        first.send_signal(signal.SIGKILL)
        first.wait()
        again, line = taker(tmp_path)
        assert line == f"{ALLOWED[0]} [({ALLOWED[0]},)]"
        again.communicate("")
    finally:
        for process, _ in takers:
            if process.poll() is None:
                process.communicate("")


def threads_cpus(pid: int) -> set[tuple[int, ...]]:
    return {
        tuple(sorted(os.sched_getaffinity(int(task)))) for task in os.listdir(f"/proc/{pid}/task")
    }


def held_cpus(server: Server, timeout: float = 10) -> set[tuple[int, ...]]:
    # Start-up (the lifespan) runs as the server starts to listen: wait for it to settle.
    deadline = time.monotonic() + timeout
    while True:
        seen = threads_cpus(server.process.pid)
        if (len(seen) == 1 and len(next(iter(seen))) == 1) or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_a_real_server_holds_to_a_cpu_the_next_does_not_take_the_last_and_the_setting():
    directory = cpu.lock_dir(ROOT)
    # Whatever else of this checkout holds a CPU now (a developer's server) is not this test's.
    free = [n for n in ALLOWED[:-1] if cpu_is_free(directory, n)]
    if len(free) != len(ALLOWED) - 1:
        pytest.skip("another server of this checkout holds a CPU")
    servers = held = [Server("http://127.0.0.1:9").start() for _ in free]
    try:
        more = Server("http://127.0.0.1:9").start()
        servers = [*held, more]
        assert [held_cpus(server) for server in held] == [{(n,)} for n in free]
        # No CPU left to take: on any CPU. Only its event loop's thread is looked at: on SQLite
        # the one database thread holds to the CPU it started on, and the loop joins it for
        # each call (core/db.py).
        assert os.sched_getaffinity(more.process.pid) == set(ALLOWED)
        for server in servers:
            server.stop()
        # Every CPU free, and the setting off: none taken.
        loose = Server("http://127.0.0.1:9", ONE_CPU_PER_PROCESS="false").start()
        servers = [loose]
        time.sleep(1)
        assert os.sched_getaffinity(loose.process.pid) == set(ALLOWED)
    finally:
        for server in servers:
            server.stop()


def cpu_is_free(directory: Path, n: int) -> bool:
    path = directory / f"cpu-{n}.lock"
    if not path.exists():
        return True
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
