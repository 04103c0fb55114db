"""Search views: people's search over all their conversations or one (a page, or htmx's
results in place), and their hits as JSON (all conversations, or one). The ranking is the one
the model's `search_history` tool searches with (search/messages.py); people's search covers
every version, the model's only its turn's branch."""

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
from search.semantic import unavailable_notice
from search.values import Hit
from web.views.owned import owned_or_404
from web.views.sidebar import page_context


@login_required
@require_GET
def conversation_search(request: HttpRequest, conversation_id: int) -> JsonResponse:
    """The conversation's whole transcript (compacted part included, every version), best hits
    first."""
    conversation = owned_or_404(request, conversation_id)
    return _hits_json(request, conversation.pk)


@login_required
@require_GET
def search_json(request: HttpRequest) -> JsonResponse:
    """Every conversation of the user's, best hits first."""
    return _hits_json(request, None)


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
    context = {"query": query, "hits": hits, "scope": conversation, "notice": unavailable_notice()}
    if request.htmx:
        return render(request, "chat/search.html#results", context)
    return render(request, "chat/search.html", page_context(request, conversation) | context)


def _hits_json(request: HttpRequest, conversation_id: int | None) -> JsonResponse:
    """`{"query", "hits"}` for one conversation or, with None, all the user's; or the 400 that
    says what is wrong with the query or the limit."""
    asked = _asked(request)
    if isinstance(asked, JsonResponse):
        return asked
    query, limit = asked
    hits = search(request.user, query, conversation_id=conversation_id, limit=limit)
    found = {"query": query, "hits": [_hit(h, conversation_id) for h in hits]}
    if notice := unavailable_notice():
        found["notice"] = notice  # by words alone: its embeddings server is down
    return JsonResponse(found)


def _hit(hit: Hit, conversation_id: int | None) -> dict:
    """One hit's fields. Across conversations a hit names its conversation; within one it says
    when it was written, whether it is on the branch on screen and which message opens it."""
    found = {
        "seq": hit.seq,
        "role": hit.role,
        "snippet": marked(hit.snippet, "**", "**"),
        "score": hit.score,
    }
    if hit.file:
        found["file"] = hit.file  # the matched words are in this file of the message
    if conversation_id is None:
        return {"conversation_id": hit.conversation_id} | found
    return found | {
        "created_at": hit.created_at.isoformat(),
        "on_branch": hit.fork is None,
        "shown_at": hit.shown_seq,
    }


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
