"""Statistics of bench runs: percentiles, medians, ratios, and the figures of one load run."""

from __future__ import annotations

import statistics

# The load figures the targets are judged on; with several rounds, their medians.
JUDGED = ("added_p50_ms", "added_p95_ms", "x_relay", "x_one_process")


def pct(values: list[float], q: float) -> float | None:
    """The q-th percentile (inclusive method); None for no values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


def ms_value(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 2)


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def spread(seconds: list[float]) -> str:
    """p50 / p95 / max of sorted durations, in ms."""
    if not seconds:
        return "none"
    p95 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.95))]
    return (
        f"p50 {seconds[len(seconds) // 2] * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"max {seconds[-1] * 1000:.0f} ms (send to send-accepted)"
    )


def run_figures(
    about: dict,
    results: list[dict],
    before: dict,
    after: dict,
    w0: float,
    w1: float,
    *,
    duration: float,
    drain: float,
) -> dict:
    """One load run's figures, from its clients' results and the CPU sampled at the start and
    the end of the window [w0, w1); `about` (config, label, kind, db, processes, layer, chats)
    comes first."""
    turns = [row for r in results for row in r["turns"]]
    stats: dict = {}
    for r in results:
        for k, v in r["stats"].items():
            if isinstance(v, dict):
                merged = stats.setdefault(k, {})
                for text, n in v.items():
                    merged[text] = merged.get(text, 0) + n
            else:
                stats[k] = stats.get(k, 0) + v
    lags = [lag for r in results for lag in r["lags"]]
    # chat, t_send, t_first, t_last, t_done, status, text_ok
    in_window = [t for t in turns if w0 <= t[1] < w1]
    first = [
        (t[2] if t[2] is not None else t[4]) - t[1]
        for t in in_window
        if t[2] is not None or (t[4] is not None and t[5] == "complete")
    ]
    last = [t[3] - t[1] for t in in_window if t[3] is not None and t[5] == "complete"]
    whole = [t[4] - t[1] for t in in_window if t[5] == "complete"]
    done_in_window = sum(1 for t in turns if t[5] == "complete" and w0 <= t[4] < w1)
    window = after["t"] - before["t"]
    statuses: dict[str, int] = {}
    for t in turns:
        statuses[t[5]] = statuses.get(t[5], 0) + 1
    completed = statuses.get("complete", 0)
    server_cpu = after["server"] - before["server"]
    client_cpu = [a - b for a, b in zip(after["clients"], before["clients"], strict=True)]
    provider_cpu = after["provider"] - before["provider"]
    services_cpu = after["services"] - before["services"]
    return {
        **about,
        "window_s": round(window, 3),
        "drain_s": drain,
        "drained_s": round(max(r["drained"] for r in results), 2),
        "sent": len(turns),
        "sent_in_window": len(in_window),
        "completed": completed,
        "lost": len(turns) - completed,
        "statuses": statuses,
        "replies_in_window": done_in_window,
        "replies_per_s": done_in_window / duration,
        "ft_p50_ms": ms_value(pct(first, 50)),
        "ft_p95_ms": ms_value(pct(first, 95)),
        "ft_samples": len(first),
        "last_word_p50_ms": ms_value(pct(last, 50)),
        "turn_p50_ms": ms_value(pct(whole, 50)),
        "turn_p95_ms": ms_value(pct(whole, 95)),
        "text_mismatches": sum(1 for t in turns if t[5] == "complete" and t[6] is False),
        "server_cpu_s": server_cpu,
        "server_cpu_ms_per_reply": server_cpu * 1000 / done_in_window if done_in_window else None,
        "server_cpu_share": server_cpu / window,
        "client_cpu_share": [c / window for c in client_cpu],
        "provider_cpu_share": provider_cpu / window,
        "services_cpu_share": services_cpu / window,
        # Everything else the machine did meanwhile (other users of a shared machine, the kernel's
        # own work): high values mean the run competed for the cores.
        "other_cpu_share": max(
            0.0,
            (after["machine"] - before["machine"])
            - server_cpu
            - sum(client_cpu)
            - provider_cpu
            - services_cpu,
        )
        / window,
        "services_cpu_ms_per_reply": services_cpu * 1000 / done_in_window
        if done_in_window
        else None,
        "client_loop_lag_p99_ms": ms_value(pct(lags, 99)),
        "client_stats": stats,
    }


def compare(results: list[dict]) -> None:
    """Add the baseline columns: added latency and replies/s ratio against the relay with the
    same processes and chats (the 1-process relay if that one was not run), and for 2 processes
    the ratio against 1 process of the same database."""
    by = {(r["config"], r["chats"], r["round"]): r for r in results}
    for r in results:
        if r["kind"] != "app":
            continue
        n = r["round"]
        relay = by.get((f"relay-{r['processes']}p", r["chats"], n)) or by.get(
            ("relay-1p", r["chats"], n)
        )
        if relay:
            r["baseline"] = relay["config"]
            r["added_p50_ms"] = diff(r["ft_p50_ms"], relay["ft_p50_ms"])
            r["added_p95_ms"] = diff(r["ft_p95_ms"], relay["ft_p95_ms"])
            r["x_relay"] = ratio(r["replies_per_s"], relay["replies_per_s"])
        if r["processes"] > 1:
            one = by.get((f"{r['db']}-1p", r["chats"], n))
            if one:
                r["x_one_process"] = ratio(r["replies_per_s"], one["replies_per_s"])


def medians(results: list[dict]) -> list[dict]:
    """One row per app configuration and chat count: the median of each judged figure over the
    rounds (each round's against the relay of that round), lost and sent summed, and the rounds
    themselves under `rounds`."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        if r["kind"] == "app":
            groups.setdefault((r["config"], r["chats"]), []).append(r)
    out = []
    for rows in groups.values():
        row = {k: rows[0][k] for k in ("config", "label", "kind", "db", "processes", "chats")}
        for key in JUDGED:
            values = [r[key] for r in rows if r.get(key) is not None]
            row[key] = statistics.median(values) if values else None
        row["lost"] = sum(r["lost"] for r in rows)
        row["sent"] = sum(r["sent"] for r in rows)
        row["rounds"] = rows
        out.append(row)
    return out
