"""The sawtooth: window tokens per turn over a long conversation, with and without compaction.

Run by hand (`make bench`, or `.venv/bin/python bench/sawtooth.py --turns 300`); not a test.

Each turn goes through the real code path, in one event loop as in the server:
`turns.actions.send` (what the websocket's send does: store the message, claim its reply
under the pre-send check, broadcast the bubble), then `turns.engine.start` on the claimed
step, awaited until the engine has nothing left to do for the conversation
(`support.waiting.settle`): a compaction the pre-send check opened, the streamed reply, its save
and broadcasts (to the in-memory channel layer, no listeners), the context panel, and the
auto-compaction the policy opens after the reply. Only the model is fake: a wrapper around
`support.fake_model.FakeClient`, registered for every model (`providers.registry.register`), which
reports `usage.input_tokens` as the app's own estimator over the exact window it was sent (there
is no real API here, so token numbers are estimates, not a tokenizer's counts). The same client
writes the summaries: a proper `<analysis>`/`<summary>` answer of bounded size.

What each turn did is read from its results, not from inside the engine: the send's claim (a
compaction, `chat.compactions.Opened`, ran before the reply), the compaction rows made during the
turn, and where none was opened after the reply, the engine's own policy
(`chat.compactions.auto_due`) on the window the turn left: it must not be due.

The "without compaction" series is the naive window: system prompt + every message so far.

Database queries are counted per turn on every thread (`support.queries.all_queries`: on
PostgreSQL the engine works on database threads); a non-compaction turn late in the
conversation must cost exactly as many queries as one early on (exit status 1 otherwise). The
engine's process-wide heartbeat and sweep are switched off on the runtime
(`runtime.current().background = False`), as in tests/test_per_turn_cost.py: they run a few
queries every TURN_HEARTBEAT_SECONDS whatever the load, which is not a turn's cost and would land
in whichever turn its timer happened to hit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, not bench/

from bench.harness.charts import ascii_chart, sparkline, write_png  # noqa: E402
from bench.harness.inprocess import UsageModel, setup_django, without_background  # noqa: E402
from bench.harness.texts import code, prose  # noqa: E402

SYSTEM_PROMPT = (
    "You are a careful senior engineer helping a colleague maintain a Django web application. "
    "Answer precisely, show code when it helps, name files and functions, and say when you are "
    "unsure. Prefer small, reviewable changes and explain the reasons behind them."
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=300, help="conversation length (default 300)")
    p.add_argument(
        "--budget", type=int, default=20_000, help="CONTEXT_BUDGET_TOKENS (default 20000)"
    )
    p.add_argument(
        "--auto-at",
        type=float,
        default=float(os.environ.get("AUTO_COMPACT_AT") or 0.6),
        help="AUTO_COMPACT_AT, share of the budget (default: env or 0.6)",
    )
    p.add_argument("--seed", type=int, default=7, help="seed for message lengths (default 7)")
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", ""),
        help="database to use (default: $DATABASE_URL, else a fresh temporary SQLite file)",
    )
    p.add_argument(
        "--png",
        default="",
        help="figure path (default: sawtooth.png in a new temporary folder; the README's, "
        "bench/sawtooth.png, is written on purpose by `make screenshots`)",
    )
    p.add_argument("--no-png", action="store_true", help="do not write the figure")
    args = p.parse_args(argv)
    if args.turns < 2:
        p.error("--turns must be at least 2")
    return args


def configure_django(args: argparse.Namespace) -> str | None:
    """Returns the temporary directory to delete afterwards, if one was made."""
    env = {
        "CONTEXT_BUDGET_TOKENS": str(args.budget),
        "AUTO_COMPACT_AT": str(args.auto_at),
        "GENERATED_TITLES": "false",  # each turn is counted as one request
    }
    args.database_url, tmp = setup_django(env, args.database_url, prefix="sawtooth-")
    return tmp


# --- what the user types and what the fake model says ------------------------------------------

WORDS = (
    "model view template queryset migration index cache session request response middleware "
    "websocket consumer channel group token budget window summary boundary transcript message "
    "reply stream error retry timeout latency database sqlite postgres transaction lock row "
    "field form widget test fixture assertion coverage refactor function class method module "
    "import settings environment deploy docker nginx static htmx partial fragment render"
).split()
ASKS = (
    "Can you explain why",
    "How should I change",
    "What is the safest way to fix",
    "I think there is a bug where",
    "Please review this:",
    "Why does the test fail when",
    "Could we simplify",
    "Next, let us look at",
)


def user_text(rng: random.Random, turn: int) -> str:
    """Mostly short questions, some paragraphs, now and then a pasted block of code or a log."""
    roll = rng.random()
    ask = f"{rng.choice(ASKS)} the {rng.choice(WORDS)} {rng.choice(WORDS)}?"
    if roll < 0.65:
        return f"{ask} {prose(rng, rng.randint(20, 350), WORDS)}"
    if roll < 0.93:
        return f"{ask}\n\n{prose(rng, rng.randint(400, 1500), WORDS)}"
    return f"{ask} Here is the code (turn {turn}):\n\n{code(rng, rng.randint(1500, 5000), WORDS)}"


def reply_text(rng: random.Random) -> str:
    text = prose(rng, rng.randint(250, 1800), WORDS)
    if rng.random() < 0.3:
        text += "\n\n" + code(rng, rng.randint(200, 900), WORDS)
    return text


# --- the run ------------------------------------------------------------------------------------


@dataclass
class TurnRecord:
    n: int
    user_seq: int = 0
    user_tokens: int = 0
    estimate: int = 0  # the claim's window estimate (WindowState.tokens) for the reply request
    sent: int = 0  # input tokens the fake model reported for the reply request
    send_queries: int = 0  # turns.actions.send
    engine_queries: int = 0  # the engine's work for the turn, auto-compaction included
    presend: bool = False  # the send's claim was a compaction: it ran before the reply
    auto: bool = False  # an auto-compaction was opened after the reply
    due_unopened: bool = False  # none was, but the policy says one is due after the turn
    compactions: list = field(default_factory=list)  # the Compaction rows made in the turn
    ms: float = 0.0
    sql: list[str] = field(default_factory=list)

    @property
    def queries(self) -> int:
        return self.send_queries + self.engine_queries

    @property
    def compacting(self) -> bool:
        return self.presend or self.auto or bool(self.compactions)


async def observe(turn: TurnRecord, claim, conversation_id: int, before_id: int) -> None:
    """What the turn did, from its results: the claim's step, the compaction rows made during
    it, and (none opened after the reply) whether the policy holds one due on the window now."""
    from asgiref.sync import sync_to_async

    from chat.compactions import Opened, auto_due
    from chat.models import Conversation
    from chat.window_loading import load_window
    from compaction.models import Compaction

    turn.presend = isinstance(claim.step, Opened)
    presend_id = claim.step.row.pk if turn.presend else None
    rows = Compaction.objects.filter(conversation_id=conversation_id, pk__gt=before_id)
    turn.compactions = [r async for r in rows.order_by("pk")]
    turn.auto = any(
        r.trigger == Compaction.Trigger.AUTO and r.pk != presend_id for r in turn.compactions
    )
    if turn.auto:
        return
    conversation = await Conversation.objects.aget(pk=conversation_id)
    state = await sync_to_async(load_window)(conversation)
    drafts = Compaction.objects.filter(
        conversation_id=conversation_id, status=Compaction.Status.DRAFT
    )
    # The engine's own decision, asked of the window the turn left.
    turn.due_unopened = auto_due(conversation, state, draft_waiting=await drafts.aexists())


async def drive(
    args: argparse.Namespace, user, conversation
) -> tuple[list[TurnRecord], UsageModel]:
    """Every turn, sent and run to the end in this event loop, as the websocket would."""
    from functools import partial

    from bench.harness.inprocess import run_turn
    from providers import registry
    from support.queries import all_queries
    from turns import engine

    def after_send(turn: TurnRecord, seen: list, claim) -> None:
        """The send's queries, counted before the engine starts; its reply must be claimed."""
        turn.send_queries = len(seen)
        if claim.step is None:
            raise SystemExit(f"turn {turn.n}: the message was queued behind nothing")

    replies = random.Random(args.seed + 1)
    model = UsageModel(lambda: reply_text(replies))
    registry.register(model)  # every model's replies and summaries come here
    without_background()
    rng = random.Random(args.seed)
    history: list[TurnRecord] = []
    last_compaction = 0  # the newest compaction row's id: a new conversation has none
    try:
        for n in range(1, args.turns + 1):
            turn = TurnRecord(n)
            text = user_text(rng, n)
            started = time.perf_counter()
            with all_queries() as seen:
                sending = partial(after_send, turn, seen)
                claim = await run_turn(user, conversation.pk, text, timeout=60, sent=sending)
            turn.ms = (time.perf_counter() - started) * 1000
            turn.engine_queries = len(seen) - turn.send_queries
            turn.sql = [q.sql for q in seen]
            turn.user_seq, turn.user_tokens = claim.message.seq, claim.message.tokens
            # What the engine sends: the reply's window, or the one the pre-send compaction cuts.
            turn.estimate = claim.step.state.tokens
            await observe(turn, claim, conversation.pk, last_compaction)
            last_compaction = max([r.pk for r in turn.compactions], default=last_compaction)
            if len(model.chat_usage) != n:
                raise SystemExit(
                    f"turn {n}: expected one reply request, saw {len(model.chat_usage)} in all"
                )
            turn.sent = model.chat_usage[-1].input_total
            history.append(turn)
    finally:
        await engine.shutdown()
    return history, model


