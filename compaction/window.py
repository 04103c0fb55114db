"""Build the model-facing window: system prompt, latest summary, kept tail of the transcript."""

from __future__ import annotations

# The summary re-enters the window as a user/assistant pair at the head of `messages`, so roles
# keep alternating and the prefix stays byte-identical (cacheable) until the next compaction.
SUMMARY_INTRO = "This conversation continues from an earlier part, summarised here:"
SUMMARY_ACK = "Understood. I have the summary of our earlier conversation and will continue from it."
