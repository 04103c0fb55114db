"""Search views: people's search over all their conversations or one (a page, or htmx's
results in place), and their hits as JSON (all conversations, or one). The same search function
the model's `search_history` tool calls (search/messages.py)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.clean import QUERY, clean
from core.errors import ActionError
from search.messages import MAX_LIMIT, search
from search.query import marked
from web.views.owned import owned_or_404
from web.views.sidebar import page_context


@login_required
@require_GET
def conversation_search(request: HttpRequest, conversation_id: int) -> JsonResponse:
    """The conversation's whole transcript (compacted part included), best hits first: the same
    function the model's `search_history` tool calls."""
    conversation = owned_or_404(request, conversation_id)
    asked = _asked(request)
    if isinstance(asked, JsonResponse):
        return asked
    query, limit = asked
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
def search_json(request: HttpRequest) -> JsonResponse:
    """Every conversation of the user's, best hits first: the search `search_history` makes
    with scope "all"."""
    asked = _asked(request)
    if isinstance(asked, JsonResponse):
        return asked
    query, limit = asked
    hits = search(request.user, query, limit=limit)
    return JsonResponse(
        {
            "query": query,
            "hits": [
                {
                    "conversation_id": h.conversation_id,
                    "seq": h.seq,
                    "role": h.role,
                    "snippet": marked(h.snippet, "**", "**"),
                    "score": h.score,
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
    conversation = owned_or_404(request, conversation_id) if conversation_id is not None else None
    try:
        query = clean(request.GET.get("q"), QUERY)
    except ActionError as exc:
        return HttpResponse(exc.reason, status=400, content_type="text/plain; charset=utf-8")
    hits = search(
        request.user, query, conversation_id=conversation_id, limit=settings.SEARCH_PAGE_HITS
    )
    context = {"query": query, "hits": hits, "scope": conversation}
    if request.htmx:
        return render(request, "chat/search.html#results", context)
    return render(request, "chat/search.html", page_context(request, conversation) | context)


def _asked(request: HttpRequest) -> tuple[str, int] | JsonResponse:
    """A JSON search's query and limit, or the 400 that says what is wrong with them."""
    limit = _limit(request.GET.get("limit"))
    if limit is None:
        return JsonResponse({"error": f"limit must be a number from 1 to {MAX_LIMIT}."}, status=400)
    try:
        return clean(request.GET.get("q"), QUERY), limit
    except ActionError as exc:
        return JsonResponse({"error": exc.reason}, status=400)


def _limit(value: str | None) -> int | None:
    if value in (None, ""):
        return 10
    try:
        limit = int(value)
    except ValueError:
        return None
    return limit if 1 <= limit <= MAX_LIMIT else None
