"""The thinking switch: offered in a conversation's settings only for a model CHAT_MODELS
declares thinking, with a budget checked (refused with a sentence, never a 500); and the
declaration itself checked at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chat.models import Conversation

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def models(settings):
    settings.LLM_PROVIDER = "anthropic"
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.CHAT_MODELS = [
        {"id": "thinker", "label": "Thinker", "context": None, "thinking": True},
        {"id": "plain", "label": "Plain", "context": None, "thinking": False},
    ]
    settings.CHAT_MODEL = "thinker"


def save(client, conversation, **fields):
    form = {"system_prompt": "", "auto_compact_at": "", "keep_tail_share": "", "summary_model": ""}
    response = client.post(
        f"/conversations/{conversation.pk}/settings/", form | fields, follow=True
    )
    assert response.status_code == 200
    return response.content.decode()


def test_a_thinking_model_offers_the_switch_and_saves_its_budget(client, alice, models):
    client.force_login(alice)
    conversation = Conversation.objects.create(owner=alice, model="thinker")
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'name="thinking"' in page and 'name="thinking_budget"' in page
    assert "Settings saved." in save(client, conversation, thinking="on", thinking_budget="8,000")
    conversation.refresh_from_db()
    assert conversation.thinking_budget == 8000
    page = save(client, conversation, thinking_budget="8000")  # switched off
    conversation.refresh_from_db()
    assert conversation.thinking_budget is None
    assert 'id="thinking-on">' in page  # shown unchecked


@pytest.mark.parametrize("budget", ["100", "10000000", "lots", "-5", "2048.5"])
def test_a_budget_out_of_bounds_is_refused_with_a_sentence(client, alice, models, budget):
    client.force_login(alice)
    conversation = Conversation.objects.create(owner=alice, model="thinker")
    page = save(client, conversation, thinking="on", thinking_budget=budget)
    assert "The thinking budget must be a whole number of tokens from 1,024 to 64,000." in page
    conversation.refresh_from_db()
    assert conversation.thinking_budget is None


def test_a_model_not_declared_thinking_has_no_switch_and_never_thinks(client, alice, models):
    client.force_login(alice)
    conversation = Conversation.objects.create(owner=alice, model="plain")
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'name="thinking"' not in page
    save(client, conversation, thinking="on", thinking_budget="4096")
    conversation.refresh_from_db()
    assert conversation.thinking_budget is None


def test_bob_cannot_switch_alices_thinking(client, alice, bob, models):
    conversation = Conversation.objects.create(owner=alice, model="thinker")
    client.force_login(bob)
    response = client.post(
        f"/conversations/{conversation.pk}/settings/", {"thinking": "on", "thinking_budget": "4096"}
    )
    assert response.status_code == 404
    conversation.refresh_from_db()
    assert conversation.thinking_budget is None


def test_a_thinking_declaration_that_is_not_true_or_false_stops_start_up():
    env = {**os.environ, "DJANGO_DEBUG": "true"}
    env["CHAT_MODELS"] = json.dumps([{"id": "a", "thinking": "yes"}])
    result = subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert (
        """CHAT_MODELS: model 'a': "thinking" must be true or false, got 'yes'""" in result.stderr
    )


@pytest.mark.parametrize(
    ("chosen", "room", "expected"),
    [
        (2048, 100_000, (2048, 2048 + 4096)),  # the budget, and the answer's room beside it
        (8000, 5000, (4999, 5000)),  # the window's room caps both, the budget under max_tokens
        (2048, 1024, (None, 1024)),  # no room for the API's least: no thinking this request
        (None, 100_000, (None, 4096)),  # switched off
    ],
)
def test_each_request_thinks_within_its_windows_room(models, settings, chosen, room, expected):
    from turns.thinking import limits

    settings.CHAT_MAX_TOKENS = 4096
    assert limits("thinker", chosen, room) == expected
    assert limits("plain", chosen, room) == (None, min(4096, room))  # a model that never thinks
