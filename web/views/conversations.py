"""Flat function views for the conversation pages. Each looks data up through owned.py
(`owned_or_404`; `aowned_or_404` in the async one) or an action scoped to the user, so another
user's conversation is a 404 and never a leak."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chat import attachments, compactions, controls, conversations, transcript
from chat.figures import load_figures, load_panel
from chat.window_loading import load_window
from core.clean import MESSAGE, SUMMARY, SYSTEM_PROMPT, TITLE, clean, number
from core.errors import ActionError
from render import frames, window_view
from tools import registry as tools
from web.views.owned import aowned_or_404, owned_or_404
from web.views.sidebar import page_context

# The message typed on the home page, for its new conversation's page to send: kept in the
# session for the one redirect (never in the URL, where history and logs would keep it).
FIRST_MESSAGE_KEY = "first_message"


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """A new chat: an empty composer with the model picker (the sidebar leads to the others)."""
    return render(request, "chat/empty.html", page_context(request))


@login_required
@require_POST
def conversation_create(request: HttpRequest) -> HttpResponse:
    """Create on the model picked (`model`; none: the default). With a `message` (the home's
    composer), the new conversation's page sends it over its socket as it opens: one way in for
    every message (limits, queue, files), and the page the reply streams to is the one the
    person lands on. A model not offered, or a message that cannot be sent, gets a 400 saying
    why with the text kept, and nothing is created."""
    text = request.POST.get("message")
    try:
        first = clean(text, MESSAGE, required=True) if text is not None else ""
        conversation = conversations.create_conversation(
            request.user, model=request.POST.get("model") or None
        )
    except ActionError as exc:
        # Said beside the form it came from: the home's composer, or the sidebar's button.
        said = {"send_error": exc.reason} if text is not None else {"create_error": exc.reason}
        context = page_context(request) | said | {"first_message": text or ""}
        return render(request, "chat/empty.html", context, status=400)
    if first:
        request.session[FIRST_MESSAGE_KEY] = [conversation.pk, first]
    return redirect("conversation", conversation_id=conversation.pk)


@login_required
@require_GET
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = owned_or_404(request, conversation_id)
    panel = load_panel(conversation)
    context = page_context(request, conversation) | {
        "page": transcript.page(
            conversation,
            before=None,
            limit=settings.PAGE_MESSAGES,
            reaching=number(request.GET.get("at")),  # a search hit to jump to
            first_kept=panel.first_kept_seq,
        ),
        "ctx": panel,
        "draft": panel.draft,  # a summary waiting for review shows on load, not only when drafted
        "conversation": conversation,
        "controls": controls.form(conversation),
    }
    if request.htmx and request.GET.get("part") == "transcript":
        # Reconnect: the tab re-fetches the transcript and replaces its own copy wholesale.
        return render(request, "chat/conversation.html#transcript", context)
    # The composer's chips: uploads not yet sent stay there through a reload.
    context["waiting"] = attachments.waiting(request.user, conversation)
    context["first_message"] = _first_message(request, conversation.pk)
    return render(request, "chat/conversation.html", context)


def _first_message(request: HttpRequest, conversation_id: int) -> str:
    """The message typed on the home page for this new conversation, given once: the composer
    holds it and sends it as the socket opens (static/js/first_send.js)."""
    held = request.session.get(FIRST_MESSAGE_KEY)
    if not held or held[0] != conversation_id:
        return ""
    del request.session[FIRST_MESSAGE_KEY]
    return held[1]


@login_required
@require_GET
def conversation_older(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = owned_or_404(request, conversation_id)
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
    conversation = owned_or_404(request, conversation_id)
    context = {
        "ctx": load_panel(conversation),
        "conversation": conversation,
    }
    return render(request, "chat/conversation.html#context", context)


@login_required
@require_GET
def conversation_window(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """'What the model sees': exactly the window that export.json reports."""
    conversation = owned_or_404(request, conversation_id)
    state = load_window(conversation)
    window = state.window()
    return render(
        request,
        "chat/conversation.html#model-view",
        {
            "window": window,
            "shown": window_view.window_messages(window),
            "tokens": state.tokens,
            "conversation": conversation,
        },
    )


@login_required
@require_POST
def conversation_rename(request: HttpRequest, conversation_id: int) -> HttpResponse:
    def rename():
        title = clean(request.POST.get("title", ""), TITLE, required=True)
        conversations.rename_conversation(request.user, conversation_id, title)

    return _changed(request, conversation_id, rename)


@login_required
@require_POST
def conversation_settings(request: HttpRequest, conversation_id: int) -> HttpResponse:
    def change():
        conversations.update_settings(
            request.user,
            conversation_id,
            system_prompt=clean(request.POST.get("system_prompt", ""), SYSTEM_PROMPT),
            review_compactions=request.POST.get("review_compactions") == "on",
            controls=controls.read(
                request.POST.get("auto_compact_at"),
                request.POST.get("keep_tail_share"),
                request.POST.get("summary_model"),
                thinking=request.POST.get("thinking") == "on",
                thinking_budget=request.POST.get("thinking_budget"),
            ),
        )

    return _changed(
        request,
        conversation_id,
        change,
        saved="Settings saved.",
        refused="Settings not saved. {}",
    )


def _changed(request, conversation_id, change, *, saved: str = "", refused: str = "{}"):
    """A form's change to the user's conversation (what the person typed cleaned, then the
    change made), or refused with its reason in a flash message; back to the conversation
    either way."""
    owned_or_404(request, conversation_id)
    try:
        change()
    except ActionError as exc:
        flash.error(request, refused.format(exc.reason))
    else:
        if saved:
            flash.success(request, saved)
    return redirect("conversation", conversation_id=conversation_id)


@login_required
@require_POST
def message_pin(request: HttpRequest, message_id: int) -> HttpResponse:
    pinned = request.POST.get("pinned") == "1"
    try:
        message = conversations.set_pinned(request.user, message_id, pinned)
    except ActionError as exc:
        # Said in the page's notice (chat.js); an unknown or another user's message is a 404.
        unknown = isinstance(exc, conversations.NoSuchMessage)
        return HttpResponse(
            exc.reason, status=404 if unknown else 400, content_type="text/plain; charset=utf-8"
        )
    # A pin before the boundary rides in the window, so the meter moves with it.
    conversation = message.conversation
    figures = load_figures(conversation, load_window(conversation))
    return HttpResponse(
        frames.message(transcript.item_of(message, pinned)) + frames.figures(figures)
    )


@login_required
@require_http_methods(["GET", "POST"])
async def conversation_tools(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The conversation's tool switches: every tool the chat has (built-in and MCP), on or off.
    Async: listing MCP tools talks to the servers this process keeps running."""
    conversation = await aowned_or_404(request, conversation_id)
    available = await tools.available()
    saved = False
    if request.method == "POST":
        conversation.disabled_tools = tools.switched_off(
            conversation.disabled_tools,
            listed={t.name for t in available},
            enabled=set(request.POST.getlist("enabled")),
        )
        await conversation.asave(update_fields=["disabled_tools", "updated_at"])
        if not request.htmx:
            return redirect("conversation", conversation.pk)
        saved = True
    off = set(conversation.disabled_tools)
    context = {
        "conversation": conversation,
        "tools": [(t, t.name not in off) for t in available],
        "saved": saved,
    }
    return render(request, "chat/conversation.html#tools", context)


@login_required
@require_POST
def draft_figures(request: HttpRequest, conversation_id: int, compaction_id: int) -> HttpResponse:
    """A waiting draft's figures for the summary as the person has edited it: the window before
    and after, kept N of M key facts, the ones lost. Text that cannot be a summary is a 400;
    another user's draft, or one no longer waiting, a 404."""
    try:
        summary = clean(request.POST.get("summary"), SUMMARY, required=True)
    except ActionError as exc:
        return HttpResponse(exc.reason, status=400, content_type="text/plain")
    try:
        figures = compactions.draft_figures(request.user, conversation_id, compaction_id, summary)
    except ActionError:
        raise Http404(compactions.NO_LONGER_WAITING) from None
    context = {
        "draft": {"conversation_id": conversation_id, "pk": compaction_id},
        "pre": figures.pre_tokens,
        "post": figures.post_tokens,
        "total": figures.facts.total,
        "kept": figures.facts.kept,
        "lost": figures.facts.lost,
        "grows": figures.grows,
    }
    return render(request, "chat/conversation.html#draft-figures-body", context)
