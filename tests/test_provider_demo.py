"""The offline demo model: deterministic, streamed, and honest about the window it was sent."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.assembly import summary_pair
from compaction.brief import rule_based_summary
from compaction.entries import Entry
from providers import registry
from providers.tokens import estimate_request, estimate_text
from providers.values import Final, Request, TextDelta
from support.waiting import until

SYSTEM = "You are a helpful assistant."


@pytest.fixture(autouse=True)
def no_word_delay(settings):
    settings.DEMO_WORD_DELAY_MS = 0


async def ask(
    messages: list[dict], system: str = SYSTEM, chunks: list[str] | None = None
) -> tuple[list[str], Final]:
    chunks = [] if chunks is None else chunks
    reply = None
    request = Request(model="demo", system=system, messages=messages, max_tokens=512)
    async for event in registry.client_for("demo").stream(request):
        if isinstance(event, TextDelta):
            chunks.append(event.text)
        else:
            reply = event
    return chunks, reply


def summarised_window() -> list[dict]:
    """A window headed by a summary, as the compaction room builds it."""
    return [
        *summary_pair(
            "Alice is planning a trip to Lisbon in May.\nHer budget is 900 euros for the hotel."
        ),
        {"role": "user", "content": "I also want to see the tiled azulejo museum."},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted: the museum."}]},
        {"role": "user", "content": "What hotel budget did I give you?"},
    ]


async def test_it_streams_several_chunks_that_make_up_the_reply():
    chunks, reply = await ask([{"role": "user", "content": "Hello there"}])

    assert len(chunks) > 5
    assert "".join(chunks) == reply.text
    assert reply.content == [{"type": "text", "text": reply.text}]
    assert reply.model == "demo"
    assert reply.stop_reason == "end_turn"


async def test_it_reports_the_message_count_and_no_summary():
    messages = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": [{"type": "text", "text": "two"}]},
        {"role": "user", "content": "three"},
    ]

    _, reply = await ask(messages)

    tokens = estimate_request(SYSTEM, messages)
    assert reply.text.startswith("I'm the offline demo model.")
    assert f"My window holds 3 messages (about {tokens:,} tokens)" in reply.text
    assert "no summary" in reply.text
    assert "You said: “three”" in reply.text


async def test_it_reports_a_summary_heading_the_window():
    _, reply = await ask(summarised_window())

    assert "My window holds 5 messages" in reply.text
    assert "headed by a summary of earlier turns" in reply.text


async def test_a_first_message_that_only_mentions_the_summary_tag_is_no_summary():
    pasted = "Fix my prompt: <summary> goes around the summary, then </summary>."
    messages = [
        {"role": "user", "content": pasted},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": "Thanks"},
    ]

    _, reply = await ask(messages)

    assert "no summary" in reply.text


async def test_it_quotes_the_best_matching_window_line_for_a_question():
    _, reply = await ask(summarised_window())

    assert "> Her budget is 900 euros for the hotel." in reply.text


def test_with_the_recall_tool_a_line_that_gives_the_address_asked_for_answers_from_the_window():
    from providers.demo import compose

    said = "Our staging DB is at postgres://10.2.3.4:5432/app and the runbook is /srv/db.md."
    messages = [
        {"role": "user", "content": said},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "What is the staging DB address?"},
    ]
    text, call = compose(SYSTEM, messages, can_search=True)
    assert call is None and said in text  # not "nothing in my window", then a search
    messages[0]["content"] = "Our staging DB is slow today."
    assert compose(SYSTEM, messages, can_search=True)[1].name == "search_history"


async def test_the_quote_never_is_the_question_itself():
    _, reply = await ask([{"role": "user", "content": "What is the hotel budget?"}])

    assert "Nothing in my window matches your question." in reply.text
    assert ">" not in reply.text


async def test_it_says_so_when_nothing_matches():
    messages = summarised_window()
    messages[-1] = {"role": "user", "content": "Do penguins enjoy jazz?"}

    _, reply = await ask(messages)

    assert "Nothing in my window matches your question." in reply.text


async def test_a_statement_gets_no_quote():
    messages = summarised_window()
    messages[-1] = {"role": "user", "content": "Tell me about the hotel budget."}

    _, reply = await ask(messages)

    assert "matches your question" not in reply.text


async def test_tool_blocks_are_read_as_text():
    messages = [
        {"role": "user", "content": "Look up the weather."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "Oslo: snowing, -4C"}
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "It is snowing."}]},
        {"role": "user", "content": "Is it snowing in Oslo?"},
    ]

    _, reply = await ask(messages)

    assert "> Oslo: snowing, -4C" in reply.text


async def test_it_is_deterministic():
    first_chunks, first = await ask(summarised_window())
    second_chunks, second = await ask(summarised_window())

    assert first_chunks == second_chunks
    assert first == second


async def test_it_reports_usage():
    messages = summarised_window()

    _, reply = await ask(messages)

    assert reply.usage.as_dict() == {
        "input_tokens": estimate_request(SYSTEM, messages),
        "output_tokens": estimate_text(reply.text),
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    assert reply.usage.known


async def test_it_waits_between_words(settings):
    settings.DEMO_WORD_DELAY_MS = 5
    loop = asyncio.get_running_loop()
    start = loop.time()

    chunks, _ = await ask([{"role": "user", "content": "hi"}])

    assert loop.time() - start >= (len(chunks) - 1) * 0.005 * 0.9


async def test_it_can_be_cancelled_between_words(settings):
    settings.DEMO_WORD_DELAY_MS = 50
    chunks: list[str] = []
    task = asyncio.create_task(ask(summarised_window(), chunks=chunks))
    await until(lambda: len(chunks) >= 2)  # under way, waiting for its next word
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    settings.DEMO_WORD_DELAY_MS = 0
    whole, _ = await ask(summarised_window())
    assert 2 <= len(chunks) < len(whole)


async def test_it_answers_an_empty_window():
    _, reply = await ask([])

    assert "My window holds 0 messages" in reply.text


# --- recall: the answer quoted, not the question's echo ------------------------------------------

QUESTION = "What did I say my name was?"


def searched(hits: list[tuple[int, str, str]]) -> list[dict]:
    """A window whose last message is the search_history result holding `hits`, as
    tools/recall.py writes them (matched words between **)."""
    lines = [f"{len(hits)} best matches for {QUESTION!r}, best first:"]
    lines += [
        f"#{seq} · {role} · 2026-12-04 10:0{seq % 10} · score 2\n  {s}" for seq, role, s in hits
    ]
    call = {"type": "tool_use", "id": "t1", "name": "search_history", "input": {"query": QUESTION}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "\n".join(lines)}
    return [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [{"type": "text", "text": "I'll search."}, call]},
        {"role": "user", "content": [result]},
    ]


async def test_the_recall_answer_skips_echoes_of_the_question_and_names_the_message():
    hits = [
        (14, "assistant", "…You said: “What did I say my **name** was?” Nothing in my window…"),
        (13, "user", "What did I say my **name** was?"),
        (16, "assistant", 'search_history {"query": "What did I say my **name** was?"}'),
        (3, "user", "My **name** is Ada Lovelace and my project lives in /srv/engine."),
    ]

    _, reply = await ask(searched(hits))

    assert reply.text == (
        "I searched our earlier messages. In message #3 you said: “My name is Ada Lovelace and "
        "my project lives in /srv/engine.”"
    )


async def test_a_message_that_answers_as_well_as_asks_is_no_echo():
    hits = [(5, "user", "My **name** is Ada, remember it. What did I say my **name** was?")]

    _, reply = await ask(searched(hits))

    assert "In message #5 you said: “My name is Ada, remember it." in reply.text


async def test_a_persons_message_is_quoted_before_a_reply_that_repeats_it():
    hits = [
        (9, "assistant", "In message #3 you said: “My **name** is Ada Lovelace.”"),
        (3, "user", "My **name** is Ada Lovelace."),
    ]

    _, reply = await ask(searched(hits))

    assert reply.text.endswith("In message #3 you said: “My name is Ada Lovelace.”")
    assert "#9" not in reply.text


async def test_hits_that_only_echo_the_question_are_said_to_be_so():
    hits = [(13, "user", "What did I say my **name** was?")]

    _, reply = await ask(searched(hits))

    assert "found only the question asked again" in reply.text
    assert "#13" not in reply.text


async def test_a_fact_the_brief_kept_is_quoted_with_the_number_of_its_message():
    said = [
        "Hello! I am trying out the demo.",
        "My name is Ada Lovelace and my project lives in /srv/engine.",
        "The lamp launch plan moves on: marketing wants the copy first.",
    ]
    folded = [Entry(2 * i + 1, "user", [{"type": "text", "text": s}]) for i, s in enumerate(said)]
    brief = rule_based_summary(folded, None, max_chars=1_350)
    messages = [
        *summary_pair(brief),
        {"role": "user", "content": "Carry on."},
        {"role": "assistant", "content": [{"type": "text", "text": "Carrying on."}]},
        {"role": "user", "content": QUESTION},
    ]

    _, reply = await ask(messages)

    # The fact as the brief keeps it: the clause that names her, not the whole sentence.
    assert "\n- (#3) My name is Ada Lovelace\n" in brief
    assert "citing message #3: “My name is Ada Lovelace" in reply.text


# --- recall across conversations: when nothing here answers, the user's other conversations ---


def searched_everywhere(first_hits: str, scope: str | None = None) -> list[dict]:
    """A window ending with a search_history result (`first_hits`, as tools/recall.py writes
    them) for a search of `scope` (None: the default, this conversation)."""
    arguments = {"query": QUESTION, "limit": 5} | ({"scope": scope} if scope else {})
    call = {"type": "tool_use", "id": "t1", "name": "search_history", "input": arguments}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": first_hits}
    return [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [{"type": "text", "text": "I'll search."}, call]},
        {"role": "user", "content": [result]},
    ]


def test_nothing_found_here_sends_it_to_the_other_conversations():
    from providers.demo import compose

    nothing = f"No message of this conversation matches {QUESTION!r}."
    text, arguments = compose(SYSTEM, searched_everywhere(nothing), can_search=True)
    assert arguments.input == {"query": QUESTION, "limit": 5, "scope": "all"}
    assert "other" in text
    # Only echoes of the question here are no answer either.
    echoes = "1 best matches:\n#13 · user · 2026-12-04 10:03 · score 2\n  What was my **name**?"
    assert compose(SYSTEM, searched_everywhere(echoes), can_search=True)[1].input["scope"] == "all"
    # Having looked everywhere, it says what it found (here: nothing) and stops.
    text, arguments = compose(SYSTEM, searched_everywhere(nothing, "all"), can_search=True)
    assert arguments is None and "found nothing" in text


async def test_a_hit_in_another_conversation_is_said_to_be_there():
    hits = (
        "2 best matches of your conversations:\n"
        "#4 · user · 2026-12-01 09:00 · score 3 · this conversation (7)\n"
        "  What did I say my **name** was?\n"
        "#2 · user · 2026-11-20 18:30 · score 2 · conversation 3 “Introductions [old]” · "
        "/conversations/3/?at=2#msg-2\n"
        "  My **name** is Ada Lovelace."
    )
    _, reply = await ask(searched_everywhere(hits, "all"))
    assert reply.text == (
        "I searched your other conversations. In [conversation 3 “Introductions \\[old\\]”, "
        "message #2](/conversations/3/?at=2#msg-2) you said: “My name is Ada Lovelace.”"
    )


# --- whether a hit answers: the question's subject, and a value of the kind it asks for --------


@pytest.mark.parametrize(
    ("question", "text"),
    [
        ("What S3 bucket name did I suggest?", "For the S3 bucket I suggest acme-logs-eu."),
        ("What is my cat called?", "My cat is called Miso and she sleeps on the router."),
        ("What did I say my name was?", "My name is Ada Lovelace."),
        ("Who is the lighthouse keeper?", "The lighthouse keeper is called Morwenna Trask."),
        ("Which port does the heron server listen on?", "The heron server listens on port 8443."),
        ("Which database did we pick for the audit log?", "The audit log moves to PostgreSQL 16."),
        ("What error did the nightly job crash with?", "The nightly job crashed with error E4821."),
        ("How many replicas does the queue run?", "The queue runs 3 replicas."),
        ("What colour is the boat?", "The colour of the boat is blue."),
        ("What is the vault combination?", "The vault combination is 31-17-42."),
        ("Is it snowing in Oslo?", "Oslo: snowing, -4C"),
        ("What hotel budget did I give you?", "Her budget is 900 euros for the hotel."),
        ("Which box holds the pelican key today?", "The pelican key is in the blue box."),
        ("Who owns the price sheet?", "Ravi Menon owns the price sheet."),
        # Where something is: the answer gives the address without the word.
        ("What is the staging DB address?", "Our staging DB is at postgres://10.2.3.4:5432/app."),
        ("What is the runbook path?", "The runbook is /srv/runbooks/db.md, kept by Priya."),
        ("What URL did we settle on for the docs?", "The docs move to https://docs.example.org."),
    ],
)
def test_a_text_that_holds_the_subject_and_a_value_of_the_kind_answers(question, text):
    from providers.answering import answers, asked

    assert answers(asked(question), text)


@pytest.mark.parametrize(
    ("question", "text"),
    [
        # The subject's words and the kind's, but no bucket named.
        ("What S3 bucket name did I suggest?", "I will suggest an S3 bucket name after legal."),
        ("What S3 bucket name did I suggest?", "Keep the invoices in S3, I suggest."),  # no bucket
        ("What is my cat called?", "The restart script is called restart.sh."),  # no cat
        ("What is my cat called?", "My cat is called… what was it again?"),  # only a question
        ("What is my cat called?", "I told you: “My cat is the grey one.”"),  # no name in it
        ("Who is the lighthouse keeper?", "- (#4) The lighthouse keeper retired."),  # nor here
        ("Who is the lighthouse keeper?", "The lighthouse keeper is new this year."),  # no name
        ("Which port does the heron server listen on?", "The heron server listens on a port."),
        ("How many replicas does the queue run?", "The queue runs several replicas."),
        ("What colour is the boat?", "The boat colour?"),
        ("What do you think?", "I think it is fine."),  # it names no subject
        ("Which box holds the heron key?", "The pelican key is in the blue box."),
        ("Who owns the price sheet?", "Ravi Menon owns the photos."),
        ("What is the staging DB address?", "The staging DB is slow today."),  # no address
        ("What is the runbook path?", "The runbook is in the wiki."),
    ],
)
def test_a_text_without_the_subject_or_a_value_of_the_kind_does_not_answer(question, text):
    from providers.answering import answers, asked

    assert not answers(asked(question), text)


def test_the_subject_and_the_kind_are_read_from_the_questions_shape():
    from providers.answering import asked

    bucket = asked("What S3 bucket name did I suggest?")
    assert (bucket.subject, bucket.kind) == ({"s3", "bucket"}, "name")
    cat = asked("What is my cat called?")
    assert (cat.subject, cat.kind) == ({"cat"}, "name")
    port = asked("Which port does the heron staging server listen on?")
    assert (port.subject, port.kind) == ({"heron", "stag", "server", "listen"}, "number")
    where = asked("What is the staging DB address?")
    assert (where.subject, where.kind) == ({"stag", "db"}, "identifier")
    alone = asked("What is the address?")  # the word is all it says: the subject
    assert (alone.subject, alone.kind) == ({"address"}, None)


async def test_a_hit_that_shares_the_words_but_not_the_answer_is_passed_over():
    hits = [
        (
            3,
            "user",
            "Before we pick an **S3** **bucket** **name**, legal must sign; I'll suggest one.",
        ),
        (5, "user", "For the **S3** **bucket** I **suggest** acme-invoices-eu, versioned."),
    ]
    messages = searched(hits)
    messages[0]["content"] = "What S3 bucket name did I suggest?"
    messages[1]["content"][1]["input"]["query"] = "What S3 bucket name did I suggest?"

    _, reply = await ask(messages)

    assert reply.text == (
        "I searched our earlier messages. In message #5 you said: “For the S3 bucket I suggest "
        "acme-invoices-eu, versioned.”"
    )


VOCABULARY = (
    "what which who where how many is did does the my cat called name S3 bucket port "
    "acme-logs Miso 8443 say suggest holds today “quoted” I'll (#3) - ,"
).split()
WORDS = st.sampled_from(VOCABULARY)  # a question: one sentence
TEXT = st.sampled_from([*VOCABULARY, ".", "?"])


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=12), st.lists(TEXT, max_size=20))
def test_an_answer_always_holds_the_subject_and_a_question_never_answers_itself(q, t):
    from providers.answering import TOKEN_RE, answers, asked, stem

    question, text = " ".join(q) + "?", " ".join(t)
    asking = asked(question)
    assert not answers(asking, question)
    if answers(asking, text):
        assert asking.subject <= {stem(w) for w in TOKEN_RE.findall(text)}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.text(max_size=200))
def test_any_question_and_text_are_read_without_error(question, text):
    from providers.answering import answers, asked

    assert answers(asked(question), text) in (True, False)


@pytest.mark.parametrize("line", ["/" * 100_000, "a" + ":" * 100_000, "x " * 50_000 + "cat?"])
def test_a_long_line_is_read_in_linear_time(line):
    import time

    from providers.answering import answers, asked

    started = time.perf_counter()
    answers(asked("What is my cat called?"), line)
    # Quadratic reading took a minute and more on lines like these.
    assert time.perf_counter() - started < 2
