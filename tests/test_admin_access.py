"""Getting into the admin (`make admin`), and every review action recorded there with who and
when."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from chat import compactions as actions
from compaction.models import Compaction, Review
from core.errors import ActionError
from tests.transcripts import add_turns

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent


def test_make_admin_creates_a_superuser_without_asking(tmp_path):
    database = tmp_path / "admin.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "ADMIN_USER": "root",
        "DJANGO_SUPERUSER_PASSWORD": "a long local password",
    }
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        ["make", "admin"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(database) as db:
        found = db.execute("SELECT is_superuser, is_staff FROM auth_user WHERE username = 'root'")
        assert found.fetchall() == [(1, 1)]


def _draft(conversation, **fields) -> Compaction:
    return Compaction.objects.create(
        conversation=conversation,
        trigger="manual",
        status="draft",
        first_kept_seq=13,
        summary="The draft brief.",
        post_tokens=10,
        **fields,
    )


def test_every_review_action_is_recorded_with_who_and_when(conversation, alice, admin_client):
    add_turns(conversation, 8)
    approved = actions.approve(alice, conversation.pk, _draft(conversation).pk, "The draft brief.")
    actions.undo(alice, conversation.pk)
    edited = actions.approve(alice, conversation.pk, _draft(conversation).pk, "Shorter.")
    discarded = actions.discard(alice, conversation.pk, _draft(conversation).pk)
    regenerated = _draft(conversation)
    actions.open_for_user(alice, conversation.pk, "focus on tests", discard=regenerated.pk)

    reviews = [(r.compaction_id, r.action, r.user) for r in Review.objects.all()]
    assert reviews == [
        (approved.pk, "approved", alice),
        (approved.pk, "undone", alice),
        (edited.pk, "edited", alice),
        (discarded.pk, "discarded", alice),
        (regenerated.pk, "regenerated", alice),
    ]
    assert all(r.at is not None for r in Review.objects.all())
    # Beside the summary in the admin, and in a list of their own.
    page = admin_client.get(f"/admin/compaction/compaction/{approved.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Approved" in text and "Undone" in text and "alice" in text
    listed = admin_client.get("/admin/compaction/review/?action__exact=edited").content.decode()
    assert 'field-action">Edited<' in listed and 'field-action">Discarded<' not in listed


def test_a_refused_review_records_nothing(conversation, alice, bob):
    add_turns(conversation, 8)
    draft = _draft(conversation)
    with pytest.raises(ActionError):
        actions.approve(bob, conversation.pk, draft.pk, "Bob's edit")  # not his conversation
    with pytest.raises(ActionError):
        actions.approve(alice, conversation.pk, draft.pk, "")  # empty
    assert not Review.objects.exists()
