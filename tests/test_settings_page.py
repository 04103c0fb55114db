"""The settings page (/settings/), each control through the test client: change the password (this
session stays, the others end), log out everywhere (every session ends and the sockets close),
the defaults of new conversations (applied to the next one made, from the home's first send and
from "New conversation"), the theme (drawn on every page), and every conversation in one file.
Bad input is refused with a reason beside the form, never a 500; every form needs its CSRF
token."""

from __future__ import annotations

import html as html_module
import json
import re

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from chat.models import Conversation, Preferences
from tests.conftest import socket_for
from tests.test_models_picker import BIG, SMALL, options
from tests.test_sessions_end import _closed_with
from tests.transcripts import add_turns
from web.consumer import SESSION_ENDED

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def page(client) -> str:
    response = client.get("/settings/")
    assert response.status_code == 200
    return response.content.decode()


def notice(html: str, section: str) -> str:
    """The text of a section's notice (its live region), as a person reads it."""
    found = re.search(rf'<div id="{section}-notice"[^>]*role="status"[^>]*>(.*?)</div>', html, re.S)
    assert found, f"no notice region for {section}"
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def test_the_page_needs_a_login_and_the_sidebar_links_to_it(client, as_alice):
    assert Client().get("/settings/").status_code == 302
    assert 'href="/settings/"' in as_alice.get("/").content.decode()
    html = page(as_alice)
    for section in ("defaults", "theme", "export", "account"):
        assert f'id="{section}"' in html


def test_every_form_needs_its_csrf_token(alice):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    html = strict.get("/settings/").content.decode()
    assert html.count('name="csrfmiddlewaretoken"') >= 5
    for url in ("defaults", "password", "theme", "logout", "delete"):
        assert strict.post(f"/settings/{url}/", {"theme": "dark"}).status_code == 403
    assert Preferences.objects.count() == 0


# --- the password ---------------------------------------------------------------------------------


def change_password(client, old: str, new: str, **headers):
    form = {"old_password": old, "new_password1": new, "new_password2": new}
    return client.post("/settings/password/", form, headers=headers)


def test_a_new_password_keeps_this_session_and_ends_the_others(alice):
    here, elsewhere = Client(), Client()
    here.force_login(alice)
    elsewhere.force_login(alice)
    response = change_password(here, "alice-password-1", "a brand new secret 42")
    assert response.status_code == 302 and response.url == "/settings/#password-notice"
    assert "Password changed" in notice(page(here), "password")
    alice.refresh_from_db()
    assert alice.check_password("a brand new secret 42")
    assert elsewhere.get("/settings/").status_code == 302  # signed out there


def test_a_wrong_current_password_or_a_weak_new_one_is_refused_with_why(as_alice, alice):
    response = change_password(as_alice, "not my password", "a brand new secret 42", **HTMX)
    html = response.content.decode()
    assert response.status_code == 200  # htmx swaps it in: the form and its notice
    assert "Password not changed" in notice(html, "password")
    assert "Your old password was entered incorrectly" in html
    response = change_password(as_alice, "alice-password-1", "123")
    assert response.status_code == 400  # without htmx: the page, drawn again, says why
    assert "This password is too short" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("alice-password-1")


def test_guessing_the_password_here_is_limited_as_signing_in_is(as_alice, alice, settings):
    settings.LOGIN_FAILURES_PER_15_MINUTES = 2
    for _ in range(2):
        change_password(as_alice, "guess", "a brand new secret 42")
    response = change_password(as_alice, "alice-password-1", "a brand new secret 42")
    assert response.status_code == 400
    assert "Too many attempts at signing in" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("alice-password-1")


# --- log out everywhere ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_logging_out_everywhere_ends_every_session_and_closes_the_sockets(
    alice, bob, conversation
):
    here, elsewhere, bobs = Client(), Client(), Client()
    for client, user in ((here, alice), (elsewhere, alice), (bobs, bob)):
        await sync_to_async(client.force_login)(user)
    ws = socket_for(alice, conversation.pk)
    assert (await ws.connect())[0]
    response = await sync_to_async(here.post)("/settings/logout/")
    assert response.status_code == 302 and response.url == "/accounts/login/"
    assert await _closed_with(ws) == SESSION_ENDED
    for client in (here, elsewhere):
        assert (await sync_to_async(client.get)("/settings/")).status_code == 302
    assert (await sync_to_async(bobs.get)("/settings/")).status_code == 200  # bob's stays
    login = (await sync_to_async(here.get)("/accounts/login/")).content.decode()
    assert "Logged out everywhere: 2 sessions ended." in login


