"""Plain values that cross the provider boundary: the request, the stream's events, usage, errors.

A provider turns a `Request` into an async stream of events and nothing else: it never calls back
into the caller, never saves, never broadcasts. The caller (the turn, the summariser) decides what
each event means.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from providers.blocks import texts


@dataclass(frozen=True)
class Request:
    """One Messages API request, minus transport details."""

    model: str
    system: str
    messages: list[dict] = field(hash=False)
    max_tokens: int = 4096
    tools: tuple[dict, ...] = ()
    # Prompt caching (providers/caching.py), for providers that support it: None sends no
    # breakpoints; else the number of leading messages that stay byte-identical until the next
    # compaction (the summary pair: 2, or 0), and whether the latest message is one too.
    cache_head: int | None = None
    cache_latest: bool = True
    # Extended thinking: the tokens the model may think with before it answers (at least 1024,
    # under max_tokens); None asks for none.
    thinking_budget: int | None = None


@dataclass(frozen=True)
class Usage:
    """Token usage as the server reported it; None where it reported nothing.

    Anthropic-compatible servers differ: some report zeros, some nothing at all. Neither is a
    figure to account with, so `known` is False for both and callers fall back to the estimate.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None

    @property
    def input_total(self) -> int:
        """Everything the request cost as input: cache reads and writes are reported apart."""
        return (
            (self.input_tokens or 0)
            + (self.cache_read_input_tokens or 0)
            + (self.cache_creation_input_tokens or 0)
        )

    @property
    def known(self) -> bool:
        # A real request always has input; zero input means the server did not count.
        return self.input_total > 0

    def as_dict(self) -> dict | None:
        """For storage: None when nothing usable was reported."""
        if not self.known:
            return None
        return {key: getattr(self, key) or 0 for key in USAGE_KEYS}

    @classmethod
    def from_mapping(cls, data) -> Usage:
        """From the API's usage object (a dict or an SDK model); missing keys stay None."""
        if data is None:
            return cls()
        get = data.get if isinstance(data, dict) else lambda k: getattr(data, k, None)
        return cls(*(_count(get(k)) for k in USAGE_KEYS))

    def plus(self, other: Usage) -> Usage:
        """Two calls' usage together (a turn's steps, a summary asked twice): what was billed."""
        return Usage(*((getattr(self, k) or 0) + (getattr(other, k) or 0) for k in USAGE_KEYS))

    @property
    def window_tokens(self) -> int | None:
        """The request's window once its reply is in it, as the server counted: its input and
        output. None when the server did not count."""
        return self.input_total + (self.output_tokens or 0) if self.known else None

    def merged(self, later: Usage) -> Usage:
        """`message_delta` repeats or updates counts from `message_start`: later values win."""
        return Usage(
            *(
                getattr(later, k) if getattr(later, k) is not None else getattr(self, k)
                for k in USAGE_KEYS
            )
        )


USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def _count(value) -> int | None:
    try:
        return None if value is None else max(int(value), 0)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Capabilities:
    """What a model behind a provider can do; callers ask this instead of checking names."""

    context_window: int
    can_summarise: bool = True
    supports_caching: bool = False
    supports_tools: bool = False  # takes tool definitions and answers with tool_use blocks
    offline: bool = False  # an offline stand-in, not a real model (the page says so)


# --- stream events -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """Some of the model's thinking (extended thinking), before its answer."""

    text: str


@dataclass(frozen=True)
class ToolUseStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolInputDelta:
    index: int
    partial_json: str


@dataclass(frozen=True)
class ToolUseStop:
    index: int
    id: str
    name: str
    input: dict = field(hash=False)


@dataclass(frozen=True)
class Final:
    """The whole message, once the stream ended: what gets stored."""

    content: list[dict] = field(hash=False)
    stop_reason: str | None = None
    usage: Usage = Usage()
    model: str = ""

    @property
    def text(self) -> str:
        return texts(self.content, sep="")


Event = TextDelta | ThinkingDelta | ToolUseStart | ToolInputDelta | ToolUseStop | Final


class LLMError(Exception):
    """A model call that failed; `reason` is a readable sentence for the user."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
