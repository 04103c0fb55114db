"""The sidebar's views: its list and next pages, what its rows' menus do (pin, archive, delete,
and undo a delete), and what every page's sidebar needs (`page_context`).

Its actions answer htmx with the list drawn again (as many rows as the page showed, a figure
static/js/sidebar.js sends) and the notice; a plain form gets a redirect back and a flash
message.
"""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from chat import conversations, preferences, sidebar
from chat.models import Conversation
from core.clean import number
from core.errors import ActionError
from providers import registry


def page_context(request: HttpRequest, current: Conversation | None = None) -> dict:
    """What every page's sidebar needs: its first page of conversations (`?sidebar=archived`:
    the archived ones, the no-script way to that list) and the Undo of a delete that brought
    the browser here."""
    model = current.model if current else registry.default_model()
    view = sidebar.ARCHIVED if request.GET.get("sidebar") == sidebar.ARCHIVED else sidebar.MAIN

    def notice() -> sidebar.Notice | None:
        deleted = request.session.pop(DELETED_KEY, None)
        return _deleted_notice(deleted, reopen=True) if deleted else None

    # Lazy: a view that answers htmx with a fragment of its page (the transcript on reconnect)
    # builds this context too, and must neither query the list nor use up the Undo.
    return {
        "sidebar": SimpleLazyObject(lambda: sidebar.page(request.user, view=view)),
        "current": current,
        "current_id": current.pk if current else None,
        "notice": SimpleLazyObject(notice),
        "back": request.get_full_path() if request.method == "GET" else None,
        "demo": registry.capabilities(model).offline,
        # The "+ New conversation" form's picker (the person's default model chosen), and the
        # header's model with its budget.
        "models": preferences.picker(preferences.stored(request.user)),
        "current_model": registry.model_info(current.model) if current else None,
    }


# The session key of a conversation just deleted, for the Undo on the page that follows.
DELETED_KEY = "sidebar_deleted"


@login_required
@require_GET
def sidebar_list(request: HttpRequest, view: str = sidebar.MAIN) -> HttpResponse:
    """The list (htmx: the archived one and back), or with `?after=`, its next page. Opened
    as a page (no script, a new tab), it is the home page with that list in its sidebar."""
    if not request.htmx:
        return redirect(reverse("home") + ("?sidebar=archived" if view == sidebar.ARCHIVED else ""))
    try:
        after = sidebar.cursor(request.GET.get("after"))
    except ValueError:
        return _plain("That is not a place in the list: reload the page.", status=400)
    context = {
        "sidebar": sidebar.page(request.user, view=view, after=after),
        "current_id": number(request.GET.get("current")),
        "back": _back(request),
    }
    return render(request, f"chat/sidebar.html#{'page' if after else 'conversations'}", context)


# A row menu's switches: the action that sets it, and the form field that says on or off.
SWITCHES = {
    "pin": (conversations.pin_conversation, "pinned"),
    "archive": (conversations.archive_conversation, "archived"),
}


@login_required
@require_POST
def conversation_switch(request: HttpRequest, conversation_id: int, switch: str) -> HttpResponse:
    """Pin or unpin, archive or unarchive, from a row's menu."""
    action, field = SWITCHES[switch]
    on = request.POST.get(field) == "1"
    try:
        conversation = action(request.user, conversation_id, on)
    except ActionError as exc:
        return _plain(exc.reason, status=404)
    return _sidebar_changed(request, _switched(switch, on, conversation))


def _switched(switch: str, on: bool, conversation: Conversation) -> sidebar.Notice:
    title = conversation.title
    if switch == "pin":
        return sidebar.Notice(f"{'Pinned' if on else 'Unpinned'} “{title}”.")
    if not on:
        return sidebar.Notice(f"Unarchived “{title}”.")
    return sidebar.Notice(
        f"Archived “{title}”: it is under “Archived conversations” at the end of the list.",
        pk=conversation.pk,
        undo_url=reverse("conversation-archive", args=[conversation.pk]),
        undo_fields=(("archived", "0"),),
        undo_label=f"Undo archiving “{title}”",
    )


@login_required
@require_POST
def conversation_restore(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Undo a delete, within UNDO_DELETE_SECONDS; later, it says so and changes nothing."""
    try:
        conversation = conversations.restore_conversation(request.user, conversation_id)
    except conversations.UndoExpired as exc:
        return _sidebar_changed(request, sidebar.Notice(exc.reason, error=True))
    except ActionError as exc:
        return _plain(exc.reason, status=404)
    notice = sidebar.Notice(f"Restored “{conversation.title}”.")
    if request.htmx:
        return _sidebar_changed(request, notice)
    flash.success(request, notice.text)
    return redirect("conversation", conversation_id=conversation.pk)


@login_required
@require_POST
def conversation_delete(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Delete, then offer to undo it. From the sidebar of another conversation, the list is
    drawn again in place; the open conversation (or a plain form) goes on to the next page,
    which shows the Undo (kept in the session for that one page)."""
    try:
        conversation = conversations.delete_conversation(request.user, conversation_id)
    except ActionError as exc:
        raise Http404(exc.reason) from None
    deleted = {"pk": conversation.pk, "title": conversation.title}
    if request.htmx and number(request.POST.get("current")) != conversation.pk:
        return _sidebar_changed(request, _deleted_notice(deleted, reopen=False))
    request.session[DELETED_KEY] = deleted
    if request.htmx:
        return HttpResponseClientRedirect(reverse("home"))
    back = _back(request)
    gone = reverse("conversation", args=[conversation.pk])
    return redirect(back if back and not back.startswith(gone) else "home")


def _deleted_notice(deleted: dict, *, reopen: bool) -> sidebar.Notice:
    title = deleted["title"]
    return sidebar.Notice(
        f"Deleted “{title}”.",
        pk=deleted["pk"],
        undo_url=reverse("conversation-restore", args=[deleted["pk"]]),
        undo_label=f"Undo deleting “{title}”",
        reopen=reopen,
    )


def _sidebar_changed(request: HttpRequest, notice: sidebar.Notice) -> HttpResponse:
    if not request.htmx:
        (flash.error if notice.error else flash.success)(request, notice.text)
        return redirect(_back(request) or "home")
    view = sidebar.view_of(request.POST.get("view"))
    context = {
        "sidebar": sidebar.page(
            request.user, view=view, size=sidebar.shown(request.POST.get("shown"))
        ),
        "current_id": number(request.POST.get("current")),
        "notice": notice,
        "back": _back(request),
    }
    return render(request, "chat/sidebar.html#changed", context)


def _back(request: HttpRequest) -> str | None:
    """The page the sidebar is on: where a plain form returns to, and the `next` its forms
    carry. Only a path on this site."""
    if request.method == "POST":
        url = request.POST.get("next")
    elif request.htmx:
        url = request.htmx.current_url_abs_path
    else:
        url = request.get_full_path()
    safe = url and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return url if safe else None


def _plain(text: str, *, status: int) -> HttpResponse:
    # htmx puts a refusal's text in the sidebar's notice (sidebar.js); a plain form shows it as is.
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")
