"""The rule-based brief names every file of what it folds (compaction/brief.py, files.py): its
message, kind, name, dimensions or pages, size, tokens, the attachment read_attachment takes,
and a text file's or PDF's first lines when its description has them; the files a brief before
named are carried on, the newest first when the room runs out."""

from __future__ import annotations

from compaction.brief import EARLIER_HEADING, FILES_HEADING, rule_based_summary
from compaction.entries import Entry
from providers.tokens import estimate_content


def user(seq: int, text: str, *files: dict) -> Entry:
    content = [{"type": "text", "text": text}, *files]
    return Entry(seq, "user", content, estimate_content(content))


def reply(seq: int, text: str) -> Entry:
    content = [{"type": "text", "text": text}]
    return Entry(seq, "assistant", content, estimate_content(content))


def pdf(attachment_id: int, name: str, lines) -> dict:
    meta = {"id": attachment_id, "name": name, "media_type": "application/pdf", "bytes": 231_400}
    return {"type": "document", "attachment": meta | {"tokens": 6000, "pages": 2, "lines": lines}}


def png(attachment_id: int, name: str) -> dict:
    meta = {"id": attachment_id, "name": name, "media_type": "image/png", "bytes": 48_210}
    return {"type": "image", "attachment": meta | {"tokens": 640, "width": 800, "height": 600}}


IMAGE_8 = (
    "[image: build-error.png (#1), 800×600 px, 48.2 kB, 640 tokens, attachment_id 8: "
    "read_attachment brings it back]"
)


def section(brief: str, heading: str) -> str:
    return brief.split(f"## {heading}\n", 1)[1].split("\n\n", 1)[0]


def test_each_file_is_named_with_what_it_held():
    entries = [
        user(
            1,
            "The spec and the error.",
            pdf(7, "spec.pdf", ["Invoice API", "v2, draft"]),
            png(8, "build-error.png"),
        ),
        reply(2, "The spec wants v2."),
    ]
    brief = rule_based_summary(entries, None, max_chars=3000)
    assert section(brief, FILES_HEADING).splitlines() == [
        "- [PDF: spec.pdf (#1), 2 pages, 231.4 kB, 6,000 tokens, attachment_id 7: "
        "read_attachment brings it back] first lines: Invoice API / v2, draft",
        f"- {IMAGE_8}",
    ]


def test_first_lines_given_as_one_text_are_read_too_and_cut_to_their_bound():
    entries = [user(1, "Read it.", pdf(7, "long.pdf", "first\nsecond\n" + "x" * 400))]
    line = section(rule_based_summary(entries, None, max_chars=3000), FILES_HEADING)
    assert "first lines: first / second / xxx" in line and line.endswith("…")
    assert len(line.split("first lines: ")[1]) == 200


def test_the_files_a_brief_named_are_carried_into_the_next():
    first = rule_based_summary([user(1, "Here.", png(8, "build-error.png"))], None, max_chars=3000)
    second = rule_based_summary(
        [user(3, "And this.", png(9, "after.png")), reply(4, "Both seen.")], first, max_chars=3000
    )
    assert section(second, FILES_HEADING).splitlines() == [
        f"- {IMAGE_8}",
        "- [image: after.png (#3), 800×600 px, 48.2 kB, 640 tokens, attachment_id 9: "
        "read_attachment brings it back]",
    ]
    assert "build-error.png" not in section(second, EARLIER_HEADING)  # named once


def test_when_the_room_runs_out_the_newest_are_named_and_the_others_counted():
    entries = [user(i, f"file {i}", png(i, f"shot-{i}.png")) for i in range(1, 60)]
    brief = rule_based_summary(entries, None, max_chars=2000)
    named = section(brief, FILES_HEADING).splitlines()
    assert len(brief) <= 2000
    left_out = 59 - (len(named) - 1)
    assert named[0] == f"- ({left_out} earlier files not named for length)"
    assert named[-1].startswith("- [image: shot-59.png (#59), ")
