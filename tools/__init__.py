"""Tools the model may call: the built-in recall tools over its conversation's whole transcript
(`recall`), every configured MCP server's tools (`mcp`), and which of them a request offers and
how one call runs (`registry`).

Imports the domain (chat), search, compaction's plain-text rendering, and core.
"""
