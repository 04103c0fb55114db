"""Malformed imports, by the thousand: every one answered 400 with its reason on the page, and
nothing left in the database. Made from two valid files (this app's export, ChatGPT's list) by
one mutation each, from a seeded generator: a wrong type in every field the import reads, each
JSON-level fault (truncated, NaN, Infinity, numbers too large, invalid UTF-8, byte-order marks,
lone surrogates, NUL, nesting too deep, trailing text), and wrong shapes. Then each numbered
case the review found (finding 3) on its own, and arbitrary JSON from hypothesis: never a 500."""

from __future__ import annotations

import copy
import json
import random
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from chat.models import Conversation, Import, Message
from tests.test_import import chatgpt_conversation

pytestmark = pytest.mark.django_db

REASON = re.compile(r'<p class="notice error" role="alert">Nothing was imported: ([^<]{12,})</p>')
CASES = 2000
SEED = 29

OWN = {
    "title": "Trip",
    "system_prompt": "Be brief.",
    "model": "ignored",
    "created_at": "2024-05-01T12:00:00+00:00",
    "updated_at": "2024-05-02T12:00:00+00:00",
    "branch_end": 3,
    "compactions": [
        {
            "id": 7,
            "trigger": "manual",
            "kind": "summary",
            "status": "committed",
            "first_kept_seq": 2,
            "cleared_before_seq": None,
            "cleared_count": 0,
            "pre_tokens": 900,
            "post_tokens": 300,
            "summary": "The user plans a trip.",
            "summariser": "model",
            "instructions": "",
            "edited": False,
            "created_at": "2024-05-01T12:30:00+00:00",
        }
    ],
    "messages": [
        {
            "seq": 1,
            "role": "user",
            "content": "Plan a trip",
            "status": "complete",
            "pinned": True,
            "created_at": "2024-05-01T12:00:00+00:00",
        },
        {
            "seq": 2,
            "parent": 1,
            "role": "assistant",
            "status": "complete",
            "tokens": 40,
            "window_tokens": 120,
            "window_head_tokens": 30,
            "window_boundary": 7,
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "trip"}},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "found"}],
                    "is_error": False,
                },
                {"type": "text", "text": "Lisbon."},
            ],
        },
        {
            "seq": 3,
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "late"},
                {"type": "text", "text": "thanks"},
            ],
        },
    ],
}
CHATGPT = [
    chatgpt_conversation("One", [("user", ["hi"]), ("assistant", ["hello", {"x": 1}])])
    | {"create_time": 1_700_000_000.25, "update_time": 1_700_000_500},
    chatgpt_conversation("Two", [("user", ["again"]), ("assistant", ["yes"])]),
]

STR, NONE, LIST, DICT, BOOL, NUMBER = "str", "none", "list", "dict", "bool", "number"
SAMPLES = {
    STR: ["", "text", "user"],
    NONE: [None],
    LIST: [[], [1, 2], ["a"]],
    DICT: [{}, {"a": 1}],
    BOOL: [True, False],
    NUMBER: [0, 42, -1.5],
}


def kind(value) -> str:
    if value is None:
        return NONE
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int | float):
        return NUMBER
    return {str: STR, list: LIST, dict: DICT}[type(value)]


COMPACTION_FIELDS = {
    "id": {NUMBER, NONE},  # a whole number: see wrong_values
    "trigger": "trigger",
    "kind": "kind",
    "status": {STR},
    "first_kept_seq": "seq",
    "cleared_before_seq": "seq or null",
    "cleared_count": "count",
    "pre_tokens": "count",
    "post_tokens": "count",
    "summary": {STR},
    "summariser": {STR, NONE},
    "instructions": {STR, NONE},
    "edited": {BOOL, NONE},
    "created_at": "date",
}
MESSAGE_FIELDS = {
    "seq": "seq or null",
    "parent": "parent",
    "pinned": {BOOL, NONE},
    "created_at": "date",
    "window_tokens": "count",
    "window_head_tokens": "count",
    "window_boundary": {NUMBER, NONE},
}


