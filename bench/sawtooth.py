"""The sawtooth: window tokens per turn over a long conversation, with and without compaction.

Run by hand (`make bench`, or `.venv/bin/python bench/sawtooth.py --turns 300`); not a test.

Each turn goes through the real code path, in one event loop as in the server: `chat.actions.send`
(what the websocket's send does: store the message, claim its reply under the pre-send check,
broadcast the bubble), then `chat.engine.start` on the claimed step, awaited until the engine has
nothing left to do for the conversation (`tests.waiting.settle`): a compaction the pre-send check
opened, the streamed reply, its save and broadcasts (to the in-memory channel layer, no
listeners), the context panel, and the auto-compaction the policy opens after the reply. Only the
model is fake: `providers.client_for` returns a wrapper around `tests.fakes.FakeClient`, which
reports `usage.input_tokens` as the app's own estimator over the exact window it was sent (there
is no real API here, so token numbers are estimates, not a tokenizer's counts). The same client
writes the summaries: a proper `<analysis>`/`<summary>` answer of bounded size.

The "without compaction" series is the naive window: system prompt + every message so far, from
the per-message token counts stored on the transcript rows.

Database queries are counted per turn on every thread (`tests.queries.all_queries`: on
PostgreSQL the engine works on database threads); a non-compaction turn late in the
conversation must cost exactly as many queries as one early on (exit status 1 otherwise). The
engine's process-wide heartbeat and sweep (`chat.engine._background`) is replaced by a
coroutine that returns at once, as in tests/test_per_turn_cost.py: it runs a few queries every
TURN_HEARTBEAT_SECONDS whatever the load, which is not a turn's cost and would land in whichever
turn its timer happened to hit.
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
import time
import uuid
from collections import Counter
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from inprocess import setup_django, without_background  # noqa: E402

DEFAULT_PNG = ROOT / "bench" / "sawtooth.png"
SYSTEM_PROMPT = (
    "You are a careful senior engineer helping a colleague maintain a Django web application. "
    "Answer precisely, show code when it helps, name files and functions, and say when you are "
    "unsure. Prefer small, reviewable changes and explain the reasons behind them."
)
CHART_WIDTH = 60
CHART_HEIGHT = 10


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
    p.add_argument("--png", default=str(DEFAULT_PNG), help=f"figure path (default {DEFAULT_PNG})")
    p.add_argument("--no-png", action="store_true", help="do not write the figure")
    args = p.parse_args(argv)
    if args.turns < 2:
        p.error("--turns must be at least 2")
    return args


def configure_django(args: argparse.Namespace) -> str | None:
    """Returns the temporary directory to delete afterwards, if one was made."""
    env = {"CONTEXT_BUDGET_TOKENS": str(args.budget), "AUTO_COMPACT_AT": str(args.auto_at)}
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


def _sentence(rng: random.Random, lo: int = 6, hi: int = 18) -> str:
    words = rng.choices(WORDS, k=rng.randint(lo, hi))
    return " ".join(words).capitalize() + "."


def _prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        s = _sentence(rng)
        out.append(s)
        size += len(s) + 1
    return " ".join(out)


def _code(rng: random.Random, chars: int) -> str:
    lines: list[str] = ["```python"]
    size = 0
    n = 0
    while size < chars:
        name = f"{rng.choice(WORDS)}_{n}"
        block = (
            f"def {name}(request, pk):\n"
            f"    obj = {rng.choice(WORDS).title()}.objects.get(pk=pk)\n"
            f"    return render(request, '{rng.choice(WORDS)}.html', {{'obj': obj}})\n"
        )
        lines.append(block)
        size += len(block)
        n += 1
    lines.append("```")
    return "\n".join(lines)


def user_text(rng: random.Random, turn: int) -> str:
    """Mostly short questions, some paragraphs, now and then a pasted block of code or a log."""
    roll = rng.random()
    ask = f"{rng.choice(ASKS)} the {rng.choice(WORDS)} {rng.choice(WORDS)}?"
    if roll < 0.65:
        return f"{ask} {_prose(rng, rng.randint(20, 350))}"
    if roll < 0.93:
        return f"{ask}\n\n{_prose(rng, rng.randint(400, 1500))}"
    return f"{ask} Here is the code (turn {turn}):\n\n{_code(rng, rng.randint(1500, 5000))}"


def reply_text(rng: random.Random) -> str:
    text = _prose(rng, rng.randint(250, 1800))
    if rng.random() < 0.3:
        text += "\n\n" + _code(rng, rng.randint(200, 900))
    return text


_USER_RE = re.compile(
    r"User \(#(\d+)\):\n(.*?)(?=\n\n(?:User|Assistant) \(#|\n</transcript>)", re.S
)


def summary_text(request_text: str, sections: tuple[str, ...]) -> str:
    """A well-formed model answer: <analysis> (discarded by the app), then a <summary> of about
    1-2k characters whatever the length of the conversation, as a good summariser keeps it."""
    users = [(int(seq), " ".join(body.split())) for seq, body in _USER_RE.findall(request_text)]
    quoted = [f'- (#{seq}) "{body[:90]}"' for seq, body in users[-8:]]
    fill = {
        "Primary request and intent": "Maintain and improve the Django chat application.",
        "Key technical concepts": "Django ORM, Channels websockets, htmx partials, compaction.",
        "Files and code": "chat/engine.py, compaction/run.py, templates/chat/*.html.",
        "Errors and fixes": "Discussed failing tests and their fixes; all resolved so far.",
        "Problem solving": "Kept changes small; agreed on query counts that do not grow.",
        "All user messages": "\n".join(quoted) or "- (none)",
        "Pending tasks": "Finish the review of the latest change.",
        "Current work": f"Answering the latest request (#{users[-1][0] if users else 0}).",
        "Next step": f'Continue with: "{users[-1][1][:120] if users else ""}"',
    }
    body = "\n\n".join(f"## {name}\n{fill.get(name, '-')}" for name in sections)
    return (
        f"<analysis>Read {len(users)} user messages in order; noted requests and files."
        f"</analysis>\n<summary>\n{body[:2000]}\n</summary>"
    )


class BenchModel:
    """The fake model: tests.fakes.FakeClient answers (and computes usage); this only chooses the
    words, tells chat replies from summary requests by their system prompt, and keeps each
    request's reported usage."""

    def __init__(self, seed: int) -> None:
        from compaction import summarise
        from tests.fakes import FakeClient

        self._summarise = summarise
        self.inner = FakeClient()
        self.rng = random.Random(seed)
        self.chat_usage: list = []  # providers.values.Usage of each reply request
        self.summary_usage: list = []  # ... and of each summary request

    def capabilities(self, model: str):
        return self.inner.capabilities(model)

    async def stream(self, request):
        from providers.values import Final

        is_summary = request.system == self._summarise.SYSTEM_PROMPT
        if is_summary:
            text = summary_text(_text_of(request.messages[-1]), self._summarise.SECTIONS)
            chunks = [text]
        else:
            text = reply_text(self.rng)
            step = max(1, len(text) // 8)  # a few deltas, each relayed like a real stream
            chunks = [text[i : i + step] for i in range(0, len(text), step)]
        self.inner.enqueue(chunks)
        async with aclosing(self.inner.stream(request)) as events:
            async for event in events:
                if isinstance(event, Final):
                    (self.summary_usage if is_summary else self.chat_usage).append(event.usage)
                yield event
        self.inner.calls.clear()  # the fake keeps a copy of every request: not needed here


def _text_of(message: dict) -> str:
    return "".join(b.get("text", "") for b in message["content"])


# --- the run ------------------------------------------------------------------------------------


@dataclass
class TurnRecord:
    n: int
    user_seq: int = 0
    user_tokens: int = 0
    estimate: int = 0  # the claim's window estimate (WindowState.tokens) for the reply request
    sent: int = 0  # input tokens the fake model reported for the reply request
    send_queries: int = 0  # chat.actions.send
    engine_queries: int = 0  # the engine's work for the turn, auto-compaction included
    presend: bool = False  # must_compact_before_send said yes
    auto: bool = False  # needs_auto_compaction said yes
    compactions: list = field(default_factory=list)  # rows run, or refusal reasons
    ms: float = 0.0
    sql: list[str] = field(default_factory=list)

    @property
    def queries(self) -> int:
        return self.send_queries + self.engine_queries

    @property
    def compacting(self) -> bool:
        return self.presend or self.auto or bool(self.compactions)


def install_spies(current: list[TurnRecord]) -> None:
    """Record what the policy decided each turn and which compactions were opened and run, by
    replacing the names the engine looks up. Pure Python wrappers: they add no queries."""
    from chat import engine, queue
    from compaction import run

    must, needs = queue.must_compact_before_send, engine.needs_auto_compaction
    open_locked, run_compaction = run.open_locked, run.run

    def must_spy(*args):
        # Asked when the message is sent, and again when the reply is claimed after a pre-send
        # compaction: the turn compacted before its reply if any of them said yes.
        result = must(*args)
        current[0].presend |= result
        return result

    def needs_spy(*args):
        current[0].auto = result = needs(*args)
        return result

    def open_spy(*args, **kwargs):
        try:
            return open_locked(*args, **kwargs)
        except run.CompactionRefused as exc:
            current[0].compactions.append(f"refused: {exc.reason}")
            raise

    async def run_spy(opened):
        row = await run_compaction(opened)
        current[0].compactions.append(row)
        return row

    queue.must_compact_before_send = must_spy
    engine.needs_auto_compaction = needs_spy
    run.open_locked = open_spy  # also what run.open_auto calls
    run.run = run_spy


async def drive(
    args: argparse.Namespace, user, conversation
) -> tuple[list[TurnRecord], BenchModel]:
    """Every turn, sent and run to the end in this event loop, as the websocket would."""
    import providers
    from chat import actions, engine
    from tests.queries import all_queries
    from tests.waiting import settle

    model = BenchModel(args.seed + 1)
    providers.client_for = lambda _model: model  # every reply and summary request comes here
    without_background()
    current = [TurnRecord(0)]
    install_spies(current)
    rng = random.Random(args.seed)
    history: list[TurnRecord] = []
    try:
        for n in range(1, args.turns + 1):
            turn = current[0] = TurnRecord(n)
            text = user_text(rng, n)
            started = time.perf_counter()
            with all_queries() as seen:
                claim = await actions.send(user, conversation.pk, text)
                turn.send_queries = len(seen)
                if claim.step is None:
                    raise SystemExit(f"turn {n}: the message was queued behind nothing")
                engine.start(claim.step)
                await settle(conversation.pk, timeout=60)
            turn.ms = (time.perf_counter() - started) * 1000
            turn.engine_queries = len(seen) - turn.send_queries
            turn.sql = [q.sql for q in seen]
            turn.user_seq, turn.user_tokens = claim.message.seq, claim.message.tokens
            # What the engine sends: the reply's window, or the one the pre-send compaction cuts.
            turn.estimate = claim.step.state.tokens
            if len(model.chat_usage) != n:
                raise SystemExit(
                    f"turn {n}: expected one reply request, saw {len(model.chat_usage)} in all"
                )
            turn.sent = model.chat_usage[-1].input_total
            history.append(turn)
    finally:
        await engine.shutdown()
    return history, model


def run(args: argparse.Namespace) -> tuple[list[TurnRecord], BenchModel, object, object]:
    from compaction.loading import budget_for
    from django.contrib.auth import get_user_model

    from chat.models import Conversation

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
    from compaction.tokens import estimate_text

    rows = list(conversation.messages.order_by("seq").values_list("seq", "tokens"))
    head = estimate_text(conversation.system_prompt)
    cumulative: dict[int, int] = {}
    total = 0
    for seq, tokens in rows:
        total += tokens
        cumulative[seq] = total
    return [head + cumulative[t.user_seq] for t in history]


# --- printing -----------------------------------------------------------------------------------

SPARKS = "▁▂▃▄▅▆▇█"


def bins(values: list[int], width: int) -> list[list[int]]:
    """Indices of `values` split into at most `width` consecutive, nearly equal groups."""
    n = len(values)
    width = min(width, n)
    return [list(range(i * n // width, (i + 1) * n // width)) for i in range(width)]


def sparkline(values: list[int], top: int, width: int = CHART_WIDTH) -> str:
    out = []
    for group in bins(values, width):
        v = max(values[i] for i in group)
        out.append(SPARKS[min(len(SPARKS) - 1, int(v / top * len(SPARKS)))] if v < top else "!")
    return "".join(out)


def ascii_chart(
    with_c: list[int], naive: list[int], marks: set[int], budget: int, threshold: int
) -> list[str]:
    """Rows of the sawtooth (█, max per column) against the budget; · is the naive window,
    ↑ where it is above the budget; ^ marks columns holding a compaction."""
    groups = bins(with_c, CHART_WIDTH)
    peaks = [max(with_c[i] for i in g) for g in groups]
    naive_peaks = [max(naive[i] for i in g) for g in groups]
    step = budget / CHART_HEIGHT
    lines = []
    for r in range(CHART_HEIGHT, 0, -1):
        lo, hi = step * (r - 1), step * r
        cells = []
        for v, nv in zip(peaks, naive_peaks, strict=True):
            if v >= hi:
                cells.append("█")
            elif v >= lo + step / 2:
                cells.append("▄")
            elif r == CHART_HEIGHT and nv > budget:
                cells.append("↑")
            elif lo <= nv < hi:
                cells.append("·")
            elif lo <= threshold < hi:
                cells.append("-")
            else:
                cells.append(" ")
        label = ""
        if r == CHART_HEIGHT:
            label = "  budget"
        elif lo <= threshold < hi:
            label = f"  auto threshold {threshold:,} (bottom of this row)"
        lines.append(f"{hi:>8,.0f} |{''.join(cells)}|{label}")
    lines.append(f"{0:>8} +{'-' * len(groups)}+")
    lines.append(
        " " * 10
        + "".join("^" if any(i + 1 in marks for i in g) else " " for g in groups)
        + "  ^ compaction"
    )
    last = len(with_c)
    axis = f"turn 1{' ' * max(1, len(groups) - len('turn 1') - len(str(last)))}{last}"
    lines.append(" " * 10 + axis)
    per = len(with_c) / len(groups)
    lines.append(
        f"          █ with compaction (peak of each column, {per:.0f} turn(s) per column)  "
        "· naive  ↑ naive above the budget"
    )
    return lines


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
    turn_of = {r.pk: t.n for t in history for r in t.compactions if hasattr(r, "pk")}
    problems: list[str] = []
    unfinished = Counter(
        conversation.messages.filter(role=Message.Role.ASSISTANT)
        .exclude(status=Message.Status.COMPLETE)
        .values_list("status", flat=True)
    )
    if unfinished:
        problems.append(f"replies not complete: {dict(unfinished)}")

    print(f"Sawtooth bench: {len(history)} turns through chat.actions.send and chat.engine")
    print(
        f"  budget {budget.total:,} tokens, auto-compaction at {budget.auto_at:.0%} "
        f"({budget.threshold:,}), kept tail {budget.keep_tokens:,}, reply reserve "
        f"{budget.reserve:,}; seed {args.seed}"
    )
    print(f"  database: {args.database_url}")
    print(
        "  model: a fake (tests.fakes.FakeClient). There is no real API: each reply's "
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
        refused = [c for c in t.compactions if isinstance(c, str)]
        if refused:
            problems.append(f"turn {t.n}: a compaction was wanted but {'; '.join(refused)}")
        elif t.auto and not t.compactions:
            problems.append(f"turn {t.n}: auto-compaction wanted but none was opened")
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
        write_png(Path(args.png), sent, naive, peaks, budget, wall)
        print(f"Figure: {args.png}")
    if problems:
        print("PROBLEMS:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print("All checks passed.")
    return 0


def write_png(path: Path, sent, naive, peaks: dict[int, int], budget, wall) -> None:
    """Two panels: the whole picture (the naive line runs away), and zoomed to the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    x = list(range(1, len(sent) + 1))
    fig, (full, zoom) = plt.subplots(
        2, 1, figsize=(11, 8), sharex=True, gridspec_kw={"height_ratios": [1, 1.6]}
    )
    for ax in (full, zoom):
        ax.plot(x, naive, color="tab:gray", lw=1.4, label="without compaction (whole transcript)")
        ax.plot(x, sent, color="tab:blue", lw=1.2, label="with compaction (window sent)")
        ax.axhline(budget.total, color="tab:red", lw=1, label=f"budget {budget.total:,}")
        ax.axhline(
            budget.threshold,
            color="tab:orange",
            lw=1,
            ls="--",
            label=f"auto threshold {budget.threshold:,}",
        )
        ax.grid(alpha=0.25)
        ax.set_ylabel("input tokens per turn")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    if wall:
        zoom.axvline(wall, color="tab:red", ls=":", lw=1)
        zoom.annotate(
            f"naive window passes the budget at turn {wall}",
            (wall, budget.total * 1.07),
            xytext=(6, 0),
            textcoords="offset points",
            color="tab:red",
            fontsize=8,
            va="center",
        )
    marked = sorted(peaks)
    zoom.scatter(
        marked,
        [peaks[n] for n in marked],
        marker="v",
        color="tab:green",
        zorder=3,
        label="compaction after the turn's reply (at its pre_tokens)",
    )
    zoom.set_ylim(0, budget.total * 1.15)
    full.set_title(f"Window tokens per turn over {len(sent)} turns (fake model, estimated tokens)")
    zoom.set_title("Zoomed to the budget: the sawtooth", fontsize=10)
    zoom.set_xlabel("turn")
    handles, labels = zoom.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
