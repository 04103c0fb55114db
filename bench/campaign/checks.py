"""The fault campaign's checks, once the clients are done: the database (every accepted message
stored verbatim, once, in order, each with a final reply keeping what its provider streams
delivered; nothing left streaming or running) and the provider's log (no request refused as
invalid)."""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.campaign.campaign import Campaign
from bench.campaign.person import Chat
from bench.campaign.tabs import FINAL, Sent, text_of
from bench.harness.services import db_connect
from support.faults import KEY_RE


def open_rows(url: str) -> dict[str, list]:
    """Replies still streaming or queued, compactions still running (or waiting as drafts)."""
    with db_connect(url) as conn:
        messages = conn.execute(
            "SELECT conversation_id, seq, status, now() - heartbeat_at FROM chat_message "
            "WHERE status IN ('streaming', 'queued') ORDER BY conversation_id, seq"
        ).fetchall()
        compactions = conn.execute(
            "SELECT conversation_id, id, status, now() - heartbeat_at FROM compaction_compaction "
            "WHERE status IN ('running', 'draft') ORDER BY conversation_id, id"
        ).fetchall()
    return {
        "streaming": [r for r in messages if r[2] == "streaming"],
        "queued": [r for r in messages if r[2] == "queued"],
        "running": [r for r in compactions if r[2] == "running"],
        "draft": [r for r in compactions if r[2] == "draft"],
    }


def settle_rows(campaign: Campaign) -> dict:
    """Once the clients are done, wait past the stale-recovery time (and a sweep after it), then
    until nothing is open or twice that time has passed: what is still open then is stuck."""
    url, stale = campaign.args.pg_url, campaign.args.stale
    began = time.monotonic()
    campaign.open_at_end = {k: len(v) for k, v in open_rows(url).items()}
    earliest, deadline = began + stale + 2, began + 2 * stale + 15
    while True:
        rows = open_rows(url)
        now = time.monotonic()
        if (now >= earliest and not any(rows.values())) or now > deadline:
            campaign.phases["settling"] = now - began
            return rows
        time.sleep(1)


def read_provider_log(path: Path) -> list[dict]:
    entries = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entries.append(json.loads(line))
    return sorted(entries, key=lambda e: e["n"])


def read_transcripts(url: str) -> tuple[dict[int, list[tuple]], list[tuple]]:
    with db_connect(url) as conn:
        messages = conn.execute(
            "SELECT conversation_id, seq, role, status, content, error FROM chat_message "
            "ORDER BY conversation_id, seq"
        ).fetchall()
        compactions = conn.execute(
            "SELECT conversation_id, status, trigger, kind, summariser, error "
            "FROM compaction_compaction"
        ).fetchall()
    by_conversation: dict[int, list[tuple]] = {}
    for row in messages:
        by_conversation.setdefault(row[0], []).append(row[1:])
    return by_conversation, compactions


def delivered_by_key(entries: list[dict]) -> dict[str, list[dict]]:
    """Each turn's chat and tool-step requests, in the order they came."""
    out: dict[str, list[dict]] = {}
    for e in entries:
        if e.get("key") and e["step"] in ("chat", "tool") and e["outcome"] != "invalid":
            out.setdefault(e["key"], []).append(e)
    return out


