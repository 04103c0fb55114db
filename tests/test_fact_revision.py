"""Lost facts get one chance back: a model's summary that leaves out key facts of what it
replaces is sent back once, with them named, and the revision is used only if it is whole; and
every boundary records what its summary kept and lost, on the divider, in the admin, in the
database."""

from __future__ import annotations

import pytest

from compaction.entries import Entry
from compaction.models import Compaction
from compaction.summariser import SummaryAsk, summarise
from support.fake_model import FakeClient
from support.waiting import settle
from tests.conftest import frame, receive_until, socket_for
from tests.transcripts import add_turns

FIRST = "<summary>## Primary request and intent\nDeploy the heron server.</summary>"
REVISED = (
    "<summary>## Primary request and intent\nDeploy the heron server on port 41234; the "
    "import fails with E4471.</summary>"
)


def said(seq: int, role: str, value: str) -> Entry:
    return Entry(seq, role, [{"type": "text", "text": value}])


SPAN = [
    said(1, "user", "Deploy the heron server; it listens on port 41234."),
    said(2, "assistant", "Done. The import still fails with E4471 on empty rows."),
]


def client_writing(*answers: str, error: str | None = None) -> FakeClient:
    client = FakeClient()
    for answer in answers:
        client.enqueue_text(answer)
    if error is not None:
        client.enqueue_error(error, status=529)
    return client


def asked(call) -> str:
    return call.messages[-1]["content"][-1]["text"]


async def test_lost_facts_are_named_once_and_the_revision_is_used():
    client = client_writing(FIRST, REVISED)
    result = await summarise(client, SummaryAsk("claude-test", SPAN))
    first, revision = client.calls  # asked exactly once more
    assert "<missing_facts>" not in asked(first)
    request = asked(revision)
    assert "Deploy the heron server." in request.split("<missing_facts>")[0]
    missing = request.split("<missing_facts>")[1].split("</missing_facts>")[0]
    assert "port 41234" in missing and "E4471" in missing
    assert "Deploy the heron server" not in missing  # only the lost ones are named
    assert result.summary.endswith("the import fails with E4471.")
    assert result.summariser == "model" and result.raw_output == REVISED
    # The usage of both calls is the summary's cost.
    assert result.usage.output_tokens > 0 and result.usage.input_tokens > len(request) // 8


async def test_no_revision_when_nothing_is_lost_or_the_setting_is_off():
    whole = client_writing(REVISED)
    result = await summarise(whole, SummaryAsk("claude-test", SPAN))
    assert len(whole.calls) == 1 and "41234" in result.summary

    off = client_writing(FIRST, REVISED)
    result = await summarise(off, SummaryAsk("claude-test", SPAN, revise=False))
    assert len(off.calls) == 1 and result.summary.endswith("Deploy the heron server.")


@pytest.mark.parametrize(
    "answer",
    [
        "Deploy the heron server on port 41234.",  # no <summary>: not a summary
        "<summary>## Primary request and intent\nDeploy on port",  # cut short
        "<summary>## Primary request and intent\nDeploy.</summary>",  # loses as many
        f"<summary>Port 41234, E4471. {'Padding. ' * 100}</summary>",  # far longer
    ],
)
async def test_an_invalid_revision_keeps_the_first_summary(answer):
    client = client_writing(FIRST, answer)
    result = await summarise(client, SummaryAsk("claude-test", SPAN))
    assert len(client.calls) == 2
    assert result.summary.endswith("Deploy the heron server.") and result.raw_output == FIRST


async def test_a_revision_cut_off_at_max_tokens_keeps_the_first_summary():
    client = client_writing(FIRST)
    client.enqueue([REVISED], stop_reason="max_tokens")
    result = await summarise(client, SummaryAsk("claude-test", SPAN))
    assert len(client.calls) == 2 and result.summary.endswith("Deploy the heron server.")


async def test_a_failed_revision_keeps_the_first_summary():
    client = client_writing(FIRST, error="The model API is overloaded right now.")
    result = await summarise(client, SummaryAsk("claude-test", SPAN))
    assert len(client.calls) == 2
    assert result.summary.endswith("Deploy the heron server.") and not result.error


