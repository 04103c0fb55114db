"""Load: N concurrent websocket chats against the app, with a bare Channels relay as the baseline.

Run by hand (`.venv/bin/python bench/load.py`, `--help` for the flags); not a test.

Every chat is one user with one conversation and one websocket. It sends a message, and the
moment the last word of the reply has arrived it sends the next one, until the measured window
ends. The model is `support/fake_anthropic.py` in its own process: every reply is the same
`--words` words, sent at once (no delay between deltas), so what is measured is the server; with
`--stream-seconds S` the first word comes at once and the rest over S seconds, as a model streams;
`--delta-ms MS` spaces the deltas MS ms apart instead, and `--paced` is `--delta-ms 30` (a model's
pace: the first token at 10 chats is then the critical path, not a wait behind other chats).

The baseline is `bench/relay.py`, served by the same uvicorn with the same settings: a consumer
that relays the provider's stream to its socket and does nothing else. It is measured in the same
run, because the machines are shared and noisy: the figures that matter are ratios and
differences against it (first-token "added" latency, replies/s "x relay").

Per configuration it prints first-token p50/p95 (send to the first text delta of that reply),
replies/s (complete fragments received in the window), lost messages (sent but never completed:
refused, error, interrupted, or still unfinished when replies stop finishing after the window),
and the server's CPU per reply (utime+stime of the uvicorn process and its workers over the
window). The load clients run in their own processes; their CPU, the fake provider's, PostgreSQL's
+ Redis's and the rest of the machine's are printed too, so a reader can judge whether anything
but the server was the bottleneck.

The scenario only: processes, services, the load client, statistics and the report are the
harness's (bench/harness/).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout, not bench/

from bench.harness import client, cpu, processes, report, services, stats  # noqa: E402
from bench.harness.processes import BenchError  # noqa: E402
from support.scripts import standalone_chunks  # noqa: E402

MODEL = "claude-bench"
PACED_DELTA_MS = 30.0  # --paced: deltas this far apart, as a model streams them

# Targets (see bench/README.md): chats -> checks.
TARGETS = report.Targets(
    added_p50_max_ms={100: 50.0, 10: 10.0},
    relay_ratio_min={100: 0.8},
    two_process_ratio_min={100: 1.3},
    zero_lost_at=frozenset({100}),
    saturated=0.85,  # share of one core above which a client or the provider may be the bottleneck
)


# --- command line --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--chats",
        type=int,
        nargs="+",
        default=[10, 100],
        metavar="N",
        help="concurrent chats; several values run each (default: 10 100)",
    )
    p.add_argument(
        "--db",
        nargs="+",
        choices=["sqlite", "postgres"],
        default=["sqlite", "postgres"],
        help="databases for the app (default: both). SQLite runs on 1 process with the "
        "in-memory channel layer; PostgreSQL on Redis",
    )
    p.add_argument(
        "--processes",
        type=int,
        nargs="+",
        choices=[1, 2],
        default=[1, 2],
        help="server processes (default: 1 2); 2 is uvicorn --workers 2 on PostgreSQL + Redis",
    )
    p.add_argument("--no-relay", action="store_true", help="skip the relay baseline")
    p.add_argument("--relay-only", action="store_true", help="run only the relay baseline")
    p.add_argument(
        "--relay-without-history",
        action="store_true",
        help="the relay sends only the new message (default: the conversation so far, the "
        "same request the app sends, so both do the same provider work)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every configuration this many times, in alternating order (relay, app, app, "
        "relay, ...), each app run against the relay of its round; the targets are judged on "
        "the median over the rounds (default 1)",
    )
    p.add_argument("--duration", type=float, default=20.0, help="measured window, s (default 20)")
    p.add_argument("--warmup", type=float, default=5.0, help="warm-up before it, s (default 5)")
    p.add_argument(
        "--drain",
        type=float,
        default=10.0,
        help="after the window, wait for outstanding replies until none has finished for this "
        "long, s (default 10)",
    )
    p.add_argument(
        "--drain-max",
        type=float,
        default=60.0,
        help="and at most this long in all, s (default 60)",
    )
    p.add_argument("--words", type=int, default=30, help="words per reply (default 30)")
    p.add_argument(
        "--stream-seconds",
        type=float,
        default=0.0,
        help="the provider streams each reply over this long, its first word at once "
        "(default 0: every word at once)",
    )
    p.add_argument(
        "--delta-ms",
        type=float,
        metavar="MS",
        help="the provider sends each reply's deltas MS ms apart, its first at once (instead of "
        "--stream-seconds: the same as --stream-seconds MS x (words - 1) / 1000)",
    )
    p.add_argument(
        "--paced",
        action="store_true",
        help=f"--delta-ms {PACED_DELTA_MS:g}, as a model streams: the 10-chat first-token target "
        "is then judged on the critical path of a reply (send, request, first frame)",
    )
    p.add_argument(
        "--clients",
        default="auto",
        help="load-client processes: a number, or auto = 1 up to 40 chats, else 2 (default)",
    )
    p.add_argument(
        "--no-deflate",
        action="store_true",
        help="no permessage-deflate on the sockets (browsers negotiate it; default: on)",
    )
    p.add_argument(
        "--pg-url",
        default="postgres://postgres@127.0.0.1:5432/chat_bench",
        help="PostgreSQL database to drop and create for each run (default: %(default)s)",
    )
    p.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/13",
        help="Redis database, flushed before each run (default: %(default)s)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument(
        "--logs",
        metavar="DIR",
        help="keep every server's and client's stderr, and the clients' raw timings, here",
    )
    p.add_argument(
        "--keep-db",
        action="store_true",
        help="leave the PostgreSQL database of the last PostgreSQL run in place, and copy each "
        "SQLite database into --logs DIR, to inspect the rows",
    )
    args = p.parse_args(argv)
    if min(args.chats) < 1 or args.duration <= 0 or min(args.warmup, args.drain) < 0:
        p.error("chats must be positive, --duration > 0, --warmup and --drain >= 0")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    args.drain_max = max(args.drain_max, args.drain)
    if args.no_relay and args.relay_only:
        p.error("--no-relay and --relay-only exclude each other")
    if args.clients != "auto" and not (args.clients.isdigit() and int(args.clients) >= 1):
        p.error("--clients must be a positive number or auto")
    if args.paced:
        if args.delta_ms is not None and args.delta_ms != PACED_DELTA_MS:
            p.error(f"--paced is --delta-ms {PACED_DELTA_MS:g}")
        args.delta_ms = PACED_DELTA_MS
    if args.delta_ms is not None:
        if args.delta_ms < 0 or args.stream_seconds:
            p.error("--delta-ms must be >= 0, and excludes --stream-seconds")
        args.stream_seconds = args.delta_ms * max(1, args.words - 1) / 1000
    return args


# --- configurations ------------------------------------------------------------------------------


@dataclass
class Config:
    kind: str  # "relay" | "app"
    processes: int
    db: str = ""  # "sqlite" | "postgres" for the app
    layer: str = "memory"  # "memory" | "redis"

    @property
    def key(self) -> str:
        if self.kind == "relay":
            return f"relay-{self.processes}p"
        return f"{self.db}-{self.processes}p"

    @property
    def label(self) -> str:
        if self.kind == "relay":
            return f"relay, {self.processes} proc ({self.layer})"
        db = "SQLite" if self.db == "sqlite" else "PostgreSQL"
        layer = "in-memory" if self.layer == "memory" else "Redis"
        return f"ours, {self.processes} proc, {db}+{layer}"


def configs_for(args: argparse.Namespace) -> list[Config]:
    out = []
    for count in sorted(set(args.processes)):
        layer = "memory" if count == 1 else "redis"
        if not args.no_relay:
            out.append(Config("relay", count, layer=layer))
        if args.relay_only:
            continue
        for db in ("sqlite", "postgres"):
            if db not in args.db:
                continue
            if db == "sqlite" and count > 1:
                continue  # not a target configuration (SQLite is for a single process)
            out.append(Config("app", count, db, "memory" if db == "sqlite" else "redis"))
    return out


def server_env(
    config: Config, database_url: str, redis_url: str, provider_url: str, *, history: bool
) -> dict:
    env = processes.base_env()
    env.update(
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="bench-load-not-a-secret",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url if config.layer == "redis" else "",
        LLM_PROVIDER="anthropic",
        ANTHROPIC_BASE_URL=provider_url,
        ANTHROPIC_API_KEY="bench",
        CHAT_MODEL=MODEL,
        LLM_MAX_RETRIES="0",
        LOG_LEVEL="WARNING",
        RELAY_HISTORY="1" if history else "0",
    )
    return env


def client_count(args: argparse.Namespace, chats: int) -> int:
    if args.clients == "auto":
        return 1 if chats <= 40 else 2
    return max(1, min(int(args.clients), chats))


# --- one run -------------------------------------------------------------------------------------


def run_one(
    args: argparse.Namespace,
    config: Config,
    chats: int,
    provider,
    provider_url: str,
    expected: str,
    workdir: Path,
) -> dict:
    print(f"  {config.label}, {chats} chats ...", end="", flush=True)
    sqlite_dir = None
    server = None
    clients = []
    try:
        if config.kind == "app" and config.db == "sqlite":
            sqlite_dir, database_url = services.temporary_sqlite(workdir, "load-sqlite-")
        elif config.kind == "app":
            services.fresh_postgres(args.pg_url)
            database_url = args.pg_url
        else:
            database_url = f"sqlite:///{workdir}/relay-unused.sqlite3"  # never opened
        if config.layer == "redis":
            services.flush_redis(args.redis_url)
        env = server_env(
            config,
            database_url,
            args.redis_url,
            provider_url,
            history=not args.relay_without_history,
        )
        if config.kind == "app":
            # Migrated, then one user, session and conversation per chat, with the ORM.
            services.migrate(env)
            made = services.make_accounts(
                env,
                users=chats,
                conversations=chats,
                model=MODEL,
                system_prompt="Be brief.",
                prefix="bench",
            )
            sessions = [user["session"] for user in made["users"]]
            pairs = [(c["id"], sessions[c["owner"]]) for c in made["conversations"]]
        else:
            pairs = [(i + 1, "") for i in range(chats)]
        port = processes.free_port()
        app = "bench.relay:application" if config.kind == "relay" else "config.asgi:application"
        server_err = workdir / f"server-{config.key}-{port}.stderr"  # the port: unique per run
        server = processes.start_server(
            processes.uvicorn(app, port, workers=config.processes), port, env, server_err
        )

        base = workdir / f"client-{config.key}-{chats}chats-{port}"
        common = {
            "port": port,
            "expected": expected,
            "warmup": args.warmup,
            "duration": args.duration,
            "drain": args.drain,
            "drain_max": args.drain_max,
            "compression": None if args.no_deflate else "deflate",
        }
        clients = client.start_all(base, pairs, client_count(args, chats), common)
        client.wait_ready(clients, base, server, server_err)
        probe = cpu.CpuProbe(
            [server.pid], [c.pid for c in clients], provider.pid, cpu.service_roots()
        )
        t0 = time.monotonic() + 0.3
        client.go(clients, t0)
        warm_end = t0 + args.warmup
        window_end = warm_end + args.duration
        processes.sleep_until(warm_end, server, server_err)
        before = probe.sample()
        processes.sleep_until(window_end, server, server_err)
        after = probe.sample()
        deadline = window_end + args.drain_max + 60
        results = client.collect(clients, base, deadline)
        server_alive = server.poll() is None
    finally:
        for proc in clients:
            processes.stop(proc, timeout=3)
        processes.stop(server)
        if sqlite_dir is not None:
            if args.keep_db and args.logs:
                Path(args.logs).mkdir(parents=True, exist_ok=True)
                for path in sqlite_dir.iterdir():
                    shutil.copy(path, Path(args.logs) / f"{config.key}-{chats}chats-{path.name}")
            shutil.rmtree(sqlite_dir, ignore_errors=True)
        if config.kind == "app" and config.db == "postgres" and not args.keep_db:
            services.drop_postgres(args.pg_url)
    about = {
        "config": config.key,
        "label": config.label,
        "kind": config.kind,
        "db": config.db,
        "processes": config.processes,
        "layer": config.layer,
        "chats": chats,
    }
    result = stats.run_figures(
        about,
        results,
        before,
        after,
        warm_end,
        window_end,
        duration=args.duration,
        drain=args.drain,
    )
    result["clients"] = len(clients)
    result["server_stderr"] = processes.tail(server_err, 40)
    result["server_log_lines"] = processes.log_summary(server_err)
    result["server_alive_at_end"] = server_alive
    print(
        f" {result['replies_per_s']:.1f} replies/s, first token p50 "
        f"{report.ms(result['ft_p50_ms'])}, lost {result['lost']}/{result['sent']}",
        flush=True,
    )
    return result


def pace(args: argparse.Namespace) -> str:
    if not args.stream_seconds:
        return "at once"
    gap = args.stream_seconds * 1000 / max(1, args.words - 1)
    return f"streamed over {args.stream_seconds:g} s (deltas {gap:.3g} ms apart)"


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    processes.stop_on_signals()
    expected = "".join(standalone_chunks(max(1, args.words)))
    configs = configs_for(args)
    if not configs:
        print("Nothing to run: check --db, --processes and --no-relay.", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="bench-load-"))
    results: list[dict] = []
    failures: list[str] = []
    status = 0
    started = time.time()
    try:
        provider, provider_url = processes.start_provider(
            [
                "--port",
                "0",
                "--words",
                str(args.words),
                "--stream-seconds",
                str(args.stream_seconds),
            ],
            workdir / "provider.stderr",
        )
        print(f"Fake provider at {provider_url}, {args.words} words per reply, {pace(args)}.")
        for chats in args.chats:
            print(f"{chats} chats:")
            for round_ in range(1, args.rounds + 1):
                if args.rounds > 1:
                    print(f" round {round_} of {args.rounds}:")
                # Every other round in reverse (relay, app | app, relay | ...): a drift of the
                # machine's speed over the rounds then favours neither side.
                for config in configs if round_ % 2 else configs[::-1]:
                    if provider.poll() is not None:
                        raise BenchError(
                            "the fake provider died:\n"
                            + processes.tail(workdir / "provider.stderr")
                        )
                    try:
                        result = run_one(
                            args, config, chats, provider, provider_url, expected, workdir
                        )
                    except BenchError as exc:  # this configuration failed: go on
                        print(" FAILED", flush=True)
                        print(f"{config.label}, {chats} chats FAILED: {exc}", file=sys.stderr)
                        failures.append(f"{config.label}, {chats} chats, round {round_}")
                        status = 1
                    else:
                        results.append({**result, "round": round_})
    except BenchError as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        print("\nInterrupted: stopping the servers and clients.", file=sys.stderr)
        status = 130
    finally:
        processes.stop_all()
        if args.logs:
            logs = Path(args.logs)
            logs.mkdir(parents=True, exist_ok=True)
            for path in [*workdir.glob("*.stderr"), *workdir.glob("client-*.json")]:
                shutil.copy(path, logs / path.name)
        shutil.rmtree(workdir, ignore_errors=True)
    stats.compare(results)
    # With several rounds the targets are judged on the medians (none with --relay-only).
    median_rows = stats.medians(results) if args.rounds > 1 else []
    judged = median_rows or results
    if results:
        report.print_report(
            results,
            median_rows,
            judged,
            TARGETS,
            duration=args.duration,
            warmup=args.warmup,
            rounds=args.rounds,
            expected=expected,
            pace=pace(args),
        )
    if failures:
        print(f"\nFailed runs: {'; '.join(failures)}")
    if results and args.json:
        payload = {
            "started": started,
            "machine": report.machine(),
            "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
            "expected_reply": expected,
            "results": results,
            "medians": [{k: v for k, v in row.items() if k != "rounds"} for row in median_rows],
            "targets": report.verdicts(judged, TARGETS),
            "failed": failures,
        }
        report.write_json(args.json, payload)
        print(f"\nWrote {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
