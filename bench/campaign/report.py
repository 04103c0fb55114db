"""The fault campaign's report: the four counts that must be 0, the totals, and the notes."""

from __future__ import annotations

import time
from collections import Counter

from bench.campaign.campaign import Campaign
from bench.campaign.checks import Findings
from bench.campaign.tabs import text_of
from bench.harness import processes
from bench.harness.stats import spread
from support.faults import KEY_RE


def report(campaign, chats, findings, entries, transcripts, compactions) -> None:
    args = campaign.args
    invalid, lost, stuck, leaks = findings.counts()
    print()
    print(
        f"Fault campaign: {args.turns:,} turns over {len(chats)} conversations of "
        f"{len(campaign.users)} users, 2 uvicorn processes on PostgreSQL + Redis, seed {args.seed}"
    )
    print(
        f"  budget {args.budget:,} tokens, TURN_STALE_SECONDS {args.stale}, LLM_MAX_RETRIES "
        f"{args.retries}, a restart every {args.restart_every} turns"
    )
    print("\nChecks (each must be 0):")
    print(f"  {'requests the provider refused as invalid':<48} {invalid:>6}")
    print(f"  {'messages lost or altered':<48} {lost:>6}")
    print(
        f"  {'rows left streaming / running after settling':<48} {stuck:>6}  "
        f"({len(findings.stuck['streaming'])} streaming, {len(findings.stuck['running'])} running)"
    )
    print(
        f"  {'cross-user reads or actions that succeeded':<48} {leaks:>6}  "
        f"(of {campaign.probes:,} probes)"
    )
    print("\nTotals:")
    for label, value in totals(campaign, chats, entries, transcripts, compactions):
        print(f"  {label:<26} {value}")
    details(campaign, findings)


def totals(campaign, chats, entries, transcripts, compactions) -> list[tuple]:
    sents = [s for c in chats for s in c.sents]
    stored = {
        KEY_RE.findall(text_of(r[3]))[0]
        for rows in transcripts.values()
        for r in rows
        if r[1] == "user" and KEY_RE.findall(text_of(r[3]))
    }
    unanswered = [s for s in sents if not s.accepted and not s.refused]
    replies = Counter(r[2] for rows in transcripts.values() for r in rows if r[1] == "assistant")
    answered = [e for e in entries if e["outcome"] not in ("invalid", "truncated")]
    requests = Counter(e["step"] for e in answered)
    injected = [e for e in answered if e["outcome"] not in ("ok", "tool_call")]
    faults = Counter(e["outcome"] for e in injected)
    by_step = Counter((e["outcome"], e["step"] == "summary") for e in injected)
    cut = [
        time.strftime("%H:%M:%S", time.localtime(e["t"]))
        for e in entries
        if e["outcome"] == "truncated"
    ]
    committed = Counter(c[2] for c in compactions if c[1] == "committed")
    statuses = Counter(c[1] for c in compactions)
    names = {
        "overloaded": "529 overloaded",
        "rate_limited": "429 rate limit",
        "stream_error": "error mid-stream",
        "dropped": "dropped mid-stream",
        "slow_first_token": "slow first token",
    }
    fault_text = ", ".join(
        f"{names[k]} {n} ({by_step[(k, True)]} in summaries)" for k, n in faults.most_common()
    )
    return [
        (
            "turns attempted",
            f"{len(sents):,} (accepted {sum(s.accepted for s in sents):,}, refused "
            f"{sum(bool(s.refused) for s in sents)}, socket gone before the answer "
            f"{len(unanswered)}: {sum(s.key in stored for s in unanswered)} of them stored)",
        ),
        ("scenarios", ", ".join(f"{k} {n}" for k, n in campaign.scenarios.most_common())),
        (
            "final status seen",
            ", ".join(f"by {k} {n}" for k, n in Counter(s.final_via for s in sents).items() if k)
            + f"; never {sum(not s.final for s in sents if s.accepted)} of the accepted",
        ),
        ("replies", ", ".join(f"{k} {n:,}" for k, n in replies.most_common())),
        (
            "provider requests",
            f"{sum(requests.values()):,} (chat {requests['chat']:,}, tool step "
            f"{requests['tool']:,}, summary {requests['summary']:,}); tool calls "
            f"{sum(e['outcome'] == 'tool_call' for e in entries)}; cut off mid-send by a "
            f"killed server {len(cut)}" + (f" (at {', '.join(cut)})" if cut else ""),
        ),
        ("faults injected", f"{sum(faults.values()):,}: {fault_text}"),
        (
            "stops",
            f"{sum(campaign.stops.values())} ("
            + ", ".join(f"{k} {n}" for k, n in campaign.stops.items())
            + ")",
        ),
        (
            "HTTP answers",
            ", ".join(f"{k // 100}xx {n:,}" for k, n in sorted(campaign.http_answers.items()))
            + f"; PostgreSQL connections to the run's database peaked at "
            f"{campaign.db_connections_peak} (max_connections {campaign.max_connections})",
        ),
        ("sends answered", spread(sorted(s.answered_in for s in sents if s.answered_in))),
        ("tab closes", f"{campaign.tab_closes} (reconnects in all: {campaign.reconnects})"),
        (
            "sockets opened",
            ", ".join(f"server {i} {n}" for i, n in sorted(campaign.tabs.items())),
        ),
        ("restarts (kill -9)", f"{campaign.restarts}"),
        (
            "compactions",
            f"{sum(committed.values())} committed (auto {committed['auto']}, manual "
            f"{committed['manual']}); {statuses['failed']} failed; {campaign.compact_requests} "
            f"compact requests, {sum(campaign.compact_refusals.values())} refused",
        ),
        (
            "cross-user probes",
            f"{campaign.probes:,}; controls on own conversations "
            f"{campaign.controls[True]}/{sum(campaign.controls.values())} allowed",
        ),
        (
            "open when clients ended",
            ", ".join(f"{n} {k}" for k, n in campaign.open_at_end.items())
            + f" (then past TURN_STALE_SECONDS={campaign.args.stale} until none was)",
        ),
        (
            "wall time",
            f"{campaign.phases['wall']:.0f} s ("
            + ", ".join(f"{k} {v:.0f} s" for k, v in campaign.phases.items() if k != "wall")
            + ")",
        ),
    ]


