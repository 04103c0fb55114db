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
        (8000, 7000, (2904, 7000)),  # the window's room: the budget shrinks, the answer keeps 4096
        (2048, 5000, (None, 4096)),  # no room for the API's least beside the answer: no thinking
        (None, 100_000, (None, 4096)),  # switched off
    ],
)
def test_each_request_thinks_within_its_windows_room(models, settings, chosen, room, expected):
    from turns.thinking import limits

    settings.CHAT_MAX_TOKENS = 4096
    asked = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert limits("thinker", chosen, room, asked) == expected
    assert limits("plain", chosen, room, asked) == (None, min(4096, room))  # never thinks


def test_a_request_going_on_with_a_turn_that_did_not_think_does_not_think(models, settings):
    """A turn stopped at TOOL_STEP_LIMIT, then "go on": its tool results and the new words are
    one user message answering an assistant message whose thinking was left out (an earlier
    turn's). The API refuses thinking there; the turn's own next step, thinking first, may."""
    from turns.thinking import limits, may_think

    settings.CHAT_MAX_TOKENS = 4096
    use = {"type": "tool_use", "id": "t1", "name": "search_history", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "found"}
    go_on = {"type": "text", "text": "go on"}
    thought = {"type": "thinking", "thinking": "Let me look.", "signature": "sig"}
    unthought = [
        {"role": "user", "content": [{"type": "text", "text": "Find it"}]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result, go_on]},
    ]
    assert not may_think(unthought)
    assert limits("thinker", 2048, 100_000, unthought) == (None, 4096)
    thinking_step = [*unthought[:1], {"role": "assistant", "content": [thought, use]}]
    assert may_think([*thinking_step, {"role": "user", "content": [result]}])
    assert may_think(unthought[:1])


def test_a_models_output_limit_holds_thinking_and_answer_together(models, settings):
    """Claude's models cap one answer's tokens (thinking included): a budget chosen up to the
    form's most would ask past it, and the API refuses such a request. Declared in CHAT_MODELS
    ("output"), the request stays within it, the thinking shrinking first."""
    from turns.thinking import limits

    settings.CHAT_MAX_TOKENS = 4096
    settings.CHAT_MODELS[0]["output"] = 32_000
    asked = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert limits("thinker", 64_000, 200_000, asked) == (32_000 - 4096, 32_000)
