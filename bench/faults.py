"""Fault campaign: many turns against two real server processes while everything goes wrong.

Run by hand (`.venv/bin/python bench/faults.py`, `--help` for the flags); not a test.

Two `uvicorn config.asgi:application` processes share a fresh PostgreSQL database and a Redis
channel layer. Clients (one driver per conversation, several conversations per user) talk to
them over real websockets with session cookies, spread over both processes, and meanwhile:

- the model (`support/fake_anthropic.py --faults`, its own process) answers with random
  faults: HTTP 529
  and 429, an `event: error` or a dropped connection after some text, slow first tokens;
- clients press Stop mid-reply (from their tab, or from a tab on the other process), close the
  tab mid-reply and come back later, queue a second message behind a running reply, and ask to
  compact while replies run (with a small budget, so auto-compaction fires often too);
- about every `--restart-every` turns one of the two processes is killed with SIGKILL and a new
  one started on its port;
- every few turns a client tries to read and act on another user's conversations (HTTP and
  websocket), which must be refused.

At the end, once the app's stale-recovery time has passed, it checks the database and the
provider's log and prints four counts that must all be 0: requests the provider refused as
invalid, messages lost or altered, rows left streaming/running, cross-user successes. The exit
status is 1 if any is not; 2 if the run itself failed, or a kind of probe was never shown to work
on the user's own conversation (then its refusals prove nothing).

The scenario only: the server slots, the clients, the checks and the report are in
bench/campaign/; processes, services and statistics are the harness's (bench/harness/).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout, not bench/

from bench.campaign import MODEL, SYSTEM_PROMPT  # noqa: E402
from bench.campaign.campaign import Campaign  # noqa: E402
from bench.campaign.checks import check, settle_rows  # noqa: E402
from bench.campaign.report import report  # noqa: E402
from bench.campaign.run import drive  # noqa: E402
from bench.campaign.servers import ServerSlot  # noqa: E402
from bench.harness import processes, services  # noqa: E402
from bench.harness.processes import HOST, BenchError  # noqa: E402

# --- command line --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--turns", type=int, default=1000, help="user messages to send (default 1000)")
    p.add_argument("--conversations", type=int, default=20, help="conversations (default 20)")
    p.add_argument("--users", type=int, default=5, help="their owners (default 5)")
    p.add_argument(
        "--restart-every",
        type=int,
        default=200,
        help="kill -9 one server process and start a new one every N turns (default 200)",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--budget", type=int, default=2000, help="CONTEXT_BUDGET_TOKENS (default 2000)")
    p.add_argument("--stale", type=int, default=5, help="TURN_STALE_SECONDS (default 5)")
    p.add_argument("--retries", type=int, default=1, help="LLM_MAX_RETRIES (default 1)")
    p.add_argument(
        "--probe-every",
        type=int,
        default=10,
        help="each client probes another user's conversations about every N turns (default 10)",
    )
    p.add_argument(
        "--pg-url",
        help="PostgreSQL database to create for the run and drop after "
        "(default postgres://postgres@127.0.0.1:5432/chat_faults_<pid>)",
    )
    p.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/12",
        help="Redis database for the channel layer, flushed at start (default: %(default)s)",
    )
    p.add_argument("--logs", metavar="DIR", help="keep the servers' stderr and the provider log")
    p.add_argument("--keep-db", action="store_true", help="do not drop the database at the end")
    args = p.parse_args(argv)
    if args.turns < 1 or args.conversations < 1 or not 1 <= args.users <= args.conversations:
        p.error("--turns and --conversations must be positive, 1 <= --users <= conversations")
    if (urlsplit(args.redis_url).path.strip("/") or "0") == "0":
        p.error("--redis-url: use a Redis database other than 0 (it is flushed)")
    args.pg_url = args.pg_url or f"postgres://postgres@{HOST}:5432/chat_faults_{os.getpid()}"
    return args


# --- set-up: database, users, server processes ---------------------------------------------------


def server_env(args: argparse.Namespace, provider_url: str) -> dict:
    env = processes.base_env()
    env.update(
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="bench-faults-not-a-secret",
        DJANGO_ALLOWED_HOSTS=HOST,
        SECURE_COOKIES="false",  # plain HTTP on localhost: the cookies must travel
        DATABASE_URL=args.pg_url,
        REDIS_URL=args.redis_url,
        LLM_PROVIDER="anthropic",
        ANTHROPIC_BASE_URL=provider_url,
        ANTHROPIC_API_KEY="bench",
        CHAT_MODEL=MODEL,
        LLM_MAX_RETRIES=str(args.retries),
        LLM_TIMEOUT_SECONDS="30",
        CONTEXT_BUDGET_TOKENS=str(args.budget),
        # A dead process's rows are recovered after TURN_STALE_SECONDS; the heartbeat (and the
        # sweep) must come well within it.
        TURN_STALE_SECONDS=str(args.stale),
        TURN_HEARTBEAT_SECONDS="1",
        LOG_LEVEL="WARNING",
    )
    return env


def prepare_database(args: argparse.Namespace, env: dict) -> dict:
    """A fresh database, migrated, with the users, their sessions and conversations."""
    services.fresh_postgres(args.pg_url)
    services.flush_redis(args.redis_url)
    services.migrate(env)
    return services.make_accounts(
        env,
        users=args.users,
        conversations=args.conversations,
        model=MODEL,
        system_prompt=SYSTEM_PROMPT,
        prefix="faults",
    )


def start_provider(args: argparse.Namespace, workdir: Path) -> tuple[str, Path]:
    """The fake provider answering with random faults, in its own process; its URL and log."""
    log = workdir / "provider.jsonl"
    options = ["--faults", "--seed", str(args.seed), "--log", str(log)]
    _, url = processes.start_provider(options, workdir / "provider.stderr")
    return url, log


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    processes.stop_on_signals()
    workdir = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    started = time.monotonic()
    status = 0
    slots: list[ServerSlot] = []
    try:
        provider_url, provider_log = start_provider(args, workdir)
        env = server_env(args, provider_url)
        made = prepare_database(args, env)
        slots = [ServerSlot(i, env, workdir) for i in range(2)]
        campaign = Campaign(args, made["users"], made["conversations"], slots)
        campaign.phases["set-up"] = time.monotonic() - started
        print(
            f"{args.turns} turns, {args.conversations} conversations, {args.users} users; "
            f"servers on ports {slots[0].port} and {slots[1].port}; provider {provider_url}; "
            f"database {args.pg_url}",
            flush=True,
        )
        chats = asyncio.run(drive(campaign))
        stuck = settle_rows(campaign)
        campaign.phases["wall"] = time.monotonic() - started
        findings, entries, transcripts, compactions = check(campaign, chats, provider_log, stuck)
        report(campaign, chats, findings, entries, transcripts, compactions)
        status = 1 if any(findings.counts()) else 2 if campaign.unproven() else 0
    except BenchError as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        status = 2
    except KeyboardInterrupt:
        print("\nInterrupted: stopping the servers.", file=sys.stderr)
        status = 130
    finally:
        for slot in slots:
            if slot.proc is not None:
                slot.stop()
        processes.stop_all()
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            for path in [*workdir.glob("*.stderr"), *workdir.glob("*.jsonl")]:
                shutil.copy(path, Path(args.logs) / path.name)
        shutil.rmtree(workdir, ignore_errors=True)
        if not args.keep_db:
            services.drop_postgres(args.pg_url)
    return status


if __name__ == "__main__":
    sys.exit(main())
