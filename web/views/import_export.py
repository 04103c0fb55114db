"""Files in and out: importing export.json or ChatGPT's conversations.json, and a
conversation's export.json and export.md downloads."""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from chat import limits
from chat.exports import as_json, as_markdown, downloads
from chat.imports import importing
from chat.models import Conversation
from core.errors import ActionError
from web.views.owned import owned_or_404
from web.views.sidebar import page_context


@login_required
@require_POST
def conversation_import(request: HttpRequest) -> HttpResponse:
    """Import export.json or ChatGPT's conversations.json; opens the (first) imported
    conversation. A bad file gets its reason and creates nothing; over the hourly limit, or
    while another import of the user's runs, a 429 says so. From the sidebar's form (htmx) the
    reason alone comes back, for the page the person is on; without JavaScript, a page says it."""
    upload = request.FILES.get("file")
    try:
        if upload is None:
            raise ActionError("Choose a file to import (export.json or conversations.json).")
        first, count = importing.import_upload(request.user, upload)
    except ActionError as exc:
        status = 429 if isinstance(exc, limits.Limited | importing.Busy) else 400
        if request.htmx:
            # Said beside the form, on the page the person imported from, which stays.
            context = {"import_error": exc.reason}
            return render(request, "chat/sidebar.html#import-refused", context, status=status)
        context = page_context(request) | {"import_error": exc.reason}
        return render(request, "chat/empty.html", context, status=status)
    if count > 1:
        flash.success(request, f"Imported {count:,} conversations.")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("conversation", args=[first]))
    return redirect("conversation", conversation_id=first)


@login_required
@require_GET
def conversation_export(request: HttpRequest, conversation_id: int) -> JsonResponse:
    """The conversation as export.json, a download: a file to keep or import (chat/exports/)."""
    conversation = owned_or_404(request, conversation_id)
    response = JsonResponse(
        as_json.conversation_json(conversation), json_dumps_params={"ensure_ascii": False}
    )
    return _download(response, conversation, "json")


@login_required
@require_GET
def conversation_export_markdown(
    request: HttpRequest, conversation_id: int
) -> StreamingHttpResponse:
    """The transcript as a Markdown download, streamed as it is written (chat/exports/)."""
    conversation = owned_or_404(request, conversation_id)
    pieces = as_markdown.conversation_markdown(conversation)
    response = StreamingHttpResponse(
        downloads.served_async(pieces) if isinstance(request, ASGIRequest) else pieces,
        content_type="text/markdown; charset=utf-8",
    )
    return _download(response, conversation, "md")


def _download[R: HttpResponseBase](response: R, conversation: Conversation, extension: str) -> R:
    """The response as a file to keep (or import), not a page in the tab: a download named
    after the conversation."""
    filename = downloads.filename(conversation, extension)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
