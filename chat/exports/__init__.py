"""A conversation written out for people and programs: export.json (`as_json`) and export.md
(`as_markdown`, whose untrusted parts `safe_markdown` keeps in their place), and what a download
of either needs (`downloads`: its file name, and the pieces streamed in chunks).

Both read the transcript with `.iterator()` in seq order, so a conversation of any length is
exported in a fixed number of queries without being held in memory at once (the Markdown one
is streamed as it is written). Everything in them is the owner's conversation: the views look it
up through `owned_by(request.user)` first.
"""
