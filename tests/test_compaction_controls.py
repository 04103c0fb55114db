"""A conversation chooses when it compacts and how much it keeps verbatim, in its settings:
within safe bounds (refused with a sentence otherwise, never a 500), the environment's defaults
while it has not chosen, and the policy, the cut and the meter all follow what it chose."""

from __future__ import annotations

import json
import re

import pytest
from django.db import transaction
from hypothesis import given
from hypothesis import strategies as st

from chat import compactions
from chat.models import Conversation
from chat.snapshot import read_snapshot
from chat.window_loading import load_window, state_of
from compaction.models import Compaction
from compaction.policy import Budget, shares, shares_problem
from support.waiting import settle
from tests.conftest import receive_until, socket_for
from tests.test_auto_compaction import REPLY_DONE
from tests.transcripts import add_turns

pytestmark = pytest.mark.django_db

DEFAULTS = {"default_auto": 0.6, "default_keep": 0.25}


@pytest.fixture(autouse=True)
def budget(settings):
    settings.CONTEXT_BUDGET_TOKENS = 2_000
    settings.AUTO_COMPACT_AT = 0.6
    settings.KEEP_TAIL_SHARE = 0.25


def save(client, conversation, **fields) -> str:
    """Post the settings form as the page sends it (every field) and read the page it leads to."""
    form = {
        "system_prompt": conversation.system_prompt,
        "auto_compact_at": "",
        "keep_tail_share": "",
        "summary_model": "",
    }
    response = client.post(
        f"/conversations/{conversation.pk}/settings/", form | fields, follow=True
    )
    assert response.status_code == 200
    return response.content.decode()


def marker(page: str) -> tuple[str, str]:
    """The meter's auto-compaction marker: where it is drawn (% of the bar) and what it says."""
    found = re.search(
        r'<svg class="threshold-mark" aria-hidden="true"><title>Auto-compaction at ([\d,]+) '
        r'tokens</title><line x1="([\d.]+)%"',
        page,
    )
    assert found, "no auto-compaction marker on the meter"
    return found.group(2), found.group(1)


# --- the bounds, as plain values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("auto_at", "keep", "expected"),
    [
        (None, None, None),
        (0.3, 0.2, None),
        (0.9, 0.8, None),
        (0.45, None, None),  # the default tail (25%) is 20 points under
        (0.29, None, "between 30% and 90%"),
        (0.91, 0.1, "between 30% and 90%"),
        (None, 0.04, "at least 5%"),
        (0.6, 0.55, "keep at most 50%"),
        (0.3, None, "Keeping 25% (the default) verbatim"),  # the default tail is too close
        (None, 0.5, None),  # exactly ten points under: allowed
    ],
)
def test_the_bounds_of_a_choice(auto_at, keep, expected):
    problem = shares_problem(auto_at, keep, **DEFAULTS)
    if expected is None:
        assert problem is None, problem
    else:
        assert problem is not None and expected in problem


def test_no_choice_is_the_environments_and_a_choice_wins():
    assert shares(None, None, **DEFAULTS) == (0.6, 0.25)
    assert shares(0.8, None, **DEFAULTS) == (0.8, 0.25)
    assert shares(None, 0.1, **DEFAULTS) == (0.6, 0.1)
    assert shares(0.45, 0.3, **DEFAULTS) == (0.45, 0.3)


def test_a_default_moved_under_a_choice_gives_way_in_the_tail_never_the_threshold():
    # Chosen at 35% when the default tail was 25%; the environment's tail is now 40%.
    auto, keep = shares(0.35, None, default_auto=0.6, default_keep=0.4)
    assert auto == 0.35 and 0 < keep <= 0.25
    # Never one the budget refuses, whatever the environment holds.
    auto, keep = shares(None, 0.3, default_auto=0.32, default_keep=0.25)
    assert 0 < keep < auto == 0.32
    # Giving way never makes the tail longer than chosen.
    assert shares(None, 0.05, default_auto=0.12, default_keep=0.1) == (0.12, 0.05)


