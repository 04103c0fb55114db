"""Files in a real browser (docs/files.md), on a desktop and a 390 px phone, light and dark: a
file attached by the paperclip, by a drop on the conversation and by a paste into the message
box shows as a chip with its name, size and tokens; × (or Esc) removes it and its upload; the
message sent shows each file (a thumbnail, a PDF's icon and pages, a text file's first lines)
opening the file itself. Nothing refused by the Content-Security-Policy, no serious axe
violation; every control at least 24 × 24 CSS px. The offline demo model answers."""

from __future__ import annotations

import base64
import io
import os
import re
import time
from pathlib import Path

import pytest
from PIL import Image, ImageDraw
from playwright.sync_api import expect

from tests import sample_files

from .conftest import (
    TIMEOUT_MS,
    new_context,
    new_conversation,
    serve,
    signup,
    wait_replies,
    wait_socket,
)
from .screens import SCREENS, in_view
from .test_accessibility_in_a_browser import Audit
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("FILES_SCREENSHOTS", "/tmp/files-screens"))
FIRST_LINES = "21:14:03 starting build\nerror: port 8443 already in use\nhint: stop the old server"
LOG = (FIRST_LINES + "\nthis fourth line is not shown\n").encode()


@pytest.fixture(scope="module")
def server():
    """A server of its own, whose budget holds a message with an image, a PDF and a text file
    (the session's is sized to compact after a few turns of text), a user of its own for each
    screen, and a file limit small enough to meet."""
    with serve(
        CONTEXT_BUDGET_TOKENS="200000", SIGNUPS_PER_HOUR="100", ATTACHMENT_MAX_BYTES="200000"
    ) as base:
        yield base


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, server):
    """(a page on a new conversation of a new user on this screen, its refusals, its name)."""
    context = browser.new_context(**SCREENS[request.param])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    page = context.new_page()
    signup(page, server)
    new_conversation(page)
    yield page, refusals, request.param
    context.close()


def build_error_png() -> bytes:
    """A screenshot as people paste them: a terminal with a build error (800 x 600)."""
    picture = Image.new("RGB", (800, 600), (30, 32, 40))
    draw = ImageDraw.Draw(picture)
    lines = [
        ("$ make build", (220, 220, 220)),
        ("compiling 214 modules...", (160, 160, 170)),
        ("error: port 8443 in use", (240, 90, 90)),
        ("  --> src/server.rs:42", (120, 170, 240)),
        ("build failed in 3.2 s", (240, 90, 90)),
    ]
    for n, (text, colour) in enumerate(lines):
        draw.text((30, 40 + 64 * n), text, fill=colour, font_size=40)
    out = io.BytesIO()
    picture.save(out, "PNG")
    return out.getvalue()


def as_file(page, data: bytes, name: str, media_type: str, how: str) -> None:
    """Hand the page a file the way a person does: `drop` it on the transcript (`drop-aside`: on
    the sidebar, a little off target), or `paste` it into the message box (a File in a
    DataTransfer, made in the page)."""
    page.evaluate(
        """([b64, name, type, how]) => {
            const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
            const data = new DataTransfer();
            data.items.add(new File([bytes], name, {type}));
            if (how.startsWith('drop')) {
                const target = document.querySelector(how === 'drop' ? '#transcript' : '.sidebar');
                for (const kind of ['dragenter', 'dragover', 'drop'])
                    target.dispatchEvent(new DragEvent(kind,
                        {bubbles: true, cancelable: true, dataTransfer: data}));
            } else {
                const box = document.getElementById('message-input');
                box.focus();
                box.dispatchEvent(new ClipboardEvent('paste',
                    {bubbles: true, cancelable: true, clipboardData: data}));
            }
        }""",
        [base64.b64encode(data).decode(), name, media_type, how],
    )


def chip(page, name: str):
    return page.locator("#chips .chip", has_text=name)


def uploaded(page, name: str) -> int:
    """The id of the chip named `name`, once its upload is done."""
    found = chip(page, name)
    expect(found).to_have_attribute("data-id", re.compile(r"^\d+$"))
    return int(found.get_attribute("data-id"))


def gone(page, attachment_id: int) -> None:
    """Wait until the upload is deleted (the chip goes at once, its delete request after).
    Each look bypasses the browser's cache: a file is served cacheable for an hour, so a look
    made before the delete committed would otherwise answer 200 from the cache ever after."""
    url = f"/attachments/{attachment_id}/"
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    look = "url => fetch(url, {cache: 'no-store'}).then(r => r.status)"
    while page.evaluate(look, url) != 404:
        assert time.monotonic() < deadline, f"{url} is still served"
        page.wait_for_timeout(100)


