"""What comes back from the summariser, made safe to keep: the cleaned <summary> of the model's
output, or a deterministic rule-based brief when that is missing, empty or malformed (so a
failed summary is never what gets committed). `from_output` and `by_rules` turn either into a
`SummaryResult`. Plain functions over plain values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction import facts, files, key_facts
from compaction import instructions as steering
from compaction.brief_facts import Room, facts_section
from compaction.entries import Entry
from compaction.prompt import SECTIONS, clip, lines_of, one_line
from providers.values import Usage

RULES_NOTE = "[Rule-based summary (no model): facts kept, user messages, key lines of replies.]"

# --- Markdown kept in its place -------------------------------------------------------------------

# A summary is Markdown: it is rendered on its divider and in "What the model sees", where the
# summary pair goes on after it (the recall note, pinned messages). A code fence that a quoted
# message opens there (three backticks or tildes at the start of a line) and nothing closes
# would swallow everything after it into one code block.
_FENCE_RE = re.compile(r"^([ \t]*)(`{3,}|~{3,})", re.MULTILINE)
_HEADING_RE = re.compile(r"^([ \t]*)(#{1,6})(?=[ \t]|$)", re.MULTILINE)
_FENCE_LINE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


def neutralise_fences(text: str) -> str:
    """Code fences in quoted text made inert: each of their backticks (or tildes) escaped, so
    every character still shows and no code block opens."""
    return _FENCE_RE.sub(lambda m: m.group(1) + "".join(f"\\{c}" for c in m.group(2)), text)


def inert_quote(text: str) -> str:
    """A message quoted inside a summary's bullet: its fences and headings escaped (a quoted
    "## Next step" must not pass for a section), its lines indented to stay in the bullet."""
    text = _HEADING_RE.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", neutralise_fences(text))
    return text.replace("\n", "\n  ")


def close_open_fence(text: str) -> str:
    """A code fence left open at the end (a model's summary cut short) closed, at the opening
    fence's own indentation, so it ends where the summary does."""
    opened: tuple[str, str] | None = None  # (indentation, fence)
    for line in text.split("\n"):
        match = _FENCE_LINE_RE.match(line)
        if match is None:
            continue
        indent, fence, rest = match.groups()
        if opened is None:
            if not (fence[0] == "`" and "`" in rest):  # a backtick fence's info has none
                opened = (indent, fence)
        elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]) and not rest.strip():
            opened = None
    return text if opened is None else f"{text}\n{opened[0]}{opened[1]}"


# --- cleaning -------------------------------------------------------------------------------------

_ANALYSIS_BLOCK_RE = re.compile(r"<analysis\s*>.*?</analysis\s*>", re.IGNORECASE | re.DOTALL)
_ANALYSIS_OPEN_RE = re.compile(r"<analysis\s*>", re.IGNORECASE)
_ANALYSIS_TAG_RE = re.compile(r"</?analysis\s*>", re.IGNORECASE)
_SUMMARY_OPEN_RE = re.compile(r"<summary\s*>", re.IGNORECASE)
_SUMMARY_CLOSE_RE = re.compile(r"</summary\s*>", re.IGNORECASE)


def clean_summary(raw: str) -> str | None:
    """The last <summary> block of a model's output, with every trace of <analysis> removed."""
    if not raw:
        return None
    # Analysis first: its notes may mention "<summary>" and must not be mistaken for the block.
    text = _ANALYSIS_BLOCK_RE.sub("", raw)
    body = _last_summary_block(text)
    if body is None:
        return None
    body = _strip_analysis(body).strip()
    return close_open_fence(body) if body else None


def _last_summary_block(text: str) -> str | None:
    closes = list(_SUMMARY_CLOSE_RE.finditer(text))
    if not closes:
        return None
    close = closes[-1]
    opens = [m for m in _SUMMARY_OPEN_RE.finditer(text, 0, close.start())]
    if not opens:
        return None
    return text[opens[-1].end() : close.start()]


