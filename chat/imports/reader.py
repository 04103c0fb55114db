"""An import file read as a stream: bounded memory whatever the file.

The bytes come from the upload in chunks (Django keeps a large upload on disk) and are checked
on the way in: the size, UTF-8, no byte-order mark, no escaped lone surrogate (the C parser would
quietly turn `\\ud800` into "?"). The C parser (ijson's yajl2_c) turns them into events, and
refuses what JSON does not allow: NaN, Infinity, numbers beyond a 64-bit integer or a double,
truncated or trailing text. From the events, `read` builds only what the import keeps (a spec
says which keys, at any depth) and skips the rest unbuilt, counting how deep lists and objects
nest; messages and compactions (this app's export) and conversations (ChatGPT's list) are
handed over one at a time, as they are read, never the whole document.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import ijson

from core.errors import ActionError

CHUNK = 256 * 1024
# Deeper than any export nests (a tool call's input inside a block inside a message inside the
# file: 6): enough for any real tool input, and far from Python's recursion limit.
MAX_DEPTH = 64
# The longest escape the surrogate check must see whole: a pair, `\ud83d\ude00`.
_LONGEST_ESCAPE = 12
# An escape, left to right so `\\` is consumed whole: a surrogate pair, a lone surrogate (the
# second alternative, refused), or any other escape.
_ESCAPE = re.compile(
    rb"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|(u[dD][89a-fA-F][0-9a-fA-F]{2})|.)",
    re.DOTALL,
)
# What `read` builds of a value (see `_value`): all of it, or only a string, number, true/false
# or null (a list or an object read past). A dict builds an object's named keys.
ANY, SCALAR = "any", "scalar"
STREAMED = object()  # in Fields: a list ("messages"...) handed over item by item


@dataclass(frozen=True)
class Each:
    """In a spec: an object of many entries (ChatGPT's `mapping` of 200,000 nodes), each
    value built as `spec` says and then handed, with its key, to a reducer that `start` makes
    for this object; what the reducer returns, a (key, value) pair, is what the object keeps.
    So each entry is held compact from the moment it is read, never the object's dicts."""

    spec: dict
    start: Callable[[], Callable[[str, object], tuple[str, object]]]


@dataclass(frozen=True)
class Skipped:
    """A value read past without being built, because its shape was not the one kept (a list
    where an object was expected): the schema names what it was."""

    kind: str  # "a list", "an object"


@dataclass(frozen=True)
class Item:
    """One element of a streamed list: `where` is "messages" or "compactions" (this app's
    export) or "conversations" (ChatGPT's list)."""

    where: str
    value: object


@dataclass(frozen=True)
class Fields:
    """The top-level object's kept fields (besides a streamed "messages"), once it has ended;
    `kind` is what the top level was ("an object", "a list", "a string", ...)."""

    kind: str
    values: dict


class Checked:
    """The upload's bytes as a file for the parser, checked chunk by chunk."""

    def __init__(self, upload, limit: int) -> None:
        self.chunks = upload.chunks(CHUNK) if hasattr(upload, "chunks") else iter([upload])
        self.limit = limit
        self.offset = 0
        self.utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self.carry = b""

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # the parser asks this to tell bytes from text
            return b""
        chunk = next(self.chunks, b"")
        final = not chunk
        if final and self.offset == 0:
            raise ActionError("That file is empty.")
        if self.offset == 0 and chunk[:3] == codecs.BOM_UTF8:
            raise ActionError(
                "That file starts with a byte-order mark: save it as UTF-8 without one "
                "(JSON files have none)."
            )
        if self.offset == 0 and chunk[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
            raise ActionError("That file is not UTF-8 text (it is UTF-16): import a .json export.")
        try:
            self.utf8.decode(chunk, final)
        except UnicodeDecodeError as exc:
            raise ActionError(
                f"That file is not UTF-8 text (at byte {self.offset + exc.start:,}): "
                "import a .json export."
            ) from None
        self._surrogates(chunk, final)
        self.offset += len(chunk)
        if self.offset > self.limit:
            raise ActionError(
                f"That file is over {self.limit:,} bytes; imports are limited to that "
                "(IMPORT_MAX_BYTES)."
            )
        return chunk

    def _surrogates(self, chunk: bytes, final: bool) -> None:
        text = self.carry + chunk
        start = self.offset - len(self.carry)
        self.carry = b""
        for match in _ESCAPE.finditer(text):
            if not final and match.start() > len(text) - _LONGEST_ESCAPE:
                self.carry = text[match.start() :]  # maybe cut short: decided with what follows
                return
            if match.group(1):
                raise ActionError(
                    f"That file holds invalid Unicode at byte {start + match.start():,}: a lone "
                    f"surrogate (\\{match.group(1).decode()}) in a string."
                )


def read(upload, limit: int, streamed: dict, keep_conversation, keep_top) -> Iterator:
    """Items as they are read (an export's lists named in `streamed`, each item built as it
    says, or ChatGPT's conversations), then the top level's `Fields`. ActionError for anything
    that is not JSON, too big or too deep."""
    events = _events(Checked(upload, limit))
    event, value = _next(events)
    if event == "start_map":
        _deep(1)
        top = {}
        for key in _keys(events):
            event, value = _next(events)
            if key in streamed and event == "start_array":
                for item in _array(events, 2, streamed[key]):
                    yield Item(key, item)
                top[key] = STREAMED
            else:
                keep = SCALAR if key in streamed else keep_top.get(key)
                found = _value(events, event, value, 2, keep)
                if keep is not None:
                    top[key] = found
        yield Fields("an object", top)
    elif event == "start_array":
        for item in _array(events, 1, keep_conversation):
            yield Item("conversations", item)
        yield Fields("a list", {})
    else:
        yield Fields(describe(_value(events, event, value, 1, SCALAR)), {})
    if next(events, None) is not None:  # the parser refuses trailing text first; a guard
        raise ActionError("That file holds more than one JSON value.")


def _events(checked: Checked) -> Iterator[tuple[str, object]]:
    try:
        yield from ijson.basic_parse(checked, use_float=True, buf_size=CHUNK)
    except ijson.JSONError as exc:
        raise ActionError(f"That file is not valid JSON ({_reason(exc)}).") from None
    except UnicodeDecodeError:  # bytes the decoder passed, that the parser's escapes made
        raise ActionError("That file holds text that is not valid UTF-8.") from None


def _reason(exc: Exception) -> str:
    """The parser's reason in words, with the text around the place it stopped."""
    text = exc.args[0] if exc.args else ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.strip() for line in str(text).strip().splitlines()]
    first = lines[0] if lines else ""
    if not first or "premature EOF" in first:
        return "it ends early: a truncated file?"
    if "overflow" in first:
        first = "a number too large: numbers must fit a 64-bit integer or a double"
    elif "invalid char" in first:
        first = "a character JSON does not allow there, such as NaN or Infinity"
    else:
        first = first.removeprefix("parse error: ").removeprefix("lexical error: ").rstrip(".")
    near = lines[1][:60] if len(lines) > 2 else ""
    return f"{first}, near “{near}”" if near else first


def _next(events: Iterator) -> tuple[str, object]:
    try:
        return next(events)
    except StopIteration:
        raise ActionError("That file is empty.") from None


def _keys(events: Iterator) -> Iterator[str]:
    """The keys of an object just opened; the caller reads each key's value before the next."""
    while True:
        event, value = _next(events)
        if event == "end_map":
            return
        yield value


def _array(events: Iterator, depth: int, keep) -> Iterator:
    """The elements of a list just opened, each built as `keep` says."""
    _deep(depth)
    while True:
        event, value = _next(events)
        if event == "end_array":
            return
        yield _value(events, event, value, depth + 1, keep)


def _value(events: Iterator, event: str, value, depth: int, keep):
    """The value that `event` starts, built as `keep` says: ANY builds all of it; a dict
    builds an object's keys named in it ("*": every key), each as its entry says; `Each`
    builds every entry and keeps what its reducer makes of it; SCALAR or
    None builds no list or object (read past, as `Skipped`). Scalars come built."""
    if event == "start_map" and isinstance(keep, Each):
        _deep(depth)
        reduce, built = keep.start(), {}
        for key in _keys(events):
            event, value = _next(events)
            key, found = reduce(key, _value(events, event, value, depth + 1, keep.spec))
            built[key] = found
        return built
    if event == "start_map":
        _deep(depth)
        spec = keep if isinstance(keep, dict) else None
        built = {} if keep is ANY or spec is not None else None
        for key in _keys(events):
            inner = ANY if keep is ANY else spec.get(key, spec.get("*")) if spec else None
            event, value = _next(events)
            found = _value(events, event, value, depth + 1, inner)
            if inner is not None:
                built[_shared(key, spec)] = found
        return built if built is not None else Skipped("an object")
    if event == "start_array":
        _deep(depth)
        built = [] if keep is ANY else None
        while True:
            event, value = _next(events)
            if event == "end_array":
                return built if built is not None else Skipped("a list")
            found = _value(events, event, value, depth + 1, keep if keep is ANY else None)
            if built is not None:
                built.append(found)
    return value  # a string, number, true/false or null


# One string for each key a spec names ("parent", "message"...), the first the file gave: the
# parser makes a new one every time, and a ChatGPT tree of 200,000 nodes repeats each as often.
# Only names in the specs are kept here, so what a file can add to it is bounded.
_KEYS: dict[str, str] = {}


def _shared(key: str, spec: dict | None) -> str:
    return _KEYS.setdefault(key, key) if spec is not None and key in spec else key


def _deep(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ActionError(
            f"That file nests lists and objects more than {MAX_DEPTH} deep; no export does."
        )


def describe(value) -> str:
    """What a JSON value is, for a reason: "a string", "a number", "null", "a list"..."""
    if isinstance(value, Skipped):
        return value.kind
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
