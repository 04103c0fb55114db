"""Flat function views. Each looks data up through `owned_by(request.user)` or an action that
does, so another user's conversation is a 404 and never a leak."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

import providers
from compaction.loading import load_panel, load_window
from compaction.models import Compaction
from search.messages import MAX_LIMIT, search
from search.text import marked
from tools import registry

from . import accounts, actions, clean, fragments, imports, transcript
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
    latest = Conversation.objects.owned_by(request.user).first()
    if latest:
        return redirect("conversation", conversation_id=latest.pk)
    return render(request, "chat/empty.html", _sidebar(request))


@login_required
@require_POST
def conversation_create(request: HttpRequest) -> HttpResponse:
    conversation = actions.create_conversation(request.user)
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
    model = current.model if current else providers.default_model()
    return {
        "conversations": Conversation.objects.owned_by(request.user).only("id", "title")[:200],
        "current": current,
        "demo": providers.capabilities(model).offline,
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
    _owned(request, conversation_id)
    actions.delete_conversation(request.user, conversation_id)
    return redirect("home")


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
    state = load_window(conversation)
    data = {
        "id": conversation.pk,
        "title": conversation.title,
        "model": conversation.model,
        "system_prompt": conversation.system_prompt,
        "messages": [
            {
                "seq": m.seq,
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "tokens": m.tokens,
                "usage": m.usage,
                "created_at": m.created_at.isoformat(),
            }
            for m in conversation.messages.order_by("seq").iterator()
        ],
        "compactions": [
            {
                "id": c.pk,
                "trigger": c.trigger,
                "pre_tokens": c.pre_tokens,
                "post_tokens": c.post_tokens,
                "first_kept_seq": c.first_kept_seq,
                "summary": c.summary,
                "summariser": c.summariser,
                "status": c.status,
                "created_at": c.created_at.isoformat(),
            }
            for c in Compaction.objects.filter(conversation=conversation).order_by("id")
        ],
        "window": {**state.window().as_request(), "tokens": state.tokens},
    }
    response = JsonResponse(data, json_dumps_params={"ensure_ascii": False})
    response["Content-Disposition"] = f'inline; filename="conversation-{conversation.pk}.json"'
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
