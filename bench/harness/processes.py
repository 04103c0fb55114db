"""Child processes of a bench: each in its own process group (Ctrl-C reaches only the bench,
which stops them), stopped on every exit path and sent SIGTERM if the bench dies (even by
SIGKILL); uvicorn servers, the fake provider, Python helpers run in a configured environment."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.harness.inprocess import UNLIMITED
from support.servers import HOST, free_port, listening

__all__ = ["HOST", "free_port", "listening"]  # re-exported: a bench's ports and readiness

ROOT = Path(__file__).resolve().parent.parent.parent
PYTHON = sys.executable
UVICORN = str(Path(PYTHON).with_name("uvicorn"))

_children: list[subprocess.Popen] = []
_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


class BenchError(Exception):
    """A run that could not go on (a server that did not start, a client that failed)."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it if the bench dies (even by SIGKILL)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(cmd: list[str], *, env: dict, stdout=None, stderr=None, stdin=None) -> subprocess.Popen:
    """A child in its own process group (Ctrl-C reaches only us; we stop it), registered so that
    every exit path stops it."""
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=stderr if stderr is not None else subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    _children.append(proc)
    return proc


def stop(proc: subprocess.Popen | None, timeout: float = 8.0) -> None:
    """SIGTERM the child's process group (uvicorn's workers are in it), SIGKILL if it lingers."""
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None and not _group_alive(proc.pid):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
            if proc.poll() is not None and not _group_alive(proc.pid):
                break
    with contextlib.suppress(ValueError):
        _children.remove(proc)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group at once: no shutdown hook runs."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    stop(proc)  # forget it


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_all() -> None:
    """Every child still running, newest first."""
    for proc in reversed(list(_children)):
        stop(proc, timeout=5.0)


def stop_on_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so the bench's `finally` stops its
    children."""

    def interrupted(signum, frame) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def base_env() -> dict:
    """This environment, with the checkout on the path, the production settings module, no
    proxy for local addresses and the abuse limits raised out of the way."""
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        PYTHONDONTWRITEBYTECODE="1",
        DJANGO_SETTINGS_MODULE="config.settings",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        # Benches count and time a turn's requests: no title request after a first reply.
        GENERATED_TITLES="false",
        **UNLIMITED,
    )
    # Each server process held to a CPU of its own, as `make serve` runs them (core/cpu.py);
    # ONE_CPU_PER_PROCESS=false in the environment measures them free.
    env.setdefault("ONE_CPU_PER_PROCESS", "true")
    return env


def run_python(args: list[str], env: dict, what: str) -> str:
    """Run `python ARGS` in the checkout with `env` (its own DATABASE_URL, say); its stdout."""
    done = subprocess.run(
        [PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode:
        raise BenchError(f"{what} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return done.stdout


def uvicorn(app: str, port: int, *, workers: int = 1, lifespan: str = "auto") -> list[str]:
    """The command serving `app` as the benches run it (warnings only, no access log)."""
    cmd = [UVICORN, app, "--host", HOST, "--port", str(port)]
    if lifespan != "auto":
        cmd += ["--lifespan", lifespan]
    cmd += ["--log-level", "warning", "--no-access-log"]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    return cmd


def start_server(cmd: list[str], port: int, env: dict, stderr: Path, timeout: float = 60):
    """Start a server and wait until it listens on `port`; its process."""
    proc = spawn(cmd, env=env, stderr=stderr.open("wb"))
    deadline = time.monotonic() + timeout
    while not listening(port):
        if proc.poll() is not None:
            raise BenchError(
                f"the server ({' '.join(cmd)}) exited with status {proc.returncode}:\n"
                f"{tail(stderr)}"
            )
        if time.monotonic() > deadline:
            stop(proc)
            raise BenchError(
                f"the server did not listen on port {port} in {timeout:g} s:\n{tail(stderr)}"
            )
        time.sleep(0.1)
    return proc


def start_provider(options: list[str], stderr: Path | None = None) -> tuple[subprocess.Popen, str]:
    """The fake Anthropic server in its own process (`python -m support.fake_anthropic
    OPTIONS`); the process and its base URL. Its stderr goes to `stderr`, if given."""
    proc = spawn(
        [PYTHON, "-m", "support.fake_anthropic", *options],
        env=base_env(),
        stdout=subprocess.PIPE,
        stderr=stderr.open("wb") if stderr is not None else None,
    )
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline().decode().strip() if ready else ""
    if not line.startswith("http://"):
        stop(proc)
        raise BenchError(
            "the fake provider did not start:\n" + (tail(stderr) if stderr is not None else "")
        )
    return proc, line


def sleep_until(t: float, server: subprocess.Popen, server_err: Path) -> None:
    """Sleep until monotonic time `t`, failing the run if the server exits meanwhile."""
    while True:
        left = t - time.monotonic()
        if left <= 0:
            return
        if server.poll() is not None:
            raise BenchError(f"the server exited mid-run:\n{tail(server_err)}")
        time.sleep(min(left, 0.2))


def log_summary(path: Path) -> list[tuple[str, int]]:
    """A server's stderr without traceback frames: each distinct line and how often, most
    frequent first (exceptions and log messages, not the stack that led to them)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    skip = ("Traceback", "During handling", "The above exception")
    counts: dict[str, list] = {}  # the line with its numbers blanked -> [first such line, count]
    for line in text.splitlines():
        if not line.strip() or line[0].isspace() or line.startswith(skip):
            continue
        entry = counts.setdefault(re.sub(r"\d+", "#", line[:160]), [line[:160], 0])
        entry[1] += 1
    return sorted(((first, n) for first, n in counts.values()), key=lambda kv: -kv[1])
