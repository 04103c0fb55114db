"""Tools the model may call: the built-in recall tools over its conversation's whole transcript
(`recall`), every configured MCP server's tools (`mcp`), which of them a request offers and how
one call runs (`registry`), and the values they share (`values`).

May import: search, chat, compaction and core.
"""
