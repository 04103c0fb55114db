"""The offline demo's recall is honest, through the real turn path (the consumer, the engine,
`search_history` over the database): it answers from a hit only when the hit holds what the
question asks about, else it searches the user's other conversations and links to the message
it found there, else it says it found nothing."""

from __future__ import annotations

import re

import pytest

from chat.models import Conversation, Message
from compaction.models import Compaction
from providers import registry
from providers.demo import DemoClient
from render.markdown import render_markdown
from tests.test_tools import plant, reply, turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

BUCKET_ASKED = "What S3 bucket name did I suggest?"
BUCKET = "acme-invoices-eu-west-1"
STORAGE = (
    "I want the invoice archive in S3, not on the old file server.",
    "Noted.",
    "Before we settle on an S3 bucket name, legal has to approve the region; I will suggest "
    "one after.",
    "Ok.",
    "I suggest the S3 bucket stays private, and its name must not mention customers.",
    "Ok.",
    f"For the S3 bucket I suggest {BUCKET}, with versioning on.",
    "Ok.",
    "Let us talk about lunch.",
    "Sure.",
)
RUNBOOK = (
    "The restart script is called restart.sh and lives in /opt/runbook.",
    "Noted.",
    "If the queue stalls, page the on-call engineer before restarting the workers.",
    "Ok.",
)


@pytest.fixture
def demo():
    registry.register(DemoClient())


def steps(saved: Message) -> tuple[list[dict], str]:
    """The searches a reply made (their arguments) and its last words."""
    calls = [b["input"] for b in saved.content if b["type"] == "tool_use"]
    return calls, saved.content[-1]["text"]


async def test_it_answers_from_the_hit_that_names_the_bucket_not_the_first_hit(
    alice, conversation, demo
):
    await plant(conversation, *STORAGE)
    # All but lunch folded into a summary that lost the name: only a search can find it.
    await Compaction.objects.acreate(
        conversation=conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=9,
        summary="The user talked about storing invoices.",
        pre_tokens=100,
        post_tokens=50,
        summariser="rules",
    )

    await turn(alice, conversation, BUCKET_ASKED, 12)

    saved = await reply(conversation, 12)
    calls, answer = steps(saved)
    assert [c.get("scope", "conversation") for c in calls] == ["conversation"]
    # Messages that name no bucket rank above the one that does: the case to get right.
    hits = re.findall(r"^#(\d+) · ", saved.content[2]["content"], re.MULTILINE)
    assert hits[0] in {"3", "5"} and "7" in hits[2:], hits
    assert answer == (
        f"I searched our earlier messages. In message #7 you said: “For the S3 bucket I suggest "
        f"{BUCKET}, with versioning on.”"
    )


async def test_the_cat_is_found_in_the_other_conversation_with_a_link_to_its_message(
    alice, bob, conversation, demo
):
    await plant(conversation, *RUNBOOK)
    home = await Conversation.objects.acreate(owner=alice, model="demo", title="Home [flat 2]")
    await plant(home, "Groceries: oat milk, rice, lemons.", "Noted.")
    await Message.objects.acreate(
        conversation=home,
        seq=3,
        role="user",
        content=[{"type": "text", "text": "My cat is called Miso and she sleeps on the router."}],
    )
    theirs = await Conversation.objects.acreate(owner=bob, model="demo", title="Bob's pets")
    await plant(theirs, "My cat is called Bartholomew.", "Noted.")

    await turn(alice, conversation, "What is my cat called?", 6)

    calls, answer = steps(await reply(conversation, 6))
    assert [c.get("scope", "conversation") for c in calls] == ["conversation", "all"]
    assert "restart.sh" not in answer and "Bartholomew" not in answer
    link = f"/conversations/{home.pk}/?at=3#msg-3"
    assert answer == (
        f"I searched your other conversations. In [conversation {home.pk} “Home \\[flat 2\\]”, "
        f"message #3]({link}) you said: “My cat is called Miso and she sleeps on the router.”"
    )
    # The link survives sanitising as it is, and leads to the message on the page.
    html = render_markdown(answer)
    assert re.search(rf'<a href="{re.escape(link)}"[^>]*>conversation {home.pk} ', html)


async def test_when_nothing_holds_the_answer_it_says_it_found_nothing(
    alice, bob, conversation, demo
):
    await plant(conversation, *RUNBOOK)
    home = await Conversation.objects.acreate(owner=alice, model="demo", title="Home")
    await plant(home, "My cat is called Miso and she sleeps on the router.", "Noted.")
    theirs = await Conversation.objects.acreate(owner=bob, model="demo", title="Bob's pets")
    await plant(theirs, "My dog is called Rex.", "Noted.")

    await turn(alice, conversation, "What is my dog called?", 6)

    calls, answer = steps(await reply(conversation, 6))
    assert [c.get("scope", "conversation") for c in calls] == ["conversation", "all"]
    assert answer == (
        "I searched our earlier messages and your other conversations, and found nothing that "
        "answers it."
    )
