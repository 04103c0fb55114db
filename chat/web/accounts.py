"""Signing in and signing up, within the abuse limits (chat/limits.py).

Failed sign-ins are counted per account name and per client address: guessing one account's
password from many addresses, or many accounts' from one, both run into a limit. The address is
the connection's (behind a proxy, `make serve` takes it from the proxy's forwarded header).
"""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from chat import limits


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


class FailuresLimited:
    """For a login form: refuse once too many attempts failed; count each failure."""

    def clean(self):
        keys = [
            f"name:{(self.cleaned_data.get('username') or '').lower()}",
            f"addr:{client_address(self.request)}",
        ]
        try:
            for key in keys:
                limits.check(limits.LOGIN_FAILURES, key)
        except limits.Limited as exc:
            raise ValidationError(exc.reason, code="limited") from None
        try:
            return super().clean()
        except ValidationError:
            for key in keys:
                try:
                    limits.hit(limits.LOGIN_FAILURES, key)
                except limits.Limited:
                    pass  # this failure is answered as a failure; the next one is refused
            raise


class LimitedLoginForm(FailuresLimited, AuthenticationForm):
    pass


class LimitedAdminLoginForm(FailuresLimited, AdminAuthenticationForm):
    pass


def check_signup(request) -> None:
    """Before an account is created: Limited if this address made too many this hour."""
    limits.check(limits.SIGNUPS, client_address(request))


def count_signup(request) -> None:
    try:
        limits.hit(limits.SIGNUPS, client_address(request))
    except limits.Limited:
        pass  # the account exists already; the next attempt is refused by check_signup
