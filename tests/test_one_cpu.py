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
# At most three CPUs for the processes these tests start: on a machine of many, as many
# processes as CPUs would be a crowd of servers.
ALLOWED = sorted(os.sched_getaffinity(0))[:3] if hasattr(os, "sched_getaffinity") else []

pytestmark = pytest.mark.skipif(len(ALLOWED) < 2, reason="one CPU: nothing to choose")

# A process held to ALLOWED that starts a thread, then takes a CPU, says which and what every
# thread of it may run on, and lives until its input closes.
TAKER = """
import os, sys, threading
from pathlib import Path
from core import cpu
os.sched_setaffinity(0, {int(n) for n in sys.argv[2].split(",")})
done = threading.Event()
threading.Thread(target=done.wait, daemon=True).start()
held = cpu.take_one(Path(sys.argv[1]))
threads = {tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}
print(held[0] if held else None, sorted(threads), flush=True)
sys.stdin.read()
"""


def taker(directory: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-c", TAKER, str(directory), ",".join(map(str, ALLOWED))],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


def test_each_process_takes_a_cpu_no_other_holds_and_the_cpu_is_free_again_when_it_dies(tmp_path):
    takers = []
    try:
        takers = [taker(tmp_path) for _ in ALLOWED[:-1]]
        # Every thread of each process, the one started before too, on that process's CPU.
        assert [line for _, line in takers] == [f"{n} [({n},)]" for n in ALLOWED[:-1]]
        # The last CPU is the kernel's, for everything else: the next process is left free.
        takers.append(taker(tmp_path))
        assert takers[-1][1] == f"None [{tuple(ALLOWED)}]"
        # A process killed outright lets its CPU go at once.
        first = takers[0][0]
        first.send_signal(signal.SIGKILL)
        first.wait()
        takers.append(taker(tmp_path))
        assert takers[-1][1] == f"{ALLOWED[0]} [({ALLOWED[0]},)]"
    finally:
        for process, _ in takers:
            if process.poll() is None:
                process.communicate("")


def test_a_directory_it_cannot_write_leaves_the_process_free(tmp_path):
    (tmp_path / "file").write_text("")
    process, line = taker(tmp_path / "file" / "locks")
    process.communicate("")
    assert line == f"None [{tuple(ALLOWED)}]"


def held_to(pid: int, timeout: float = 10) -> set[tuple[int, ...]]:
    """What the server's threads may run on once its start-up (the lifespan, run as it starts
    to listen) has held them."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {
            tuple(sorted(os.sched_getaffinity(int(task))))
            for task in os.listdir(f"/proc/{pid}/task")
        }
        if (len(seen) == 1 and len(next(iter(seen))) == 1) or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


def free(pid: int, timeout: float = 5) -> bool:
    """Whether the server's event loop runs on any of its CPUs. On SQLite the loop joins the one
    database thread's CPU for each call and comes back (core/db.py): free is seen between calls,
    held never."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.sched_getaffinity(pid) == set(ALLOWED):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.django_db(transaction=True)
def test_real_servers_hold_to_a_cpu_each_but_the_last_and_only_when_the_setting_says():
    if any(not cpu_is_free(cpu.lock_dir(), n) for n in ALLOWED[:-1]):
        pytest.skip("another server of this user holds a CPU")
    servers = []

    def start(**env) -> Server:
        servers.append(Server("http://127.0.0.1:9", cpus=set(ALLOWED), **env).start())
        return servers[-1]

    try:
        held = [start(ONE_CPU_PER_PROCESS="true") for _ in ALLOWED[:-1]]
        more = start(ONE_CPU_PER_PROCESS="true")
        unset = start()  # the settings' default: off (make serve turns it on)
        assert [held_to(server.process.pid) for server in held] == [{(n,)} for n in ALLOWED[:-1]]
        assert free(more.process.pid) and free(unset.process.pid)
        for server in held:
            server.stop()
        # Every CPU free now, and the setting off: none taken.
        off = start(ONE_CPU_PER_PROCESS="false")
        time.sleep(1)
        assert free(off.process.pid) and all(cpu_is_free(cpu.lock_dir(), n) for n in ALLOWED)
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
