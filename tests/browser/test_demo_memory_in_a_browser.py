"""The offline demo tells the truth about memory, as a newcomer tries it: a name and a path said
in an early turn (#3, after a greeting), the same question asked once while they are still in
the window, then turns until several compactions have folded them away; asked again, the reply
on screen names them and the message that said them (not the question asked before, nor the
demo's echo of it). Every size and scheme runs the whole conversation: with words streamed
without a pause it takes seconds. Asked about something only another conversation holds, the
demo links to the message there, and the link opens it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, conversation_id, new_conversation, serve, signup, turn
from .screens import SCREENS
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

QUESTION = "What did I say my name was?"
FACT = "My name is Ada Lovelace and my project lives in /srv/engine."
COMPACTIONS = 3
# About 330 tokens each: a compaction every five turns or so in the 5,000-token test budget. No
# word of the question (name, say) in them, so only the facts can answer it.
FILLER = (
    "Turn {n}. The lamp launch plan moves on: marketing wants the copy, the photos and the "
    "price sheet a week before the deadline, finance signs off every change, and the regional "
    "variations of the sheet are checked twice by the team before they are published. "
)


# Whether an element is on screen: inside the viewport, and what is drawn at its middle is the
# element itself (not a sticky header or panel over it).
SEEN = """el => {
    const r = el.getBoundingClientRect();
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return r.top >= 0 && r.bottom <= innerHeight && top !== null && el.contains(top);
}"""


@pytest.fixture(scope="module")
def quick_server():
    """The session's settings, but words streamed without a pause: twenty turns in seconds; and
    room for this module's sign-ups (a new user for each screen of each test)."""
    with serve(DEMO_WORD_DELAY_MS="0", SIGNUPS_PER_HOUR="20") as base:
        yield base


@pytest.mark.parametrize("screen", list(SCREENS))
def test_asked_after_many_compactions_the_demo_names_what_was_said_and_where(
    browser, quick_server, screen, tmp_path
):
    context = browser.new_context(**SCREENS[screen])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    try:
        page = context.new_page()
        signup(page, quick_server)
        new_conversation(page)
        turn(page, "Hello! I am trying out the demo before we use it for real work.")
        turn(page, FACT)  # message #3
        turn(page, QUESTION)  # answered from the window, and an echo for the search later
        dividers = page.locator('#transcript .divider.committed[data-trigger="auto"]')
        n = 0
        while dividers.count() < COMPACTIONS:
            n += 1
            assert n <= 12 * COMPACTIONS, f"{dividers.count()} compactions after {n} turns"
            turn(page, FILLER.format(n=n) * 3)
            page.wait_for_function("() => !document.querySelector('#transcript .divider.running')")

        turn(page, QUESTION)

        answer = page.locator("#transcript .message.assistant").last.locator("p").last
        expect(answer).to_contain_text("Ada Lovelace")
        expect(answer).to_contain_text(re.compile(r"message #3\b"))
        assert page.evaluate(SEEN, answer.element_handle()), (
            f"the answer is not on screen ({screen})"
        )
        page.screenshot(path=tmp_path / f"demo-memory-{screen}.png")
        print(f"screenshot: {tmp_path}/demo-memory-{screen}.png")
        refusals.assert_none(page)
    finally:
        context.close()


@pytest.mark.parametrize("screen", ["desktop-light", "phone-dark"])
def test_an_answer_from_another_conversation_links_to_its_message(
    browser, quick_server, screen, tmp_path
):
    context = browser.new_context(**SCREENS[screen])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    try:
        page = context.new_page()
        signup(page, quick_server)
        new_conversation(page)
        turn(page, "My cat is called Miso and she sleeps on the router.")  # message #1
        for n in range(1, 5):  # the message is scrolled out of view by the time it is linked
            turn(page, FILLER.format(n=n))
        home = conversation_id(page)
        new_conversation(page)
        turn(page, "The restart script is called restart.sh and lives in /opt/runbook.")

        turn(page, "What is my cat called?")

        answer = page.locator("#transcript .message.assistant").last.locator("p").last
        expect(answer).to_contain_text("Miso")
        link = answer.get_by_role("link", name=re.compile(rf"conversation {home}\b.*message #1"))
        expect(link).to_have_attribute("href", f"/conversations/{home}/?at=1#msg-1")
        page.screenshot(path=tmp_path / f"demo-answer-{screen}.png")
        link.click()
        page.wait_for_url(f"**/conversations/{home}/?at=1#msg-1")
        target = page.locator("#msg-1")
        expect(target).to_contain_text("My cat is called Miso")
        page.wait_for_function("() => document.querySelector(':target')?.id === 'msg-1'")
        page.wait_for_function(SEEN, arg=target.element_handle())
        page.screenshot(path=tmp_path / f"demo-link-{screen}.png")
        print(f"screenshots: {tmp_path}/demo-answer-{screen}.png, demo-link-{screen}.png")
        refusals.assert_none(page)
    finally:
        context.close()
