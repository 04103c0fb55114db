"""Models: the operator lists them with their budgets (CHAT_MODELS), a new conversation picks
one, its header shows it, and its budget, meter and compaction follow it."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import sync_to_async

from chat.models import Conversation
from compaction.models import Compaction
from compaction.window_state import budget_for
from providers import registry
from support.waiting import settle
from tests.conftest import receive_until, socket_for
from tests.test_settings import load_settings
from tests.transcripts import add_turns

SMALL = {"id": "small-model", "label": "Small model", "context": 2_000}
BIG = {"id": "big-model", "label": "Big model", "context": 8_000}


@pytest.fixture
def two_models(settings):
    """A deployment with a key (so not the offline demo) offering a small and a big model."""
    settings.LLM_PROVIDER = ""
    settings.ANTHROPIC_API_KEY = "sk-test-not-used"
    settings.ANTHROPIC_BASE_URL = ""
    settings.CHAT_MODELS = [SMALL, BIG]
    settings.CHAT_MODEL = BIG["id"]
    settings.CONTEXT_BUDGET_TOKENS = 0
    return settings


def options(html: str) -> list[tuple[str, str, bool]]:
    select = re.search(r'<select name="model".*?</select>', html, re.S)
    assert select, "no model picker on the page"
    return [
        (value, label, bool(selected))
        for value, selected, label in re.findall(
            r'<option value="([^"]*)"( selected)?>([^<]*)</option>', select.group(0)
        )
    ]


# --- the picker and creating ---------------------------------------------------------------------


@pytest.mark.django_db
def test_the_picker_lists_the_configured_models_with_their_budgets(client, alice, two_models):
    client.force_login(alice)
    page = client.get("/").content.decode()
    assert options(page) == [
        ("small-model", "Small model · 2k tokens", False),
        ("big-model", "Big model · 8k tokens", True),  # CHAT_MODEL is the default
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("model", ["small-model", "big-model"])
def test_creating_with_each_model_stores_it_and_the_header_shows_it(
    client, alice, two_models, model
):
    client.force_login(alice)
    response = client.post("/conversations/", {"model": model})
    conversation = Conversation.objects.get(owner=alice)
    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{conversation.pk}/"
    assert conversation.model == model
    page = client.get(response["Location"]).content.decode()
    label, budget = {"small-model": ("Small model", "2,000"), "big-model": ("Big model", "8,000")}[
        model
    ]
    header = re.search(r'<span class="model-name" title="([^"]*)">([^<]*)</span>', page)
    assert header.group(2) == f"{label} · {budget[0]}k tokens"
    assert model in header.group(1) and f"{budget} tokens" in header.group(1)
    # The meter's budget follows the conversation's model.
    assert f"/ {budget} tokens" in page


@pytest.mark.django_db
def test_no_choice_creates_on_the_default(client, alice, two_models):
    client.force_login(alice)
    client.post("/conversations/")
    assert Conversation.objects.get(owner=alice).model == "big-model"


@pytest.mark.django_db
def test_an_unknown_model_is_refused_with_the_choices_and_nothing_is_created(
    client, alice, two_models
):
    client.force_login(alice)
    response = client.post("/conversations/", {"model": "gpt-9<script>"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "There is no model" in page and "Small model, Big model" in page
    assert "<script>" not in page  # escaped like any other text
    assert not Conversation.objects.filter(owner=alice).exists()


@pytest.mark.django_db
def test_offline_only_the_demo_is_offered(client, alice, settings):
    settings.LLM_PROVIDER = "demo"
    settings.CHAT_MODELS = [SMALL, BIG]
    assert [m.id for m in registry.available_models()] == ["demo"]
    client.force_login(alice)
    assert '<select name="model"' not in client.get("/").content.decode()  # nothing to pick
    assert client.post("/conversations/", {"model": "small-model"}).status_code == 400
    client.post("/conversations/")
    conversation = Conversation.objects.get(owner=alice)
    assert conversation.model == "demo"
    assert registry.client_for(conversation.model).name == "demo"  # the stored model answers


def test_a_models_own_budget_wins_then_the_override_then_the_providers_window(settings):
    settings.LLM_PROVIDER = ""
    settings.ANTHROPIC_API_KEY = "sk-test-not-used"
    settings.CHAT_MODELS = [SMALL, {"id": "claude-sonnet-5", "label": "Sonnet", "context": None}]
    settings.CONTEXT_BUDGET_TOKENS = 0
    assert registry.context_budget("small-model") == 2_000
    assert registry.context_budget("claude-sonnet-5") == 200_000  # the provider's own window
    assert registry.context_budget("demo") == 2_000
    settings.CONTEXT_BUDGET_TOKENS = 5_000
    assert registry.context_budget("small-model") == 2_000  # its own "context" is specific
    assert registry.context_budget("claude-sonnet-5") == 5_000
    assert registry.context_budget("an-old-model") == 5_000  # no longer listed: still served
    assert registry.model_info("an-old-model").label == "an-old-model"


# --- the budget and compaction follow the model --------------------------------------------------


@pytest.mark.django_db
def test_the_budget_and_threshold_follow_the_conversations_model(alice, two_models):
    small = budget_for("small-model")
    big = budget_for("big-model")
    assert (small.total, big.total) == (2_000, 8_000)
    assert small.threshold < big.threshold


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_the_same_long_conversation_auto_compacts_under_the_small_model_only(
    alice, two_models, fake_llm
):
    # Both are answered by the fake model; only their budgets differ.
    compacted = {}
    for model in ("small-model", "big-model"):
        conversation = await Conversation.objects.acreate(owner=alice, model=model)
        await sync_to_async(add_turns)(conversation, 6)  # about 1,400 tokens
        fake_llm.enqueue([f"Reply on {model}: " + "noted " * 20])
        fake_llm.enqueue(["<summary>Earlier turns about topics.</summary>"])  # if it compacts
        ws = socket_for(alice, conversation.pk)
        await ws.connect()
        await ws.send_to(text_data=json.dumps({"action": "send", "message": "One more " * 20}))
        await receive_until(ws, lambda f: 'hx-swap-oob="outerHTML"' in f and "Reply on" in f)
        await settle(conversation.pk)
        await ws.disconnect()
        compacted[model] = [
            (c.trigger, c.status)
            async for c in Compaction.objects.filter(conversation=conversation)
        ]
    # Past 60% of 2,000 but well under 60% of 8,000.
    assert compacted["small-model"] == [("auto", "committed")]
    assert compacted["big-model"] == []
    # Each conversation's stored model is the one asked (reply, the summary's requests, reply).
    asked = [call.model for call in fake_llm.calls]
    assert asked == ["small-model"] * (len(asked) - 1) + ["big-model"] and len(asked) >= 3


# --- the setting ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[{", "CHAT_MODELS must be a JSON list like"),
        ("{}", "CHAT_MODELS must be a non-empty JSON list"),
        ("[]", "CHAT_MODELS must be a non-empty JSON list"),
        ('["claude"]', 'CHAT_MODELS: model 1 must be an object with at least an "id"'),
        ('[{"label": "x"}]', 'CHAT_MODELS: model 1 needs an "id"'),
        ('[{"id": "a b"}]', 'CHAT_MODELS: model 1 needs an "id"'),
        ('[{"id": "a"}, {"id": "a"}]', "CHAT_MODELS: model 'a' is listed twice"),
        (
            '[{"id": "a", "context": "big"}]',
            "\"context\" must be a whole number of tokens, got 'big'",
        ),
        ('[{"id": "a", "context": 0}]', '"context" must be a whole number of tokens, got 0'),
        ('[{"id": "a", "context": true}]', '"context" must be a whole number of tokens'),
        ('[{"id": "a", "label": ""}]', '"label" must be text of 1-100 characters'),
        (
            '[{"id": "a", "contxt": 5}]',
            "model 1 has unknown keys contxt (known: id, label, context, thinking, output)",
        ),
    ],
)
def test_a_malformed_models_list_stops_start_up_with_a_clear_message(value, message):
    result = load_settings(CHAT_MODELS=value)
    assert result.returncode != 0
    assert message in result.stderr


def test_chat_model_must_be_one_of_the_listed_models():
    result = load_settings(CHAT_MODELS='[{"id": "a"}, {"id": "b"}]', CHAT_MODEL="c")
    assert result.returncode != 0
    assert "CHAT_MODEL ('c') must be one of the ids in CHAT_MODELS (a, b)" in result.stderr


def test_a_models_list_parses_and_defaults_to_its_first_model():
    import os
    import subprocess
    import sys

    from tests.test_settings import ROOT

    env = {k: v for k, v in os.environ.items() if k != "CHAT_MODEL"}
    env |= {
        "DJANGO_SECRET_KEY": "k",
        "CHAT_MODELS": '[{"id": "a", "label": " Model A ", "context": 1000}, {"id": "b"}]',
    }
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, config.settings as s; print(json.dumps([s.CHAT_MODEL, s.CHAT_MODELS]))",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout) == [
        "a",
        [
            {"id": "a", "label": "Model A", "context": 1000, "thinking": False, "output": None},
            {"id": "b", "label": "b", "context": None, "thinking": False, "output": None},
        ],
    ]
