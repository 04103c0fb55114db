"""What a person sees when something is refused or down, in a real browser, on a desktop and on a
390 px phone: Redis stopping and starting under an open conversation, an import refused or long,
a pin refused.

Screenshots go to pytest's temporary directory (printed with -s), to look at.
"""

from __future__ import annotations

import contextlib
import json
import re

import pytest
from playwright.sync_api import expect

from support.servers import Redis

from .conftest import (
    message_ids,
    new_context,
    new_conversation,
    reach_list,
    send,
    serve,
    signup,
    turn,
    wait_replies,
    wait_socket,
)

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
# The same phone with its browser's address bar and toolbar showing: what is left for the page.
PHONE_WITH_BARS = {"width": 390, "height": 664}
DESKTOP = {"width": 1280, "height": 860}
PAUSED = "Live updates are paused"
# Scrolled to the end of the conversation: the newest message just above the composer (on a
# phone the context panel follows below; the page's own end is that panel's).
END_OF_CONVERSATION = """() => {
    const main = document.getElementById('main');
    window.scrollTo(0, main.getBoundingClientRect().bottom + window.scrollY - window.innerHeight);
}"""


def shoot(page, path, *visible) -> None:
    """The page now, on a desktop and on a phone, scrolled to the end where the person is typing;
    at both sizes each of `visible` must be in view there. The desktop size is put back."""
    for size, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.evaluate(END_OF_CONVERSATION)
        for locator in visible:
            expect(locator).to_be_in_viewport(ratio=1)
        page.screenshot(path=f"{path}-{name}.png")
    page.set_viewport_size(DESKTOP)


def watch_socket(page) -> None:
    """Record, in the page, when the banner shows and hides and when the socket tries to
    connect (ms since the page loaded)."""
    page.evaluate(
        """() => {
            window.__banner = [];
            window.__attempts = [];
            const banner = document.getElementById('connection');
            new MutationObserver(() => window.__banner.push([banner.hidden, performance.now()]))
                .observe(banner, {attributes: true, attributeFilter: ['hidden']});
            document.addEventListener('htmx:wsConnecting',
                () => window.__attempts.push(performance.now()));
        }"""
    )


@contextlib.contextmanager
def with_redis(browser):
    """A redis-server of the test's own, a server using it and a browser context:
    (redis, base URL, context)."""
    redis = Redis().start()
    try:
        with serve(REDIS_URL=redis.url) as base:
            context = new_context(browser)
            try:
                yield redis, base, context
            finally:
                context.close()
    finally:
        redis.stop()


def test_a_tab_lives_through_redis_stopping_and_starting(browser, tmp_path):
    """Redis stops under an open conversation: what the person sends is kept and answered, they
    are told (where they are typing) that live updates are paused, and once Redis is back the
    page catches up by itself and the notice goes."""
    with with_redis(browser) as (redis, base, context):
        page = context.new_page()
        signup(page, base)
        new_conversation(page)
        # Enough turns for the page to scroll: the top of the page is out of sight.
        turn(page, "Before Redis stops: the harbour hall is booked for Friday.")
        turn(page, "The band arrives at six and needs a socket by the stage.")
        turn(page, "The florist brings the tables' flowers at four.")
        watch_socket(page)

        redis.stop()
        box = page.locator("#message-input")
        box.fill("While Redis is down: the caterer needs the head count, OSPREY.")
        box.press("Enter")
        notice = page.locator("#notice")
        banner = page.locator("#connection")
        expect(notice).to_contain_text(PAUSED)
        expect(banner).to_be_visible()
        expect(box).to_have_value("")  # the server has it: the composer is emptied
        # The page still loads over HTTP: the stored message shows while Redis is down.
        expect(page.locator("#msg-7")).to_contain_text("OSPREY")
        # Handshakes are refused while Redis is down: let the page try a few times.
        page.wait_for_function("() => window.__attempts.length >= 3", timeout=20_000)
        shoot(page, tmp_path / "redis-down", notice, banner)
        expect(banner).to_be_visible()

        restarted = page.evaluate("performance.now()")
        redis.start()
        expect(banner).to_be_hidden(timeout=40_000)
        dropped_at, hidden_at = page.evaluate("[window.__banner[0][1], window.__banner.at(-1)[1]]")
        attempts = page.evaluate("window.__attempts.length")
        print(
            f"dropped {(restarted - dropped_at) / 1000:.1f} s before Redis was back, "
            f"{attempts} connection attempts; banner gone "
            f"{(hidden_at - restarted) / 1000:.1f} s after Redis was back"
        )
        # The message sent while Redis was down and its reply, without a reload.
        wait_replies(page, 4)
        expect(page.locator("#msg-8")).to_contain_text("OSPREY")
        ids = message_ids(page)
        assert ids == [f"msg-{n}" for n in range(1, 9)], ids
        expect(notice).to_be_hidden()  # live updates are not paused any more
        shoot(page, tmp_path / "redis-back")
        print("screenshots in", tmp_path)


