"""Admins review every summary; transcripts are read-only in the admin."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import Conversation, Message
from compaction.models import Compaction
from tests.test_versions import _edited_conversation
from tests.transcripts import add_turns

pytestmark = pytest.mark.django_db


@pytest.fixture
def boundary(conversation):
    add_turns(conversation, 4)
    return Compaction.objects.create(
        conversation=conversation,
        trigger="auto",
        status="committed",
        first_kept_seq=5,
        summary="CLEANED SUMMARY TEXT",
        raw_output="<analysis>RAW THINKING</analysis><summary>CLEANED SUMMARY TEXT</summary>",
        summariser="model",
        pre_tokens=1234,
        post_tokens=321,
        edited=True,
    )


def test_the_compaction_list_filters_by_trigger_and_status(admin_client, boundary):
    page = admin_client.get(
        "/admin/compaction/compaction/?trigger__exact=auto&status__exact=committed"
    )
    html = page.content.decode()
    assert page.status_code == 200
    assert "1234" in html.replace(",", "") and "321" in html
    empty = admin_client.get("/admin/compaction/compaction/?trigger__exact=manual").content.decode()
    assert "0 compactions" in empty


def test_the_detail_shows_summary_beside_raw_output_and_links_the_span(admin_client, boundary):
    html = admin_client.get(f"/admin/compaction/compaction/{boundary.pk}/change/").content.decode()
    assert "CLEANED SUMMARY TEXT" in html and "RAW THINKING" in html
    assert f"conversation__id__exact={boundary.conversation_id}&amp;seq__lt=5" in html
    span = admin_client.get(
        f"/admin/chat/message/?conversation__id__exact={boundary.conversation_id}&seq__lt=5"
    )
    assert span.status_code == 200 and "4 messages" in span.content.decode()


def test_transcript_rows_cannot_be_edited_or_deleted_in_the_admin(admin_client, boundary):
    message = Message.objects.first()
    page = admin_client.get(f"/admin/chat/message/{message.pk}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert admin_client.post(f"/admin/chat/message/{message.pk}/delete/").status_code == 403
    assert (
        admin_client.post(
            f"/admin/compaction/compaction/{boundary.pk}/change/", {"summary": "rewritten"}
        ).status_code
        == 403
    )
    boundary.refresh_from_db()
    assert boundary.summary == "CLEANED SUMMARY TEXT"


@pytest.mark.django_db
def test_the_admin_reads_the_branch_once_however_long_the_conversation(
    admin_client, alice, conversation
):
    admin_client.get(f"/admin/chat/conversation/{conversation.pk}/change/")  # caches warm
    counts = []
    for extra in (0, 40):
        other = Conversation.objects.create(owner=alice, model="fake-model")
        _edited_conversation(other)
        Message.objects.bulk_create(
            Message(conversation=other, seq=seq, role="user" if seq % 2 else "assistant")
            for seq in range(7, 7 + extra)
        )
        with CaptureQueriesContext(connection) as queries:
            admin_client.get(f"/admin/chat/conversation/{other.pk}/change/")
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_a_review_names_who_made_it(admin_client, boundary, alice):
    from compaction.models import Review

    Review.objects.create(compaction=boundary, action="edited", user=alice)
    Review.objects.create(compaction=boundary, action="approved", user=None)
    page = admin_client.get(f"/admin/compaction/compaction/{boundary.pk}/change/").content.decode()
    assert "edited by alice at" in page and "approved by a deleted account at" in page
    assert "edited by 1 " not in page


def test_the_compaction_list_shows_few_narrow_columns_and_cuts_a_long_title(admin_client, boundary):
    Conversation.objects.filter(pk=boundary.conversation_id).update(title="A" * 150)
    html = admin_client.get("/admin/compaction/compaction/").content.decode()
    headers = [
        "column-id",
        "column-conversation_title",
        "column-what",
        "column-tokens",
        "column-written_by",
        "column-state",
    ]
    for header in headers:
        assert header in html
    assert html.count('<th scope="col" class="') == len(headers)  # no others
    assert "auto · summary" in html and "1,234 → 321" in html and "Committed · edited" in html
    assert f'<span class="cut" title="{"A" * 150}">' in html
    assert "css/admin.css" in html


@pytest.mark.parametrize(
    ("kind", "summariser", "shown"),
    [
        ("summary", "rules", "none — rule-based summary, no model output"),
        ("clear", "", "none — tool results cleared, no model call"),
    ],
)
def test_a_summary_with_no_model_output_says_why(admin_client, boundary, kind, summariser, shown):
    Compaction.objects.filter(pk=boundary.pk).update(
        raw_output="", kind=kind, summariser=summariser
    )
    html = admin_client.get(f"/admin/compaction/compaction/{boundary.pk}/change/").content.decode()
    assert shown in html
