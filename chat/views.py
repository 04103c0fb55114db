"""Flat function views. Each looks data up through `owned_by(request.user)` or an action that
does, so another user's conversation is a 404 and never a leak."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

import providers
from compaction.loading import load_panel, load_window
from search.messages import MAX_LIMIT, search
from search.text import marked
from tools import registry

from . import accounts, actions, clean, exports, fragments, imports, sidebar, transcript
from .errors import ActionError
from .models import Conversation, Pin


def _owned(request: HttpRequest, conversation_id: int) -> Conversation:
    return get_object_or_404(Conversation.objects.owned_by(request.user), pk=conversation_id)


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.ALLOW_SIGNUP:
        raise Http404("Sign-up is switched off.")
    form = UserCreationForm(request.POST or None)
    if request.method == "POST":
        try:
            accounts.check_signup(request)
        except ActionError as exc:
            form.add_error(None, exc.reason)
        if form.is_valid():
            user = form.save()
            accounts.count_signup(request)
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect("home")
    return render(request, "registration/signup.html", {"form": form})


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    # The latest of the listed ones: an archived conversation is not where anyone starts.
    latest = Conversation.objects.owned_by(request.user).filter(archived_at__isnull=True).first()
    if latest:
        url = reverse("conversation", args=[latest.pk])
        if request.GET.get("sidebar") == sidebar.ARCHIVED:
            url += f"?sidebar={sidebar.ARCHIVED}"  # the no-script way to the archived list
        return redirect(url)
    return render(request, "chat/empty.html", _sidebar(request))


@login_required
@require_POST
def conversation_create(request: HttpRequest) -> HttpResponse:
    """Create on the model picked (`model`; none: the default). A model not offered here gets
    a 400 naming the ones that are, and nothing is created."""
    try:
        conversation = actions.create_conversation(
            request.user, model=request.POST.get("model") or None
        )
    except ActionError as exc:
        context = _sidebar(request) | {"create_error": exc.reason}
        return render(request, "chat/empty.html", context, status=400)
    return redirect("conversation", conversation_id=conversation.pk)


@login_required
@require_POST
def conversation_import(request: HttpRequest) -> HttpResponse:
    """Import export.json or ChatGPT's conversations.json; opens the (first) imported
    conversation. A bad file gets its reason and creates nothing."""
    upload = request.FILES.get("file")
    try:
        if upload is None:
            raise ActionError("Choose a file to import (export.json or conversations.json).")
        imports.check_size(upload.size)
        created = imports.store(request.user, imports.parse(upload.read()))
    except ActionError as exc:
        context = _sidebar(request) | {"import_error": exc.reason}
        return render(request, "chat/empty.html", context, status=400)
    if len(created) > 1:
        flash.success(request, f"Imported {len(created):,} conversations.")
    return redirect("conversation", conversation_id=created[0].pk)


def _sidebar(request: HttpRequest, current: Conversation | None = None) -> dict:
    """What every page's sidebar needs: its first page of conversations (`?sidebar=archived`:
    the archived ones, the no-script way to that list) and the Undo of a delete that brought
    the browser here."""
    model = current.model if current else providers.default_model()
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
        "demo": providers.capabilities(model).offline,
        # The "+ New conversation" form's picker, and the header's model with its budget.
        "models": providers.available_models(),
        "current_model": providers.model_info(current.model) if current else None,
    }


@login_required
@require_GET
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = _owned(request, conversation_id)
    panel = load_panel(conversation, load_window(conversation))
    context = _sidebar(request, conversation) | {
        "page": transcript.page(
            conversation,
            before=None,
            limit=settings.PAGE_MESSAGES,
            reaching=_number(request.GET.get("at")),  # a search hit to jump to
        ),
        "ctx": panel,
        "draft": panel.draft,  # a summary waiting for review shows on load, not only when drafted
        "conversation": conversation,
    }
    if request.htmx and request.GET.get("part") == "transcript":
        # Reconnect: the tab re-fetches the transcript and replaces its own copy wholesale.
        return render(request, "chat/conversation.html#transcript", context)
    return render(request, "chat/conversation.html", context)


@login_required
@require_GET
def conversation_older(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = _owned(request, conversation_id)
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        return HttpResponse("Say which messages: ?before=<seq>.", status=400)
    page = transcript.page(conversation, before=before, limit=settings.PAGE_MESSAGES)
    return render(
        request, "chat/conversation.html#older", {"page": page, "conversation": conversation}
    )


@login_required
@require_GET
def conversation_context(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = _owned(request, conversation_id)
    context = {
        "ctx": load_panel(conversation, load_window(conversation)),
        "conversation": conversation,
    }
    return render(request, "chat/conversation.html#context", context)


@login_required
@require_GET
def conversation_window(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """'What the model sees': exactly the window that export.json reports."""
    conversation = _owned(request, conversation_id)
    state = load_window(conversation)
    return render(
        request,
        "chat/conversation.html#model-view",
        {
            "window": state.window(),
            "tokens": state.tokens,
            "has_summary": state.boundary is not None,
            "conversation": conversation,
        },
    )


@login_required
@require_POST
def conversation_rename(request: HttpRequest, conversation_id: int) -> HttpResponse:
    _owned(request, conversation_id)
    try:
        actions.rename_conversation(request.user, conversation_id, request.POST.get("title", ""))
    except actions.ActionError as exc:
        flash.error(request, exc.reason)
    return redirect("conversation", conversation_id=conversation_id)


@login_required
@require_POST
def conversation_settings(request: HttpRequest, conversation_id: int) -> HttpResponse:
    _owned(request, conversation_id)
    try:
        actions.update_settings(
            request.user,
            conversation_id,
            system_prompt=request.POST.get("system_prompt", ""),
            review_compactions=request.POST.get("review_compactions") == "on",
        )
    except actions.ActionError as exc:
        flash.error(request, f"Settings not saved. {exc.reason}")
    else:
        flash.success(request, "Settings saved.")
    return redirect("conversation", conversation_id=conversation_id)


@login_required
@require_POST
def conversation_delete(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Delete, then offer to undo it. From the sidebar of another conversation, the list is
    drawn again in place; the open conversation (or a plain form) goes on to the next page,
    which shows the Undo (kept in the session for that one page)."""
    _owned(request, conversation_id)
    conversation = actions.delete_conversation(request.user, conversation_id)
    deleted = {"pk": conversation.pk, "title": conversation.title}
    if request.htmx and _number(request.POST.get("current")) != conversation.pk:
        return _sidebar_changed(request, _deleted_notice(deleted, reopen=False))
    request.session[DELETED_KEY] = deleted
    if request.htmx:
        return HttpResponseClientRedirect(reverse("home"))
    back = _back(request)
    gone = reverse("conversation", args=[conversation.pk])
    return redirect(back if back and not back.startswith(gone) else "home")


