"""Device cookies (OWASP's defence against account lockout by strangers): a browser that has
signed in as a user holds a signed cookie naming that user and a random nonce, and its failed
sign-ins are counted against that device alone. Failures from browsers without one (anyone
else) are counted against "unknown clients of this account": a stranger guessing a password
locks out only other strangers, never the user's own browsers.

The cookie is signed with the secret key (HMAC, salted for this use), so it can be neither
forged nor moved to another account name; it says nothing about the password. One cookie per
browser: signing in as someone else replaces it.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core import signing
from django.utils.deprecation import MiddlewareMixin

COOKIE = "device"
SALT = "web.device_cookies"
MAX_AGE = 365 * 24 * 3600  # a year: the browser keeps its allowance between sign-ins


def signed_in(sender, request, user, **kwargs) -> None:
    """Every sign-in (the sign-in page, a sign-up, the admin's own page): its response gives
    the browser a device cookie (`DeviceCookieMiddleware`), whichever view signed it in."""
    if request is not None:
        request.device_user = user.get_username()


class DeviceCookieMiddleware(MiddlewareMixin):
    """Sets the cookie on the response of a request that signed someone in (`signed_in`)."""

    def process_response(self, request, response):
        username = getattr(request, "device_user", None)
        if username:
            issue(response, username)
        return response


def issue(response, username: str) -> None:
    """Give the browser a device cookie for `username` (after it signed in)."""
    value = signing.Signer(salt=SALT).sign(f"{username.lower()}:{secrets.token_urlsafe(16)}")
    response.set_cookie(
        COOKIE,
        value,
        max_age=MAX_AGE,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def device_of(request, username: str) -> str | None:
    """The nonce of the request's device cookie if it is valid and names `username`; None for
    an unknown client (no cookie, a forged or altered one, or one of another account)."""
    value = request.COOKIES.get(COOKIE) if request is not None else None
    if not value:
        return None
    try:
        named, nonce = signing.Signer(salt=SALT).unsign(value).rsplit(":", 1)
    except (signing.BadSignature, ValueError):
        return None
    return nonce if named == username.lower() else None


def failure_key(request, username: str) -> str:
    """Whose failed sign-ins an attempt counts against: this device's, or the account's
    unknown clients'."""
    nonce = device_of(request, username)
    return f"device:{nonce}" if nonce else f"name:{username.lower()}"