def check_conversation(chat: Chat, rows: list[tuple], streams: dict[str, list[dict]]) -> list[str]:
    """Everything that was lost or altered in one conversation, one line each."""
    where = f"conversation {chat.conversation_id}"
    problems = []
    seqs = [r[0] for r in rows]
    if seqs != list(range(1, len(seqs) + 1)):
        missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
        doubled = sorted(s for s, n in Counter(seqs).items() if n > 1)
        problems.append(f"{where}: seqs not gap-free (missing {missing}, doubled {doubled})")
    by_seq = {r[0]: r for r in rows}
    stored: dict[str, int] = {}
    for seq, role, _, content, _ in rows:
        if role != "user":
            if seq - 1 not in by_seq or by_seq[seq - 1][1] != "user":
                problems.append(f"{where} seq {seq}: a reply with no user message before it")
            continue
        text = text_of(content)
        keys = KEY_RE.findall(text)
        sent = chat.by_key.get(keys[0]) if keys else None
        if sent is None:
            problems.append(f"{where} seq {seq}: a user message nobody sent: {text[:80]!r}")
            continue
        if sent.key in stored:
            problems.append(
                f"{where} seq {seq}: {sent.key} stored twice (also seq {stored[sent.key]})"
            )
        stored[sent.key] = seq
        if text != sent.text:
            problems.append(
                f"{where} seq {seq}: {sent.key} altered: {text!r} != sent {sent.text!r}"
            )
        reply = by_seq.get(seq + 1)
        if reply is None or reply[1] != "assistant":
            problems.append(f"{where} seq {seq}: {sent.key} has no reply row after it")
        else:
            problems += check_reply(where, sent, reply, streams.get(sent.key, []))
    accepted = [s for s in chat.sents if s.accepted]
    problems += [
        f"{where}: {s.key} was accepted by the server but is not in the database"
        for s in accepted
        if s.key not in stored
    ]
    order = [stored[s.key] for s in sorted(accepted, key=lambda s: s.at) if s.key in stored]
    if order != sorted(order):
        problems.append(f"{where}: accepted messages stored out of order: seqs {order}")
    return problems


def check_reply(where: str, sent: Sent, reply: tuple, stream: list[dict]) -> list[str]:
    """A reply ends final, keeping exactly the text its provider streams delivered (a prefix of
    it when stopped or cut off by a dying process)."""
    seq, _, status, content, error = reply
    if status == "streaming":
        return []  # counted with the stuck rows
    text = text_of(content)
    delivered = "".join(e["text"] for e in stream)
    outcomes = ",".join(e["outcome"] for e in stream) or "no request"
    say = f"{where} seq {seq} ({sent.key}, {status}, provider: {outcomes})"
    if status not in FINAL:
        return [f"{say}: the reply did not end in a final status"]
    if not delivered.startswith(text):
        return [
            f"{say}: stored text {text[:60]!r}... is not what the provider sent {delivered[:60]!r}"
        ]
    if status in ("complete", "error") and text != delivered:
        lost = delivered[len(text) :]
        return [
            f"{say}: {len(lost)} characters the provider delivered were not kept: {lost[:60]!r}"
        ]
    return []


@dataclass
class Findings:
    invalid: list[dict]
    lost: list[str]
    stuck: dict
    leaks: list[str]
    unconfirmed: list[str] = field(default_factory=list)  # not counted: see `unconfirmed`

    def counts(self) -> tuple[int, int, int, int]:
        stuck = len(self.stuck["streaming"]) + len(self.stuck["running"])
        return len(self.invalid), len(self.lost), stuck, len(self.leaks)


def check(campaign: Campaign, chats: list[Chat], provider_log: Path, stuck: dict):
    entries = read_provider_log(provider_log)
    transcripts, compactions = read_transcripts(campaign.args.pg_url)
    streams = delivered_by_key(entries)
    lost = []
    for chat in chats:
        lost += check_conversation(chat, transcripts.get(chat.conversation_id, []), streams)
    # (Replies left queued are among the lost above: not in a final status.)
    lost += [f"conversation {c} compaction {i}: left as a draft" for c, i, _, _ in stuck["draft"]]
    invalid = [e for e in entries if e["outcome"] == "invalid"]
    findings = Findings(invalid, lost, stuck, campaign.leaks)
    findings.unconfirmed = unconfirmed(chats, transcripts)
    return findings, entries, transcripts, compactions


def unconfirmed(chats: list[Chat], transcripts: dict) -> list[str]:
    """Messages whose socket closed before the server answered the send and that are not in
    the database: allowed (nothing was promised), but listed, with how soon the socket went."""
    out = []
    for chat in chats:
        rows = transcripts.get(chat.conversation_id, [])
        stored = {k for r in rows if r[1] == "user" for k in KEY_RE.findall(text_of(r[3]))[:1]}
        out += [
            f"conversation {chat.conversation_id} {s.key} ({s.scenario}): {s.socket_lost}; "
            "not stored"
            for s in chat.sents
            if s.socket_lost and not s.accepted and not s.refused and s.key not in stored
        ]
    return out