# --- the sidebar ---------------------------------------------------------------------------------
# Its actions answer htmx with the list drawn again (as many rows as the page showed, a figure
# static/js/sidebar.js sends) and the notice; a plain form gets a redirect back and a flash
# message.

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
        "current_id": _number(request.GET.get("current")),
        "back": _back(request),
    }
    return render(request, f"chat/sidebar.html#{'page' if after else 'conversations'}", context)


@login_required
@require_POST
def conversation_pin(request: HttpRequest, conversation_id: int) -> HttpResponse:
    pinned = request.POST.get("pinned") == "1"
    try:
        conversation = actions.pin_conversation(request.user, conversation_id, pinned)
    except ActionError as exc:
        return _plain(exc.reason, status=404)
    done = "Pinned" if pinned else "Unpinned"
    return _sidebar_changed(request, sidebar.Notice(f"{done} “{conversation.title}”."))


@login_required
@require_POST
def conversation_archive(request: HttpRequest, conversation_id: int) -> HttpResponse:
    archived = request.POST.get("archived") == "1"
    try:
        conversation = actions.archive_conversation(request.user, conversation_id, archived)
    except ActionError as exc:
        return _plain(exc.reason, status=404)
    title = conversation.title
    if not archived:
        return _sidebar_changed(request, sidebar.Notice(f"Unarchived “{title}”."))
    notice = sidebar.Notice(
        f"Archived “{title}”: it is under “Archived conversations” at the end of the list.",
        pk=conversation.pk,
        undo_url=reverse("conversation-archive", args=[conversation.pk]),
        undo_fields=(("archived", "0"),),
        undo_label=f"Undo archiving “{title}”",
    )
    return _sidebar_changed(request, notice)


