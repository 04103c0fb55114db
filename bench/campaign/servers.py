"""The fault campaign's two server processes: each a port, and whichever process serves it now
(killed with SIGKILL now and then, and a new one started on the same port)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from pathlib import Path

from bench.harness import processes
from bench.harness.processes import HOST, BenchError


class ServerSlot:
    """One of the two server processes: a port, and whichever process serves it now."""

    def __init__(self, index: int, env: dict, workdir: Path) -> None:
        self.index = index
        self.port = processes.free_port()
        self.env = env
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.up = False
        self.generation = 0
        self.stderr_paths: list[Path] = []

    async def start(self) -> None:
        """A new process on the slot's port, as `make serve` starts one (lifespan on); the other
        clients go on meanwhile."""
        self.generation += 1
        err = self.workdir / f"server-{self.index}-{self.generation}.stderr"
        self.stderr_paths.append(err)
        cmd = processes.uvicorn("config.asgi:application", self.port, lifespan="on")
        self.proc = processes.spawn(cmd, env=self.env, stderr=err.open("wb"))
        deadline = time.monotonic() + 60
        while not await listening(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"server {self.index} did not start:\n{processes.tail(err)}")
            await asyncio.sleep(0.1)
        self.up = True

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, what it was doing is left for the other to recover."""
        self.up = False
        processes.kill(self.proc)

    def stop(self) -> None:
        self.up = False
        processes.stop(self.proc)


async def listening(port: int) -> bool:
    """Whether the port accepts connections, asked without blocking the clients' event loop."""
    try:
        _, writer = await asyncio.open_connection(HOST, port)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
