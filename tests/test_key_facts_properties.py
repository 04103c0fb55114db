"""Properties of the fact check (compaction/key_facts.py), for any text: a summary that holds a
fact's identifying text, in any case, punctuation, quotes, Markdown escapes or line breaks,
never lists it as lost; a fact is recorded once; nothing the demo model or the app's brief says
about the window is a fact; a question or a greeting is none."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import key_facts
from compaction.brief import rule_based_summary
from compaction.entries import Entry
from providers.demo import compose

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

lower = st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8)
digits = st.integers(min_value=0, max_value=99999).map(str)
cap = lower.map(str.capitalize)
MONTHS = "January February March April May June July August September October November December"


def url():
    return st.builds(
        lambda scheme, a, b, c, d, port, path: f"{scheme}://{a}.{b}.{c}.{d}:{port}/{path}",
        st.sampled_from(["redis", "https", "postgres", "amqp", "ftp"]),
        *[st.integers(0, 255)] * 4,
        st.integers(1, 65535),
        lower,
    )


TOKENS = st.one_of(
    url(),
    st.builds(lambda a, b, c: f"/{a}/{b}/{c}.md", lower, lower, lower),
    st.builds(lambda a, b: f"{a}_{b}", lower, lower),
    st.builds(lambda a, b, c: f"{a}.{b}_{c}", lower, lower, lower),
    st.builds(lambda a, n: f"{a.upper()[:4]}-{n}", lower, st.integers(10, 99999)),
    st.builds(lambda n: f"{n:,}", st.integers(1000, 10**8)),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(1, 99), st.integers(0, 99)),
    st.builds(lambda n, u: f"{n} {u}", st.integers(1, 999), st.sampled_from(["ms", "GB", "%"])),
    st.builds(lambda n: f"${n:,}", st.integers(1, 10**6)),
    st.builds(lambda a, b: f"{a} {b}", cap, cap),
)
LABELS = st.sampled_from(["The setting is", "Our broker is at", "We agreed on", "Use"])


def sentence_with(token: str, label: str) -> str:
    return f"{label} {token} for the team."


@st.composite
def restated(draw, token: str) -> str:
    """`token` as another writer might put it: case changed, its punctuation swapped for other
    punctuation, Markdown escapes, spaces or line breaks, quoted or in backticks."""
    parts = re.split(r"([^\w]+|_|(?<=\d)(?=[^\W\d_])|(?<=[^\W\d_])(?=\d))", token)
    out = []
    separators = draw(st.sampled_from([",", ""]))  # a number's thousands: all or none
    for i, part in enumerate(parts):
        if i % 2 == 0:  # a run of letters or digits: its case may change, never its characters
            out.append(part.upper() if draw(st.booleans()) else part.lower())
        elif re.search(r"[$€£%]", part) or (part == "," and parts[i + 1][:1].isdigit()):
            # A sign of the number and a thousands separator are the number's, not punctuation.
            out.append(part if part != "," else separators)
        else:  # what stands between two runs: any punctuation, escaped, spaced or broken
            out.append(
                draw(st.sampled_from([part, "\\_", " ", "\n", "-", ".", "/", ": ", "\\*", part]))
            )
    text = "".join(out)
    open_, close = draw(st.sampled_from([("", ""), ("`", "`"), ('"', '"'), ("“", "”"), ("*", "*")]))
    return f"{open_}{text}{close}"


@FAST
@given(TOKENS, LABELS, st.data())
def test_a_summary_holding_a_facts_words_in_any_form_never_lists_it_lost(token, label, data):
    found = key_facts.of_text(sentence_with(token, label), 3)
    assert found, token
    for fact in found:
        summary = f"Earlier: the team met.\n- {data.draw(restated(fact.token))} (noted)\nDone."
        assert key_facts.states(summary, fact), (fact, summary)
        assert not key_facts.lost([fact], summary)


@FAST
@given(
    st.integers(1, 28),
    st.sampled_from(MONTHS.split()),
    st.integers(1990, 2090),
    st.sampled_from(["{y}-{m:02}-{d:02}", "{d} {M} {y}", "{M} {d}, {y}", "{M} {d}th, {y}"]),
)
def test_a_date_is_kept_in_any_of_its_forms(day, month, year, form):
    m = MONTHS.split().index(month) + 1
    (fact,) = key_facts.of_text(f"The launch moved to {day} {month} {year} after review.", 2)
    summary = "Launch: " + form.format(y=year, m=m, d=day, M=month) + "."
    assert key_facts.states(summary, fact)


# How another message may write the same token whole: its case, quotes, backticks, emphasis,
# a Markdown escape.
AGAIN = [
    str.upper,
    str.lower,
    lambda t: f"`{t}`",
    lambda t: f"“{t}”",
    lambda t: f"**{t}**",
    lambda t: t.replace("_", "\\_"),
]


@FAST
@given(
    st.lists(st.tuples(TOKENS, LABELS, st.sampled_from(["user", "assistant"])), max_size=8),
    st.data(),
)
def test_a_fact_is_recorded_once(said, data):
    # Each statement made again in another form, by either role: no fact more, one line each
    # when lost.
    def entries_of(statements):
        return [
            Entry(seq, role, [{"type": "text", "text": sentence_with(token, label)}])
            for seq, (token, label, role) in enumerate(statements, start=1)
        ]

    again = [(data.draw(st.sampled_from(AGAIN))(t), label, role) for t, label, role in said]
    once = {f.key for f in key_facts.of_span(entries_of(said), "")}
    found = key_facts.of_span(entries_of(said + again), "")
    assert len({f.key for f in found}) == len(found)
    assert {f.key for f in found} == once
    lost = key_facts.tally(entries_of(said + again), None, "Nothing kept.").lost
    assert len(set(lost)) == len(lost)


@FAST
@given(st.lists(st.tuples(TOKENS, LABELS), min_size=1, max_size=6), st.data())
def test_the_demo_model_adds_no_fact_of_its_own(said, data):
    # Whatever it is told, the demo's replies (its window: N messages, about N tokens; what it
    # quotes back) state no fact the person did not: its facts are the person's, recorded once.
    sent, entries = [], []
    for token, label in said:
        text = sentence_with(token, label)
        if data.draw(st.booleans()):
            text += " Does this look right?"
        sent.append({"role": "user", "content": text})
        reply, _ = compose("Be brief.", sent)
        sent.append({"role": "assistant", "content": reply})
        for role, value in (("user", text), ("assistant", reply)):
            entries.append(Entry(len(entries) + 1, role, [{"type": "text", "text": value}]))
    everything = {f.key for f in key_facts.of_span(entries, "")}
    persons = {f.key for f in key_facts.of_span([e for e in entries if e.role == "user"], "")}
    assert everything == persons


@FAST
@given(st.integers(0, 10**7), st.integers(0, 10**7), st.integers(1, 9999))
def test_what_a_reply_or_a_brief_says_about_the_window_is_no_fact(messages, tokens, seq):
    for text in (
        f"I'm the offline demo model. My window holds {messages:,} messages (about "
        f"{tokens:,} tokens), headed by a summary of earlier turns.",
        f"I searched our earlier messages. In message #{seq} you said: “ok”",
        f"My summary of our earlier turns keeps it, citing message #{seq}: “ok”",
        f"- ({messages} earlier user messages omitted for length)",
        f"- ({messages} facts left out for length so far)",
    ):
        assert key_facts.of_text(text, 2, by_person=False) == [], text


@FAST
@given(st.lists(st.sampled_from(["hello there", "ok", "sounds good", "thanks!"]), max_size=6))
def test_a_brief_of_messages_that_state_nothing_states_no_fact(said):
    # The app's own framing of a brief (its note, headings, what it left out) is not a fact.
    entries = [Entry(i + 1, "user", [{"type": "text", "text": t}]) for i, t in enumerate(said)]
    brief = rule_based_summary(entries, None, max_chars=800)
    assert key_facts.of_span([], brief) == []


@FAST
@given(TOKENS, LABELS, cap, cap)
def test_questions_and_greetings_are_never_facts(token, label, first, last):
    for text in (
        f"{label} {token} for the team?",
        f"Is it {token}?",
        f"You said: “Is it {token}?”",
        f"Hi {first} {last}!",
        f"Thanks, {first} {last}.",
        "“Thanks, that's great!”",
    ):
        assert key_facts.of_text(text, 1) == [], text