def at_least_24px(locator) -> None:
    for n in range(locator.count()):
        box = locator.nth(n).bounding_box()
        assert box and box["width"] >= 24 and box["height"] >= 24, (locator, n, box)


def test_attach_by_button_drop_and_paste_remove_one_and_send(screen, server):
    page, refusals, name = screen
    # axe, in light and dark (Audit measures both): once for each screen size.
    audit = Audit() if name.endswith("light") else None
    attach = page.get_by_label("Attach files")
    expect(attach).to_be_attached()
    at_least_24px(page.locator("label.attach"))

    attach.set_input_files(
        [
            {"name": "build-error.png", "mimeType": "image/png", "buffer": build_error_png()},
            {"name": "server.log", "mimeType": "text/plain", "buffer": LOG},
        ]
    )
    as_file(page, sample_files.pdf(2), "spec.pdf", "application/pdf", "drop")
    as_file(page, sample_files.image("PNG", (300, 200)), "image.png", "image/png", "paste")
    as_file(page, b"aside", "aside.txt", "text/plain", "drop-aside")

    image = uploaded(page, "build-error.png")
    uploaded(page, "server.log")
    pdf = uploaded(page, "spec.pdf")
    pasted = uploaded(page, "pasted-image.png")
    aside = uploaded(page, "aside.txt")
    expect(page.locator("#chips .chip-name")).to_have_text(
        ["build-error.png", "server.log", "spec.pdf", "pasted-image.png", "aside.txt"]
    )
    page.get_by_role("button", name="Remove aside.txt").click()
    gone(page, aside)
    expect(chip(page, "build-error.png")).to_contain_text("640 tokens")  # 800 x 600 / 750
    expect(chip(page, "spec.pdf")).to_contain_text("kB · 6,000 tokens")
    expect(chip(page, "pasted-image.png")).to_contain_text("80 tokens")
    at_least_24px(page.locator("#chips .chip-remove"))
    page.screenshot(path=SHOTS / f"chips-{name}.png")
    if audit:
        audit(page, "chips")

    # × removes the pasted one, and its upload with it.
    page.get_by_role("button", name="Remove pasted-image.png").click()
    expect(chip(page, "pasted-image.png")).to_have_count(0)
    expect(page.get_by_role("button", name="Remove spec.pdf")).to_be_focused()
    gone(page, pasted)
    assert page.request.get(f"{server}/attachments/{image}/").status == 200

    page.fill("#message-input", "Why does the build fail?")
    page.press("#message-input", "Enter")
    bubble = page.locator("#transcript .message.user").last
    expect(bubble).to_contain_text("Why does the build fail?")
    expect(page.locator("#chips")).to_be_hidden()
    expect(page.locator("#chips .chip")).to_have_count(0)
    wait_replies(page, 1)

    thumbnail = bubble.locator("a.file-card.image img")
    expect(thumbnail).to_have_attribute("alt", "build-error.png")
    expect(thumbnail).to_have_attribute("src", f"/attachments/{image}/")
    assert thumbnail.evaluate("img => img.complete && img.naturalWidth") == 800
    card = bubble.locator("a.file-card.pdf")
    expect(card).to_contain_text("spec.pdf")
    expect(card).to_contain_text("2 pages · 6,000 tokens")
    expect(bubble.locator("a.file-card.text .file-lines")).to_have_text(FIRST_LINES)
    at_least_24px(bubble.locator("a.file-card"))
    in_view(page, card)
    with page.expect_popup() as opened:
        card.click()
    popup = opened.value
    popup.wait_for_load_state()
    assert popup.url == f"{server}/attachments/{pdf}/"
    popup.close()
    page.screenshot(path=SHOTS / f"sent-{name}.png")
    bubble.screenshot(path=SHOTS / f"bubble-{name}.png")
    if audit:
        audit(page, "a message with files sent")
        audit.assert_clean()
    refusals.assert_none(page)