# --- defaults for new conversations ---------------------------------------------------------------


@pytest.fixture
def two_models(settings):
    settings.LLM_PROVIDER = ""
    settings.ANTHROPIC_API_KEY = "sk-test-not-used"
    settings.ANTHROPIC_BASE_URL = ""
    settings.CHAT_MODELS = [SMALL, BIG]
    settings.CHAT_MODEL = BIG["id"]
    settings.CONTEXT_BUDGET_TOKENS = 0
    settings.AUTO_COMPACT_AT = 0.6
    settings.KEEP_TAIL_SHARE = 0.25
    return settings


DEFAULTS = {
    "model": SMALL["id"],
    "system_prompt": "Answer in French.",
    "review_compactions": "on",
    "auto_compact_at": "70",
    "keep_tail_share": "30",
    "summary_model": BIG["id"],
}


def started_with(conversation: Conversation) -> tuple:
    return (
        conversation.model,
        conversation.system_prompt,
        conversation.review_compactions,
        conversation.auto_compact_at,
        conversation.keep_tail_share,
        conversation.summary_model,
    )


CHOSEN = (SMALL["id"], "Answer in French.", True, 0.7, 0.3, BIG["id"])


def test_new_conversations_start_with_the_defaults_saved(as_alice, alice, two_models):
    response = as_alice.post("/settings/defaults/", DEFAULTS, headers=HTMX)
    assert response.status_code == 200
    assert "Defaults saved" in notice(response.content.decode(), "defaults")
    # The pickers choose the default model: the sidebar's and the home composer's.
    home = as_alice.get("/").content.decode()
    assert [o for o in options(home) if o[2]][0][0] == SMALL["id"]
    html = page(as_alice)
    assert "Answer in French." in html and 'value="70"' in html and 'value="30"' in html

    # "+ New conversation" (its picker's choice sent), and the home's first send.
    made = as_alice.post("/conversations/", {"model": SMALL["id"]})
    first = Conversation.objects.get(pk=re.search(r"/(\d+)/$", made.url).group(1))
    assert started_with(first) == CHOSEN
    sent = as_alice.post("/conversations/", {"message": "Bonjour"})
    second = Conversation.objects.get(pk=re.search(r"/(\d+)/$", sent.url).group(1))
    assert started_with(second) == CHOSEN
    # A model picked for one conversation wins over the default, the rest still apply.
    picked = as_alice.post("/conversations/", {"model": BIG["id"], "message": "Hi"})
    third = Conversation.objects.get(pk=re.search(r"/(\d+)/$", picked.url).group(1))
    assert started_with(third) == (BIG["id"], *CHOSEN[1:])
    # Another person's new conversations keep the deployment's defaults.
    bobs = Client()
    bobs.force_login(alice.__class__.objects.create_user("bob", password="bob-password-1"))
    theirs = bobs.post("/conversations/", {})
    assert started_with(Conversation.objects.get(pk=theirs.url.split("/")[-2]))[0] == BIG["id"]


