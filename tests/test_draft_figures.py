"""A draft waiting for review shows what it would do (the window before → after, kept N of M key
facts, the lost ones), counted again for the text as the person edits it; and what an approved
edit records is that same count. The walk of issue 37: a draft that leaves out the Redis URL,
edited by hand to state it, counts it kept, on the draft and on the divider."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from chat.models import Message
from compaction.models import Compaction
from providers.demo import compose
from providers.tokens import estimate_content
from support.waiting import settle
from tests.conftest import frame, receive_until, socket_for
from tests.transcripts import add_turns, text_block

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

SAID = [
    "Hi! I'm Dana Whitfield and I run the platform team.",
    "Our broker is Redis 7.2 at redis://10.4.2.17:6379/3 for the job queue.",
    "The health check calls socket.create_connection(('staging.internal', 8443)) every 30 s.",
    "The runbook lives at /srv/runbooks/queue-recovery.md and the invoice id is INV-20931.",
    "Does this look right?",
]
URL = "redis://10.4.2.17:6379/3"
# The model's draft: every fact of the walk but the broker's address.
DRAFT = (
    "Dana Whitfield runs the platform team; the broker is Redis 7.2. The health check calls "
    "socket.create_connection(('staging.internal', 8443)) every 30 s. Runbook: "
    "/srv/runbooks/queue-recovery.md; invoice INV-20931."
)
# The person's edit: the address added, as Markdown would have it escaped and broken.
EDITED = DRAFT + "\n\nBroker at `redis://10.4.2.17:\n6379/3`"


def build(conversation) -> None:
    """The walk's turns, answered by the demo model as it answers them, then filler turns."""
    rows, sent = [], []
    for i, text in enumerate(SAID):
        sent.append({"role": "user", "content": text})
        reply, _ = compose("Be brief.", sent)
        sent.append({"role": "assistant", "content": reply})
        for seq, role, value in ((2 * i + 1, "user", text), (2 * i + 2, "assistant", reply)):
            content = text_block(value)
            rows.append(
                Message(
                    conversation=conversation,
                    seq=seq,
                    role=role,
                    content=content,
                    tokens=estimate_content(content),
                )
            )
    Message.objects.bulk_create(rows)
    add_turns(conversation, 6)


@pytest.fixture
async def reviewed(conversation, settings, fake_llm):
    settings.CONTEXT_BUDGET_TOKENS = 3_000  # the draft in one summary request
    settings.SUMMARY_REVISES_FACTS = False  # the draft as the model wrote it
    conversation.review_compactions = True
    await conversation.asave()
    await sync_to_async(build)(conversation)
    fake_llm.enqueue([f"<summary>{DRAFT}</summary>"])
    return conversation


async def client_for(user) -> AsyncClient:
    client = AsyncClient(enforce_csrf_checks=False)
    await client.aforce_login(user)
    return client


def figures_url(conversation_id, compaction_id) -> str:
    return f"/conversations/{conversation_id}/compactions/{compaction_id}/figures/"


async def test_an_edit_that_states_a_lost_fact_counts_it_kept_on_the_draft_and_the_divider(
    alice, reviewed
):
    ws = socket_for(alice, reviewed.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: 'name="summary"' in f)
    await settle(reviewed.pk)
    draft = await Compaction.objects.aget(conversation=reviewed)
    assert (draft.status, draft.summary) == ("draft", DRAFT)
    # The draft's figures, shown as it arrives: the window before → after, kept N of M, lost.
    shown = frames[-1]
    assert 'id="draft-figures"' in shown
    assert f'<span class="pre">{draft.pre_tokens:,}</span>' in shown
    assert f'<span class="post">{draft.post_tokens:,}</span>' in shown
    assert f"kept {draft.facts_kept} of {draft.facts_total} key facts" in shown
    assert [URL in lost for lost in draft.facts_lost] == [True]  # the address, and only it
    # Nothing the demo said about its window, no question, no greeting is counted.
    assert draft.facts_total == 9, draft.facts_lost

    client = await client_for(alice)
    response = await client.post(figures_url(reviewed.pk, draft.pk), {"summary": EDITED})
    assert response.status_code == 200
    page = response.content.decode()
    assert f"kept {draft.facts_total} of {draft.facts_total} key facts" in page
    assert URL not in page and "facts-lost" not in page
    # Figures only: the draft is not touched by counting.
    await draft.arefresh_from_db()
    assert (draft.status, draft.summary) == ("draft", DRAFT)

    await ws.send_to(text_data=frame(action="approve", compaction=str(draft.pk), summary=EDITED))
    await receive_until(ws, lambda f: "Compacted (manual)" in f)
    await draft.arefresh_from_db()
    assert (draft.status, draft.edited) == ("committed", True)
    assert (draft.facts_kept, draft.facts_total, draft.facts_lost) == (9, 9, [])
    await ws.disconnect()


async def drafted(user, conversation) -> Compaction:
    """Compact now over the socket, in review mode: the draft it leaves waiting."""
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    await receive_until(ws, lambda f: 'name="summary"' in f)
    await settle(conversation.pk)
    await ws.disconnect()
    return await Compaction.objects.aget(conversation=conversation)


async def test_the_figures_follow_the_text_both_ways(alice, reviewed):
    draft = await drafted(alice, reviewed)
    client = await client_for(alice)
    # Fewer facts stated: more lost, and the window after is the shorter summary's.
    page = (
        await client.post(figures_url(reviewed.pk, draft.pk), {"summary": "Dana Whitfield."})
    ).content.decode()
    assert "kept 1 of 9 key facts" in page
    assert "INV-20931" in page and "/srv/runbooks/queue-recovery.md" in page
    # A summary longer than what it replaces would not make the window smaller: said so.
    page = (
        await client.post(figures_url(reviewed.pk, draft.pk), {"summary": DRAFT * 40})
    ).content.decode()
    assert "would not be smaller" in page


async def test_the_figures_are_the_owners_and_refuse_bad_input(alice, bob, reviewed):
    draft = await drafted(alice, reviewed)
    url = figures_url(reviewed.pk, draft.pk)
    # Another user's draft reads as none.
    assert (await (await client_for(bob)).post(url, {"summary": EDITED})).status_code == 404
    client = await client_for(alice)
    assert (await client.post(url, {"summary": ""})).status_code == 400
    assert (await client.post(url, {"summary": "a\x00b"})).status_code == 400
    assert (await client.post(url, {"summary": "x" * 10**6})).status_code == 400
    assert (await client.get(url)).status_code == 405
    wrong = figures_url(reviewed.pk, draft.pk + 1)
    assert (await client.post(wrong, {"summary": EDITED})).status_code == 404
    # Without the CSRF token the request is refused.
    strict = AsyncClient(enforce_csrf_checks=True)
    await strict.aforce_login(alice)
    assert (await strict.post(url, {"summary": EDITED})).status_code == 403
    # Anonymous: to the login page.
    assert (await AsyncClient().post(url, {"summary": EDITED})).status_code == 302
