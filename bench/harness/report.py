"""The load bench's report: every run's row, the medians over rounds, the targets judged, the
notes (lost messages, saturated clients, servers' stderr), and the JSON of it all."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Targets:
    """What the load bench's runs must meet, by number of chats."""

    added_p50_max_ms: dict[int, float] = field(default_factory=dict)  # 1 process, over the relay
    relay_ratio_min: dict[int, float] = field(default_factory=dict)  # replies/s, x the relay
    two_process_ratio_min: dict[int, float] = field(default_factory=dict)  # x 1 process
    zero_lost_at: frozenset[int] = frozenset()
    saturated: float = 0.85  # share of one core above which a client or the provider may limit


def num(value, fmt: str, suffix: str = "") -> str:
    return "—" if value is None else format(value, fmt) + suffix


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} ms"


def lost(row: dict) -> str:
    return f"{row['lost']}/{row['sent']}"


def table(results: list[dict]) -> str:
    head = (
        f"{'configuration':<34} {'chats':>5} {'ft p50':>8} {'ft p95':>8} {'+p50':>8} "
        f"{'+p95':>8} {'rep/s':>7} {'xrelay':>6} {'x1proc':>6} {'lost/sent':>11} "
        f"{'srv ms/rep':>10} {'srv CPU':>7} {'db CPU':>6} {'client CPU':>10} {'prov CPU':>8} "
        f"{'other':>5}"
    )
    lines = [head, "-" * len(head)]
    several = len({r["round"] for r in results}) > 1
    for r in results:
        clients = "+".join(f"{c:.0%}" for c in r["client_cpu_share"])
        name = f"{r['label']}, #{r['round']}" if several else r["label"]
        lines.append(
            f"{name:<34} {r['chats']:>5} {num(r['ft_p50_ms'], '.1f'):>8} "
            f"{num(r['ft_p95_ms'], '.1f'):>8} {num(r.get('added_p50_ms'), '+.1f'):>8} "
            f"{num(r.get('added_p95_ms'), '+.1f'):>8} {r['replies_per_s']:>7.1f} "
            f"{num(r.get('x_relay'), '.2f'):>6} {num(r.get('x_one_process'), '.2f'):>6} "
            f"{lost(r):>11} "
            f"{num(r['server_cpu_ms_per_reply'], '.2f'):>10} {r['server_cpu_share']:>7.0%} "
            f"{r['services_cpu_share']:>6.0%} {clients:>10} {r['provider_cpu_share']:>8.0%} "
            f"{r['other_cpu_share']:>5.0%}"
        )
    return "\n".join(lines)


