"""Files in the window, in a real browser: an image sent to the demo model shows on the meter as
its own segment, named in the legend, and in the model view as a line linking to the file."""

from __future__ import annotations

import json
import os

import pytest
from playwright.sync_api import expect

from tests import sample_files

from .conftest import TIMEOUT_MS, conversation_id, new_conversation, wait_replies
from .screens import SCREENS, leave_panel, reach_panel
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser


def upload(page, base: str, name: str, data: bytes) -> dict:
    """An upload over HTTP as the page's user (its cookies and CSRF token)."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.request.post(
        f"{base}/conversations/{conversation_id(page)}/attachments/",
        multipart={"file": {"name": name, "mimeType": "application/octet-stream", "buffer": data}},
        headers={"X-CSRFToken": token, "Referer": base + "/"},
    )
    assert answer.status == 201, answer.text()
    return answer.json()


@pytest.mark.parametrize("name", list(SCREENS))
def test_an_image_shows_on_the_meter_and_in_the_model_view(
    browser, user_state, server, tmp_path, name
):
    context = browser.new_context(storage_state=user_state, **SCREENS[name])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    chat = context.new_page()
    try:
        chat.goto(f"{server}/")
        new_conversation(chat)
        _meter_and_model_view(chat, server, tmp_path / f"{name}.png")
        refusals.assert_none(chat)
    finally:
        context.close()


def _meter_and_model_view(chat, server: str, screenshot) -> None:
    shot = upload(chat, server, "build-error.png", sample_files.image("PNG", (800, 600)))
    # The send frame the composer's attach button will send (docs/files.md); its chips are
    # tested with the composer.
    frame = {"action": "send", "message": "What does this say?", "attachments": [shot["id"]]}
    chat.evaluate(
        "frame => document.getElementById('chat-root')['htmx-internal-data']"
        ".webSocket.socket.send(frame)",
        json.dumps(frame),
    )
    wait_replies(chat, 1)

    reach_panel(chat)  # on a phone the meter is behind "Context"
    files = chat.locator("#context-figures .legend li", has=chat.locator(".seg-files"))
    expect(files).to_contain_text("Files")
    expect(files).to_be_visible()
    expect(chat.locator("#context-figures .meter svg.seg-files")).to_have_count(1)
    leave_panel(chat)
    chat.click("#show-model-view")
    line = chat.locator("#model-view .window-file a")
    expect(line).to_have_text(f"image: build-error.png, 800×600 px, {shot['tokens']:,} tokens")
    assert line.get_attribute("href") == f"/attachments/{shot['id']}/"
    chat.screenshot(path=os.environ.get("FILES_WINDOW_SCREENSHOT", screenshot))
