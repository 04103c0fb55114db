"""Confirmations and refusals where the person is looking: an import from the sidebar's form
(htmx) refused says why beside the form, the page it came from staying (no page of its own to
reload and post again); an accepted one leads to its conversation, whose notice above the message
box says how many came in; a conversation's settings say "Settings saved." there too."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chat.models import Conversation
from tests.test_import import chatgpt_conversation

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HTTP_HX_REQUEST": "true"}


def from_the_sidebar(client, raw: bytes):
    """The import form's post as htmx sends it."""
    return client.post(
        "/conversations/import/", {"file": SimpleUploadedFile("export.json", raw)}, **HTMX
    )


def notice(page: str) -> str:
    """The text of the notice above the message box (in the page's live region)."""
    live = r'<div class="live-notices" role="status">(.*?)<div id="progress"'
    region = re.search(live, page, re.S)
    assert region, "no live region"
    found = re.search(r'<div id="notice" class="notice (\w+)"[^>]*>(.*?)</div>', region.group(1))
    assert found, region.group(1)
    return f"{found.group(1)}: {found.group(2).strip()}"


def test_a_refused_import_says_why_for_the_page_it_came_from(client, alice):
    client.force_login(alice)
    response = from_the_sidebar(client, b'{"messages": [{"role": "user", ')
    assert response.status_code == 400
    body = response.content.decode()
    # The reason alone, for the form's place on the page: no page of its own, no redirect.
    assert body.startswith('<p class="notice error">Nothing was imported: ') and "JSON" in body
    assert "<html" not in body and "HX-Redirect" not in response
    assert not Conversation.objects.exists()


def test_an_import_over_the_limit_says_so_with_a_429(client, alice, settings):
    settings.IMPORTS_PER_HOUR = 1
    client.force_login(alice)
    good = json.dumps({"title": "One", "messages": [{"role": "user", "content": "hi"}]})
    assert from_the_sidebar(client, good.encode()).status_code == 200
    response = from_the_sidebar(client, good.encode())
    assert response.status_code == 429
    assert "Too many attempts at importing" in response.content.decode()
    assert Conversation.objects.count() == 1


def test_an_accepted_import_opens_its_conversation_saying_how_many_came(client, alice):
    client.force_login(alice)
    both = [
        chatgpt_conversation(title, [("user", ["hi"]), ("assistant", ["hello"])])
        for title in ("First", "Second")
    ]
    response = from_the_sidebar(client, json.dumps(both).encode())
    first = Conversation.objects.get(title="Imported: First")
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/conversations/{first.pk}/"

    page = client.get(response["HX-Redirect"]).content.decode()
    assert notice(page) == "info: Imported 2 conversations."
    assert 'class="flash"' not in page  # not above the layout, out of sight


def test_settings_saved_is_said_above_the_message_box(client, alice, conversation):
    client.force_login(alice)
    response = client.post(
        f"/conversations/{conversation.pk}/settings/", {"system_prompt": "Be kind."}, follow=True
    )
    page = response.content.decode()
    assert notice(page) == "info: Settings saved."
    assert 'class="flash"' not in page