def test_a_default_model_no_longer_offered_gives_way_to_the_deployments(
    as_alice, alice, two_models
):
    as_alice.post("/settings/defaults/", DEFAULTS | {"summary_model": SMALL["id"]})
    two_models.CHAT_MODELS = [BIG]
    made = as_alice.post("/conversations/", {})
    conversation = Conversation.objects.get(pk=made.url.split("/")[-2])
    assert (conversation.model, conversation.summary_model) == (BIG["id"], "")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("model", "gpt-none", "There is no model 'gpt-none' to choose here"),
        ("system_prompt", "x" * 20_001, "The system prompt is 20,001 characters; the limit is"),
        ("system_prompt", "nul\x00", "The system prompt contains a NUL character"),
        ("auto_compact_at", "lots", "Compact at must be a percentage of the budget"),
        ("auto_compact_at", "99", "Compact at"),
        ("summary_model", "gpt-none", "There is no model 'gpt-none' to write summaries here"),
    ],
)
def test_bad_defaults_are_refused_with_a_reason_and_nothing_saved(
    as_alice, two_models, field, value, reason
):
    answered = as_alice.post("/settings/defaults/", DEFAULTS | {field: value}, headers=HTMX)
    assert answered.status_code == 200
    said = notice(answered.content.decode(), "defaults")
    assert said.startswith("Defaults not saved.") and reason in said, said
    response = as_alice.post("/settings/defaults/", DEFAULTS | {field: value})
    assert response.status_code == 400
    assert reason in notice(response.content.decode(), "defaults")
    if field != "system_prompt":  # the page drawn again keeps the prompt typed
        assert ">Answer in French.</textarea>" in response.content.decode()
    assert Preferences.objects.count() == 0


def test_a_system_prompt_too_large_for_the_default_model_is_refused(as_alice, two_models):
    two_models.CHAT_MODELS = [SMALL | {"context": 1_000}, BIG]
    words = " ".join(f"rule{i}" for i in range(600))
    response = as_alice.post("/settings/defaults/", DEFAULTS | {"system_prompt": words})
    assert response.status_code == 400
    said = notice(response.content.decode(), "defaults")
    assert "more than half of this model's window budget of 1,000" in said, said


# --- the theme ------------------------------------------------------------------------------------


def themed(html: str) -> tuple[str, str, str]:
    """(<html>'s data-theme, the colour schemes the browser is told, dark.css's media)."""
    theme = re.search(r'<html lang="en" data-theme="([a-z]+)">', html)
    scheme = re.search(r'<meta name="color-scheme" content="([^"]+)">', html)
    dark = re.search(r'href="/static/css/dark\.css" media="([^"]+)"', html)
    assert theme and scheme and dark, html[:600]
    return theme.group(1), scheme.group(1), dark.group(1)


def test_the_theme_chosen_is_drawn_on_every_page(as_alice, conversation):
    assert themed(page(as_alice)) == ("system", "light dark", "(prefers-color-scheme: dark)")
    assert themed(Client().get("/accounts/login/").content.decode())[0] == "system"
    response = as_alice.post("/settings/theme/", {"theme": "dark"})
    assert response.status_code == 302 and response.url == "/settings/#theme"
    html = page(as_alice)
    assert "Theme saved: dark." in notice(html, "theme")
    for url in ("/", f"/conversations/{conversation.pk}/", "/settings/", "/search/?q=x"):
        assert themed(as_alice.get(url).content.decode()) == ("dark", "dark", "all"), url
    as_alice.post("/settings/theme/", {"theme": "light"})
    assert themed(as_alice.get("/").content.decode()) == ("light", "light", "not all")


def test_a_theme_that_does_not_exist_is_refused(as_alice):
    response = as_alice.post("/settings/theme/", {"theme": "neon"})
    assert response.status_code == 400
    said = notice(response.content.decode(), "theme")
    assert "There is no theme 'neon'. Pick one of: system, light, dark." in said
    assert Preferences.objects.count() == 0


# --- export everything ----------------------------------------------------------------------------


def test_export_everything_is_one_file_of_every_conversation_with_messages(
    as_alice, alice, bob, conversation
):
    add_turns(conversation, 2)
    archived = Conversation.objects.create(owner=alice, model="fake-model", title="Old")
    add_turns(archived, 1)
    as_alice.post(f"/conversations/{archived.pk}/archive/", {"archived": "1"})
    Conversation.objects.create(owner=alice, model="fake-model", title="Empty")
    add_turns(Conversation.objects.create(owner=bob, model="fake-model", title="Bob's"), 1)
    response = as_alice.get("/settings/export.json")
    assert response.status_code == 200
    assert re.fullmatch(
        r'attachment; filename="conversations-\d{4}-\d{2}-\d{2}\.json"',
        response["Content-Disposition"],
    )
    doc = json.loads(b"".join(response.streaming_content))
    assert [(c["id"], len(c["messages"])) for c in doc] == [(conversation.pk, 4), (archived.pk, 2)]
    assert Client().get("/settings/export.json").status_code == 302
