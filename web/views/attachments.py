"""Files given to the model: the upload endpoint, the file served to its owner and an unsent
upload removed (chat/attachments.py decides; docs/files.md is the contract)."""

from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from chat import attachments
from core.errors import ActionError
from web.views.owned import owned_or_404

log = logging.getLogger(__name__)


@login_required
@require_POST
def attachment_upload(request: HttpRequest, conversation_id: int) -> JsonResponse:
    """201 with the file's id, name, media type, bytes and tokens; a refusal is a 400 (a 413
    for a file too large) with the reason, and nothing kept."""
    conversation = owned_or_404(request, conversation_id)
    try:
        attachments.refuse_body(request.META.get("CONTENT_LENGTH"))
        kept = attachments.upload(request.user, conversation.pk, request.FILES.get("file"))
    except ActionError as exc:
        status = {attachments.TooLarge: 413, attachments.Busy: 503}.get(type(exc), 400)
        answer = JsonResponse({"error": exc.reason}, status=status)
        if status == 503:
            answer["Retry-After"] = "5"
        return answer
    return JsonResponse(attachments.described(kept), status=201)


@login_required
@require_GET
def attachment_file(request: HttpRequest, attachment_id: int) -> FileResponse:
    """The file, to its owner only (anyone else: 404), as its own type, never as a page."""
    try:
        attachment = attachments.owned(request.user, attachment_id)
    except ActionError as exc:
        raise Http404(exc.reason) from None
    try:
        stored = attachment.file.open("rb")
    except Exception:  # noqa: BLE001 - any storage's failure: the file is not there to serve
        log.warning("could not read the stored file of attachment %s", attachment.pk, exc_info=True)
        raise Http404("That file could not be read from storage.") from None
    response = FileResponse(
        stored,
        content_type=attachments.served_type(attachment),
        filename=attachment.name,  # Content-Disposition: inline, the name encoded safely
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=3600"
    return response


@login_required
@require_POST
def attachment_delete(request: HttpRequest, attachment_id: int) -> HttpResponse:
    """An upload not yet sent, removed (a composer chip's ×): 204; one sent already is a 400
    with the reason; another user's, or none, a 404. A POST to a named action, as every change
    here is (a conversation's delete/, rename/, pin/): the same login and CSRF checks."""
    try:
        attachments.remove(request.user, attachment_id)
    except attachments.AlreadySent as exc:
        return JsonResponse({"error": exc.reason}, status=400)
    except ActionError as exc:
        raise Http404(exc.reason) from None
    return HttpResponse(status=204)