share = st.floats(min_value=0.01, max_value=1.0)


@given(
    auto_at=st.none() | st.floats(min_value=0.3, max_value=0.9),
    keep=st.none() | st.floats(min_value=0.05, max_value=0.8),
    env=st.tuples(share, share).filter(lambda e: e[1] < e[0]),
)
def test_whatever_was_chosen_and_whatever_the_environment_says_the_budget_holds(auto_at, keep, env):
    """A choice made under other defaults never breaks a page: the shares always make a budget
    (0 < keep < compact at), the threshold is the one chosen, the tail never longer."""
    auto, kept = shares(auto_at, keep, default_auto=env[0], default_keep=env[1])
    Budget(total=10_000, auto_at=auto, keep_share=kept)  # raises on shares that would loop
    assert auto == (env[0] if auto_at is None else auto_at)
    assert kept <= (env[1] if keep is None else keep)


# --- the settings form ----------------------------------------------------------------------------


def test_a_choice_is_saved_as_a_share_and_empty_is_the_default(client, alice, conversation):
    client.force_login(alice)
    page = save(client, conversation, auto_compact_at="45", keep_tail_share="15")
    assert "Settings saved." in page
    conversation.refresh_from_db()
    assert (conversation.auto_compact_at, conversation.keep_tail_share) == (0.45, 0.15)
    # The form shows the choice, and the default it would have as the placeholder.
    assert re.search(r'name="auto_compact_at"[^>]*value="45"[^>]*placeholder="60"', page)
    assert re.search(r'name="keep_tail_share"[^>]*value="15"[^>]*placeholder="25"', page)
    save(client, conversation)
    conversation.refresh_from_db()
    assert (conversation.auto_compact_at, conversation.keep_tail_share) == (None, None)


@pytest.mark.parametrize(
    ("auto_at", "keep", "said"),
    [
        ("20", "", "Compact at must be between 30% and 90% of the budget."),
        ("95", "10", "Compact at must be between 30% and 90% of the budget."),
        ("", "2", "Keep verbatim must be at least 5% of the budget."),
        ("60", "55", "keep at most 50% (10 points under), or compact later."),
        ("30", "", "Keeping 25% (the default) verbatim leaves too little"),
        ("lots", "", "Compact at must be a percentage of the budget (30% to 90%)."),
        ("", "nan", "Keep verbatim must be a percentage of the budget"),
        ("1e999", "", "Compact at must be a percentage of the budget"),
    ],
)
def test_a_choice_out_of_bounds_is_refused_with_why_and_nothing_changes(
    client, alice, conversation, auto_at, keep, said
):
    Conversation.objects.filter(pk=conversation.pk).update(
        auto_compact_at=0.5, keep_tail_share=0.2, system_prompt="Kept."
    )
    client.force_login(alice)
    page = save(
        client, conversation, auto_compact_at=auto_at, keep_tail_share=keep, system_prompt="New."
    )
    assert "Settings not saved." in page and said in page
    conversation.refresh_from_db()
    assert (conversation.auto_compact_at, conversation.keep_tail_share) == (0.5, 0.2)
    assert conversation.system_prompt == "Kept."


def test_another_users_conversation_cannot_be_changed(client, bob, conversation):
    client.force_login(bob)
    response = client.post(
        f"/conversations/{conversation.pk}/settings/",
        {"system_prompt": "", "auto_compact_at": "40", "keep_tail_share": "10"},
    )
    assert response.status_code == 404
    conversation.refresh_from_db()
    assert conversation.auto_compact_at is None


# --- the policy, the cut and the meter follow it -------------------------------------------------


