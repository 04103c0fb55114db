"""The conversation sidebar: date headings, pinned first, archived apart, delete with an undo,
keyset pages at a fixed number of queries, and every action scoped to its owner (alice owns,
bob is denied)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat import sidebar
from chat.models import Conversation, Message
from chat.sidebar import Cursor, Entry, group, label

HTMX = {"HX-Request": "true"}
PARIS = ZoneInfo("Europe/Paris")
ROW = re.compile(r'id="sidebar-row-(\d+)"')
HEADING = re.compile(r'<h2 class="group-heading">([^<]*)</h2>')
NEXT = re.compile(r'hx-get="/sidebar/(?:archived/)?\?after=([^"]+)"')


def _rows(html: str) -> list[int]:
    return [int(pk) for pk in ROW.findall(html)]


def _headings(html: str) -> list[str]:
    return HEADING.findall(html)


# --- the headings: a plain function over plain values ---------------------------------------------


def test_days_are_calendar_days_in_the_time_zone():
    now = datetime(2026, 3, 10, 0, 10, tzinfo=PARIS)  # ten past midnight in Paris
    today = now.date()

    def at(*args) -> str:
        return label(datetime(*args, tzinfo=PARIS), today, PARIS)

    assert at(2026, 3, 10, 0, 0) == "Today"
    assert at(2026, 3, 9, 23, 50) == "Yesterday"  # twenty minutes ago, but yesterday
    assert at(2026, 3, 9, 0, 0) == "Yesterday"
    assert at(2026, 3, 8, 23, 59) == "Previous 7 days"
    assert at(2026, 3, 3, 0, 0) == "Previous 7 days"  # seven days ago
    assert at(2026, 3, 2, 23, 59) == "Previous 30 days"  # eight
    assert at(2026, 2, 8, 12, 0) == "Previous 30 days"  # thirty
    assert at(2026, 2, 7, 23, 59) == "Older"  # thirty-one
    assert at(2026, 3, 10, 9, 0) == "Today"  # later today: another server's clock
    assert at(2027, 1, 1, 0, 0) == "Today"


def test_a_utc_time_is_read_in_the_time_zone_given():
    # 23:30 UTC on the 9th is 00:30 on the 10th in Paris: today there, yesterday in UTC.
    when = datetime(2026, 3, 9, 23, 30, tzinfo=UTC)
    assert label(when, datetime(2026, 3, 10).date(), PARIS) == "Today"
    assert label(when, datetime(2026, 3, 10).date(), UTC) == "Yesterday"


def test_groups_come_in_order_with_headings_only_for_what_is_there():
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    entries = [
        Entry(1, "pinned long ago", now - timedelta(days=90), pinned=True),
        Entry(2, "today", now - timedelta(hours=1)),
        Entry(3, "today too", now - timedelta(hours=2)),
        Entry(4, "old", now - timedelta(days=60)),
    ]
    groups = group(entries, now, UTC)
    assert [(g.label, [e.pk for e in g.entries]) for g in groups] == [
        ("Pinned", [1]),
        ("Today", [2, 3]),
        ("Older", [4]),
    ]
    assert not any(g.continued for g in groups)


def test_a_page_that_starts_inside_a_group_continues_it_without_a_second_heading():
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    after = Cursor(False, now - timedelta(days=40), 99)  # the last page ended in "Older"
    groups = group([Entry(5, "older still", now - timedelta(days=41))], now, UTC, after=after)
    assert [(g.label, g.continued) for g in groups] == [("Older", True)]
    pinned_before = Cursor(True, now, 98)  # the pinned ones ended the last page
    groups = group([Entry(6, "today", now)], now, UTC, after=pinned_before)
    assert [(g.label, g.continued) for g in groups] == [("Today", False)]


def test_a_cursor_survives_the_url_exactly():
    when = datetime(2026, 3, 10, 12, 0, 0, 123457, tzinfo=UTC)
    for pinned in (True, False):
        cursor = Cursor(pinned, when, 42)
        assert Cursor.decode(cursor.encode()) == cursor
    for bad in ("", "x.1.2", "u.1", "u.a.2", "p.1.2.3"):
        with pytest.raises(ValueError):
            Cursor.decode(bad)


# --- the list, through the pages -------------------------------------------------------------


def _make(owner, title: str, *, ago: timedelta, **fields) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, model="fake-model", title=title)
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - ago, **fields
    )
    conversation.refresh_from_db()
    return conversation


@pytest.mark.django_db
def test_the_page_groups_by_date_in_settings_time_zone(client, alice, settings):
    settings.TIME_ZONE = "Pacific/Auckland"
    now = datetime(2026, 3, 10, 11, 30, tzinfo=UTC)  # 00:30 on the 11th in Auckland
    late = Conversation.objects.create(owner=alice, model="m", title="late")
    Conversation.objects.filter(pk=late.pk).update(updated_at=now - timedelta(hours=1))
    page = sidebar.page(alice, now=now)
    # 10:30 UTC is 23:30 on the 10th in Auckland: yesterday there, though today in UTC.
    assert [g.label for g in page.groups] == ["Yesterday"]


@pytest.mark.django_db
def test_pinned_conversations_come_first_and_pinning_is_not_activity(client, alice):
    old = _make(alice, "Tax return", ago=timedelta(days=100))
    # Stamped a minute ahead: "Today" whenever the test runs, just after midnight too (a time in
    # the future is today; five minutes ago is yesterday at 00:03).
    new = _make(alice, "Holiday", ago=-timedelta(minutes=1))
    client.force_login(alice)
    html = client.get(f"/conversations/{new.pk}/").content.decode()
    assert _rows(html) == [new.pk, old.pk]
    assert _headings(html) == ["Today", "Older"]

    response = client.post(f"/conversations/{old.pk}/pin/", {"pinned": "1"}, headers=HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert _rows(html) == [old.pk, new.pk]
    assert _headings(html) == ["Pinned", "Today"]
    assert "Pinned “Tax return”." in html
    pinned = Conversation.objects.get(pk=old.pk)
    assert pinned.pinned_at is not None
    assert pinned.updated_at == old.updated_at  # still "Older" once unpinned

    client.post(f"/conversations/{old.pk}/pin/", {"pinned": "0"}, headers=HTMX)
    html = client.get(f"/conversations/{new.pk}/").content.decode()
    assert _rows(html) == [new.pk, old.pk]
    assert _headings(html) == ["Today", "Older"]


@pytest.mark.django_db
def test_archived_conversations_leave_the_list_and_are_listed_apart(client, alice):
    kept = _make(alice, "Kept", ago=timedelta(hours=1))
    filed = _make(alice, "Filed away", ago=timedelta(minutes=1))
    client.force_login(alice)
    response = client.post(
        f"/conversations/{filed.pk}/archive/", {"archived": "1", "current": kept.pk}, headers=HTMX
    )
    html = response.content.decode()
    assert _rows(html) == [kept.pk]
    assert "Archived “Filed away”" in html and "Undo archiving “Filed away”" in html
    assert Conversation.objects.get(pk=filed.pk).updated_at == filed.updated_at

    # Not in the main list, nor in the home page's; in the archived one.
    assert _rows(client.get("/sidebar/", headers=HTMX).content.decode()) == [kept.pk]
    assert _rows(client.get("/").content.decode()) == [kept.pk]
    archived = client.get("/sidebar/archived/", headers=HTMX).content.decode()
    assert _rows(archived) == [filed.pk] and "Unarchive “Filed away”" in archived
    # Without scripts: the same list in the page's sidebar.
    page = client.get(f"/conversations/{kept.pk}/?sidebar=archived").content.decode()
    assert _rows(page) == [filed.pk]
    # Still opens by its URL.
    assert client.get(f"/conversations/{filed.pk}/").status_code == 200

    response = client.post(
        f"/conversations/{filed.pk}/archive/",
        {"archived": "0", "view": "archived"},
        headers=HTMX,
    )
    assert "No archived conversations." in response.content.decode()
    assert _rows(client.get("/sidebar/", headers=HTMX).content.decode()) == [filed.pk, kept.pk]


@pytest.mark.django_db
def test_deleting_another_conversation_stays_on_the_page_and_undo_restores_it(client, alice):
    other = _make(alice, "Shopping list", ago=timedelta(days=3))
    here = _make(alice, "Open one", ago=-timedelta(minutes=1))  # "Today", just after midnight too
    client.force_login(alice)
    response = client.post(f"/conversations/{other.pk}/delete/", {"current": here.pk}, headers=HTMX)
    assert response.status_code == 200 and "HX-Redirect" not in response
    html = response.content.decode()
    assert _rows(html) == [here.pk]
    assert "Deleted “Shopping list”." in html
    assert f'hx-post="/conversations/{other.pk}/restore/"' in html
    assert Conversation.objects.get(pk=other.pk).deleted_at is not None

    response = client.post(
        f"/conversations/{other.pk}/restore/", {"current": here.pk}, headers=HTMX
    )
    html = response.content.decode()
    assert "Restored “Shopping list”." in html
    # Back in its place: deleting and restoring are not activity.
    assert _rows(html) == [here.pk, other.pk]
    assert _headings(html) == ["Today", "Previous 7 days"]
    restored = Conversation.objects.get(pk=other.pk)
    assert restored.deleted_at is None and restored.updated_at == other.updated_at


@pytest.mark.django_db
def test_deleting_the_open_conversation_goes_home_with_the_undo(client, alice):
    rest = _make(alice, "Another", ago=timedelta(hours=2))
    here = _make(alice, "Draft essay", ago=timedelta(minutes=1))
    Message.objects.create(conversation=here, seq=1, role="user", content=[])
    client.force_login(alice)
    response = client.post(f"/conversations/{here.pk}/delete/", {"current": here.pk}, headers=HTMX)
    assert response["HX-Redirect"] == "/"
    page = client.get("/")  # the home's composer, the others in the sidebar
    assert page.status_code == 200 and 'id="home-composer"' in page.content.decode()
    html = page.content.decode()
    assert _rows(html) == [rest.pk]
    assert "Deleted “Draft essay”." in html
    # The Undo is a plain form here: it opens the conversation again.
    undo = re.search(r'<form method="post" action="/conversations/(\d+)/restore/"([^>]*)>', html)
    assert undo and int(undo.group(1)) == here.pk and "hx-post" not in undo.group(2)
    # Shown once: the next page has no notice.
    assert "Deleted “Draft essay”." not in client.get(f"/conversations/{rest.pk}/").content.decode()

    response = client.post(f"/conversations/{here.pk}/restore/")
    assert response.status_code == 302 and response["Location"] == f"/conversations/{here.pk}/"
    assert client.get(f"/conversations/{here.pk}/").status_code == 200
    assert Message.objects.filter(conversation=here).count() == 1


@pytest.mark.django_db
def test_the_header_form_without_scripts_goes_home_with_the_undo(client, alice):
    here = _make(alice, "Plain form", ago=timedelta(minutes=1))
    client.force_login(alice)
    response = client.post(f"/conversations/{here.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/"
    assert "Deleted “Plain form”." in client.get("/", follow=True).content.decode()


@pytest.mark.django_db
def test_undo_after_the_grace_period_is_refused_and_says_so(client, alice, settings):
    settings.UNDO_DELETE_SECONDS = 300
    gone = _make(alice, "Old notes", ago=timedelta(days=1))
    client.force_login(alice)
    client.post(f"/conversations/{gone.pk}/delete/", headers=HTMX)
    Conversation.objects.filter(pk=gone.pk).update(
        deleted_at=timezone.now() - timedelta(seconds=301)
    )
    response = client.post(f"/conversations/{gone.pk}/restore/", headers=HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Too late to undo: “Old notes” was deleted more than 5 minutes ago" in html
    assert Conversation.objects.get(pk=gone.pk).deleted_at is not None
    assert _rows(html) == []

    # Just inside it, it is restored.
    Conversation.objects.filter(pk=gone.pk).update(
        deleted_at=timezone.now() - timedelta(seconds=290)
    )
    client.post(f"/conversations/{gone.pk}/restore/", headers=HTMX)
    assert Conversation.objects.get(pk=gone.pk).deleted_at is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/conversations/{id}/pin/", {"pinned": "1"}),
        ("/conversations/{id}/archive/", {"archived": "1"}),
        ("/conversations/{id}/delete/", {}),
        ("/conversations/{id}/restore/", {}),
    ],
)
@pytest.mark.parametrize("htmx", [False, True])
def test_bob_gets_a_404_for_alices_conversation_and_nothing_changes(
    client, alice, bob, path, data, htmx
):
    mine = _make(alice, "Alice's diary", ago=timedelta(hours=1))
    if "restore" in path:
        Conversation.objects.filter(pk=mine.pk).update(deleted_at=timezone.now())
    before = Conversation.objects.filter(pk=mine.pk).values().get()
    client.force_login(bob)
    response = client.post(path.format(id=mine.pk), data, headers=HTMX if htmx else {})
    assert response.status_code == 404
    assert b"diary" not in response.content
    assert Conversation.objects.filter(pk=mine.pk).values().get() == before
    # An id that is nobody's: the same clear 404, never a 500.
    response = client.post(path.format(id=987654), data, headers=HTMX if htmx else {})
    assert response.status_code == 404
    if "delete" not in path:  # the existing delete view keeps Django's 404 page
        assert response.content.decode() == "That conversation does not exist."


@pytest.mark.django_db
def test_bob_never_sees_alices_rows(client, alice, bob):
    _make(alice, "Alice's secret", ago=timedelta(hours=1))
    client.force_login(bob)
    for url in ("/sidebar/", "/sidebar/archived/"):
        assert "secret" not in client.get(url, headers=HTMX).content.decode()


@pytest.mark.django_db
def test_actions_need_the_csrf_token(alice):
    mine = _make(alice, "Guarded", ago=timedelta(hours=1))
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    for path in ("pin", "archive", "delete", "restore"):
        assert client.post(f"/conversations/{mine.pk}/{path}/").status_code == 403
    assert client.get(f"/conversations/{mine.pk}/pin/").status_code == 405
    mine.refresh_from_db()
    assert mine.pinned_at is None and mine.archived_at is None and mine.deleted_at is None


@pytest.mark.django_db
def test_a_plain_form_comes_back_to_its_page_and_never_leaves_the_site(client, alice):
    here = _make(alice, "Here", ago=timedelta(minutes=1))
    other = _make(alice, "There", ago=timedelta(hours=1))
    client.force_login(alice)
    back = f"/conversations/{here.pk}/"
    response = client.post(f"/conversations/{other.pk}/pin/", {"pinned": "1", "next": back})
    assert response.status_code == 302 and response["Location"] == back
    response = client.post(
        f"/conversations/{other.pk}/archive/", {"archived": "1", "next": "https://evil.example/"}
    )
    assert response["Location"] == "/"


@pytest.mark.django_db
def test_a_bad_cursor_is_a_400_and_the_list_urls_are_pages_without_scripts(client, alice):
    client.force_login(alice)
    assert client.get("/sidebar/?after=nonsense", headers=HTMX).status_code == 400
    assert client.get("/sidebar/?after=u.1.x", headers=HTMX).status_code == 400
    assert client.get("/sidebar/archived/")["Location"] == "/?sidebar=archived"
    assert client.get("/sidebar/")["Location"] == "/"


@pytest.mark.django_db
def test_the_sidebar_has_no_inline_script_handler_or_style(client, alice):
    here = _make(alice, "Strict", ago=timedelta(minutes=1))
    _make(alice, "Pinned one", ago=timedelta(days=2), pinned_at=timezone.now())
    client.force_login(alice)
    html = client.get(f"/conversations/{here.pk}/").content.decode()
    nav = html[html.index('<nav class="sidebar"') : html.index("</nav>")]
    assert not re.search(r"\son[a-z]+=|\sstyle=|<script(?![^>]*\ssrc=)", nav)
    # Every row action is a labelled control naming its conversation.
    assert 'aria-label="Actions for “Strict”"' in nav
    for action in ("Pin “Strict”", "Archive “Strict”", "Delete “Strict”", "Unpin “Pinned one”"):
        assert f'aria-label="{action}"' in nav


# --- thousands of conversations, a page at a time ---------------------------------------------


@pytest.fixture
def thousands(alice, bob):
    """3,000 of alice's conversations, three to each instant (ties the id must break), two hours
    apart: every heading has some. Seven are pinned, some archived, some deleted; bob has his
    own. Returns alice's listed ids in the order the sidebar must show them."""
    now = timezone.now()
    rows = []
    for i in range(3000):
        rows.append(
            Conversation(
                owner=alice,
                model="m",
                title=f"Conversation {i}",
                updated_at=now - timedelta(hours=2 * (i // 3)),
                pinned_at=now if i % 400 == 7 else None,
                archived_at=now if i % 97 == 5 else None,
                deleted_at=now if i % 89 == 3 else None,
            )
        )
    rows += [
        Conversation(owner=bob, model="m", title=f"Bob {i}", updated_at=now) for i in range(50)
    ]
    times = [row.updated_at for row in rows]
    Conversation.objects.bulk_create(rows, batch_size=500)  # updated_at is auto_now: set to now
    for row, at in zip(rows, times, strict=True):
        row.updated_at = at
    Conversation.objects.bulk_update(rows, ["updated_at"], batch_size=500)  # the times given here
    listed = Conversation.objects.filter(
        owner=alice, deleted_at__isnull=True, archived_at__isnull=True
    )
    values = list(listed.values_list("pk", "updated_at", "pinned_at"))
    values.sort(key=lambda r: (r[2] is None, -r[1].timestamp(), -r[0]))
    return [pk for pk, _, _ in values]


@pytest.mark.django_db
def test_thousands_page_by_page_nothing_twice_nothing_missed_fixed_queries(
    client, alice, thousands
):
    client.force_login(alice)
    seen: list[int] = []
    headings: list[str] = []
    counts: list[int] = []
    url = "/sidebar/"
    while url:
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url, headers=HTMX)
        assert response.status_code == 200
        html = response.content.decode()
        counts.append(len(queries))
        rows = _rows(html)
        assert 0 < len(rows) <= sidebar.PAGE_SIZE
        seen += rows
        headings += _headings(html)
        found = NEXT.search(html)
        url = f"/sidebar/?after={found.group(1)}" if found else None
        assert len(counts) < 100, "paging does not end"

    assert seen == thousands  # the order, and each once
    assert len(seen) > 2500
    # Each heading once, across all pages, in order.
    assert headings == [
        "Pinned",
        "Today",
        "Yesterday",
        "Previous 7 days",
        "Previous 30 days",
        "Older",
    ]
    # The first page reads the pinned rows then the others; every later page the same fixed
    # number of queries (session, user, one page), the 60th as cheap as the 2nd.
    assert len(set(counts[1:])) == 1, counts
    assert counts[0] <= counts[1] + 1, counts
    assert counts[1] <= 3, counts


@pytest.mark.django_db
def test_the_first_page_costs_the_same_for_ten_or_thousands(client, alice, bob):
    def first_page_queries() -> int:
        client.force_login(alice)
        with CaptureQueriesContext(connection) as queries:
            client.get("/sidebar/", headers=HTMX)
        return len(queries)

    for i in range(10):
        _make(alice, f"few {i}", ago=timedelta(hours=i))
    few = first_page_queries()
    Conversation.objects.bulk_create(
        [Conversation(owner=alice, model="m", title=f"many {i}") for i in range(2000)]
    )
    assert first_page_queries() == few


@pytest.mark.django_db
def test_an_action_draws_the_list_again_with_the_rows_the_page_showed(client, alice):
    made = [_make(alice, f"Row {i}", ago=timedelta(minutes=i)) for i in range(120)]
    client.force_login(alice)
    response = client.post(
        f"/conversations/{made[0].pk}/pin/", {"pinned": "1", "shown": "100"}, headers=HTMX
    )
    assert len(_rows(response.content.decode())) == 100
    response = client.post(
        f"/conversations/{made[0].pk}/pin/", {"pinned": "0", "shown": "999999"}, headers=HTMX
    )
    assert len(_rows(response.content.decode())) == 120  # all there are (capped at MAX_SHOWN)


@pytest.mark.django_db
@pytest.mark.parametrize("view", [sidebar.MAIN, sidebar.ARCHIVED])
def test_every_list_is_read_in_an_index_order_without_a_sort(alice, view):
    """The pinned, the unpinned and the archived rows each come from an index in the list's
    order: a page reads its rows and stops, whatever else the user has."""
    now = timezone.now()
    for i in range(60):
        stamp = {"pinned_at": now} if i % 3 == 0 else {"archived_at": now} if i % 3 == 1 else {}
        _make(alice, f"c{i}", ago=timedelta(minutes=i), **stamp)
    with CaptureQueriesContext(connection) as queries:
        sidebar.page(alice, view=view)
    reads = [q["sql"] for q in queries if "chat_conversation" in q["sql"]]
    assert len(reads) == (2 if view == sidebar.MAIN else 1)
    sqlite = connection.vendor == "sqlite"
    with transaction.atomic(), connection.cursor() as cursor:
        if not sqlite:  # a few rows: PostgreSQL would rather sort; can an index spare it?
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_sort = off")
        for sql in reads:
            cursor.execute(("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + sql)
            plan = " ".join(str(row) for row in cursor.fetchall())
            assert ("TEMP B-TREE" if sqlite else "Sort") not in plan, plan