async def test_a_rule_based_summary_is_not_sent_for_revision():
    client = client_writing("no summary here")
    result = await summarise(client, SummaryAsk("claude-test", SPAN))
    assert result.summariser == "rules" and len(client.calls) == 1
    assert "41234" in result.summary and "E4471" in result.summary  # its facts section


async def compact_now(alice, conversation, fake_llm, *replies: str) -> list[str]:
    """Compact Now over a span whose first message states two key facts (a port and an error
    code), the model answering with `replies` in turn; the frames until the divider."""
    message = await conversation.messages.aget(seq=1)
    message.content = [
        {"type": "text", "text": "The heron server listens on port 41234; E4471 on import."}
    ]
    await message.asave()
    for reply in replies:
        fake_llm.enqueue([reply])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: "Compacted (manual)" in f)
    await settle(conversation.pk)
    await ws.disconnect()
    return frames


# --- the boundary --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_the_boundary_records_and_shows_what_its_summary_kept(
    alice, long_conversation, fake_llm, settings
):
    settings.SUMMARY_REVISES_FACTS = False
    settings.CONTEXT_BUDGET_TOKENS = 4_000  # the span in one summary request, not two parts
    frames = await compact_now(
        alice,
        long_conversation,
        fake_llm,
        "<summary>The heron server listens on port 41234.</summary>",
    )
    assert len(fake_llm.calls) == 1  # the setting is off: no revision
    row = await Compaction.objects.aget(conversation=long_conversation)
    assert (row.facts_total, row.facts_kept, row.facts_lost) == (2, 1, ["E4471 on import"])
    divider = next(f for f in frames if "Compacted (manual)" in f)
    assert "kept 1 of 2 key facts" in divider
    assert '<div class="facts-lost">' in divider and "<li>E4471 on import</li>" in divider


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_a_compaction_commits_the_revised_summary_with_its_count(
    alice, long_conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 4_000  # the span in one summary request, not two parts
    frames = await compact_now(
        alice,
        long_conversation,
        fake_llm,
        "<summary>The heron server listens on port 41234.</summary>",
        "<summary>Port 41234; the import fails with E4471.</summary>",
    )
    assert len(fake_llm.calls) == 2 and "E4471 on import" in asked(fake_llm.calls[1])
    row = await Compaction.objects.aget(conversation=long_conversation)
    assert row.summary == "Port 41234; the import fails with E4471."
    assert (row.facts_total, row.facts_kept, row.facts_lost) == (2, 2, [])
    divider = next(f for f in frames if "Compacted (manual)" in f)
    assert "kept 2 of 2 key facts" in divider and "facts-lost" not in divider


@pytest.mark.django_db
def test_the_admin_shows_the_key_facts_beside_the_summary(admin_client, conversation):
    row = Compaction.objects.create(
        conversation=conversation,
        trigger="auto",
        status="committed",
        first_kept_seq=1,
        summary="Port 41234.",
        facts_total=3,
        facts_kept=1,
        facts_lost=["fails with E4471", "<b>owned by Ada Lovelace</b>"],
    )
    html = admin_client.get(f"/admin/compaction/compaction/{row.pk}/change/").content.decode()
    assert "kept 1 of 3; lost:<ul><li>fails with E4471</li>" in html
    assert "&lt;b&gt;owned by Ada Lovelace&lt;/b&gt;" in html  # escaped, as all model text
    listing = admin_client.get("/admin/compaction/compaction/").content.decode()
    assert "E4471" not in listing  # in the detail, not the list


@pytest.mark.django_db
def test_an_edited_draft_is_counted_again(alice, conversation):
    from chat import compactions

    add_turns(conversation, 8)
    long_conversation = conversation
    message = long_conversation.messages.get(seq=1)
    message.content = [{"type": "text", "text": "The heron server listens on port 41234 now."}]
    message.save()
    draft = Compaction.objects.create(
        conversation=long_conversation,
        trigger="manual",
        status="draft",
        first_kept_seq=5,
        pre_tokens=10_000,
        summary="The heron server.",
        facts_total=1,
        facts_kept=0,
        facts_lost=["server listens on port 41234"],
    )
    approved = compactions.approve(
        alice, long_conversation.pk, draft.pk, "The heron server listens on port 41234."
    )
    assert (approved.facts_total, approved.facts_kept, approved.facts_lost) == (1, 1, [])
    assert approved.edited