def test_auto_compaction_fires_at_the_conversations_share_not_the_default(conversation):
    add_turns(conversation, 5)  # about 40% of the 2,000-token budget
    window = load_window(conversation)
    assert 0.35 * 2_000 < window.tokens < 0.6 * 2_000
    assert not compactions.auto_due(conversation, window, draft_waiting=False)
    Conversation.objects.filter(pk=conversation.pk).update(auto_compact_at=0.35)
    conversation.refresh_from_db()
    window = load_window(conversation)
    assert window.budget.threshold == 700
    assert compactions.auto_due(conversation, window, draft_waiting=False)


def test_a_conversation_that_never_chose_follows_the_environment(conversation, settings):
    add_turns(conversation, 5)
    settings.AUTO_COMPACT_AT = 0.35
    assert load_window(conversation).budget.threshold == 700
    assert compactions.auto_due(conversation, load_window(conversation), draft_waiting=False)


def _kept_from(conversation) -> tuple[int, int]:
    """Where a compaction opened now would cut, and the tokens it keeps verbatim."""
    with transaction.atomic():
        locked = Conversation.objects.locked(conversation.pk)
        snapshot = read_snapshot(conversation.pk)
        state = state_of(locked, snapshot)
        opened = compactions.open_locked(locked, state, snapshot.later_versions(), trigger="manual")
        transaction.set_rollback(True)  # only the plan is wanted
    return opened.row.first_kept_seq, sum(
        e.tokens for e in state.entries if e.seq >= opened.row.first_kept_seq
    )


def test_a_compaction_keeps_the_conversations_share_verbatim(conversation):
    add_turns(conversation, 14, words=10)
    cut_default, kept_default = _kept_from(conversation)
    assert kept_default <= 0.25 * 2_000
    Conversation.objects.filter(pk=conversation.pk).update(
        auto_compact_at=0.5, keep_tail_share=0.08
    )
    conversation.refresh_from_db()
    cut, kept = _kept_from(conversation)
    assert kept <= 0.08 * 2_000 < kept_default
    assert cut > cut_default  # less is kept: the cut comes later


def test_the_meters_marker_moves_with_the_choice(client, alice, conversation):
    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert marker(page) == ("60.0", "1,200")
    assert "auto-compacts at 1,200" in page
    page = save(client, conversation, auto_compact_at="45")
    assert marker(page) == ("45.0", "900")
    assert "auto-compacts at 900" in page
    # The panel the socket and the reconnect fetch render says the same.
    context = client.get(f"/conversations/{conversation.pk}/context/").content.decode()
    assert marker(context) == ("45.0", "900")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_over_the_socket_auto_compaction_fires_at_the_share_chosen(
    alice, conversation, fake_llm, settings
):
    """The engine after each reply: with the threshold chosen at 35% of 2,000 tokens, the
    first compaction comes as the window passes 700, long before the default's 1,200, and it
    keeps no more than the 10% chosen (or the last turn)."""
    await Conversation.objects.filter(pk=conversation.pk).aupdate(
        auto_compact_at=0.35, keep_tail_share=0.1
    )
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    for turn in range(1, 9):
        fake_llm.enqueue([f"Reply {turn}: " + "noted " * 25])
        await ws.send_to(
            text_data=json.dumps({"action": "send", "message": f"Turn {turn} " + "word " * 40})
        )
        await receive_until(ws, REPLY_DONE)
        await settle(conversation.pk)
        if await Compaction.objects.filter(conversation=conversation).aexists():
            break
    await ws.disconnect()
    row = await Compaction.objects.filter(conversation=conversation).afirst()
    assert row is not None, "the window passed the chosen threshold but nothing compacted"
    assert row.trigger == "auto" and row.status == "committed", row.error
    assert 700 <= row.pre_tokens < 1_200
    kept = [
        m.tokens
        async for m in conversation.messages.filter(seq__gte=row.first_kept_seq, status="complete")
    ]
    assert sum(kept) <= max(200, kept[0] + kept[1])  # 10%, or the last turn whole