@login_required
@require_POST
def conversation_restore(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Undo a delete, within UNDO_DELETE_SECONDS; later, it says so and changes nothing."""
    try:
        conversation = actions.restore_conversation(request.user, conversation_id)
    except actions.UndoExpired as exc:
        return _sidebar_changed(request, sidebar.Notice(exc.reason, error=True))
    except ActionError as exc:
        return _plain(exc.reason, status=404)
    notice = sidebar.Notice(f"Restored “{conversation.title}”.")
    if request.htmx:
        return _sidebar_changed(request, notice)
    flash.success(request, notice.text)
    return redirect("conversation", conversation_id=conversation.pk)


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
        "current_id": _number(request.POST.get("current")),
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


@login_required
@require_POST
def message_pin(request: HttpRequest, message_id: int) -> HttpResponse:
    try:
        message = actions.set_pinned(request.user, message_id, request.POST.get("pinned") == "1")
    except actions.ActionError as exc:
        raise Http404(exc.reason) from None
    pinned = Pin.objects.filter(message=message).exists()
    item = transcript.Item(
        kind="message",
        message=message,
        pinned=pinned,
        outside_window=message.seq < transcript.first_kept_seq(message.conversation),
    )
    return HttpResponse(fragments.message(item))


@login_required
@require_GET
def conversation_export(request: HttpRequest, conversation_id: int) -> JsonResponse:
    conversation = _owned(request, conversation_id)
    response = JsonResponse(
        exports.conversation_json(conversation), json_dumps_params={"ensure_ascii": False}
    )
    filename = exports.filename(conversation, "json")
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response


@login_required
@require_GET
def conversation_export_markdown(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The transcript as a Markdown download, streamed as it is written (see chat/exports.py)."""
    conversation = _owned(request, conversation_id)
    pieces = exports.conversation_markdown(conversation)
    response = StreamingHttpResponse(
        exports.served_async(pieces) if isinstance(request, ASGIRequest) else pieces,
        content_type="text/markdown; charset=utf-8",
    )
    filename = exports.filename(conversation, "md")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def conversation_search(request: HttpRequest, conversation_id: int) -> JsonResponse:
    """The conversation's whole transcript (compacted part included), best hits first: the same
    function the model's `search_history` tool calls."""
    conversation = _owned(request, conversation_id)
    limit = _limit(request.GET.get("limit"))
    if limit is None:
        return JsonResponse({"error": f"limit must be a number from 1 to {MAX_LIMIT}."}, status=400)
    try:
        query = clean.clean(request.GET.get("q"), clean.QUERY)
    except ActionError as exc:
        return JsonResponse({"error": exc.reason}, status=400)
    hits = search(request.user, query, conversation_id=conversation.pk, limit=limit)
    return JsonResponse(
        {
            "query": query,
            "hits": [
                {
                    "seq": h.seq,
                    "role": h.role,
                    "snippet": marked(h.snippet, "**", "**"),
                    "score": h.score,
                    "created_at": h.created_at.isoformat(),
                    "on_branch": h.fork is None,
                    "shown_at": h.shown_seq,
                }
                for h in hits
            ],
        }
    )


@login_required
@require_GET
def search_page(request: HttpRequest, conversation_id: int | None = None) -> HttpResponse:
    """Search for people: all their conversations (the sidebar's box), or one (the header's).
    Each hit links to its message in the conversation, which the page scrolls to and marks."""
    conversation = _owned(request, conversation_id) if conversation_id is not None else None
    try:
        query = clean.clean(request.GET.get("q"), clean.QUERY)
    except ActionError as exc:
        return HttpResponse(exc.reason, status=400, content_type="text/plain; charset=utf-8")
    hits = search(
        request.user, query, conversation_id=conversation_id, limit=settings.SEARCH_PAGE_HITS
    )
    context = {"query": query, "hits": hits, "scope": conversation}
    if request.htmx:
        return render(request, "chat/search.html#results", context)
    return render(request, "chat/search.html", _sidebar(request, conversation) | context)


def _number(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _limit(value: str | None) -> int | None:
    if value in (None, ""):
        return 10
    try:
        limit = int(value)
    except ValueError:
        return None
    return limit if 1 <= limit <= MAX_LIMIT else None


@login_required
@require_http_methods(["GET", "POST"])
async def conversation_tools(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The conversation's tool switches: every tool the chat has (built-in and MCP), on or off.
    Async: listing MCP tools talks to the servers this process keeps running."""
    user = await request.auser()
    conversation = await Conversation.objects.owned_by(user).filter(pk=conversation_id).afirst()
    if conversation is None:
        raise Http404("No such conversation.")
    tools = await registry.available()
    saved = False
    if request.method == "POST":
        listed = {t.name for t in tools}
        enabled = set(request.POST.getlist("enabled"))
        # A tool of a server that is down now keeps the switch it had.
        kept = [name for name in conversation.disabled_tools if name not in listed]
        conversation.disabled_tools = sorted({*kept, *(listed - enabled)})
        await conversation.asave(update_fields=["disabled_tools", "updated_at"])
        if not request.htmx:
            return redirect("conversation", conversation.pk)
        saved = True
    off = set(conversation.disabled_tools)
    context = {
        "conversation": conversation,
        "tools": [(t, t.name not in off) for t in tools],
        "saved": saved,
    }
    return render(request, "chat/conversation.html#tools", context)