def run(args: argparse.Namespace) -> tuple[list[TurnRecord], UsageModel, object, object]:
    from django.contrib.auth import get_user_model

    from chat.models import Conversation
    from compaction.window_state import budget_for

    user = get_user_model().objects.create_user(
        f"bench-{uuid.uuid4().hex[:8]}", password=uuid.uuid4().hex
    )
    conversation = Conversation.objects.create(
        owner=user, model="fake-model", system_prompt=SYSTEM_PROMPT
    )
    history, model = asyncio.run(drive(args, user, conversation))
    return history, model, conversation, budget_for(conversation.model)


def naive_series(conversation, history: list[TurnRecord]) -> list[int]:
    """Tokens each request would carry if the whole transcript were sent every turn."""
    from providers.tokens import estimate_text

    rows = list(conversation.messages.order_by("seq").values_list("seq", "tokens"))
    head = estimate_text(conversation.system_prompt)
    cumulative: dict[int, int] = {}
    total = 0
    for seq, tokens in rows:
        total += tokens
        cumulative[seq] = total
    return [head + cumulative[t.user_seq] for t in history]


# --- printing -----------------------------------------------------------------------------------


def first_over(values: list[int], limit: int) -> int | None:
    return next((i + 1 for i, v in enumerate(values) if v > limit), None)