def own_fields(doc: dict) -> list[tuple[tuple, set, object]]:
    """(path, kinds allowed, value test) for every field of an export the import reads."""
    fields = [(("title",), {STR, NONE}), (("system_prompt",), {STR, NONE}), (("messages",), {LIST})]
    fields += [(("compactions",), {LIST}), (("branch_end",), "seq or null")]
    fields += [(("created_at",), "date"), (("updated_at",), "date")]
    for i, compaction in enumerate(doc["compactions"]):
        at = ("compactions", i)
        fields.append((at, {DICT}))
        fields += [(at + (key,), COMPACTION_FIELDS[key]) for key in compaction]
    for i, message in enumerate(doc["messages"]):
        at = ("messages", i)
        fields += [(at, {DICT}), (at + ("role",), "role"), (at + ("status",), {STR, NONE})]
        fields += [(at + (key,), rule) for key, rule in MESSAGE_FIELDS.items() if key in message]
        fields.append((at + ("content",), {STR, LIST}))
        if not isinstance(message["content"], list):
            continue
        for j, block in enumerate(message["content"]):
            b = at + ("content", j)
            fields += [(b, {DICT}), (b + ("type",), {STR})]
            if block["type"] == "text":
                fields.append((b + ("text",), {STR}))
            elif block["type"] == "tool_use":
                fields += [(b + ("id",), "text"), (b + ("name",), "text"), (b + ("input",), {DICT})]
            elif block["type"] == "tool_result":
                fields += [(b + ("tool_use_id",), "text"), (b + ("is_error",), {BOOL})]
                fields.append((b + ("content",), {STR, LIST}))
                if isinstance(block["content"], list):
                    for k in range(len(block["content"])):
                        inner = b + ("content", k)
                        fields += [(inner, {DICT}), (inner + ("type",), {STR})]
                        fields.append((inner + ("text",), {STR}))
    return fields


def chatgpt_fields(doc: list) -> list[tuple[tuple, set]]:
    fields = []
    for i, conversation in enumerate(doc):
        c = (i,)
        fields += [(c, {DICT}), (c + ("title",), {STR, NONE}), (c + ("mapping",), {DICT})]
        fields.append((c + ("current_node",), {STR, NONE}))
        fields += [(c + ("create_time",), "epoch"), (c + ("update_time",), "epoch")]
        for key, node in conversation["mapping"].items():
            n = c + ("mapping", key)
            fields += [(n, {DICT}), (n + ("parent",), {STR, NONE}), (n + ("children",), "ids")]
            fields.append((n + ("message",), {DICT, NONE}))
            if node["message"] is None:
                continue
            m = n + ("message",)
            fields += [(m + ("author",), {DICT, NONE}), (m + ("author", "role"), {STR, NONE})]
            fields += [(m + ("content",), {DICT, NONE}), (m + ("content", "parts"), {LIST, NONE})]
            if "create_time" in node["message"]:
                fields.append((m + ("create_time",), "epoch"))
            for p in range(len(node["message"]["content"]["parts"])):
                fields.append((m + ("content", "parts", p), {STR, DICT}))
    return fields


def wrong_values(allowed) -> list:
    """Values that break the field's rule: another type, or (for a role, an id, a list of node
    ids) a value of the right type that is still not allowed."""
    if allowed == "role":
        return ["system", "", 1, None, ["user"], {"role": "user"}]
    if allowed == "text":  # a non-empty string
        return ["", 7, None, True, ["id"], {}]
    if allowed == "ids":
        return [1, "n0", {}, [1], [None], True]
    if allowed in ("seq", "seq or null"):  # a message of the file, by its number
        return [0, -1, 99, 1.5, "1", True, [1]] + ([] if allowed == "seq or null" else [None])
    if allowed == "parent":  # 0 (none) or a message listed before
        return [-1, 99, 1.5, "1", True, [1]]
    if allowed == "epoch":  # seconds since 1970
        return ["2024-05-01", -1, 1e13, True, [], {}]
    if allowed == "count":
        return [-1, 1.5, "3", True, 2**31, [], {}]
    if allowed == "date":
        return ["yesterday", "2024-13-01", "", 5, True, [], {}]
    if allowed in ("trigger", "kind"):
        return ["imported", "", 1, None, ["manual"]]
    return [v for k, values in SAMPLES.items() if k not in allowed for v in values]


