"""Signing in, signing up and resetting a password, within the abuse limits (chat/limits.py).

Failed sign-ins are counted per client address, and per account name for clients unknown to
it, or per device for a browser that signed in as that user before (its device cookie,
web/device_cookies.py): guessing one account's password from many addresses, or many accounts'
from one, both run into a limit, and neither locks the user's own browsers out. Each attempt
takes its place in the count before the password is checked, and a sign-in that succeeds gives
it back: so thirty attempts at once are thirty places, and only as many as the limit are
checked. The address is the connection's (behind a proxy, `make serve` takes it from the
proxy's forwarded header).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import login
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm, UserCreationForm
from django.contrib.auth.views import LoginView, PasswordResetView
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from chat import limits
from core.errors import ActionError
from web import device_cookies


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


def _take(limit: limits.Limit, keys: list[str]) -> None:
    """A place under `limit` for each key, or ValidationError saying which limit was reached."""
    try:
        for key in keys:
            limits.hit(limit, key)
    except limits.Limited as exc:
        raise ValidationError(exc.reason, code="limited") from None


class FailuresLimited:
    """For a login form: every attempt counts as a failure until it succeeds."""

    def clean(self):
        keys = [
            device_cookies.failure_key(self.request, self.cleaned_data.get("username") or ""),
            f"addr:{client_address(self.request)}",
        ]
        _take(limits.LOGIN_FAILURES, keys)
        cleaned = super().clean()  # a wrong password raises: its places stay taken
        for key in keys:
            limits.release(limits.LOGIN_FAILURES, key)
        return cleaned


class LimitedLoginForm(FailuresLimited, AuthenticationForm):
    pass


class LimitedAdminLoginForm(FailuresLimited, AdminAuthenticationForm):
    pass


class LimitedLoginView(LoginView):
    """Django's sign-in, counting failures (a browser that signs in gets a device cookie, as
    every sign-in does: web/device_cookies.py)."""

    authentication_form = LimitedLoginForm


class LimitedPasswordResetForm(PasswordResetForm):
    """Each request sends an email: limited per client address and per address asked for, so
    neither a mailbox nor the mail server can be flooded from here."""

    def __init__(self, *args, request=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request

    def clean(self):
        cleaned = super().clean()
        email = (cleaned.get("email") or "").lower()
        keys = [f"addr:{client_address(self.request)}"] + ([f"email:{email}"] if email else [])
        try:
            _take(limits.PASSWORD_RESETS, keys)
        except ValidationError as exc:
            self.add_error("email", exc)  # the page shows the email field's errors
        return cleaned


class LimitedPasswordResetView(PasswordResetView):
    form_class = LimitedPasswordResetForm

    def get_form_kwargs(self):
        return super().get_form_kwargs() | {"request": self.request}


def take_signup(request) -> None:
    """Before an account is created: a place among this address's sign-ups this hour, or
    ActionError. Given back with `give_back_signup` if the form turns out to be wrong."""
    limits.hit(limits.SIGNUPS, client_address(request))


def give_back_signup(request) -> None:
    limits.release(limits.SIGNUPS, client_address(request))


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.ALLOW_SIGNUP:
        raise Http404("Sign-up is switched off.")
    form = UserCreationForm(request.POST or None)
    if request.method == "POST":
        try:
            take_signup(request)
        except ActionError as exc:
            form.add_error(None, exc.reason)
        else:
            try:
                if form.is_valid():
                    user = form.save()
                    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                    return redirect("home")
            except IntegrityError:  # the same name, created at the same moment by another
                form.add_error("username", "A user with that username already exists.")
            give_back_signup(request)
    return render(request, "registration/signup.html", {"form": form})