def nearest_plain(history: list[TurnRecord], want: int, *, backwards_only: bool = False) -> int:
    by_n = {t.n: t for t in history}
    for d in range(len(history)):
        for n in (want - d,) if backwards_only else (want - d, want + d):
            if n in by_n and not by_n[n].compacting:
                return n
    raise SystemExit("no turn without a compaction to compare")


_LITERAL_RE = re.compile(r"'[^']*'|\b\d+(\.\d+)?\b")


def shape(sql: str) -> str:
    return _LITERAL_RE.sub("?", sql)


def report(args, history, model, conversation, budget) -> int:
    from chat.models import Message
    from compaction.models import Compaction

    naive = naive_series(conversation, history)
    sent = [t.sent for t in history]
    marks = {t.n for t in history if t.compactions}
    rows = list(Compaction.objects.filter(conversation=conversation).order_by("id"))
    committed = [r for r in rows if r.status == Compaction.Status.COMMITTED]
    turn_of = {r.pk: t.n for t in history for r in t.compactions}
    problems: list[str] = []
    unfinished = Counter(
        conversation.messages.filter(role=Message.Role.ASSISTANT)
        .exclude(status=Message.Status.COMPLETE)
        .values_list("status", flat=True)
    )
    if unfinished:
        problems.append(f"replies not complete: {dict(unfinished)}")

    print(f"Sawtooth bench: {len(history)} turns through turns.actions.send and turns.engine")
    print(
        f"  budget {budget.total:,} tokens, auto-compaction at {budget.auto_at:.0%} "
        f"({budget.threshold:,}), kept tail {budget.keep_tokens:,}, reply reserve "
        f"{budget.reserve:,}; seed {args.seed}"
    )
    print(f"  database: {args.database_url}")
    print(
        "  model: a fake (support.fake_model.FakeClient). There is no real API: each reply's "
        "usage.input_tokens is the app's own estimator over the exact window sent "
        f"({model.inner.__class__.__name__}, ~3 chars/token), so all numbers are estimates."
    )
    print()
    print("Tokens sent per turn, with compaction:")
    print(f"  min {min(sent):,}  mean {statistics.mean(sent):,.0f}  max {max(sent):,}")
    print(f"  {sparkline(sent, budget.total)}   (scale 0..budget)")
    print("Tokens per turn, naive (whole transcript every turn):")
    print(f"  min {min(naive):,}  mean {statistics.mean(naive):,.0f}  max {max(naive):,}")
    print(f"  {sparkline(naive, max(naive) + 1)}   (scale 0..{max(naive):,})")
    print()
    for line in ascii_chart(sent, naive, marks, budget.total, budget.threshold):
        print(line)
    print()

    print(
        f"Compactions: {len(committed)} committed of {len(rows)} attempted "
        f"(summary calls: {len(model.summary_usage)})"
    )
    print(f"  at turns: {', '.join(str(turn_of.get(r.pk, '?')) for r in committed) or 'none'}")
    if committed:
        gaps = [b - a for a, b in zip(sorted(marks), sorted(marks)[1:], strict=False)]
        pre = [r.pre_tokens for r in committed]
        post = [r.post_tokens for r in committed]
        print(
            f"  pre_tokens {min(pre):,}..{max(pre):,}, post_tokens {min(post):,}..{max(post):,}, "
            f"summariser {dict(Counter(r.summariser for r in committed))}, "
            f"turns between: {min(gaps, default=0)}..{max(gaps, default=0)}"
        )
    for r in rows:
        if r.status != Compaction.Status.COMMITTED:
            problems.append(f"compaction {r.pk} at turn {turn_of.get(r.pk)}: {r.status} {r.error}")
    presend = [t.n for t in history if t.presend]
    if presend:
        print(f"  pre-send compactions (before the turn's reply) at turns: {presend}")
    for t in history:
        if t.due_unopened:
            problems.append(f"turn {t.n}: auto-compaction due after the reply but none was opened")
    # Does the window really drop, and by what post_tokens says?
    post_errors = []
    by_n = {t.n: t for t in history}
    for r in committed:
        n = turn_of.get(r.pk)
        if not r.post_tokens < r.pre_tokens or not r.post_tokens < budget.threshold:
            problems.append(
                f"compaction at turn {n}: post_tokens {r.post_tokens} not below pre "
                f"{r.pre_tokens} and threshold {budget.threshold}"
            )
        after = by_n.get(n + 1) if n else None
        if after is not None and not by_n[n].presend:
            if not after.sent < by_n[n].sent:
                problems.append(f"turn {n + 1}: window {after.sent} did not drop after compaction")
            post_errors.append(after.sent - after.user_tokens - r.post_tokens)
    if post_errors:
        print(
            "  post_tokens vs the window actually sent next turn (minus the new user message): "
            f"off by {min(post_errors):+,}..{max(post_errors):+,} tokens"
        )
    drift = [t.sent - t.estimate for t in history if not t.presend]
    print(
        "  the claim's window estimate (WindowState.tokens) vs reported input: "
        f"off by {min(drift):+,}..{max(drift):+,} tokens"
    )
    print()

    mean_w, mean_n = statistics.mean(sent), statistics.mean(naive)
    print("Window tokens, with vs without compaction:")
    print(f"  mean {mean_w:>10,.0f} vs {mean_n:>10,.0f}   ({mean_n / mean_w:.1f}x)")
    print(f"  max  {max(sent):>10,} vs {max(naive):>10,}   ({max(naive) / max(sent):.1f}x)")
    total_w, total_n = sum(sent), sum(naive)
    total_s = sum(u.input_total for u in model.summary_usage)
    print(
        f"  total input over all turns: {total_w:,} vs {total_n:,} ({total_n / total_w:.1f}x); "
        f"with the summary calls' {total_s:,} input tokens: {total_w + total_s:,} "
        f"({total_n / (total_w + total_s):.1f}x)"
    )
    wall = first_over(naive, budget.total)
    wall_reserve = first_over(naive, budget.total - budget.reserve)
    if wall:
        print(
            f"  context wall: the naive window exceeds the {budget.total:,}-token budget at turn "
            f"{wall} (no room for the {budget.reserve:,}-token reply from turn {wall_reserve}); "
            "beyond it the naive numbers are hypothetical"
        )
    else:
        print(f"  context wall: the naive window stays under the budget for all {len(naive)} turns")
    if max(sent) >= budget.total:
        problems.append(f"with compaction the window reached {max(sent)} >= budget {budget.total}")
    print()

    early = nearest_plain(history, 10)
    late = nearest_plain(history, len(history), backwards_only=True)
    te, tl = by_n[early], by_n[late]
    note = ""
    if (early, late) != (10, len(history)):
        note = f" (turn 10 / {len(history)} had a compaction; nearest turns without one used)"
    plain = [t for t in history if not t.compacting]
    compacting = [t for t in history if t.compacting]
    print(f"Queries per turn (send + the engine's turn incl. the auto-compaction check){note}:")
    print(
        f"  turn {early}: {te.queries} ({te.send_queries} + {te.engine_queries}),  "
        f"turn {late}: {tl.queries} ({tl.send_queries} + {tl.engine_queries})"
    )
    equal = te.queries == tl.queries
    print(f"  assert queries(turn {early}) == queries(turn {late}): {'ok' if equal else 'FAILED'}")
    if not equal:
        problems.append(f"queries grew: turn {early} {te.queries} vs turn {late} {tl.queries}")
        diff = Counter(map(shape, tl.sql))
        diff.subtract(Counter(map(shape, te.sql)))
        for sql, k in diff.items():
            if k:
                print(f"    {k:+d} x {sql[:160]}")
    spread = Counter(t.queries for t in plain)
    usual = spread.most_common(1)[0][0]
    odd = [f"turn {t.n}: {t.queries}" for t in plain if t.queries != usual]
    print(
        f"  all {len(plain)} turns without compaction: {dict(sorted(spread.items()))}"
        + (f" (not {usual}: {', '.join(odd[:8])}{' ...' if len(odd) > 8 else ''})" if odd else "")
    )
    if compacting:
        qs = [t.queries for t in compacting]
        print(
            f"  {len(compacting)} turns with a compaction: {min(qs)}..{max(qs)} queries "
            "(reported separately)"
        )
    head_ms = statistics.median(t.ms for t in plain[:20])
    tail_ms = statistics.median(t.ms for t in plain[-20:])
    print(
        f"  wall time per turn without compaction (median, noisy): first 20 {head_ms:.1f} ms, "
        f"last 20 {tail_ms:.1f} ms"
    )
    print()

    if not args.no_png:
        peaks = {turn_of[r.pk]: r.pre_tokens for r in committed if r.pk in turn_of}
        if args.png:
            png = Path(args.png)
        else:  # not the README's figure: that one changes on purpose only (make screenshots)
            png = Path(tempfile.mkdtemp(prefix="sawtooth-figure-")) / "sawtooth.png"
        write_png(png, sent, naive, peaks, budget, wall)
        print(f"Figure: {png}")
    if problems:
        print("PROBLEMS:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print("All checks passed.")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = configure_django(args)
    try:
        started = time.perf_counter()
        history, model, conversation, budget = run(args)
        elapsed = time.perf_counter() - started
        status = report(args, history, model, conversation, budget)
        print(f"({len(history)} turns in {elapsed:.1f} s)")
        return status
    finally:
        if tmp:
            from django.db import connections

            connections.close_all()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