def _strip_analysis(body: str) -> str:
    body = _ANALYSIS_BLOCK_RE.sub("", body)
    # An unterminated <analysis> runs to the end: everything after it is private notes.
    opened = _ANALYSIS_OPEN_RE.search(body)
    if opened:
        body = body[: opened.start()]
    return _ANALYSIS_TAG_RE.sub("", body)


# --- the rule-based fallback ----------------------------------------------------------------------

_PER_USER_MESSAGE = 600
_MIN_PER_USER_MESSAGE = 80
_PER_LINE = 200
_CODE_RE = re.compile(r"`([^`\n]{2,60})`")
_ERROR_RE = re.compile(
    r"\b(error|exception|traceback|failed|fails|failing|bug|fix(?:ed|es)?)\b", re.I
)
_DECISION_RE = re.compile(
    r"\b(decid\w*|decision|chose|choose|instead|because|we will|we'll|i will|i'll|plan)\b", re.I
)
_PENDING_RE = re.compile(r"\b(todo|to do|next|remaining|still need|need to|pending|later)\b", re.I)
# The facts of the whole conversation have the first claim on the room, up to this share of it
# (in sixths): a brief must never lose who the person is, where the work lives, what was
# settled, while the latest span's messages are also in the verbatim tail and within the recall
# tool's reach. Room the other sections leave unused goes to the facts too.
_FACTS_SIXTHS = 5
# A section given less room than this would say nothing ("Continue fr…"): it is left out, its
# room going to the facts.
_MIN_SECTION = 60
# How the room the facts leave is shared out, in 39ths: this span's user messages get the largest
# share; the brief of the span before, one level deep, comes next. "lines" is each of three
# line-picking sections, "small" each of four short ones.
_WEIGHTS = {"users": 17, "previous": 5, "intent": 3, "lines": 2, "small": 2}
_WEIGHT_TOTAL = 39  # 17 + 5 + 3 + 3 * 2 + 4 * 2
FACTS_HEADING = "Facts kept"
EARLIER_HEADING = "Earlier brief"
# Every file the conversation was given, named with what it held: carried from brief to brief
# (a file folded long ago is still one read_attachment can bring back), up to this share of
# the room (in sixths); beyond it the oldest are counted, not named.
FILES_HEADING = "Files"
_FILES_SIXTHS = 2