def medians_table(rows: list[dict]) -> str:
    head = (
        f"{'configuration':<34} {'chats':>5} {'+p50':>8} {'+p95':>8} {'xrelay':>6} "
        f"{'x1proc':>6} {'lost/sent':>11}  each round: +p50 ms / xrelay"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        each = ", ".join(
            f"{num(x.get('added_p50_ms'), '+.1f')}/{num(x.get('x_relay'), '.2f')}"
            for x in r["rounds"]
        )
        lines.append(
            f"{r['label']:<34} {r['chats']:>5} {num(r['added_p50_ms'], '+.1f'):>8} "
            f"{num(r['added_p95_ms'], '+.1f'):>8} {num(r['x_relay'], '.2f'):>6} "
            f"{num(r['x_one_process'], '.2f'):>6} {lost(r):>11}"
            f"  {each}"
        )
    return "\n".join(lines)


def verdicts(results: list[dict], targets: Targets) -> list[str]:
    """A line per target. Given `stats.medians()` rows, each judges the median and says in how
    many rounds the target held on its own."""
    out = []

    def line(row: dict, holds, text: str) -> None:
        ok = holds(row)
        mark = "n/a " if ok is None else ("PASS" if ok else "FAIL")
        rounds = row.get("rounds")
        if rounds and ok is not None:
            met = sum(bool(holds(x)) for x in rounds)
            text += f"; median of {len(rounds)} rounds, met in {met}"
        out.append(f"  [{mark}] {text}")

    def at_most(key: str, limit: float):
        return lambda row: None if row.get(key) is None else row[key] <= limit

    def at_least(key: str, limit: float):
        return lambda row: None if row.get(key) is None else row[key] >= limit

    for r in results:
        if r["kind"] != "app":
            continue
        name = f"{r['chats']} chats, {r['label']}"
        if r["processes"] == 1:
            limit = targets.added_p50_max_ms.get(r["chats"])
            if limit is not None:
                line(
                    r,
                    at_most("added_p50_ms", limit),
                    f"{name}: first-token p50 added {num(r.get('added_p50_ms'), '+.1f', ' ms')} "
                    f"over the relay (target <= {limit:g} ms)",
                )
            ratio_min = targets.relay_ratio_min.get(r["chats"])
            if ratio_min is not None:
                line(
                    r,
                    at_least("x_relay", ratio_min),
                    f"{name}: replies/s {num(r.get('x_relay'), '.2f', 'x')} the relay "
                    f"(target >= {ratio_min:g}x)",
                )
        else:
            ratio_min = targets.two_process_ratio_min.get(r["chats"])
            if ratio_min is not None:
                line(
                    r,
                    at_least("x_one_process", ratio_min),
                    f"{name}: replies/s {num(r.get('x_one_process'), '.2f', 'x')} one process "
                    f"on the same database and layer (target >= {ratio_min:g}x)",
                )
        if r["chats"] in targets.zero_lost_at:
            line(
                r,
                lambda row: row["lost"] == 0,
                f"{name}: {r['lost']} of {r['sent']} messages lost (target 0)",
            )
    return out


def warnings_for(results: list[dict], saturated: float) -> list[str]:
    out = []
    for r in results:
        name = f"{r['label']}, {r['chats']} chats"
        busy = [c for c in r["client_cpu_share"] if c >= saturated]
        if busy:
            out.append(
                f"  {name}: a load client used {max(busy):.0%} of a core; it may have been the "
                "bottleneck (try --clients 2)"
            )
        lag = r["client_loop_lag_p99_ms"]
        if lag is not None and lag > 20:
            out.append(f"  {name}: the client event loop ran {lag:.0f} ms late (p99)")
        if r["other_cpu_share"] >= 0.25:
            out.append(
                f"  {name}: the rest of the machine used {r['other_cpu_share']:.0%} of a core "
                "meanwhile (a shared machine): trust the ratios more than the absolute figures"
            )
        if r["provider_cpu_share"] >= saturated:
            out.append(
                f"  {name}: the fake provider used {r['provider_cpu_share']:.0%} of a core; it "
                "may have been the bottleneck"
            )
        if r["lost"]:
            kinds = ", ".join(
                f"{n} {status}"
                for status, n in sorted(r["statuses"].items())
                if status != "complete"
            )
            why = ""
            if "unfinished" in r["statuses"]:
                why = f" (unfinished: no final fragment after a {r['drained_s']:.1f} s drain)"
            out.append(f"  {name}: lost {r['lost']} = {kinds}{why}")
        if r["text_mismatches"]:
            out.append(
                f"  {name}: {r['text_mismatches']} completed replies whose streamed deltas were "
                "not the beginning of the provider's text (deltas lost, doubled or reordered)"
            )
        if not r["server_alive_at_end"]:
            out.append(f"  {name}: the server was not running at the end of the run")
        s = r["client_stats"]
        odd = {k: v for k, v in s.items() if k != "notices" and v}
        if odd:
            out.append(f"  {name}: client saw {odd}")
        for text, n in sorted(s.get("notices", {}).items(), key=lambda kv: -kv[1])[:3]:
            out.append(f"  {name}: notice x{n}: {text}")
        for text, n in r["server_log_lines"][:4]:
            out.append(f"  {name}: server stderr x{n}: {text}")
    return out


def print_report(
    results: list[dict],
    median_rows: list[dict],
    judged: list[dict],
    targets: Targets,
    *,
    duration: float,
    warmup: float,
    rounds: int,
    expected: str,
    pace: str,
) -> None:
    """Every run's row, then the medians over the rounds (if any), then the targets, judged on
    `judged` (the medians, or each run)."""
    print()
    print(
        f"Window {duration:g} s after {warmup:g} s warm-up; replies of "
        f"{len(expected.split())} words ({len(expected)} chars), {pace}; "
        f"{os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.2f}."
    )
    print(
        "ft = first token (send -> first text delta), ms; +p50/+p95 = ours minus the relay; "
        "xrelay = replies/s over the relay's; x1proc = 2 processes over 1 process; CPU columns "
        "are shares of one core over the window (db = PostgreSQL + Redis; other = the rest of "
        "the machine: other users, the kernel)."
    )
    print()
    print(table(results))
    if median_rows:
        print(f"\nMedians over {rounds} rounds (each round's app run against its relay):\n")
        print(medians_table(median_rows))
    lines = verdicts(judged, targets)
    if lines:
        print("\nTargets:")
        print("\n".join(lines))
    notes = warnings_for(results, targets.saturated)
    if notes:
        print("\nNotes:")
        print("\n".join(notes))


def machine() -> dict:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def write_json(path: str, payload: dict) -> None:
    Path(path).write_text(json.dumps(payload, indent=2) + "\n")
