"""Search over transcripts: the database's own full-text index, natural-language queries ranked
by how many words match and how rare they are, always scoped to the user (SQLite and
PostgreSQL run this same file)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.branches import Fork
from chat.models import Conversation, Message
from chat.search_index import MARK_CLOSE, MARK_OPEN, searchable_text
from chat.transcript import trees
from search.messages import search
from search.query import parse
from support.waiting import settle
from tests.conftest import receive_until, socket_for
from tests.transcripts import committed_boundary
from tools import recall
from tools.values import Context, ToolError

pytestmark = pytest.mark.django_db(transaction=True)


def add(conversation, *texts, role="user", status="complete"):
    start = (conversation.messages.order_by("-seq").values_list("seq", flat=True).first() or 0) + 1
    for offset, text in enumerate(texts):
        Message.objects.create(
            conversation=conversation,
            seq=start + offset,
            role=role,
            status=status,
            content=[{"type": "text", "text": text}],
        )


def seqs(hits):
    return [h.seq for h in hits]


def matched(hits):
    """The hits that hold a word of the query themselves (the others come through a neighbour,
    after them, their snippets unmarked)."""
    return [h.seq for h in hits if MARK_OPEN in h.snippet]


def test_a_hit_need_not_hold_every_word_and_words_are_stemmed(alice, conversation):
    add(conversation, "The deployment failed with a permissions error.", "Lunch was nice.")
    hits = search(alice, "why did deploying fail, what errors were there?", limit=5)
    assert seqs(hits) == [1, 2] and matched(hits) == [1]
    assert hits[0].role == "user" and hits[0].conversation_id == conversation.pk
    assert MARK_OPEN in hits[0].snippet and MARK_CLOSE in hits[0].snippet


def test_more_matching_words_and_rarer_words_rank_first(alice, conversation):
    add(
        conversation,
        "python is great",  # 1: a common word only
        "python again",  # 2
        "more python here",  # 3
        "kubernetes cluster notes",  # 4: the rare word only
        "python on kubernetes",  # 5: both
        "python tips",  # 6
    )
    hits = search(alice, "python kubernetes", conversation_id=conversation.pk, limit=10)
    assert seqs(hits)[:2] == [5, 4]
    assert set(seqs(hits)) == {1, 2, 3, 4, 5, 6}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_quoted_phrase_must_appear_as_written(alice, conversation):
    add(conversation, "a blue whale surfaced", "the whale was blue and grey")
    assert matched(search(alice, '"blue whale"', limit=5)) == [1]


def test_tool_calls_and_results_are_searchable(alice, conversation):
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        content=[
            {"type": "tool_result", "tool_use_id": "t1", "content": "Traceback: ZeroDivisionError"}
        ],
    )
    Message.objects.create(
        conversation=conversation,
        seq=2,
        role="assistant",
        content=[
            {"type": "tool_use", "id": "t2", "name": "lookup", "input": {"city": "Reykjavik"}}
        ],
    )
    assert matched(search(alice, "zerodivisionerror", limit=5)) == [1]
    assert matched(search(alice, "reykjavik", limit=5)) == [2]


def test_only_the_users_own_live_history_is_searched(alice, bob, conversation):
    mine = Conversation.objects.create(owner=alice, model="fake-model", title="Other")
    gone = Conversation.objects.create(owner=alice, model="fake-model")
    theirs = Conversation.objects.create(owner=bob, model="fake-model")
    add(conversation, "marmalade recipe")
    add(mine, "marmalade again")
    add(gone, "marmalade deleted")
    gone.deleted_at = gone.created_at
    gone.save()
    add(theirs, "marmalade secret")
    add(conversation, "marmalade never sent", status="cancelled")
    everywhere = search(alice, "marmalade", limit=10)
    assert {(h.conversation_id, h.seq) for h in everywhere} == {(conversation.pk, 1), (mine.pk, 1)}
    assert {h.conversation_title for h in everywhere} == {conversation.title, "Other"}
    assert seqs(search(alice, "marmalade", conversation_id=conversation.pk)) == [1]
    assert [h.conversation_id for h in search(bob, "marmalade")] == [theirs.pk]


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ('NEAR(a b) AND "', [1]),  # NEAR is a word here, not FTS5's operator
        ("column AND nothing", [1]),  # AND is no operator: "column" alone finds it
        ("words -column", [1]),  # no exclusion either
        ("* ^ - :", []),  # no words at all: nothing, rather than everything
        ("col:umn", []),  # no column filter: the words "col" and "umn", in no message
        ("", []),
        ("   ", []),
        ('"', []),
    ],
)
def test_query_syntax_is_never_interpreted(alice, conversation, query, found):
    """Operators of the database's query language are words like any other: the query raises
    no error and finds what its words find."""
    add(conversation, "near and column words")
    assert seqs(search(alice, query)) == found


def test_parse_keeps_the_words_that_count():
    assert parse("What did we decide about the Postgres migration?").terms == (
        "decide",
        "postgres",
        "migration",
    )
    assert parse('find "exact words here" please').phrases == (("exact", "words", "here"),)
    assert parse("what is it").terms == ("what", "is", "it")  # common words only: keep them


def test_searchable_text_strips_the_snippet_marks():
    text = searchable_text([{"type": "text", "text": f"a{MARK_OPEN}b{MARK_CLOSE}"}])
    assert text == "ab"


# --- the JSON endpoint ---------------------------------------------------------------------------


def test_search_json_answers_hits_best_first(client, alice, conversation):
    add(conversation, "the release date is the 4th", "nothing here", "release notes drafted")
    client.force_login(alice)
    response = client.get(f"/conversations/{conversation.pk}/search.json", {"q": "release date"})
    assert response.status_code == 200
    data = response.json()
    assert data["query"] == "release date"
    assert [h["seq"] for h in data["hits"] if "**" in h["snippet"]] == [1, 3]
    assert sorted(h["seq"] for h in data["hits"]) == [1, 2, 3]  # 2 through its neighbours
    assert set(data["hits"][0]) >= {"seq", "role", "snippet", "score"}
    assert "**release**" in data["hits"][0]["snippet"].lower()


def test_search_json_refuses_a_bad_limit_and_hides_other_users(client, alice, bob, conversation):
    add(conversation, "private words")
    client.force_login(alice)
    url = f"/conversations/{conversation.pk}/search.json"
    assert client.get(url, {"q": "private", "limit": "x"}).status_code == 400
    assert client.get(url, {"q": "private", "limit": "0"}).status_code == 400
    assert client.get(url, {"q": "private", "limit": "2"}).json()["hits"][0]["seq"] == 1
    assert client.get(url, {"q": ""}).json() == {"query": "", "hits": []}
    client.force_login(bob)
    response = client.get(url, {"q": "private"})
    assert response.status_code == 404
    assert b"private" not in response.content


@pytest.mark.usefixtures("channel_layer")
async def test_a_streamed_reply_is_indexed_when_it_is_saved(alice, conversation, fake_llm):
    from asgiref.sync import sync_to_async

    fake_llm.enqueue(["The answer is ", "quokka."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "name an animal"}))
    await receive_until(ws, lambda f: 'data-status="complete"' in f)
    await settle(conversation.pk)
    hits = await sync_to_async(search)(alice, "quokka")
    assert [(h.seq, h.role) for h in hits if MARK_OPEN in h.snippet] == [(2, "assistant")]
    await ws.disconnect()


def test_the_index_is_put_back_after_a_migration_dropped_its_triggers(alice, conversation):
    from django.db import connection

    from chat import search_index as schema

    if connection.vendor != "sqlite":
        pytest.skip("SQLite rebuilds a table to alter it, dropping its triggers")
    with connection.cursor() as cursor:
        for name in schema.SQLITE_TRIGGERS:
            cursor.execute(f"DROP TRIGGER {name}")
    add(conversation, "written while the triggers were gone: aardvark")
    assert search(alice, "aardvark") == []
    schema.ensure(connection)  # what chat's post_migrate runs
    assert seqs(search(alice, "aardvark")) == [1]
    add(conversation, "and after: aardvark again")
    assert sorted(seqs(search(alice, "aardvark"))) == [1, 2]


# --- search for people ---------------------------------------------------------------------------


def test_people_search_their_conversations_and_hits_link_to_the_message(
    client, alice, bob, conversation
):
    other = Conversation.objects.create(owner=alice, model="fake-model", title="Trip plans")
    add(conversation, "fish & chips <b>wombat</b> question")
    add(other, "wombat sightings near the coast")
    bobs = Conversation.objects.create(owner=bob, model="fake-model")
    add(bobs, "bob's wombat")
    client.force_login(alice)
    page = client.get("/search/", {"q": "wombat"}).content.decode()
    assert page.count('class="search-hit"') == 2
    # Bob's text and link, not the bare name: a random CSRF token can contain "bob".
    assert "Trip plans" in page and "bob&#x27;s" not in page and "bob's" not in page
    assert f"/conversations/{bobs.pk}/" not in page
    assert f'href="/conversations/{other.pk}/?at=1#msg-1"' in page
    # Escaped, then marked (PostgreSQL's headlines drop tag-like text; SQLite's keep it).
    assert "fish &amp; chips" in page and "<mark>wombat</mark>" in page and "<b>" not in page
    fragment = client.get(
        f"/conversations/{conversation.pk}/search/", {"q": "wombat"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert fragment.count('class="search-hit"') == 1 and "<html" not in fragment
    client.force_login(bob)
    assert client.get(f"/conversations/{conversation.pk}/search/", {"q": "x"}).status_code == 404


def test_a_jump_to_an_old_hit_loads_the_transcript_back_to_it(
    client, alice, conversation, settings
):
    settings.PAGE_MESSAGES = 5
    add(conversation, "needle in the haystack", *[f"filler {i}" for i in range(30)])
    client.force_login(alice)
    assert 'id="msg-1"' not in client.get(f"/conversations/{conversation.pk}/").content.decode()
    page = client.get(f"/conversations/{conversation.pk}/", {"at": "1"}).content.decode()
    assert 'id="msg-1"' in page and 'id="msg-31"' in page
    assert client.get(f"/conversations/{conversation.pk}/", {"at": "x"}).status_code == 200


# --- versions -----------------------------------------------------------------------------------


def versioned(conversation) -> None:
    """1 2 3 4, then message 3 edited as 5 (after 2) with its reply 6: the branch on screen is
    1 2 5 6; 3 and 4 are the other version."""
    add(conversation, "plan the trip")
    add(conversation, "pack the wombat", role="assistant")
    add(conversation, "wombat by train")
    add(conversation, "trains are slow", role="assistant")
    for seq, parent, role, text in [(5, 2, "user", "wombat by car"), (6, 5, "assistant", "ok")]:
        Message.objects.create(
            conversation=conversation,
            seq=seq,
            parent_seq=parent,
            role=role,
            content=[{"type": "text", "text": text}],
        )


def test_hits_on_another_version_say_so_and_lead_to_its_switcher(client, alice, conversation):
    versioned(conversation)
    hits = {h.seq: h for h in search(alice, "wombat", conversation_id=conversation.pk)}
    assert set(matched(hits.values())) == {2, 3, 5}  # every version is searched
    assert hits[2].fork is None and hits[5].fork is None
    assert hits[3].fork == Fork(shown=5, switchable=True)  # 5's ‹ › leads back to 3
    assert search(alice, "slow", conversation_id=conversation.pk)[0].shown_seq == 5  # 4 follows 3

    client.force_login(alice)
    page = client.get("/search/", {"q": "train"}).content.decode()
    assert f'href="/conversations/{conversation.pk}/?at=5#msg-5"' in page
    assert "another version<" in page and "#3 · You" in page
    data = client.get(f"/conversations/{conversation.pk}/search.json", {"q": "wombat"}).json()
    placed = {
        h["seq"]: (h["on_branch"], h["shown_at"]) for h in data["hits"] if "**" in h["snippet"]
    }
    assert placed == {2: (True, 2), 3: (False, 5), 5: (True, 5)}

    # Switched back to the first version: now 5 is the other one.
    Conversation.objects.filter(pk=conversation.pk).update(leaf_seq=4)
    hits = {h.seq: h for h in search(alice, "wombat", conversation_id=conversation.pk)}
    assert hits[3].fork is None and hits[5].fork == Fork(shown=3, switchable=True)


def test_a_compacted_other_version_is_not_promised_a_switcher(client, alice, conversation):
    versioned(conversation)
    add(conversation, "more", "and more")  # 7 and 8 follow 6
    committed_boundary(conversation, first_kept_seq=7)  # 5 and 3 are folded into the summary
    hits = {h.seq: h for h in search(alice, "train", conversation_id=conversation.pk)}
    assert hits[3].fork == hits[4].fork == Fork(shown=5, switchable=False)
    client.force_login(alice)
    page = client.get("/search/", {"q": "train"}).content.decode()
    assert "another version, compacted" in page and "whose ‹ › switch" not in page


def test_placing_hits_costs_one_query_and_two_more_for_versions(alice, bob, conversation):
    add(conversation, "wombat one", "wombat two")
    versioned(Conversation.objects.create(owner=bob, model="fake-model"))  # not alice's
    with CaptureQueriesContext(connection) as plain:
        assert all(h.fork is None for h in search(alice, "wombat"))
    for _ in range(3):  # however many conversations have versions
        versioned(Conversation.objects.create(owner=alice, model="fake-model"))
    with CaptureQueriesContext(connection) as forked:
        assert len(matched(search(alice, "wombat", limit=50))) == 11
    assert len(forked) == len(plain) + 2


def test_the_forks_are_found_through_their_own_index(alice, conversation):
    versioned(conversation)
    with CaptureQueriesContext(connection) as queries:
        trees([conversation.pk])
    sql = queries.captured_queries[0]["sql"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            ("EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN ") + sql
        )
        plan = " ".join(str(row) for row in cursor.fetchall())
    assert "message_fork" in plan, plan


def test_the_model_recalls_only_its_own_branch(alice, conversation):
    versioned(conversation)
    add(conversation, "go?")  # 7, after 6
    context = Context(alice.pk, conversation.pk, turn_seq=7)
    found = recall.search_history(context, {"query": "wombat"})
    assert "#2 " in found and "#5 " in found and "#3 " not in found
    assert read_seqs(context, 1, 6) == [1, 2, 5, 6]
    # Answering within the other version (asked again at message 4), it reads that one.
    other = Context(alice.pk, conversation.pk, turn_seq=4)
    assert "#3 " in recall.search_history(other, {"query": "wombat"})
    assert read_seqs(other, 1, 6) == [1, 2, 3, 4]
    # With no turn (a call from outside one), the branch on screen.
    outside = Context(alice.pk, conversation.pk)
    assert "#3 " not in recall.search_history(outside, {"query": "wombat"})
    assert read_seqs(outside, 1, 7) == [1, 2, 5, 6, 7]


def test_the_model_reads_up_to_its_own_turn(alice, conversation):
    add(conversation, "one", "two", "three", "four")
    context = Context(alice.pk, conversation.pk, turn_seq=2)
    assert read_seqs(context, 1, 4) == [1, 2]
    with pytest.raises(ToolError, match="after #2 are this turn's own"):
        recall.read_messages(context, {"from_seq": 3, "to_seq": 4})


def read_seqs(context, first: int, last: int) -> list[int]:
    read = recall.read_messages(context, {"from_seq": first, "to_seq": last})
    return [int(line.split(" ")[0][1:]) for line in read.splitlines() if line.startswith("#")]