def replaced(doc, path: tuple, value):
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


def encoded(doc) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def json_faults(rng: random.Random, raw: bytes) -> list[bytes]:
    """JSON-level faults in a valid file's bytes."""
    faults = [raw[: rng.randrange(0, len(raw) - 1)] for _ in range(3)]  # truncated
    faults += [b"\xef\xbb\xbf" + raw, b"\xff\xfe" + raw.decode().encode("utf-16-le")]
    faults.append(b"\xfe\xff" + raw.decode().encode("utf-16-be"))
    at = raw.index(b'"', rng.randrange(0, len(raw) // 2)) + 1  # inside some string
    for bad in (b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\x80", b"\xe2\x82"):
        faults.append(raw[:at] + bad + raw[at:])
    for escape in (rb"\ud800", rb"\udfff", rb"\ud800\u0041", rb"x\udbff", rb"\\\ud800"):
        faults.append(raw[:at] + escape + raw[at:])
    faults += [raw + b" x", raw + raw, raw + b"\x00", raw[:-1]]
    return faults


def value_faults(doc, paths: list[tuple]) -> list[bytes]:
    """Values JSON or the import refuses, put where a value is: numbers out of range, NaN,
    nesting too deep, NUL in text."""
    out = []
    marker = "\ue123marker"
    for path in paths:
        text = encoded(replaced(doc, path, marker))
        for value in (b"NaN", b"-Infinity", b"Infinity", b"1e400", b"-1e999", b"9" * 4300):
            out.append(text.replace(f'"{marker}"'.encode(), value))
        out.append(text.replace(f'"{marker}"'.encode(), b"18446744073709551616"))
        for depth in (65, 200, 1500):
            out.append(text.replace(f'"{marker}"'.encode(), b"[" * depth + b"]" * depth))
    return out


SHAPES = [
    b"",
    b"   \n",
    b"null",
    b"true",
    b"42",
    b'"a string"',
    b"[]",
    b"[1, 2]",
    b"[[]]",
    b'[{"mapping": []}]',
    b"{}",
    b'{"messages": {}}',
    b'{"messages": "none"}',
    b'{"messages": null}',
    b'{"messages": []}',
    b'{"messages": [[]]}',
    b'{"mapping": {}}',
    b'{"title": "only a title"}',
    b'{"messages": [{"role": "user", "content": "x"}]',
    b"{" * 100_000,
    b"[" * 100_000,
    b'{"a": ' * 2000 + b"1" + b"}" * 2000,
]


def malformed(seed: int = SEED, count: int = CASES) -> list[bytes]:
    rng = random.Random(seed)
    cases = list(SHAPES)
    for doc, fields in ((OWN, own_fields(OWN)), (CHATGPT, chatgpt_fields(CHATGPT))):
        for path, allowed in fields:
            cases += [encoded(replaced(doc, path, v)) for v in wrong_values(allowed)]
        raw = encoded(doc)
        text_paths = [path for path, allowed in fields if allowed in ({STR}, "text")]
        cases += value_faults(doc, rng.sample(text_paths, min(6, len(text_paths))))
        for path in rng.sample(text_paths, min(6, len(text_paths))):
            cases.append(encoded(replaced(doc, path, "a\x00b")))
        cases += json_faults(rng, raw)
        # Ignored fields are read past, but a number or nesting JSON refuses still counts.
        cases += value_faults(doc, [(0, "create_time")] if doc is CHATGPT else [("model",)])
    while len(cases) < count:  # more truncations and faults at random places
        doc = rng.choice([OWN, CHATGPT])
        cases += json_faults(rng, encoded(doc))
    return cases[:count]


def upload(client, raw: bytes):
    return client.post("/conversations/import/", {"file": SimpleUploadedFile("x.json", raw)})


def nothing_left() -> bool:
    rows = (Conversation.objects, Message.objects, Import.objects)
    return not any(r.exists() for r in rows)


def test_every_malformed_file_is_refused_with_a_reason_and_leaves_nothing(client, alice, settings):
    settings.IMPORTS_PER_HOUR = 10**9
    client.force_login(alice)
    cases = malformed()
    assert len(cases) == CASES
    for raw in cases:
        response = upload(client, raw)
        assert response.status_code == 400, raw[:300]
        assert REASON.search(response.content.decode()), raw[:300]
        assert nothing_left(), raw[:300]


def test_the_generator_would_notice_an_import_that_accepted_a_bad_file(client, alice, settings):
    """The fuzzer's checks can fail: its base files are valid, and import."""
    settings.IMPORTS_PER_HOUR = 100
    client.force_login(alice)
    assert upload(client, encoded(OWN)).status_code == 302
    assert upload(client, encoded(CHATGPT)).status_code == 302
    assert Conversation.objects.filter(owner=alice).count() == 3


# --- finding 3, one by one ---------------------------------------------------------------------


def with_message(**fields) -> bytes:
    return encoded({"messages": [{"role": "user", "content": "hi", **fields}]})


def with_block(block) -> bytes:
    return encoded({"messages": [{"role": "user", "content": [block]}]})


def chatgpt_with(change) -> bytes:
    doc = copy.deepcopy(CHATGPT)
    change(doc[0])
    return encoded(doc)


def _node(conversation, key="n0"):
    return conversation["mapping"][key]


FINDING_3 = {
    "a non-string status": (with_message(status=3), "status is a number"),
    "a text block whose text is a number": (with_block({"type": "text", "text": 5}), "a number"),
    "a text block whose text is null": (with_block({"type": "text", "text": None}), "is null"),
    "a tool_result whose content is a list of numbers": (
        with_block({"type": "tool_result", "tool_use_id": "t", "content": [1, 2]}),
        "Part 1 of the content",
    ),
    "NaN in a block": (
        with_block({"type": "text", "text": "x", "n": 1}).replace(b'"n": 1', b'"n": NaN'),
        "not valid JSON",
    ),
    "a 4,300-digit integer": (
        with_block({"type": "text", "text": "x", "n": 1}).replace(b"1}", b"9" * 4300 + b"}"),
        "a number too large",
    ),
    "a ChatGPT author of the wrong type": (
        chatgpt_with(lambda c: _node(c)["message"].update(author="user")),
        "author",
    ),
    "a ChatGPT current_node of the wrong type": (
        chatgpt_with(lambda c: c.update(current_node=["n1"])),
        "current_node",
    ),
    "a ChatGPT parent of the wrong type": (
        chatgpt_with(lambda c: _node(c).update(parent={"id": "sys"})),
        "parent",
    ),
    "a ChatGPT role of the wrong type": (
        chatgpt_with(lambda c: _node(c)["message"]["author"].update(role=["user"])),
        "role",
    ),
    "JSON nested 1,500 deep": (
        with_block({"type": "tool_use", "id": "t", "name": "n", "input": {"a": "DEEP"}}).replace(
            b'"DEEP"', b"[" * 1500 + b"]" * 1500
        ),
        "more than 64 deep",
    ),
}


@pytest.mark.parametrize("case", FINDING_3)
def test_each_case_of_finding_3_is_a_400_with_its_reason(client, alice, case):
    raw, reason = FINDING_3[case]
    client.force_login(alice)
    response = upload(client, raw)
    assert response.status_code == 400
    assert reason in REASON.search(response.content.decode()).group(1)
    assert nothing_left()


# --- anything at all ---------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)
SHAPED = st.fixed_dictionaries(
    {"messages": st.lists(st.dictionaries(st.sampled_from(["role", "content", "status"]), JSON))}
)


@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.one_of(st.binary(max_size=200), JSON.map(encoded), SHAPED.map(encoded)))
def test_any_file_is_imported_or_refused_never_a_500(client, alice, settings, raw):
    settings.IMPORTS_PER_HOUR = 10**9
    client.force_login(alice)
    response = upload(client, raw)
    assert response.status_code in (302, 400)
    if response.status_code == 400:
        assert REASON.search(response.content.decode())
        assert nothing_left()
    Conversation.objects.all().delete()
