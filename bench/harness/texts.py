"""Seeded text for scripted users and fake models: sentences and prose from a bench's own word
list, blocks of Python code, and a summariser's answer."""

from __future__ import annotations

import random
import re


def sentence(rng: random.Random, words: list[str], lo: int = 6, hi: int = 18) -> str:
    chosen = rng.choices(words, k=rng.randint(lo, hi))
    return " ".join(chosen).capitalize() + "."


def prose(rng: random.Random, chars: int, words: list[str]) -> str:
    """Sentences until there are at least `chars` characters."""
    out: list[str] = []
    size = 0
    while size < chars:
        s = sentence(rng, words)
        out.append(s)
        size += len(s) + 1
    return " ".join(out)


def code(rng: random.Random, chars: int, words: list[str]) -> str:
    """A fenced block of Django view functions, at least `chars` characters of them."""
    lines: list[str] = ["```python"]
    size = 0
    n = 0
    while size < chars:
        name = f"{rng.choice(words)}_{n}"
        block = (
            f"def {name}(request, pk):\n"
            f"    obj = {rng.choice(words).title()}.objects.get(pk=pk)\n"
            f"    return render(request, '{rng.choice(words)}.html', {{'obj': obj}})\n"
        )
        lines.append(block)
        size += len(block)
        n += 1
    lines.append("```")
    return "\n".join(lines)


# The user messages of a summary request's transcript (compaction/prompt.py renders them so).
USER_RE = re.compile(r"User \(#(\d+)\):\n(.*?)(?=\n\n(?:User|Assistant) \(#|\n</transcript>)", re.S)


def summary_answer(request_text: str, sections: tuple[str, ...]) -> str:
    """A well-formed model answer: <analysis> (discarded by the app), then a <summary> of about
    1-2k characters whatever the length of the conversation, as a good summariser keeps it."""
    users = [(int(seq), " ".join(body.split())) for seq, body in USER_RE.findall(request_text)]
    quoted = [f'- (#{seq}) "{body[:90]}"' for seq, body in users[-8:]]
    fill = {
        "Primary request and intent": "Maintain and improve the Django chat application.",
        "Key technical concepts": "Django ORM, Channels websockets, htmx partials, compaction.",
        "Files and code": "chat/engine.py, compaction/run.py, templates/chat/*.html.",
        "Errors and fixes": "Discussed failing tests and their fixes; all resolved so far.",
        "Problem solving": "Kept changes small; agreed on query counts that do not grow.",
        "All user messages": "\n".join(quoted) or "- (none)",
        "Pending tasks": "Finish the review of the latest change.",
        "Current work": f"Answering the latest request (#{users[-1][0] if users else 0}).",
        "Next step": f'Continue with: "{users[-1][1][:120] if users else ""}"',
    }
    body = "\n\n".join(f"## {name}\n{fill.get(name, '-')}" for name in sections)
    return (
        f"<analysis>Read {len(users)} user messages in order; noted requests and files."
        f"</analysis>\n<summary>\n{body[:2000]}\n</summary>"
    )