def details(campaign: Campaign, findings: Findings, limit: int = 25) -> None:
    notes = []
    for e in findings.invalid[:limit]:
        notes.append(
            f"invalid request #{e['n']} ({e['step']}, turn {e['key']}): {e['invalid']}; "
            f"messages: {e['shape']}"
        )
    notes += findings.lost[:limit]
    for kind in ("streaming", "running"):
        for c, n, status, age in findings.stuck[kind][:limit]:
            what = "seq" if kind == "streaming" else "compaction"
            notes.append(f"conversation {c} {what} {n} left {status} (heartbeat {age} ago)")
    notes += findings.leaks[:limit]
    notes += findings.unconfirmed[:limit]
    notes += [f"client gave up waiting for the reply to {u}" for u in campaign.unsettled[:limit]]
    if campaign.control_failures:
        notes.append(
            "controls failed on the user's own conversation: "
            f"{Counter(campaign.control_failures).most_common()}; never succeeded (those probes "
            f"prove nothing): {campaign.unproven() or 'none'}"
        )
    notes += [f"HTTP {k} x{n}" for k, n in campaign.http_errors.most_common(limit)]
    notes += [
        f"probe answered neither 404 nor 2xx/3xx: {k} x{n}"
        for k, n in campaign.probe_errors.items()
    ]
    notes += [f"send refused x{n}: {t}" for t, n in campaign.refusals.most_common(5)]
    notes += [f"compact refused x{n}: {t}" for t, n in campaign.compact_refusals.most_common(5)]
    notes += [f"notice x{n}: {t}" for t, n in campaign.other_notices.most_common(5)]
    notes += campaign.restart_log
    for slot in campaign.slots:
        for path in slot.stderr_paths:
            # Django logs each 404 the probes met: expected, so not listed.
            lines = [
                (t, n) for t, n in processes.log_summary(path) if not t.startswith("Not Found:")
            ]
            notes += [f"{path.stem} stderr x{n}: {line}" for line, n in lines[:4]]
    if notes:
        print("\nNotes:")
        print("\n".join(f"  {n}" for n in notes))