def rule_based_summary(
    entries: Sequence[Entry],
    previous_summary: str | None,
    instructions: str = "",
    max_chars: int = 6000,
) -> str:
    """A bounded, deterministic brief built without a model. Never empty, never over max_chars.

    It carries forward the facts of the brief before it (`compaction/facts.py`) with those of
    the messages it folds, and the rest of that brief one level deep: a brief nested in a brief
    in a brief would leave, after a few compactions, nothing but their openings.

    The key facts of what it replaces (compaction/key_facts.py) that the brief would not state
    get their chance back: written into its facts section, within the section's bound, so a
    fact the brief before held is not lost by the next.

    The facts the instructions ask for (compaction/instructions.py: ports, paths, names, a
    topic's words...) have the first claim on the whole room; the facts section says how many
    there were and which did not fit, and names the others left out when the room ran out."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    steer = steering.parse(instructions or "")
    wanted = steering.asked(steer, entries, previous_summary)
    first = _brief(entries, previous_summary, instructions, max_chars, [], steer, wanted)
    lost = key_facts.lost(key_facts.of_span(entries, previous_summary), first)
    # One that a fact of the person's states is that fact's (kept or left out with it): noted
    # again on its own, it would count twice.
    carried = _section((previous_summary or "").strip(), FACTS_HEADING)
    said = "\n".join(f.text for f in [*facts.parse_lines(carried), *facts.facts_of(entries)])
    noted = [f.as_fact() for f in lost if not key_facts.states(said, f)]
    if not noted:
        return first
    return _brief(entries, previous_summary, instructions, max_chars, noted, steer, wanted)


def _brief(
    entries: Sequence[Entry],
    previous_summary: str | None,
    instructions: str,
    max_chars: int,
    extra: list[facts.Fact],
    steer: steering.Steer,
    wanted: Sequence[tuple[key_facts.KeyFact, str]],
) -> str:
    users = [e for e in entries if e.role == "user" and e.starts_user_turn and e.text.strip()]
    assistants = [e for e in entries if e.role == "assistant"]
    previous = (previous_summary or "").strip()
    # The facts first, up to their share; then the fixed framing (note, headings); what is left
    # is shared out by _WEIGHTS. When the bound is tight, the sections still get half of what
    # the facts leave (their headings need less than the 40 characters each set aside).
    free = max_chars - len(RULES_NOTE) - len(FACTS_HEADING) - 6
    named = files.section(
        _section(previous, FILES_HEADING), entries, max(free, 0) * _FILES_SIXTHS // 6
    )
    free -= len(named) + len(FILES_HEADING) + 6 if named else 0
    earlier = _earlier_brief(previous) if previous else ""
    # A brief the model wrote before this one (the part before, when a span folded in parts
    # falls back here) is the best account of what it folded: the rules cannot rebuild it, so it
    # keeps up to a quarter of the room ahead of the facts.
    by_model = earlier and not previous.startswith(RULES_NOTE)
    reserved = min(len(earlier) + len(EARLIER_HEADING) + 6, free // 4) if by_model else 0
    carried = _section(previous, FACTS_HEADING)
    room = Room(max_chars, (free - reserved) * _FACTS_SIXTHS // 6, claim=free)
    first = facts_section(carried, entries, extra, steer, room, wanted)
    # What the facts the instructions ask for took beyond the facts' share is the sections' loss.
    reserved = min(reserved, max(free - len(first), 0))
    free -= len(first) + reserved
    room = max(free - 40 * (len(SECTIONS) + 1), free // 2)
    share = {name: room * weight // _WEIGHT_TOTAL for name, weight in _WEIGHTS.items()}
    # The user's steer (in the intent) is worth a line of its own, room permitting.
    share["intent"] = max(share["intent"], min(_PER_LINE + 30, room // 3))
    share = {name: size if size >= _MIN_SECTION else 0 for name, size in share.items()}
    share["previous"] = max(share["previous"], reserved)
    sections = {
        "Primary request and intent": _intent(users, instructions, share["intent"]),
        "Key technical concepts": _concepts(entries, share["small"]),
        "Files and code": _matching_lines(entries, facts.PATH_RE, share["lines"]),
        "Errors and fixes": _matching_lines(entries, _ERROR_RE, share["lines"]),
        "Problem solving": _assistant_key_lines(assistants, share["lines"]),
        "All user messages": _user_messages(users, share["users"], steer.topic),
        "Pending tasks": _matching_lines(users[-3:], _PENDING_RE, share["small"]),
        "Current work": _current_work(assistants, share["small"]),
        "Next step": _next_step(users, share["small"]),
    }
    parts = [f"## {name}\n{sections[name]}" for name in SECTIONS if sections[name]]
    if earlier and share["previous"]:
        # Cut to its share, which may fall inside one of its code blocks: closed where it ends.
        earlier = close_open_fence(_demote_headings(clip(earlier, share["previous"])))
        parts.insert(0, f"## {EARLIER_HEADING}\n{earlier}")
    if named:
        parts.insert(0, f"## {FILES_HEADING}\n{named}")
    used = len(RULES_NOTE) + sum(len(p) + 2 for p in parts)
    left = max_chars - used - len(FACTS_HEADING) - 6
    kept = facts_section(
        carried,
        entries,
        extra,
        steer,
        Room(max_chars, left, claim=left),
        wanted,
        elsewhere="\n\n".join(parts),
    )
    if kept:
        parts.insert(0, f"## {FACTS_HEADING}\n{kept}")
    if not entries and not previous:
        parts.append("No earlier messages to summarise.")
    return clip("\n\n".join([RULES_NOTE, *parts]), max_chars)


def _sections(text: str) -> list[tuple[str | None, str]]:
    """A brief's top-level sections as (heading, body); what precedes the first heading has
    None as its heading."""
    found: list[tuple[str | None, str]] = []
    heading, body = None, []
    for line in text.split("\n"):
        if line.startswith("## "):
            found.append((heading, "\n".join(body).strip()))
            heading, body = line[3:].strip(), []
        else:
            body.append(line)
    found.append((heading, "\n".join(body).strip()))
    return [(h, b) for h, b in found if h is not None or b]


def _section(text: str, heading: str) -> str:
    return "\n".join(body for name, body in _sections(text) if name == heading)


def _earlier_brief(previous: str) -> str:
    """The brief before, without what this one carries itself: its note, its facts (merged into
    this brief's) and its own earlier brief (one level is kept, not a chain)."""
    kept = []
    for heading, body in _sections(previous):
        if heading is None:
            if body != RULES_NOTE:
                kept.append(body)
        elif heading not in (FACTS_HEADING, EARLIER_HEADING, FILES_HEADING):
            kept.append(f"## {heading}\n{body}")
    return "\n\n".join(kept)


def _demote_headings(text: str) -> str:
    # The earlier brief has the same section headings; nest them so they do not read as this one's.
    return re.sub(r"^(#+ )", r"#\1", text, flags=re.MULTILINE)


def _bullets(lines: list[str], budget: int) -> str:
    """As many bullets as fit in `budget`, in order, without repeats."""
    out: list[str] = []
    used = 0
    seen: set[str] = set()
    for line in lines:
        if line in seen:
            continue
        seen.add(line)
        bullet = f"- {line}"
        if used + len(bullet) + 1 > budget:
            break
        out.append(bullet)
        used += len(bullet) + 1
    return "\n".join(out)


def _intent(users: list[Entry], instructions: str, budget: int) -> str:
    lines = []
    # The user's steer comes first so a tight bound never drops it.
    if instructions and instructions.strip():
        lines.append(f"Summary focus asked for: {one_line(instructions, _PER_LINE)}")
    if users:
        lines.append(f"First request (#{users[0].seq}): {one_line(users[0].text, _PER_LINE)}")
    if len(users) > 1:
        lines.append(f"Latest request (#{users[-1].seq}): {one_line(users[-1].text, _PER_LINE)}")
    return _bullets(lines, budget)


def _concepts(entries: Sequence[Entry], budget: int) -> str:
    terms = [m.group(1).strip() for e in entries for m in _CODE_RE.finditer(e.text)]
    return ", ".join(dict.fromkeys(t for t in terms if t))[:budget].rstrip(", ")


def _matching_lines(entries: Sequence[Entry], pattern: re.Pattern[str], budget: int) -> str:
    lines = [
        f"(#{e.seq}) {one_line(line, _PER_LINE)}"
        for e in entries
        for line in lines_of(e)
        if pattern.search(line)
    ]
    return _bullets(lines, budget)


def _assistant_key_lines(assistants: list[Entry], budget: int) -> str:
    lines = []
    for entry in assistants:
        own = [line for line in entry.text.splitlines() if line.strip()]
        if own:
            lines.append(f"(#{entry.seq}) {one_line(own[0], _PER_LINE)}")
        decisions = [x for x in own[1:] if _DECISION_RE.search(x)]
        lines += [f"(#{entry.seq}) {one_line(x, _PER_LINE)}" for x in decisions]
    return _bullets(lines, budget)


def _user_messages(users: list[Entry], budget: int, topic: Sequence[str] = ()) -> str:
    """Every user message, shortened; when they do not all fit, those about the `topic` the
    instructions name win, then the most recent."""
    if budget <= 0:
        return ""
    kept: dict[int, str] = {}
    used = 0
    # Share the room so every message keeps at least its opening words (goals and constraints
    # usually come first); only when even that does not fit are the oldest left out.
    each = max(_MIN_PER_USER_MESSAGE, min(_PER_USER_MESSAGE, budget // max(len(users), 1) - 16))
    latest_first = list(reversed(users))
    about = [e for e in latest_first if steering.about(topic, e.text)]
    for entry in [*about, *(e for e in latest_first if e not in about)]:
        quoted = f'- (#{entry.seq}) "{inert_quote(clip(entry.text.strip(), each))}"'
        room = budget - used
        if len(quoted) + 1 > room:
            if not kept and room > 40:
                # The first in line always appears, cut to whatever room there is.
                kept[entry.seq] = clip(quoted, room - 1) + '"'
            break
        kept[entry.seq] = quoted
        used += len(quoted) + 1
    omitted = len(users) - len(kept)
    lines = [kept[seq] for seq in sorted(kept)]
    if omitted:
        which = "earlier"
        if about:
            which = "other" if all(e.seq in kept for e in about) else "more"
        lines.insert(0, f"- ({omitted} {which} user messages omitted for length)")
    return "\n".join(lines)


def _current_work(assistants: list[Entry], budget: int) -> str:
    lines = []
    if assistants and assistants[-1].text.strip():
        last = assistants[-1]
        lines.append(f"Last assistant reply (#{last.seq}): {one_line(last.text, _PER_LINE)}")
    return _bullets(lines, budget)


def _next_step(users: list[Entry], budget: int) -> str:
    if not users:
        return ""
    latest = users[-1]
    return clip(
        f'Continue from the most recent user request (#{latest.seq}): "'
        f'{one_line(latest.text, _PER_LINE)}"',
        budget,
    )


# --- the result ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryResult:
    summary: str
    raw_output: str
    summariser: str  # "model" or "rules"
    usage: Usage = field(default_factory=Usage, hash=False)  # of the summary call(s)
    error: str = ""


def from_output(
    raw: str,
    stop_reason: str | None,
    usage: Usage,
    entries: Sequence[Entry],
    previous_summary: str | None,
    instructions: str = "",
    *,
    max_chars: int = 6000,
) -> SummaryResult:
    """What the model wrote, kept if it holds a usable <summary>, else the rule-based brief."""
    cleaned = clean_summary(raw)
    if cleaned is not None:
        return SummaryResult(cleaned, raw, "model", usage, "")
    return by_rules(
        entries,
        previous_summary,
        instructions,
        max_chars=max_chars,
        error=_rejection(raw, stop_reason),
        raw=raw,
        usage=usage,
    )


def by_rules(
    entries: Sequence[Entry],
    previous_summary: str | None,
    instructions: str = "",
    *,
    max_chars: int = 6000,
    error: str = "",
    raw: str = "",
    usage: Usage | None = None,
) -> SummaryResult:
    """The rule-based brief as a result, saying why the model's was not used (if it was tried)."""
    summary = rule_based_summary(entries, previous_summary, instructions, max_chars=max_chars)
    return SummaryResult(summary, raw, "rules", usage or Usage(), error)


def _rejection(raw: str, stop_reason: str | None) -> str:
    """Why a model output was not usable, in words an admin can act on."""
    if not raw.strip():
        return "model returned an empty summary"
    if stop_reason == "max_tokens" and not _SUMMARY_CLOSE_RE.search(raw):
        return "model summary was cut off at max_tokens before </summary>"
    if not _SUMMARY_CLOSE_RE.search(raw) or not _SUMMARY_OPEN_RE.search(raw):
        return "model summary had no <summary> tags"
    return "model summary was empty inside its <summary> tags"
