"""Prompt caching: what share of a long conversation's input is read from the cache, and what
the input is billed, against the same conversation without breakpoints and without compaction.

Run by hand (`make bench-cache`, or `.venv/bin/python bench/cache.py`); not a test.

One conversation of `--turns` turns is driven through the real turn code (`turns.actions.send`,
the engine's steps: tool calls, auto-compaction with its summary requests) and the real SDK,
against `support/fake_anthropic.py` in this process. That server keeps a prompt cache the way the
API does (a prefix up to a breakpoint, byte-identical, read within 5 minutes; prefixes under
`--min-cache-tokens` are not cached) and reports each request's input apart as read from the
cache, written to it, and the rest; tokens are a quarter of the characters of the request's
JSON, so the figures are estimates with the API's structure, not a tokenizer's counts.

The same seeded conversation (the same messages, replies, tool calls) runs five times, each on
a fresh database and a fresh cache:

  ours            breakpoints, compaction, summaries asked over the cached prefix (as it ships)
  transcript sums breakpoints, compaction, summaries asked over a separate transcript
                  (SUMMARY_READS_CACHE=false)
  no breakpoints  PROMPT_CACHING=false, compaction
  no compaction   breakpoints, a budget so large nothing is ever compacted
  neither         no breakpoints, no compaction: the reference

Billed input counts every request's input at the API's prices relative to plain input: reads at
0.1, writes at 1.25, the rest at 1 (chat steps and summary requests alike).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, not bench/

from bench.harness.inprocess import run_turn, setup_django, without_background  # noqa: E402
from bench.harness.texts import prose  # noqa: E402
from support.fake_anthropic import FakeAnthropic  # noqa: E402
from support.messages_api import system_text  # noqa: E402
from support.scripts import Script  # noqa: E402

READ_PRICE, WRITE_PRICE = 0.1, 1.25
CONFIGS = {
    "ours": {"caching": True, "compaction": True, "over_prefix": True},
    "transcript sums": {"caching": True, "compaction": True, "over_prefix": False},
    "no breakpoints": {"caching": False, "compaction": True, "over_prefix": False},
    "no compaction": {"caching": True, "compaction": False, "over_prefix": False},
    "neither": {"caching": False, "compaction": False, "over_prefix": False},
}
READ_SHARE_TARGET = 0.8

WORDS = (
    "model view template queryset migration index cache session request response middleware "
    "websocket consumer channel group token budget window summary boundary transcript message "
    "reply stream retry timeout latency database transaction lock row field form widget test "
    "fixture assertion coverage refactor function class method module import settings static"
).split()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=300, help="conversation length (default 300)")
    p.add_argument("--budget", type=int, default=20_000, help="CONTEXT_BUDGET_TOKENS (20000)")
    p.add_argument("--tool-share", type=float, default=0.2, help="turns with a tool call (0.2)")
    p.add_argument(
        "--min-cache-tokens", type=int, default=1024, help="smallest cached prefix (1024)"
    )
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--config", choices=list(CONFIGS), help=argparse.SUPPRESS)  # one run
    return p.parse_args(argv)


def script(seed: int, turns: int, tool_share: float) -> list[dict]:
    """The conversation, decided up front so every configuration runs the same one."""
    rng = random.Random(seed)
    plan = []
    for n in range(1, turns + 1):
        plan.append(
            {
                "user": f"Turn {n}. " + prose(rng, rng.randint(80, 900), WORDS),
                "reply": prose(rng, rng.randint(250, 1500), WORDS),
                "tool": rng.random() < tool_share,
                "query": " ".join(rng.choices(WORDS, k=3)),
            }
        )
    return plan


def run_one(args: argparse.Namespace) -> dict:
    """One configuration, in this process (`main` starts one process per configuration, since
    settings are read once)."""
    config = CONFIGS[args.config]
    planned = PlannedConversation(script(args.seed, args.turns, args.tool_share))
    fake = FakeAnthropic(planned, record=False).start()
    fake.cache.min_tokens = args.min_cache_tokens
    env = {
        "LLM_PROVIDER": "anthropic",
        "ANTHROPIC_API_KEY": "bench",
        "ANTHROPIC_BASE_URL": fake.url,
        "PROMPT_CACHING": "true" if config["caching"] else "false",
        "SUMMARY_READS_CACHE": "true" if config["over_prefix"] else "false",
        "CONTEXT_BUDGET_TOKENS": str(args.budget if config["compaction"] else 100_000_000),
        "CHAT_MAX_TOKENS": "1024",
        "LLM_MAX_RETRIES": "0",
    }
    _, tmp = setup_django(env, prefix="cache-bench-")
    try:
        started = time.perf_counter()
        asyncio.run(_drive(planned.plan_of_turns, args.turns))
        from compaction.models import Compaction

        return {
            "kinds": planned.kinds,
            "counts": fake.counts,
            "compactions": Compaction.objects.filter(status="committed").count(),
            "seconds": time.perf_counter() - started,
        }
    finally:
        fake.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


class PlannedConversation:
    """The fake server's planner (support/scripts.py): answers from the planned conversation, a
    tool call first where the plan says so, a well-formed summary for a summary request; notes
    which kind each request was."""

    def __init__(self, plan: list[dict]) -> None:
        self.plan_of_turns = plan
        self.turn = 0
        self.called = False
        self.kinds: list[str] = []

    def plan(self, body: dict) -> Script:
        from compaction.prompt import PREFIX_MARKER, SECTIONS, SYSTEM_PROMPT

        last = body["messages"][-1]["content"][-1]
        if system_text(body) == SYSTEM_PROMPT or last.get("text", "").startswith(PREFIX_MARKER):
            summary = "\n\n".join(f"## {s}\n- kept (#{self.turn})" for s in SECTIONS)
            chunks, stop, tools, kind = (
                [f"<summary>\n{summary}\n</summary>"],
                "end_turn",
                [],
                "summary",
            )
        else:
            if last.get("type") != "tool_result":  # a new turn, not its next step
                self.turn += 1
                self.called = False
            plan = self.plan_of_turns[self.turn - 1]
            kind = "chat" if last.get("type") != "tool_result" else "tool step"
            if plan["tool"] and not self.called:
                self.called = True
                arguments = json.dumps({"query": plan["query"]})
                tool = {
                    "id": f"toolu_{self.turn}",
                    "name": "search_history",
                    "input_parts": [arguments],
                }
                chunks, stop, tools = ["Let me check."], "tool_use", [tool]
            else:
                chunks, stop, tools = [plan["reply"]], "end_turn", []
        self.kinds.append(kind)
        script = Script("reply", chunks, {"output_tokens": 1}, stop, tools=tools)
        script.counted = True
        return script


async def _drive(plan: list[dict], turns: int) -> None:
    from django.contrib.auth import get_user_model

    from chat.models import Conversation
    from turns import engine

    without_background()
    user = await get_user_model().objects.acreate(username=f"cache-{uuid.uuid4().hex[:8]}")
    conversation = await Conversation.objects.acreate(
        owner=user, model="claude-bench", system_prompt=prose(random.Random(1), 1200, WORDS)
    )
    try:
        for n in range(turns):
            await run_turn(user, conversation.pk, plan[n]["user"])
    finally:
        await engine.shutdown()


def totals(run: dict) -> dict:
    counts = run["counts"]
    summaries = [c for c, kind in zip(counts, run["kinds"], strict=True) if kind == "summary"]
    return {
        "requests": len(counts),
        "summaries": len(summaries),
        **_billed(counts),
        "summary billed": _billed(summaries)["billed"],
    }


def _billed(counts: list[dict]) -> dict:
    plain = sum(c["input_tokens"] for c in counts)
    read = sum(c["cache_read_input_tokens"] for c in counts)
    written = sum(c["cache_creation_input_tokens"] for c in counts)
    return {
        "input": plain + read + written,
        "read": read,
        "written": written,
        "billed": plain + READ_PRICE * read + WRITE_PRICE * written,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.config:
        print(json.dumps(run_one(args)))
        return 0
    runs = {}
    for name in CONFIGS:
        command = [sys.executable, __file__, "--config", name, "--turns", str(args.turns)]
        command += ["--budget", str(args.budget), "--tool-share", str(args.tool_share)]
        command += ["--min-cache-tokens", str(args.min_cache_tokens), "--seed", str(args.seed)]
        print(f"  {name} ...", end="", flush=True, file=sys.stderr)
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
        if done.returncode != 0:
            print(f" failed\n{done.stderr[-3000:]}", file=sys.stderr)
            return 1
        runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f" {runs[name]['seconds']:.0f} s", file=sys.stderr)
    return report(args, runs)


def report(args: argparse.Namespace, runs: dict) -> int:
    figures = {
        name: totals(run) | {"compactions": run["compactions"]} for name, run in runs.items()
    }
    reference = figures["neither"]["billed"]
    print(
        f"{args.turns} turns ({args.tool_share:.0%} with a tool call), budget {args.budget:,} "
        f"tokens, prefixes under {args.min_cache_tokens:,} tokens not cached; reads billed at "
        f"{READ_PRICE}, writes at {WRITE_PRICE}.\n"
    )
    header = (
        f"{'configuration':16} {'requests':>8} {'compactions':>11} {'input':>11} "
        f"{'from cache':>10} {'written':>10} {'billed':>11} {'x neither':>9} "
        f"{'summaries billed':>16}"
    )
    print(header)
    print("-" * len(header))
    for name, f in figures.items():
        share = f["read"] / f["input"] if f["input"] else 0
        print(
            f"{name:16} {f['requests']:8} {f['compactions']:11} {f['input']:11,} "
            f"{share:10.0%} {f['written']:10,} {f['billed']:11,.0f} "
            f"{f['billed'] / reference:9.2f} {f['summary billed']:16,.0f}"
        )
    ours = figures["ours"]
    share = ours["read"] / ours["input"]
    print(
        f"\nOurs: {share:.0%} of input read from the cache; billed input "
        f"{ours['billed'] / figures['no breakpoints']['billed']:.2f}x the same run without "
        f"breakpoints, {ours['billed'] / figures['no compaction']['billed']:.2f}x caching "
        f"without compaction, {ours['billed'] / reference:.2f}x neither.\n"
        f"Summary requests over the cached prefix billed "
        f"{ours['summary billed'] / figures['transcript sums']['summary billed']:.2f}x the same "
        f"summaries over a separate transcript (whole run: "
        f"{ours['billed'] / figures['transcript sums']['billed']:.2f}x)."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    verdict = "PASS" if share >= READ_SHARE_TARGET else "FAIL"
    print(f"[{verdict}] cache-read share {share:.0%} (target >= {READ_SHARE_TARGET:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
