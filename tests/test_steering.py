"""Instructions steer a summary: the rule-based brief gives what they name (ports, paths, names,
a topic's words) the first claim on its room and says truthfully what did not fit; "left out
for length" only when its room ran out; a regenerated draft reflects new instructions, or the
notice says why it cannot."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async

from chat.models import Conversation, Message
from compaction import summariser
from compaction.brief import rule_based_summary
from compaction.entries import Entry
from compaction.instructions import Steer, kinds_in, parse, report
from compaction.instructions import asked as steering_asked
from compaction.models import Compaction
from compaction.policy import Budget
from providers.demo import compose
from providers.tokens import estimate_content
from support.waiting import settle
from tests.conftest import frame, receive_until, shows, socket_for
from tests.test_notices import the_notice
from tests.transcripts import committed_boundary

ASKED = "Keep every port, path and name"
# A person's messages with the ports, paths and names asked for, and numbers, dates and
# questions besides that compete with them for the brief's room.
SAID = [
    "Hi, I'm Dana Whitfield and I run the platform team at Northwind Freight.",
    "The quarterly budget is 48,000 euros and 3,200 euros of it is already spent.",
    "The API gateway listens on port 8443 and the admin panel on port 9090.",
    "We moved the standup to 09:30 and the retro to 16:45 on Thursdays.",
    "Our Celery broker is Redis 7.2 at redis://10.4.2.17:6379/3 for the billing migration.",
    "The audit is due on 14 March 2026 and the renewal on 2026-04-30.",
    "The incident runbook lives at /srv/ops/runbooks/redis-failover.md now.",
    "Invoice INV-2026-0417 from Acme Hosting is still unpaid, it blocks the billing migration.",
    "The gateway config is at /etc/northwind/gateway.yaml and Priya Raman owns it.",
    "The cluster has 128 cores, 512 GB of memory and 2,400 GB of disk in total.",
    "Metrics are scraped on port 9100 and Grafana Labs hosts the dashboards.",
    "Does this look right?",
]
# What the instructions name, as the messages state them.
PORTS = ["8443", "9090", "9100", "10.4.2.17:6379"]
PATHS = ["/srv/ops/runbooks/redis-failover.md", "/etc/northwind/gateway.yaml"]
NAMES = ["Dana Whitfield", "Northwind Freight", "Acme Hosting", "Priya Raman", "Grafana Labs"]


def walk(said: list[str]) -> list[Entry]:
    """The person's messages with the offline demo model's replies, as its window makes them."""
    entries, messages = [], []
    for text in said:
        for role, content in (("user", text), ("assistant", None)):
            if content is None:
                content = compose("Be brief.", messages)[0]
            block = [{"type": "text", "text": content}]
            messages.append({"role": role, "content": block})
            entries.append(Entry(len(entries) + 1, role, block, estimate_content(block)))
    return entries


def room_for(entries: list[Entry]) -> int:
    """The room the rule-based brief has when these fold on a 2,000-token budget (as in the
    conversation that showed the problem)."""
    return summariser.fallback_chars(Budget(2_000), sum(e.tokens for e in entries))


def asked_note(summary: str) -> str:
    found = re.search(r"^- \(\d+ [^\n]* asked for[^\n]*\)$", summary, re.M)
    assert found, summary
    return found.group(0)


# --- reading the instructions ---------------------------------------------------------------------


def test_instructions_name_kinds_of_facts_and_a_topic():
    assert parse(ASKED) == Steer(("port", "path", "name"), ())
    assert parse("keep everything about the billing migration") == Steer(
        (), ("billing", "migration")
    )
    # "invoice" is neither a kind nor how people ask: a topic.
    assert parse("URLs, invoice ids and dates please") == Steer(
        ("url", "identifier", "date"), ("invoice",)
    )
    assert not parse("please, just keep it short")


# --- the rule-based brief -------------------------------------------------------------------------


def test_every_port_path_and_name_asked_for_is_kept_when_it_fits():
    entries = walk(SAID)[:-2]
    room = room_for(entries)

    summary = rule_based_summary(entries, None, ASKED, max_chars=room)

    assert len(summary) <= room
    missing = [x for x in PORTS + PATHS + NAMES if x not in summary]
    assert not missing, summary
    assert "ports, paths and names asked for, all stated)" in asked_note(summary)
    # The room was enough for them: nothing asked for is said not to fit.
    assert "did not fit" not in summary


def test_with_a_tiny_room_the_brief_names_what_did_not_fit_and_says_it_was_for_length():
    entries = walk(SAID)[:-2]

    summary = rule_based_summary(entries, None, ASKED, max_chars=500)

    assert len(summary) <= 500
    note = asked_note(summary)
    stated, asked, out = re.search(
        r"\((\d+) of the (\d+) ports, paths and names asked for are stated; (\d+) did not fit "
        r"in 500 ch",
        note,
    ).groups()
    assert int(out) > 0 and int(stated) + int(out) == int(asked)
    # The notice after the compaction counts the same facts the same way.
    said = report(ASKED, entries, None, summary, by_rules=True, room=500)
    assert f"It states {stated} of the {asked} ports, paths and names" in said, (said, note)
    # Every port, path and name the span states is in the brief, or its message is named as
    # holding one that did not fit.
    for seq, text in ((e.seq, e.text) for e in entries if e.role == "user"):
        stated = [x for x in PORTS + PATHS + NAMES if x in text]
        if any(x not in summary for x in stated):
            assert f"#{seq}" in note.split("did not fit")[1], (seq, summary)
    assert re.search(r"^- \(\d+ more facts left out for length", summary, re.M), summary


def test_left_out_for_length_appears_only_when_this_briefs_room_ran_out():
    entries = walk(SAID)
    # A first brief in a tiny room leaves facts out, and says so.
    first = rule_based_summary(entries[:12], None, max_chars=400)
    assert "left out for length" in first
    # The next has room to spare: it says nothing was left out for length (the first brief
    # said what it left out on its own boundary; its count is not carried on).
    second = rule_based_summary(entries[12:20], first, max_chars=6_000)
    assert len(second) < 6_000 - 500
    assert "left out for length" not in second, second


def test_a_topic_has_the_first_claim_on_the_room():
    entries = walk(SAID)[:-2]

    summary = rule_based_summary(
        entries, None, "keep everything about the billing migration", max_chars=500
    )

    assert "redis://10.4.2.17:6379/3" in summary and "INV-2026-0417" in summary, summary
    assert "facts about billing migration asked for" in asked_note(summary)


# --- through the socket: compact now, review, regenerate ------------------------------------------


async def chat(user, conversation, said: list[str], start: int = 1) -> None:
    """Each message sent and answered by the offline demo model, through the real engine."""
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    for n, text in enumerate(said):
        await ws.send_to(text_data=frame(action="send", message=text))
        await receive_until(ws, shows(start + 2 * n + 1, "complete"), timeout=15)
        await settle(conversation.pk)
    await ws.disconnect()


async def steer(ws, conversation, instructions: str, draft=None) -> tuple[Compaction, str]:
    """Compact now (or, with a draft, regenerate it) with `instructions`: the draft and the
    notice shown with it."""
    if draft is None:
        asked = frame(action="compact", instructions=instructions)
    else:
        asked = frame(action="regenerate", compaction=str(draft.pk), instructions=instructions)
    await ws.send_to(text_data=asked)
    frames = await receive_until(ws, lambda f: 'name="summary"' in f)
    await settle(conversation.pk)
    shown = the_notice(frames[-1])
    assert shown is not None and not shown[2], frames[-1]  # shown where the person looks
    row = await Compaction.objects.filter(conversation=conversation).alatest("id")
    return row, shown[1]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_compact_now_keeps_what_the_instructions_name_and_regenerate_says_what_changed(
    alice, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 2_000
    conversation = await Conversation.objects.acreate(
        owner=alice, model="demo", system_prompt="Be brief.", review_compactions=True
    )
    said = [SAID[n] for n in (0, 2, 4, 6, 7, 8, 10, 11)]
    await chat(alice, conversation, said)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()

    draft, notice = await steer(ws, conversation, ASKED)

    assert (draft.status, draft.summariser) == ("draft", "rules")
    folded = " ".join(said[: (draft.first_kept_seq - 1) // 2])
    asked = [x for x in PORTS + PATHS + NAMES if x in folded]
    assert "10.4.2.17:6379" in asked and PATHS[0] in asked and len(asked) >= 6
    assert not [x for x in asked if x not in draft.summary], draft.summary
    assert "ports, paths and names of the messages it replaces" in notice
    assert "room for" in notice  # how much room the summary without a model had

    # Other instructions: a draft that reflects them, and a notice that says so.
    again, notice = await steer(
        ws, conversation, "keep everything about the billing migration", draft
    )
    assert again.summary != draft.summary
    assert "facts about billing migration asked for" in again.summary
    assert notice.startswith("New draft written with your instructions.")

    # The same ones again: the same draft, and the notice says so.
    same, notice = await steer(
        ws, conversation, "keep everything about the billing migration", again
    )
    assert same.summary == again.summary
    assert notice.startswith("The new draft is the same as the one before.")

    # Instructions naming what the span does not hold: the notice says so.
    _, notice = await steer(ws, conversation, "Keep every date", same)
    assert "The messages this summary replaces hold no dates." in notice
    statuses = [c.status async for c in Compaction.objects.order_by("id")]
    assert statuses == ["discarded", "discarded", "discarded", "draft"]
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_a_model_gets_the_instructions_and_a_same_draft_is_said_to_be_the_same(
    alice, long_conversation, fake_llm, settings
):
    settings.SUMMARY_REVISES_FACTS = False  # one request per draft
    settings.CONTEXT_BUDGET_TOKENS = 3_000  # each draft in one summary request
    long_conversation.review_compactions = True
    await long_conversation.asave()
    fake_llm.enqueue(["<summary>Topic 1 and port 8443.</summary>"])
    fake_llm.enqueue(["<summary>Topic 1 and port 8443.</summary>"])
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact", instructions=ASKED))
    await receive_until(ws, lambda f: 'name="summary"' in f)
    await settle(long_conversation.pk)
    draft = await Compaction.objects.aget(conversation=long_conversation)

    again, notice = await steer(ws, long_conversation, "focus on the API", draft)

    assert "focus on the API" in str(fake_llm.calls[-1].messages)
    assert (again.summariser, again.summary) == ("model", draft.summary)
    assert notice.startswith("The new draft is the same as the one before.")
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_compact_now_after_a_brief_gives_the_new_brief_the_room_of_the_one_it_revises(
    alice, settings
):
    # The problem as seen: "Compact now" on a small window folds a few short messages and the
    # brief before them; its brief had room for 70% of the messages only, less than the brief
    # it carries on, and said facts were "left out for length" with the window far from full.
    settings.CONTEXT_BUDGET_TOKENS = 2_000
    conversation = await Conversation.objects.acreate(
        owner=alice, model="demo", system_prompt="Be brief.", review_compactions=True
    )
    entries = walk(SAID[:-1])
    for entry in entries:
        await Message.objects.acreate(
            conversation=conversation,
            seq=entry.seq,
            role=entry.role,
            content=entry.content,
            tokens=entry.tokens,
        )
    before = rule_based_summary(entries, None, max_chars=900)
    await sync_to_async(committed_boundary)(
        conversation, len(entries) + 1, summary=before, summariser="rules"
    )
    later = ["Thanks.", "Got it.", "Sounds good.", "Next week then.", "Ok.", "Noted, bye."]
    await chat(alice, conversation, later, start=len(entries) + 1)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()

    draft, notice = await steer(ws, conversation, ASKED)

    assert draft.first_kept_seq > len(entries) + 1  # it folded some of the later messages
    # The room of the brief before (the most a 2,000-token budget gives a brief), not 70% of
    # the few short messages folded with it.
    assert "room for 900 characters" in notice
    carried = [x for x in PORTS + PATHS + NAMES if x in before]
    assert len(carried) >= 8
    assert not [x for x in carried if x not in draft.summary], draft.summary
    assert "did not fit" not in draft.summary
    if "left out for length" in draft.summary:  # only with the room full
        assert len(draft.summary) > 900 - 100, draft.summary
    await ws.disconnect()


def test_a_topic_keeps_the_messages_about_it_when_not_all_fit():
    said = [
        "The billing migration starts with the ledger tables and their triggers.",
        *(f"Unrelated note {n}: the lamp launch needs new photos and copy." for n in range(8)),
    ]
    entries = [Entry(n + 1, "user", [{"type": "text", "text": t}]) for n, t in enumerate(said)]

    plain = rule_based_summary(entries, None, max_chars=1_200)
    steered = rule_based_summary(
        entries, None, "keep everything about the billing migration", max_chars=1_200
    )

    quoted = re.compile(r'^- \(#1\) "The billing migration starts', re.M)
    assert not quoted.search(plain) and "earlier user messages omitted" in plain
    assert quoted.search(steered), steered
    assert "other user messages omitted for length" in steered


def test_a_port_is_one_a_text_calls_a_port_or_that_follows_a_host_not_a_time():
    assert "port" in kinds_in("gateway listens on port 8443")
    assert "port" in kinds_in("broker at redis://10.4.2.17:6379/3")
    assert "port" in kinds_in("metrics on staging.internal:9100 and localhost:8080")
    assert "port" not in kinds_in("moved the standup to 09:30 on Thursdays")
    assert "port" not in kinds_in("the fault is at views.py:42 and app.js:7")


def test_what_the_instructions_got_is_said_in_words_a_person_reads():
    entries = walk(SAID[:3])[:-1]
    model = "The API gateway is on 8443; Dana Whitfield and Northwind Freight."

    said = report(ASKED, entries, None, model, by_rules=False, room=900)

    assert said.startswith("It states 3 of the 4 ports, paths and names")
    assert "not stated: the admin panel on port 9090 (#5)" in said
    assert "room" not in said  # a model's summary has no room of characters
    assert report("be brief", entries, None, model, by_rules=False, room=900) == ""
    rules = report("please", entries, None, model, by_rules=True, room=900)
    assert rules.startswith("Your instructions name no kind of fact and no topic")
    same = report("", entries, None, model, by_rules=True, room=900, regenerates=model)
    assert same.startswith("The new draft is the same as the one before. Rules write the same")


def test_a_fact_is_asked_for_by_its_own_token_and_counted_once():
    entries = walk(SAID)[:-2]

    asked = steering_asked(parse(ASKED), entries, None)

    # The invoice's id is no name though a name sits beside it; the path beside Priya Raman is
    # one path; every fact is listed once.
    tokens = [fact.token for fact, _ in asked]
    assert "INV-2026-0417" not in tokens
    assert tokens.count("/etc/northwind/gateway.yaml") == 1
    assert len({fact.key for fact, _ in asked}) == len(asked)
    assert {kind for _, kind in asked} <= {"port", "path", "name"}
    assert {t for t in tokens if t in PORTS + PATHS + NAMES} >= {*PATHS, *NAMES}
