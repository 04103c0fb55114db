"""An offline, deterministic stand-in model that describes the window it was sent.

With no API key a newcomer still sees the whole app work: the demo streams word by word, says how
many messages and tokens its window holds and whether a summary heads it, and, asked a question,
quotes the line of its window that answers it, so what the model still "remembers" after a
compaction is visible (a line of the summary that cites a message is quoted with its number).
When no line of its window answers, it calls the recall tool `search_history` (when the request
offers it) and quotes the best hit that answers, with its message number, so recall after a
compaction can be seen without an API key. A hit answers only when it holds what the question
asks about (providers/answering.py): not an echo of the question, nor a message that shares its
words without saying it. When nothing in the conversation answers, it searches the user's other
conversations (scope "all") and links to the message it found there; when nothing there answers
either, it says it found nothing.

Files (providers/demo_files.py): for each file the latest message brought it says its name,
kind, size and token cost, and for a text file or a PDF the line that best matches the
question; asked about a file cleared from its window (a line names it), it calls
`read_attachment` for it, and describes the file that comes back, so a person without an API
key sees files go in, get cleared and come back.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import NamedTuple

from providers import demo_files, titles
from providers.answering import Asked, answers, asked
from providers.blocks import block_text, tool_uses, type_of
from providers.sent_files import estimated
from providers.tokens import estimate_text
from providers.values import (
    Capabilities,
    Event,
    Final,
    Request,
    TextDelta,
    ToolUseStart,
    ToolUseStop,
    Usage,
)

MODEL = "demo"
# Small on purpose: a newcomer sees compaction after a handful of turns.
CONTEXT_WINDOW = 2_000

STOP_WORDS = frozenset(
    """
    the and for are but not you your yours all any can had her was one our out has have him his
    how its may who why what when where which with this that these those from they them their
    there then than too very just also into onto about over under some such only own same so
    does did doing done would could should will shall been being were is it of to in on at by
    me my mine we us i a an or if as be do no yes get got let say said tell told please
    """.split()
)
WORD_RE = re.compile(r"[^\W\d_]{3,}")


class DemoClient:
    """Streams its reply word by word, `word_delay` seconds apart (so Stop can be seen)."""

    name = "demo"

    def __init__(self, *, word_delay: float = 0.0) -> None:
        self.word_delay = max(0.0, word_delay)

    def capabilities(self, model: str) -> Capabilities:
        # It cannot write a summary: compaction uses the rule-based brief, honestly labelled.
        return Capabilities(
            context_window=CONTEXT_WINDOW, can_summarise=False, offline=True, supports_tools=True
        )

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        offered = {t.get("name") for t in request.tools}
        named = titles.exchange(request)
        if named is not None:
            text, call = key_words_title(*named), None
        else:
            # Its files' words are read with pypdf: off the event loop.
            text, call = await asyncio.to_thread(
                compose,
                request.system,
                request.messages,
                can_search=SEARCH_TOOL in offered,
                can_read=demo_files.READ_TOOL in offered,
            )
        for i, chunk in enumerate(re.findall(r"\S+\s*", text)):
            if i:
                # Zero still yields to the loop, so a stop request can land between words.
                await asyncio.sleep(self.word_delay)
            yield TextDelta(chunk)
        content = [{"type": "text", "text": text}]
        if call is not None:
            use = {
                "type": "tool_use",
                "id": f"toolu_demo_{len(request.messages)}",
                "name": call.name,
                "input": call.input,
            }
            content.append(use)
            yield ToolUseStart(1, use["id"], call.name)
            yield ToolUseStop(1, use["id"], call.name, call.input)
        usage = Usage(
            input_tokens=estimated(request.system, request.messages),
            output_tokens=estimate_text(text),
            cache_read_input_tokens=0,
            cache_creation_input_tokens=0,
        )
        yield Final(
            content=content,
            stop_reason="tool_use" if call is not None else "end_turn",
            usage=usage,
            model=MODEL,
        )


# Words in a title the demo makes.
TITLE_WORDS = 4


def key_words_title(user_text: str, reply_text: str) -> str:
    """A title from a first exchange's key words: the person's words said most (ties in the
    order they were written), in the order they came; the reply's when the person's message has
    none (files alone, a greeting)."""
    said = [w for w in WORD_RE.findall(user_text.lower()) if w not in STOP_WORDS]
    said = said or [w for w in WORD_RE.findall(reply_text.lower()) if w not in STOP_WORDS]
    chosen = sorted(dict.fromkeys(said), key=lambda w: -said.count(w))[:TITLE_WORDS]
    return " ".join(sorted(chosen, key=said.index)).capitalize()


class Call(NamedTuple):
    """A tool the demo calls: its name and input."""

    name: str
    input: dict


SEARCH_TOOL = "search_history"
# Hits asked for: room for the question's own echoes (asked before, repeated in replies) besides
# the answer, in a window the size of the demo's.
SEARCH_LIMIT = 5
# A window headed by a summary opens with a user message carrying it between these tags, each on
# a line of its own, and the assistant's acknowledgement (compaction/assembly.py).
SUMMARY_TAGS = ("<summary>", "</summary>")
SUMMARY_RE = re.compile(r"^<summary>$.*^</summary>$", re.MULTILINE | re.DOTALL)
# A search_history answer's hits: "#12 · user · 2026-11-30 18:04 · score 3.1" then the snippet;
# searching every conversation, a hit in another one ends its first line with the conversation
# and the link to its message there (tools/recall.py).
HIT_RE = re.compile(r"^#(\d+) · (\w+) · ([^\n]*)\n\s+(.+)$", re.MULTILINE)
ELSEWHERE_RE = re.compile(r"· conversation (\d+) “(.*)” · (/\S*)$")
# search_history's scope over every conversation of the user's.
EVERYWHERE = "all"
# How a hit's snippet marks the words the search matched, and a question within it (up to its
# question mark, from where the sentence starts or the snippet was cut).
MARK = "**"
QUESTION_RE = re.compile(r"[^.!?\n]*\?")
# A summary's line citing a message: "- (#12) The port is 8443." or "- (#12) "quoted words"".
CITED_RE = re.compile(r'^- \(#(\d+)\) "?(.+?)"?$')


def compose(
    system: str, messages: list[dict], *, can_search: bool = False, can_read: bool = False
) -> tuple[str, Call | None]:
    """The whole reply, a pure function of the request: its text, and the tool it calls (None:
    the turn ends here): search_history when nothing in the window answers, read_attachment
    (`can_read`) when the question asks about a file cleared from it."""
    ended = _results(messages)
    if ended is not None and _last_call(messages).name == demo_files.READ_TOOL:
        return _given_back(ended, messages), None
    if ended is not None:
        results = "\n".join(block_text(b) for b in ended)
        search = _last_call(messages).input
        question = str(search.get("query", ""))
        everywhere = search.get("scope") == EVERYWHERE
        if can_search and not everywhere and not _answers(results, asked(question)):
            text = "Nothing in this conversation answers it; I'll look in your other ones."
            arguments = {"query": question, "limit": SEARCH_LIMIT, "scope": EVERYWHERE}
            return text, Call(SEARCH_TOOL, arguments)
        return quote_hits(results, question, everywhere=everywhere), None
    tokens = estimated(system, messages)
    summarised = _summarised(messages)
    head = (
        f"I'm the offline demo model. My window holds {_plural(len(messages), 'message')} "
        f"(about {_plural(tokens, 'token')}), "
        + (
            "headed by a summary of earlier turns."
            if summarised
            else "with no summary of earlier turns."
        )
    )
    parts = [head]

    last = len(messages) - 1
    while last >= 0 and messages[last].get("role") != "user":
        last -= 1
    if last < 0:
        parts.append("There is no user message in my window to answer.")
        return "\n\n".join(parts), None

    said = " ".join(demo_files.typed(messages[last].get("content")).split())
    parts.append(f"You said: “{_short(said, 160)}”")
    files = demo_files.received(messages[last].get("content"))
    described, answered = demo_files.describe(files, said)
    if described:
        parts.append("\n".join([f"You sent {_plural(len(files), 'file')}:", *described]))
    call = None
    if "?" in said and not answered:
        window = messages[:last] + messages[last + 1 :]
        present = _present(window)
        # A file the question names, cleared from the window: read it again (unless one of
        # that name is in the window anyway).
        lost = can_read and demo_files.cleared_asked_about(
            "\n".join(_message_text(m) for m in window), said, present
        )
        # A file named in the question is where to look, not what a line must say.
        about = said
        for name in present:
            about = re.sub(re.escape(name), " ", about, flags=re.IGNORECASE)
        # With the recall tool at hand, only a line that holds what the question asks about
        # answers it from the window (a line about the otter does not answer a question about
        # the ocelot); otherwise the history is searched. Without the tool, the line sharing
        # half the words will do: it is shown as the best match, not as an answer.
        line = None if lost else _best_line(about, window, strict=can_search)
        if lost:
            parts.append(
                f"{lost['name']} (message #{lost['seq']}) was cleared from my window; "
                "I'll read it again."
            )
            call = Call(demo_files.READ_TOOL, lost)
        elif line:
            parts.append(
                _cited(line)
                or "The line in my window that best matches your question:\n\n> " + _short(line)
            )
        elif can_search:
            parts.append("Nothing in my window matches your question; I'll search our history.")
            call = Call(SEARCH_TOOL, {"query": _short(said, 200), "limit": SEARCH_LIMIT})
        else:
            parts.append("Nothing in my window matches your question.")
    return "\n\n".join(parts), call


def _given_back(results: list[dict], messages: list[dict]) -> str:
    """The reply once read_attachment answered (`results`): the files it gave back, described
    for the question (the person's latest message), or what the tool said went wrong."""
    files = demo_files.received(results)
    question = next(
        (
            typed
            for m in reversed(messages)
            if m.get("role") == "user" and (typed := demo_files.typed(m.get("content")))
        ),
        "",
    )
    if not files:
        said = " ".join(block_text(b) for b in results)
        return f"I could not read the file again: {_short(said)}"
    described, _ = demo_files.describe(files, " ".join(question.split()))
    return "\n".join(["I read it again with read_attachment:", *described])


def _present(window: list[dict]) -> set[str]:
    """The names of the files in the window (sent, or given back by read_attachment)."""
    return {meta["name"] for m in window for meta, _ in demo_files.received(m.get("content"))}


def _results(messages: list[dict]) -> list[dict] | None:
    """The tool results the request ends with (its next step), or None."""
    if not messages or messages[-1].get("role") != "user":
        return None
    results = [b for b in messages[-1].get("content") or [] if isinstance(b, dict)]
    if any(type_of(b) != "tool_result" for b in results):
        return None  # a message the user typed (after an earlier turn's results): answer it
    return results or None


def _last_call(messages: list[dict]) -> Call:
    """The tool call whose results end the request (an empty one if there is none)."""
    before = messages[-2] if len(messages) >= 2 else {}
    content = before.get("content") if before.get("role") == "assistant" else None
    calls = tool_uses(content) if isinstance(content, list) else []
    if not calls:
        return Call("", {})
    return Call(str(calls[-1].get("name", "")), calls[-1].get("input") or {})


def _answers(results: str, question: Asked) -> list[tuple[int, str, str, str]]:
    """A search's hits that answer the question: not an echo of it (their matched words all
    inside questions: the question asked before, or repeated in a reply, or sent as the
    search's own query), and holding what it asks about: (seq, role, where, snippet), `where`
    the Markdown link to the message in another conversation, or empty."""
    found = []
    for seq, role, meta, snippet in HIT_RE.findall(results):
        if _echo(snippet) or not answers(question, snippet):
            continue
        where = ""
        if elsewhere := ELSEWHERE_RE.search(meta):
            conversation, title, link = elsewhere.groups()
            label = f"conversation {conversation} “{_unlinked(title)}”, message #{seq}"
            where = f"[{label}]({link})"
        found.append((int(seq), role, where, snippet))
    return found


def quote_hits(results: str, question: str, *, everywhere: bool = False) -> str:
    """The answer from a search's hits for `question`: the best one that answers it, a person's
    message before a reply (the demo's replies only repeat what it was told), named by its
    number (and linked, in another conversation); or, when none does, that it found nothing
    (`everywhere`: in the user's other conversations either)."""
    hits = _answers(results, asked(question))
    searched = "our earlier messages" + (" and your other conversations," if everywhere else "")
    if not hits:
        echoes = HIT_RE.findall(results)
        if echoes and all(_echo(snippet) for *_, snippet in echoes):
            return f"I searched {searched} and found only the question asked again."
        return f"I searched {searched} and found nothing that answers it."
    seq, role, where, snippet = next((h for h in hits if h[1] == "user"), hits[0])
    who = "you" if role == "user" else "I"
    quote = _short(snippet.replace(MARK, ""), 300)
    if where:
        return f"I searched your other conversations. In {where} {who} said: “{quote}”"
    return f"I searched our earlier messages. In message #{seq} {who} said: “{quote}”"


def _unlinked(title: str) -> str:
    """A title as a link's text: its brackets and backslashes escaped, so it cannot end the
    link's text early."""
    return re.sub(r"([\\\[\]])", r"\\\1", title)


def _echo(snippet: str) -> bool:
    """Whether every word the search matched in a hit's snippet lies inside a question: the
    hit only repeats one, it answers none."""
    return MARK not in QUESTION_RE.sub("", snippet)


def _cited(line: str) -> str | None:
    """A summary's line that cites its message ("- (#12) The port is 8443."), said with the
    number; None for a line that cites none."""
    match = CITED_RE.match(line)
    if match is None:
        return None
    seq, said = match.groups()
    return f"My summary of our earlier turns keeps it, citing message #{seq}: “{_short(said)}”"


def _best_line(question: str, window: list[dict], *, strict: bool = False) -> str | None:
    """The window's line sharing the most of the question's words, of those that answer it
    with `strict`, else of those sharing at least half. Lines that are questions themselves
    are no answer."""
    wanted, asking = _words(question), asked(question)
    best, best_score = None, 0 if strict else max(1, (len(wanted) + 1) // 2)
    for line in _window_lines(window):
        if "?" in line or (strict and not answers(asking, line)):
            continue
        score = len(wanted & _words(line))
        # `>=`: on a tie the later (more recent) line wins.
        if score >= best_score:
            best, best_score = line, score
    return best


def _window_lines(window: list[dict]) -> list[str]:
    """What the user, the summary and tools said: not the demo's own echoes, nor the words that
    introduce a summary."""
    lines = []
    summarised = _summarised(window)
    for i, message in enumerate(window):
        if message["role"] == "assistant":
            continue
        text = _message_text(message)
        if i == 0 and summarised:
            text = text[text.index(SUMMARY_TAGS[0]) :]
        found = (line.strip() for line in text.splitlines())
        lines += [line for line in found if line and not (summarised and line in SUMMARY_TAGS)]
    return lines


def _summarised(messages: list[dict]) -> bool:
    """Whether the window opens with the summary pair, not merely mentions the tag."""
    return (
        len(messages) >= 2
        and messages[0].get("role") == "user"
        and messages[1].get("role") == "assistant"
        and SUMMARY_RE.search(_message_text(messages[0])) is not None
    )


def _words(text: str) -> set[str]:
    return {w for w in WORD_RE.findall(text.lower()) if w not in STOP_WORDS}


def _message_text(message: dict) -> str:
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(demo_files.block_words(b) for b in content)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
