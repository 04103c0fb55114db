"""A cheaper model may write a conversation's summaries: SUMMARY_MODEL, or the conversation's
own choice among the configured models (else its own model). The model asked is the one chosen,
its cost counts on the conversation, and the boundary records who wrote it: the divider and the
admin say "summary by <model>", or "by rules"."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction

from chat import compactions
from chat.figures import dollars_spent, load_spent
from chat.models import Conversation
from chat.snapshot import read_snapshot
from chat.window_loading import state_of
from compaction.models import Compaction
from core import db
from providers import registry
from providers.tokens import estimate_request
from providers.values import Capabilities
from support.fake_model import FakeClient
from tests.test_settings import load_settings
from tests.transcripts import add_turns
from turns import compacting

SMALL = {"id": "small-model", "label": "Small model", "context": 8_000}
BIG = {"id": "big-model", "label": "Big model", "context": 8_000}
SUMMARY = "<summary>\n## Primary request and intent\nBuild a TOML parser.\n</summary>"


@pytest.fixture
def two_models(settings):
    """A deployment with a key (not the offline demo) offering a big model and a cheaper one."""
    settings.LLM_PROVIDER = ""
    settings.ANTHROPIC_API_KEY = "sk-test-not-used"
    settings.ANTHROPIC_BASE_URL = ""
    settings.CHAT_MODELS = [BIG, SMALL]
    settings.CHAT_MODEL = BIG["id"]
    settings.CONTEXT_BUDGET_TOKENS = 0
    settings.SUMMARY_MODEL = ""
    settings.MODEL_PRICES = {"big-model": (10.0, 50.0), "small-model": (1.0, 5.0)}
    return settings


class CachingFake(FakeClient):
    """The fake model, as a provider with a prompt cache: a summary may read the prefix."""

    def capabilities(self, model):
        return Capabilities(context_window=self.context_window, supports_caching=True)


@pytest.fixture
def models(two_models):
    """A fake registered for each model, as providers are: each records what it was asked."""
    fakes = {"big-model": CachingFake(name="big"), "small-model": CachingFake(name="small")}
    for model, fake in fakes.items():
        fake.enqueue([SUMMARY], usage={"input_tokens": 900, "output_tokens": 60})
        registry.register(fake, model)
    return fakes


def _opened(conversation_id: int, warm: bool):
    with transaction.atomic():
        conversation = Conversation.objects.locked(conversation_id)
        snapshot = read_snapshot(conversation_id)
        return compactions.open_locked(
            conversation,
            state_of(conversation, snapshot),
            snapshot.later_versions(),
            trigger="manual",
            warm=warm,
        )


async def compact(conversation, *, warm: bool = False) -> Compaction:
    """Open and run one compaction, as the engine does."""
    return await compacting.run(await db.run(_opened, conversation.pk, warm))


async def big_conversation(alice, summary_model: str = "") -> Conversation:
    conversation = await Conversation.objects.acreate(
        owner=alice, model="big-model", system_prompt="Be brief.", summary_model=summary_model
    )
    await sync_to_async(add_turns)(conversation, 8)
    return conversation


# --- which model writes it -----------------------------------------------------------------------

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_conversations_choice_writes_the_summary_and_its_cost_counts(alice, models):
    conversation = await big_conversation(alice, summary_model="small-model")
    row = await compact(conversation)
    assert row.status == "committed" and row.summariser == "model"
    assert row.summary_model == "small-model"
    assert [call.model for call in models["small-model"].calls] == ["small-model"]
    assert models["big-model"].calls == []
    # Counted on the conversation at the summary model's price: its own running totals are
    # priced at its own model's, so the cheaper model's tokens are not added to them.
    conversation = await Conversation.objects.aget(pk=conversation.pk)
    assert conversation.input_tokens is None
    assert conversation.other_models_cost == pytest.approx(900 * 1e-6 + 60 * 5e-6)
    spent = await db.run(load_spent, conversation)
    assert spent.total.dollars == pytest.approx(0.0012)
    assert dollars_spent(conversation) == pytest.approx(0.0012)  # the admin's figure
    assert (await Compaction.objects.aget(pk=row.pk)).summary_model == "small-model"


async def test_summary_model_is_the_default_and_a_choice_wins_over_it(alice, models, settings):
    settings.SUMMARY_MODEL = "small-model"
    row = await compact(await big_conversation(alice))
    assert row.summary_model == "small-model" and len(models["small-model"].calls) == 1
    # A conversation that chose its own model for its summaries keeps it.
    row = await compact(await big_conversation(alice, summary_model="big-model"))
    assert row.summary_model == "big-model" and len(models["big-model"].calls) == 1


async def test_without_a_choice_the_conversations_model_writes_it(alice, models):
    conversation = await big_conversation(alice)
    row = await compact(conversation)
    assert row.summary_model == "big-model"
    assert [call.model for call in models["big-model"].calls] == ["big-model"]
    assert models["small-model"].calls == []
    # Its own model's call is added to its running totals, priced at its price.
    conversation = await Conversation.objects.aget(pk=conversation.pk)
    assert (conversation.input_tokens, conversation.output_tokens) == (900, 60)
    assert conversation.other_models_cost == 0
    spent = await db.run(load_spent, conversation)
    assert spent.total.dollars == pytest.approx(900 * 10e-6 + 60 * 50e-6)


async def test_a_choice_no_longer_offered_gives_way_to_the_default(alice, models, settings):
    settings.CHAT_MODELS = [BIG]  # the cheaper model was taken off the list
    row = await compact(await big_conversation(alice, summary_model="small-model"))
    assert row.summary_model == "big-model" and models["small-model"].calls == []


async def test_the_cached_prefix_is_read_only_by_the_conversations_own_model(alice, models):
    # The prefix is warm: the conversation's own model reads it (its system prompt first)...
    own = await compact(await big_conversation(alice), warm=True)
    assert own.summary_model == "big-model"
    assert models["big-model"].calls[0].system == "Be brief."
    # ...another model has no cache of it: asked over a transcript, with the summariser's own.
    other = await compact(await big_conversation(alice, summary_model="small-model"), warm=True)
    assert other.summary_model == "small-model"
    assert models["small-model"].calls[0].system != "Be brief."


async def test_a_summary_model_with_a_smaller_budget_is_sent_no_more_than_it(
    alice, models, settings
):
    settings.CHAT_MODELS = [BIG, SMALL | {"context": 2_000}]
    settings.SUMMARY_MAX_TOKENS = 400
    small = models["small-model"]
    for _ in range(20):
        small.enqueue([SUMMARY])
    conversation = await big_conversation(alice, summary_model="small-model")
    await sync_to_async(add_turns)(conversation, 12, words=60)  # about 4,000 tokens more
    row = await compact(conversation)
    assert row.summary_model == "small-model" and row.summariser == "model"
    assert len(small.calls) > 1  # folded in parts that fit the small model's budget
    for call in small.calls:
        assert estimate_request(call.system, call.messages) + call.max_tokens <= 2_000


async def test_a_rule_based_summary_names_no_model(alice, two_models):
    registry.register(FakeClient(can_summarise=False))
    row = await compact(await big_conversation(alice, summary_model="small-model"))
    assert row.summariser == "rules" and row.summary_model == ""


# --- the settings form ---------------------------------------------------------------------------


def save(client, conversation, summary_model: str) -> str:
    form = {"system_prompt": "", "summary_model": summary_model}
    response = client.post(f"/conversations/{conversation.pk}/settings/", form, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def offered(page: str) -> list[tuple[str, str, bool]]:
    select = re.search(r'<select name="summary_model".*?</select>', page, re.S)
    assert select, "no summary model in the settings"
    return [
        (value, label, bool(selected))
        for value, selected, label in re.findall(
            r'<option value="([^"]*)"( selected)?>([^<]*)</option>', select.group(0)
        )
    ]


def test_the_settings_offer_the_configured_models_and_save_the_choice(client, alice, two_models):
    conversation = Conversation.objects.create(owner=alice, model="big-model")
    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert offered(page) == [
        ("", "Default (Big model)", False),
        ("big-model", "Big model", False),
        ("small-model", "Small model", False),
    ]
    page = save(client, conversation, "small-model")
    assert "Settings saved." in page
    assert ("small-model", "Small model", True) in offered(page)
    conversation.refresh_from_db()
    assert conversation.summary_model == "small-model"
    two_models.SUMMARY_MODEL = "small-model"  # the default's label follows the setting
    page = save(client, conversation, "")
    assert offered(page)[0] == ("", "Default (Small model)", False)
    conversation.refresh_from_db()
    assert conversation.summary_model == ""


def test_an_unknown_model_is_refused_with_the_choices(client, alice, two_models):
    conversation = Conversation.objects.create(
        owner=alice, model="big-model", summary_model="small-model"
    )
    client.force_login(alice)
    page = save(client, conversation, "gpt-9<script>")
    assert "Settings not saved." in page and "There is no model" in page
    assert "Big model, Small model" in page
    assert "<script>" not in page  # escaped like any other text
    conversation.refresh_from_db()
    assert conversation.summary_model == "small-model"


def test_offline_only_the_demo_may_write_summaries(client, alice, settings):
    settings.LLM_PROVIDER = "demo"
    settings.CHAT_MODELS = [BIG, SMALL]
    conversation = Conversation.objects.create(owner=alice, model="demo")
    client.force_login(alice)
    assert "Settings not saved." in save(client, conversation, "small-model")
    assert registry.summary_model("demo", "small-model") == "demo"


def test_a_summary_model_not_configured_stops_start_up():
    result = load_settings(CHAT_MODELS="", CHAT_MODEL="claude-sonnet-5", SUMMARY_MODEL="gpt-9")
    assert result.returncode != 0
    assert "SUMMARY_MODEL ('gpt-9') must be one of the ids in CHAT_MODELS" in result.stderr
    listed = '[{"id": "claude-sonnet-5"}, {"id": "claude-haiku-4"}]'
    assert load_settings(CHAT_MODELS=listed, SUMMARY_MODEL="claude-haiku-4").returncode == 0


# --- the divider and the admin say who wrote it ---------------------------------------------------


@pytest.fixture
def written(alice):
    """A conversation on Sonnet with two boundaries: Haiku wrote one summary, the rules the
    other (each folding its own span)."""
    conversation = Conversation.objects.create(owner=alice, model="claude-sonnet-5")
    add_turns(conversation, 6)
    rows = [
        Compaction.objects.create(
            conversation=conversation,
            trigger="auto",
            status="undone",
            first_kept_seq=5,
            summary="By rules.",
            summariser="rules",
            pre_tokens=900,
            post_tokens=300,
        ),
        Compaction.objects.create(
            conversation=conversation,
            trigger="manual",
            status="committed",
            first_kept_seq=9,
            summary="By Haiku.",
            summariser="model",
            summary_model="claude-haiku-4",
            pre_tokens=1_000,
            post_tokens=400,
            input_tokens=1_000_000,
            output_tokens=0,
        ),
    ]
    return conversation, rows


def divider(page: str, row: Compaction) -> str:
    found = re.search(
        rf'<details class="divider[^"]*" id="compaction-{row.pk}".*?</summary>', page, re.S
    )
    assert found, f"no divider for compaction {row.pk}"
    return found.group(0)


def test_the_divider_says_which_model_wrote_the_summary_and_prices_it_so(client, alice, written):
    conversation, (by_rules, by_haiku) = written
    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "summary by claude-haiku-4" in divider(page, by_haiku)
    assert "summary by rules" in divider(page, by_rules)
    assert "claude-haiku-4" not in divider(page, by_rules)
    # Priced as Haiku ($1 per million input tokens), not as the conversation's Sonnet ($3).
    assert "summary cost $1.0000" in divider(page, by_haiku)


def test_the_admin_says_which_model_wrote_each_summary(admin_client, written):
    _, (by_rules, by_haiku) = written
    listing = admin_client.get("/admin/compaction/compaction/").content.decode()
    cells = re.findall(r'<td class="field-written_by">([^<]*)</td>', listing)
    assert sorted(cells) == ["claude-haiku-4", "rules"]
    detail = admin_client.get(f"/admin/compaction/compaction/{by_haiku.pk}/change/").content
    assert "claude-haiku-4" in detail.decode()
    for value, shown in (("claude-haiku-4", "claude-haiku-4"), ("rules", "rules")):
        filtered = admin_client.get(f"/admin/compaction/compaction/?written_by={value}")
        cells = re.findall(r'<td class="field-written_by">([^<]*)</td>', filtered.content.decode())
        assert cells == [shown]