def test_files_alone_esc_removes_a_chip_and_a_refusal_says_why(browser, server):
    context = new_context(browser)
    try:
        page = context.new_page()
        signup(page, server)
        new_conversation(page)
        attach = page.get_by_label("Attach files")

        # A file the checks refuse: its reason where the person is looking, and no chip.
        attach.set_input_files(
            {"name": "drawing.svg", "mimeType": "image/svg+xml", "buffer": b"<svg></svg>"}
        )
        notice = page.locator("#notice")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("drawing.svg")
        expect(page.locator("#chips .chip")).to_have_count(0)
        expect(page.locator("#chips")).to_be_hidden()
        # Too large (a 413, its body refused before it is read): which file is said.
        attach.set_input_files(
            {"name": "huge.log", "mimeType": "text/plain", "buffer": b"x" * 300_000}
        )
        expect(notice).to_contain_text("“huge.log”: This upload is 0.3 MB: the limit is 0.2 MB")
        expect(page.locator("#chips .chip")).to_have_count(0)

        # By keyboard: Tab reaches the paperclip; Esc on a chip removes it (the reply is not
        # stopped: there is none).
        page.focus("#message-input")
        page.keyboard.press("Shift+Tab")
        expect(attach).to_be_focused()
        attach.set_input_files(
            [
                {"name": "a.txt", "mimeType": "text/plain", "buffer": b"first file"},
                {"name": "b.txt", "mimeType": "text/plain", "buffer": b"second file"},
            ]
        )
        expect(notice).to_be_hidden()  # the refusal before is gone with the next upload
        first = uploaded(page, "a.txt")
        uploaded(page, "b.txt")
        page.get_by_role("button", name="Remove a.txt").focus()
        page.keyboard.press("Escape")
        expect(chip(page, "a.txt")).to_have_count(0)
        expect(page.get_by_role("button", name="Remove b.txt")).to_be_focused()
        gone(page, first)

        # Reloaded, the upload not sent waits in its chip still.
        page.reload()
        wait_socket(page)
        uploaded(page, "b.txt")

        # Files alone: Enter in the empty box sends them.
        page.press("#message-input", "Enter")
        bubble = page.locator("#transcript .message.user").last
        expect(bubble.locator("a.file-card.text")).to_contain_text("b.txt")
        expect(bubble.locator("a.file-card.text .file-lines")).to_have_text("second file")
        expect(page.locator("#chips .chip")).to_have_count(0)
        wait_replies(page, 1)
        # The box is required again: an empty Enter sends nothing.
        page.press("#message-input", "Enter")
        page.wait_for_timeout(300)
        expect(page.locator("#transcript .message.user")).to_have_count(1)
    finally:
        context.close()


def test_a_file_sent_from_another_tab_leaves_this_tabs_composer(browser, server):
    context = new_context(browser)
    try:
        first = context.new_page()
        signup(first, server)
        new_conversation(first)
        first.get_by_label("Attach files").set_input_files(
            {"name": "notes.md", "mimeType": "text/plain", "buffer": b"# Notes\nport 8443\n"}
        )
        uploaded(first, "notes.md")
        second = context.new_page()
        second.goto(first.url)
        wait_socket(second)
        uploaded(second, "notes.md")  # waiting: a chip in every tab

        first.fill("#message-input", "What port?")
        first.press("#message-input", "Enter")
        expect(second.locator("#transcript a.file-card.text")).to_contain_text("notes.md")
        expect(second.locator("#chips .chip")).to_have_count(0)
        expect(second.locator("#chips")).to_be_hidden()
        expect(second.locator("#message-input")).to_have_attribute("required", "")
        wait_replies(first, 1)
    finally:
        context.close()


def test_screenshot_of_files_for_the_readme(browser, server, tmp_path):
    """screenshots/files.png: a conversation with an image and a PDF sent (desktop, light), into
    the folder README_SCREENSHOTS names when it is set (`make screenshots`)."""
    out = Path(os.environ.get("README_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    shot = out / "files.png"
    shot.unlink(missing_ok=True)
    context = new_context(browser, color_scheme="light")
    try:
        page = context.new_page()
        page.set_viewport_size({"width": 1400, "height": 900})
        signup(page, server, "ada")
        new_conversation(page)
        page.fill("input[name=title]", "Build failure")
        page.get_by_role("button", name="Rename").click()
        page.wait_for_load_state()
        wait_socket(page)
        page.get_by_label("Attach files").set_input_files(
            [
                {"name": "build-error.png", "mimeType": "image/png", "buffer": build_error_png()},
                {
                    "name": "deploy-guide.pdf",
                    "mimeType": "application/pdf",
                    "buffer": sample_files.pdf(4),
                },
            ]
        )
        uploaded(page, "build-error.png")
        uploaded(page, "deploy-guide.pdf")
        page.fill("#message-input", "The build fails on the new server: what does the error say?")
        page.press("#message-input", "Enter")
        wait_replies(page, 1)
        page.get_by_label("Attach files").set_input_files(
            {"name": "server.log", "mimeType": "text/plain", "buffer": LOG}
        )
        uploaded(page, "server.log")
        page.fill("#message-input", "And the log from the last run.")
        page.wait_for_function("() => document.querySelector('#transcript img').complete")
        page.evaluate("window.scrollTo(0, 0)")  # the message with its files, whole
        page.screenshot(path=str(shot))
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "readme-files.png"))
    finally:
        context.close()
    assert shot.stat().st_size > 10_000
