"""Token estimates, where the server has not counted.

The API's `usage` on a reply is the ground truth for what the window it was sent cost. Between
replies only what was added since is *estimated*, with a deliberately conservative (high) local
estimator, so the window is never believed smaller than it is. Each message's estimate is stored
once when it is saved; nothing here re-counts a whole history.
"""

from __future__ import annotations

import math

from providers.blocks import block_text, file_of, file_tokens, type_of

# English prose runs near 4 characters a token for Claude's tokenizer; code and other scripts run
# denser. Three characters a token over-counts prose by ~30%, which is the safe direction.
CHARS_PER_TOKEN = 3.0
# Role markers and block framing cost a few tokens per message.
MESSAGE_OVERHEAD = 4
# Anthropic's estimate for an image: width x height / 750 tokens, and an image past about
# 1,600 tokens is scaled down by the API until it is within them.
PIXELS_PER_TOKEN = 750
IMAGE_MAX_TOKENS = 1600
# A PDF page costs its text plus the page seen as an image: "1,500 to 3,000 tokens a page"
# in Anthropic's PDF guide. We take the top of that range (estimates here err high, as the
# text estimator's do, so the window is never believed smaller than it is) until the usage the
# API reports corrects it.
PDF_TOKENS_PER_PAGE = 3000


def estimate_length(chars: int) -> int:
    """Tokens for `chars` characters of text (a streaming reply counts its length as it grows)."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def estimate_text(text: str) -> int:
    return estimate_length(len(text))


def image_tokens(width: int, height: int) -> int:
    return min(math.ceil(width * height / PIXELS_PER_TOKEN), IMAGE_MAX_TOKENS)


def pdf_tokens(pages: int) -> int:
    return pages * PDF_TOKENS_PER_PAGE


def estimate_content(content: list[dict] | str) -> int:
    if isinstance(content, str):
        return MESSAGE_OVERHEAD + estimate_text(content)
    return MESSAGE_OVERHEAD + sum(estimate_block(b) for b in content)


def estimate_block(block: dict) -> int:
    """One block: a file by its upload's estimate (images by their pixels, PDFs by their pages),
    anything else by its text (a request's own file blocks are first read back as the stored
    ones: providers/sent_files.as_references)."""
    meta = file_of(block)
    if meta is not None:
        return file_tokens(meta)
    inner = block.get("content") if type_of(block) == "tool_result" else None
    if isinstance(inner, list) and any(file_of(b) for b in inner):  # read_attachment's result
        return sum(estimate_block(b) for b in inner)
    return estimate_text(block_text(block))


def estimate_request(system: str, messages: list[dict]) -> int:
    """Estimate a whole request: the usage the offline models report (no server counts it)."""
    return estimate_text(system) + sum(estimate_content(m["content"]) for m in messages)
