"""Sign-in limits a stranger cannot turn against a user (OWASP's device cookies): a browser that
signed in as the user before keeps its own allowance; failures from unknown clients lock out
only unknown clients; per-address limits stay. Each attempt comes from its own address
(REMOTE_ADDR), so the per-address limit is not what refuses."""

from __future__ import annotations

import itertools

import pytest
from django.conf import settings
from django.test import Client

from web import device_cookies

pytestmark = pytest.mark.django_db

LIMIT = 10
PASSWORD = "alice-password-1"
addresses = (f"198.51.100.{n}" for n in itertools.count(1))


@pytest.fixture(autouse=True)
def limit(settings):
    settings.LOGIN_FAILURES_PER_15_MINUTES = LIMIT


def sign_in(client: Client, password: str, username: str = "alice") -> str:
    answer = client.post(
        "/accounts/login/",
        {"username": username, "password": password},
        REMOTE_ADDR=next(addresses),
    )
    assert answer.status_code < 500
    if answer.status_code == 302:
        return "signed in"
    return "refused" if "Too many attempts" in answer.content.decode() else "wrong"


def known_browser() -> Client:
    """A browser alice has signed in from: it holds her device cookie, and is signed out."""
    browser = Client()
    assert sign_in(browser, PASSWORD) == "signed in"
    assert device_cookies.COOKIE in browser.cookies
    del browser.cookies[settings.SESSION_COOKIE_NAME]
    return browser


def test_thirty_strangers_lock_out_strangers_but_not_alices_own_browser(alice):
    own = known_browser()
    outcomes = [sign_in(Client(), f"guess {n}") for n in range(30)]
    assert outcomes == ["wrong"] * LIMIT + ["refused"] * (30 - LIMIT)

    assert sign_in(own, PASSWORD) == "signed in"  # at once, with its device cookie
    assert sign_in(Client(), PASSWORD) == "refused"  # a new client is refused

    # A cookie that is altered, or names another account, makes no client known.
    forged = Client()
    value = own.cookies[device_cookies.COOKIE].value
    forged.cookies[device_cookies.COOKIE] = value.replace("alice:", "alice:x", 1)
    assert sign_in(forged, PASSWORD) == "refused"


def test_a_devices_own_failures_lock_that_device_only(alice):
    guessing, other = known_browser(), known_browser()
    outcomes = [sign_in(guessing, f"guess {n}") for n in range(LIMIT + 2)]
    assert outcomes == ["wrong"] * LIMIT + ["refused"] * 2
    assert sign_in(guessing, PASSWORD) == "refused"

    assert sign_in(other, PASSWORD) == "signed in"  # alice's other browser
    assert sign_in(Client(), PASSWORD) == "signed in"  # and one she has never used


def test_a_device_cookie_of_another_account_counts_as_unknown(alice, bob):
    bobs = Client()
    assert sign_in(bobs, "bob-password-1", "bob") == "signed in"
    del bobs.cookies[settings.SESSION_COOKIE_NAME]
    for n in range(LIMIT):
        assert sign_in(Client(), f"guess {n}") == "wrong"
    assert sign_in(bobs, PASSWORD) == "refused"  # bob's browser is a stranger to alice's account


def test_the_per_address_limit_stays(alice):
    own = known_browser()
    for n in range(LIMIT):
        own.post(
            "/accounts/login/", {"username": f"name{n}", "password": "x"}, REMOTE_ADDR="203.0.113.9"
        )
    answer = own.post(
        "/accounts/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="203.0.113.9"
    )
    assert "Too many attempts" in answer.content.decode()


def test_the_admins_own_sign_in_page_gives_a_device_cookie_too():
    """An admin signing in at /admin/login/ keeps an allowance of their own: else a stranger
    guessing that password would lock the admin out, the case the cookies are for."""
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("root", password="root-password-1")
    browser = Client()
    answer = browser.post(
        "/admin/login/",
        {"username": "root", "password": "root-password-1", "next": "/admin/"},
        REMOTE_ADDR=next(addresses),
    )
    assert answer.status_code == 302
    assert device_cookies.COOKIE in browser.cookies