def test_a_second_tab_shows_what_happened_while_redis_was_down(browser, tmp_path):
    with with_redis(browser) as (redis, base, context):
        page = context.new_page()
        signup(page, base)
        new_conversation(page)
        turn(page, "Before Redis stops: the harbour hall is booked for Friday.")
        other = context.new_page()  # the same conversation in a second tab, left idle
        other.goto(page.url)
        wait_socket(other)

        redis.stop()
        send_text(page, "While Redis is down: the caterer needs the head count, PETREL.")
        expect(page.locator("#notice")).to_contain_text(PAUSED)
        redis.start()
        expect(page.locator("#connection")).to_be_hidden(timeout=40_000)
        wait_replies(page, 2)
        try:
            expect(other.locator("#msg-3")).to_contain_text("PETREL", timeout=10_000)
            wait_replies(other, 2)
        finally:
            other.screenshot(path=str(tmp_path / "second-tab.png"))
            print("screenshot in", tmp_path)


def send_text(page, text: str) -> None:
    """Type a message and press Enter, whether or not the page will show it."""
    page.fill("#message-input", text)
    page.press("#message-input", "Enter")


def choose_file(page, name: str, content: bytes):
    """Choose a file in the sidebar's import form; the form."""
    reach_list(page)
    form = page.locator(".import-form")
    form.locator("input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "application/json", "buffer": content}]
    )
    return form


def import_file(page, name: str, content: bytes) -> None:
    """Choose a file in the sidebar's import form and submit it; wait for a refusal's reason,
    said beside the form on the page it came from (which stays)."""
    form = choose_file(page, name, content)
    url = page.url
    with page.expect_response(lambda r: r.url.endswith("/conversations/import/")):
        form.get_by_role("button", name="Import", exact=True).click()
    expect(form.locator("#import-result")).not_to_be_empty()
    assert page.url == url


def test_a_refused_import_says_why_where_the_person_is_looking(browser, tmp_path):
    """A malformed file, one over the size limit and one over the hourly limit: each answer
    says why nothing was imported, in view on a phone and on a desktop, and nothing appears in
    the list."""
    with serve(IMPORTS_PER_HOUR="2", IMPORT_MAX_BYTES="20000") as base:
        context = new_context(browser)
        try:
            page = context.new_page()
            signup(page, base)
            for n in range(4):  # a list to scroll past, as a person who uses the app has
                page.goto(f"{base}/")
                new_conversation(page)
                turn(page, f"Conversation {n} about the launch.")
            for row in page.locator(".sidebar-row").all()[:2]:  # a second group: "Pinned"
                row.locator("summary").click()
                row.get_by_role("button", name="Pin").click()
            expect(page.locator(".sidebar-row.pinned")).to_have_count(2)
            listed = page.locator(".sidebar-row").count()
            refused = page.locator("#import-result")

            page.set_viewport_size(PHONE_WITH_BARS)
            import_file(page, "conversations.json", b'{"messages": [{"role": "user", ')
            expect(refused).to_contain_text("Nothing was imported:")
            reason = refused.inner_text()
            assert "JSON" in reason, reason
            expect(refused).to_be_in_viewport(ratio=1)
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
            page.screenshot(path=str(tmp_path / "import-malformed-phone.png"))

            page.set_viewport_size(DESKTOP)
            import_file(page, "export.json", b'{"messages": ["' + b"x" * 20_000 + b'"]}')
            expect(refused).to_contain_text("imports are limited to 20,000")
            expect(refused).to_be_in_viewport(ratio=1)
            page.screenshot(path=str(tmp_path / "import-too-large-desktop.png"))

            page.set_viewport_size(PHONE_WITH_BARS)
            import_file(page, "export.json", b'{"messages": []}')
            expect(refused).to_contain_text("Too many attempts at importing conversations")
            expect(refused).to_be_in_viewport(ratio=1)
            page.screenshot(path=str(tmp_path / "import-limited-phone.png"))
            expect(page.locator(".sidebar-row")).to_have_count(listed)
            print("screenshots in", tmp_path)
        finally:
            context.close()


