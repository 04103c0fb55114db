"""Per-address limits count the address the deployment can vouch for: X-Forwarded-For is
believed only from the proxies TRUSTED_PROXIES names (none by default), against a real server
process started as `make serve` starts it."""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.servers import Server
from web import forwarded

pytestmark = pytest.mark.django_db(transaction=True)

NO_PROVIDER = "http://127.0.0.1:9"  # sign-ups ask no model


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # the 302 itself is the answer


def sign_up(server: Server, name: str, forwarded_for: str) -> bool:
    """One sign-up, as a fresh browser would, claiming to be `forwarded_for`: True if it made an
    account, False if the per-address limit refused it."""
    cookies = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(cookies), NoRedirects()
    )
    url = f"http://127.0.0.1:{server.port}/accounts/signup/"
    browser.open(url, timeout=30).read()
    token = next(cookie.value for cookie in cookies if cookie.name == "csrftoken")
    form = {"username": name, "password1": "a fine pass 123", "password2": "a fine pass 123"}
    request = urllib.request.Request(
        url,
        data=urllib.parse.urlencode(form | {"csrfmiddlewaretoken": token}).encode(),
        headers={"X-Forwarded-For": forwarded_for},
    )
    try:
        page = browser.open(request, timeout=30)
    except urllib.error.HTTPError as answer:
        assert answer.code == 302, answer.read()
        return True
    text = page.read().decode()
    assert page.status == 200 and "Too many attempts at signing up" in text, text
    return False


def test_a_client_cannot_choose_its_address_by_default(django_user_model):
    server = Server(NO_PROVIDER, SIGNUPS_PER_HOUR="5").start()
    try:
        made = [sign_up(server, f"new{n}", f"198.51.100.{n}") for n in range(12)]
    finally:
        server.stop()
    assert made == [True] * 5 + [False] * 7
    assert django_user_model.objects.count() == 5


def test_from_a_named_proxy_the_forwarded_address_counts(django_user_model):
    server = Server(NO_PROVIDER, SIGNUPS_PER_HOUR="5", TRUSTED_PROXIES="127.0.0.1").start()
    try:
        # Each its own address, as the proxy says: none is held up by another's count.
        made = [sign_up(server, f"new{n}", f"198.51.100.{n}") for n in range(8)]
        # A client writing addresses of its own before the proxy's hop gains nothing: the
        # proxy's hop (the rightmost not a named proxy) is the one that counts.
        spoofed = [
            sign_up(server, f"same{n}", f"192.0.2.{n}, 203.0.113.7, 127.0.0.1") for n in range(7)
        ]
    finally:
        server.stop()
    assert made == [True] * 8
    assert spoofed == [True] * 5 + [False] * 2


@pytest.mark.parametrize(
    ("peer", "header", "proxies", "expected"),
    [
        ("127.0.0.1", "198.51.100.1", (), "127.0.0.1"),  # no proxy named: the connection
        ("127.0.0.1", "198.51.100.1", ("127.0.0.1",), "198.51.100.1"),
        ("10.1.2.3", "198.51.100.1", ("127.0.0.1",), "10.1.2.3"),  # not a named proxy
        ("10.1.2.3", "1.1.1.1, 198.51.100.1, 10.0.0.9", ("10.0.0.0/8",), "198.51.100.1"),
        ("127.0.0.1", "", ("127.0.0.1",), "127.0.0.1"),
        ("127.0.0.1", "not an address", ("127.0.0.1",), "not an address"),
        ("::1", "2001:db8::5", ("::1",), "2001:db8::5"),
        ("10.0.0.1", "10.0.0.2, 10.0.0.3", ("*",), "10.0.0.2"),  # all trusted: the leftmost
    ],
)
def test_the_client_is_the_first_hop_from_the_right_that_is_not_a_named_proxy(
    peer, header, proxies, expected
):
    assert forwarded.client(peer, header, forwarded.networks(proxies)) == expected


def test_make_run_and_serve_leave_the_address_to_the_app():
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    servers = re.findall(r"uvicorn config\.asgi:application(?:[^\n]*\\\n)*[^\n]*", makefile)
    assert len(servers) == 2
    for command in servers:
        assert "--no-proxy-headers" in command and "--forwarded-allow-ips" not in command
