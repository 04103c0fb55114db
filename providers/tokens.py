"""Token estimates, where the server has not counted.

The API's `usage` on a reply is the ground truth for what the window it was sent cost. Between
replies only what was added since is *estimated*, with a deliberately conservative (high) local
estimator, so the window is never believed smaller than it is. Each message's estimate is stored
once when it is saved; nothing here re-counts a whole history.
"""

from __future__ import annotations

import base64
import io
import math
import re

from PIL import Image

from providers.blocks import FILE_TYPES, block_text, file_of, file_tokens, type_of

# English prose runs near 4 characters a token for Claude's tokenizer; code and other scripts run
# denser. Three characters a token over-counts prose by ~30%, which is the safe direction.
CHARS_PER_TOKEN = 3.0
# Role markers and block framing cost a few tokens per message.
MESSAGE_OVERHEAD = 4


def estimate_length(chars: int) -> int:
    """Tokens for `chars` characters of text (a streaming reply counts its length as it grows)."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def estimate_text(text: str) -> int:
    return estimate_length(len(text))


def estimate_content(content: list[dict] | str) -> int:
    if isinstance(content, str):
        return MESSAGE_OVERHEAD + estimate_text(content)
    return MESSAGE_OVERHEAD + sum(estimate_block(b) for b in content)


def estimate_block(block: dict) -> int:
    """One block: a file by its upload's estimate (images by their pixels, PDFs by their pages),
    the API's own file block (a request on its way, which the offline models count) likewise,
    anything else by its text."""
    meta = file_of(block)
    if meta is not None:
        return file_tokens(meta)
    if type_of(block) in FILE_TYPES and isinstance(block.get("source"), dict):
        return estimate_sent_file(block["source"])
    inner = block.get("content") if type_of(block) == "tool_result" else None
    if isinstance(inner, list) and any(file_of(b) for b in inner):  # read_attachment's result
        return sum(estimate_block(b) for b in inner)
    return estimate_text(block_text(block))


def estimate_request(system: str, messages: list[dict]) -> int:
    """Estimate a whole request: the usage the offline models report (no server counts it)."""
    return estimate_text(system) + sum(estimate_content(m["content"]) for m in messages)


# Anthropic's estimates for files (docs/files.md): an image costs width x height / 750 tokens,
# at most about 1,600 (the API scales a larger one down); a PDF page up to 3,000 (its text and
# the page seen as an image).
PIXELS_PER_TOKEN = 750
IMAGE_MAX_TOKENS = 1600
PDF_TOKENS_PER_PAGE = 3000


def image_tokens(width: int, height: int) -> int:
    return min(math.ceil(width * height / PIXELS_PER_TOKEN), IMAGE_MAX_TOKENS)


def estimate_sent_file(source: dict) -> int:
    """A file as the API's block carries it: a text source by its text; an image by its pixels
    (its header read, nothing decoded); a PDF by its pages. What cannot be read counts as the
    most an image or a page can cost."""
    data = source.get("data")
    if source.get("type") == "text":
        return estimate_text(str(data or ""))
    try:
        raw = base64.b64decode(str(data or ""))
    except ValueError:
        return IMAGE_MAX_TOKENS
    if source.get("media_type") == "application/pdf":
        return PDF_TOKENS_PER_PAGE * max(1, len(_PDF_PAGE.findall(raw)))
    try:
        with Image.open(io.BytesIO(raw)) as image:  # lazy: reads the header only
            return image_tokens(*image.size)
    except (OSError, ValueError, Image.DecompressionBombError):
        return IMAGE_MAX_TOKENS


# A PDF's page objects ("/Type /Page", not "/Pages"): a count good enough for an estimate.
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