def test_a_refused_pin_says_why_above_the_composer_on_a_phone(chat, tmp_path):
    """A pin the server refuses (a reply still streaming: its bubble has no Pin button, so the
    request is made as the button would, with htmx) is said in the notice, in view where the
    person is typing, and the bubble is left as it was."""
    page = chat
    page.set_viewport_size(PHONE)
    # A turn taller than the screen: the top of the page is out of sight.
    turn(page, "Tell me about the lighthouse keeper's week, GUILLEMOT. " * 8)
    send(page, "And the ferry timetable, please. " * 8)
    reply = page.locator("#msg-4")
    expect(reply).to_have_attribute("data-status", "streaming")
    # The reply is written right after the message it answers: the next row.
    url = page.get_attribute("#msg-3 .pin-toggle", "hx-post")
    pk = int(re.search(r"/messages/(\d+)/pin/", url).group(1)) + 1
    page.evaluate(
        """pk => htmx.ajax('POST', `/messages/${pk}/pin/`, {source: '#msg-4',
            target: '#msg-4', swap: 'outerHTML', values: {pinned: '1'}})""",
        pk,
    )
    notice = page.locator("#notice")
    expect(notice).to_contain_text("Wait for the reply to finish before pinning it.")
    page.evaluate(END_OF_CONVERSATION)
    expect(notice).to_be_in_viewport(ratio=1)
    page.screenshot(path=str(tmp_path / "pin-refused-phone.png"))
    print("screenshot in", tmp_path)
    expect(reply).to_have_attribute("data-status", "streaming")  # not swapped for the refusal
    wait_replies(page, 2)
    expect(reply).not_to_have_class(re.compile(r"\bpinned\b"))
    assert page.get_attribute("#msg-4 .pin-toggle", "hx-post") == f"/messages/{pk}/pin/"


def long_export(messages: int) -> bytes:
    """An export.json of one conversation this long: seconds of work for the server."""
    return json.dumps(
        {
            "title": "The keeper's log",
            "messages": [
                {"role": ("user", "assistant")[n % 2], "content": f"Hour {n}: calm, lamp lit."}
                for n in range(messages)
            ],
        }
    ).encode()


def test_a_long_import_shows_it_is_working_and_a_second_is_told_to_wait(browser, tmp_path):
    """While a long import runs its form says so and cannot be sent again; an import from another
    tab meanwhile is refused with the reason, in view on a phone; the long one then opens. A
    server of its own: the session's has no sign-ups to spare (five an hour from an address)."""
    with serve() as server, contextlib.closing(new_context(browser)) as context:
        page = context.new_page()
        signup(page, server)
        other = context.new_page()
        other.set_viewport_size(PHONE_WITH_BARS)
        other.goto(f"{server}/")

        form = choose_file(page, "export.json", long_export(60_000))
        # Playwright waits while a page's form submission is pending: the page notes what its
        # form showed where it survives the navigation that follows.
        form.evaluate(
            """form => new MutationObserver(() => localStorage.setItem('import-form',
                JSON.stringify({
                    importing: form.classList.contains('importing'),
                    progress: form.querySelector('.import-progress').checkVisibility(),
                    text: form.querySelector('.import-progress').innerText.trim(),
                    disabled: form.querySelector('button[type=submit]').disabled,
                }))).observe(form, {attributes: true, subtree: true})"""
        )
        button = form.get_by_role("button", name="Import", exact=True)
        button.evaluate("button => setTimeout(() => button.click(), 0)")  # returns at once

        # Another tab, once the first has sent its file. A file found bad tells whether the
        # long import had begun on the server (the answer is then that it is running): nothing
        # is imported either way, and the question is asked again until it has.
        other.wait_for_function("() => localStorage.getItem('import-form')")
        refused = other.locator("#import-result")
        for _ in range(5):
            import_file(other, "export.json", b'{"messages": [')
            if "still running" in refused.inner_text():
                break
        expect(refused).to_contain_text("An import of yours is still running")
        expect(refused).to_be_in_viewport(ratio=1)
        other.screenshot(path=str(tmp_path / "import-busy-phone.png"))

        page.wait_for_url("**/conversations/*/", timeout=60_000)
        shown = json.loads(page.evaluate("localStorage.getItem('import-form')"))
        assert shown == {
            "importing": True,
            "progress": True,
            "text": "Importing…",
            "disabled": True,
        }, shown
        expect(page.locator("#title-input")).to_have_value("Imported: The keeper's log")
        expect(page.locator("#transcript .message").last).to_contain_text("Hour 59999")
        print("screenshots in", tmp_path)
