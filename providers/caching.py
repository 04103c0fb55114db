"""Where a request's prompt-cache breakpoints go: a pure function over its parts.

The API caches a request's prefix, in the order tools, system, messages, up to each block marked
`cache_control: {"type": "ephemeral"}` (at most four). The window is built so that its prefix
stays byte-identical between compactions; the breakpoints mark its stable layers:

1. the end of the system prompt (tools come before it, so one mark covers both; with no system
   prompt, the last tool);
2. the end of the summary pair at the head of `messages` (changes only at a compaction);
3. the latest message (a moving breakpoint: the next request reads everything up to it).

Three at most, within the API's four. Blocks are copied before marking: the caller's window is
not changed.
"""

from __future__ import annotations

EPHEMERAL = {"type": "ephemeral"}


def with_breakpoints(
    system: str, messages: list[dict], tools: list[dict], *, head: int, latest: bool
) -> tuple[list[dict] | str, list[dict], list[dict]]:
    """(system, messages, tools) as the SDK takes them, with the breakpoints placed."""
    tools = list(tools)
    if system:
        system_param: list[dict] | str = [
            {"type": "text", "text": system, "cache_control": EPHEMERAL}
        ]
    else:
        system_param = system
        if tools:
            tools[-1] = {**tools[-1], "cache_control": EPHEMERAL}
    marked = {head - 1} if 0 < head <= len(messages) else set()
    if latest and messages:
        marked.add(len(messages) - 1)
    messages = [_marked(m) if i in marked else m for i, m in enumerate(messages)]
    return system_param, messages, tools


def _marked(message: dict) -> dict:
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not content:
        return message
    return {**message, "content": [*content[:-1], {**content[-1], "cache_control": EPHEMERAL}]}
