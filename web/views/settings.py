"""The settings page (/settings/): the person's account (change the password, log out
everywhere, delete the account), the defaults of their new conversations, their theme, and every
conversation in one file.

Each section is its own form posting to its own URL. With htmx, the defaults and the password
answer with their form drawn again and the section's notice (out of band, into a live region
that stays in the page, so screen readers read it), where the person pressed the button. Without
it, a form that succeeds comes back to the page at its section (the notice waits in the session
for that one page); one refused is drawn again at its section with the reason, as a 400.
Ending the sessions and deleting the account leave for the sign-in page.
"""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth import logout, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from chat import account, controls, limits, preferences
from chat.exports import as_json, downloads
from core.clean import SYSTEM_PROMPT, clean
from core.errors import ActionError
from providers import registry
from web import sessions

TEMPLATE = "settings/page.html"
# The notice a form's redirect leaves for the page it lands on: (section, text, is an error).
NOTICE_KEY = "settings_notice"
WRONG_PASSWORD = "That is not your password."
# Where the page comes back to after a form without htmx: the notice (at the top of the screen),
# or the theme's whole section, short enough to show its choices and the notice under them.
ANCHORS = {"theme": "theme"}


@login_required
@require_GET
def settings_page(request: HttpRequest) -> HttpResponse:
    notice = request.session.pop(NOTICE_KEY, None)
    return render(request, TEMPLATE, _context(request, notice=notice))


def _context(request: HttpRequest, *, notice=None, **forms) -> dict:
    """The page's context; `forms` may hold the password form as posted, and the system prompt
    typed into a refused defaults form."""
    prefs = preferences.stored(request.user)
    chosen = preferences.defaults(prefs)
    section, text, error = notice or (None, "", False)
    return {
        "password_form": forms.get("password_form") or PasswordChangeForm(request.user),
        "defaults": chosen,
        "controls": controls.form(chosen),
        "models": registry.available_models(),
        "themes": preferences.THEMES.choices,
        "chosen_theme": prefs.theme,
        # What was typed into a refused defaults form (without htmx, the page is drawn again).
        "posted_prompt": forms.get("posted_prompt"),
        "notice": {"section": section, "text": text, "error": error},
    }


def _answer(
    request, section: str, text: str, *, error: bool = False, whole: bool = False, **forms
) -> HttpResponse:
    """What a section's form gets back: its part of the page and its notice (htmx, unless the
    page must be drawn `whole`), or the page at that section (drawn again with the reason when
    refused, else after a redirect)."""
    if request.htmx and not whole:
        context = _context(request, notice=(section, text, error), **forms) | {"oob": True}
        return render(request, f"{TEMPLATE}#{section}-answer", context)
    if error:
        return render(
            request, TEMPLATE, _context(request, notice=(section, text, error), **forms), status=400
        )
    request.session[NOTICE_KEY] = (section, text, error)
    return redirect(reverse("settings") + f"#{ANCHORS.get(section, f'{section}-notice')}")


@login_required
@require_POST
def settings_defaults(request: HttpRequest) -> HttpResponse:
    """The defaults of the person's new conversations: a model offered here, a system prompt
    within its limits, review before compacting, and the compaction controls."""
    post = request.POST
    try:
        preferences.save_defaults(
            request.user,
            model=post.get("model", ""),
            system_prompt=clean(post.get("system_prompt", ""), SYSTEM_PROMPT),
            review_compactions=post.get("review_compactions") == "on",
            controls=controls.read(
                post.get("auto_compact_at"), post.get("keep_tail_share"), post.get("summary_model")
            ),
        )
    except ActionError as exc:
        reason = f"Defaults not saved. {exc.reason}"
        return _answer(
            request, "defaults", reason, error=True, posted_prompt=post.get("system_prompt")
        )
    return _answer(request, "defaults", "Defaults saved: new conversations start with them.")


@login_required
@require_POST
def settings_password(request: HttpRequest) -> HttpResponse:
    """A new password, with the current one. This session stays signed in; every other one
    ends (the password is in each session's check), and the person's sockets close."""
    form = PasswordChangeForm(request.user, request.POST)
    try:
        valid = _password_checked(request, form.is_valid)
    except ActionError as exc:
        return _answer(request, "password", exc.reason, error=True, password_form=form)
    if not valid:
        return _answer(
            request, "password", "Password not changed: see below.", error=True, password_form=form
        )
    update_session_auth_hash(request, form.save())
    return _answer(
        request, "password", "Password changed. You are still signed in here, and nowhere else."
    )


@login_required
@require_POST
def settings_logout_everywhere(request: HttpRequest) -> HttpResponse:
    """End every session of the person's, this one too, and close their sockets."""
    ended = sessions.end_every_session(request.user.pk)
    logout(request)
    flash.success(request, f"Logged out everywhere: {ended:,} session{'s'[: ended != 1]} ended.")
    return redirect("login")


@login_required
@require_POST
def settings_delete_account(request: HttpRequest) -> HttpResponse:
    """Delete the account and everything in it, once the person has confirmed with their
    password; then sign the browser out."""
    user = request.user
    password = request.POST.get("password", "")
    try:
        confirmed = _password_checked(request, lambda: user.check_password(password))
    except ActionError as exc:
        return _answer(request, "delete", exc.reason, error=True)
    if not confirmed:
        reason = f"Nothing was deleted: {WRONG_PASSWORD}"
        return _answer(request, "delete", reason, error=True)
    sessions.end_every_session(user.pk)
    logout(request)
    account.delete_account(user)
    flash.success(request, "Your account and everything in it were deleted.")
    if request.htmx:
        return HttpResponse(headers={"HX-Redirect": reverse("login")})
    return redirect("login")


def _password_checked(request: HttpRequest, check) -> bool:
    """`check()`, a check of the person's password, counted as a sign-in attempt on their name
    (chat/limits.py): a session in the wrong hands cannot guess the password here faster than
    at the sign-in page. Limited (ActionError) past the limit."""
    key = f"name:{request.user.get_username().lower()}"
    limits.hit(limits.LOGIN_FAILURES, key)
    if not check():
        return False
    limits.release(limits.LOGIN_FAILURES, key)
    return True


@login_required
@require_POST
def settings_theme(request: HttpRequest) -> HttpResponse:
    """The theme of every page: the system's, light or dark. A whole page load (the theme is
    drawn from <html> down), back to the theme's section."""
    try:
        prefs = preferences.save_theme(request.user, request.POST.get("theme"))
    except ActionError as exc:
        return _answer(request, "theme", f"Theme not changed. {exc.reason}", error=True, whole=True)
    return _answer(
        request, "theme", f"Theme saved: {prefs.get_theme_display().lower()}.", whole=True
    )


@login_required
@require_GET
def settings_export(request: HttpRequest) -> StreamingHttpResponse:
    """Every conversation as one JSON file, written as it is read, that import takes back."""
    pieces = as_json.everything_json(request.user)
    response = StreamingHttpResponse(
        downloads.served_async(pieces) if isinstance(request, ASGIRequest) else pieces,
        content_type="application/json; charset=utf-8",
    )
    filename = f"conversations-{timezone.now():%Y-%m-%d}.json"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
