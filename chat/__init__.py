"""The domain: conversations and their append-only transcript (`models`, a tree of versions:
`branches`, `transcript`), the conversation's state in one read (`state`) and the window built
from it (`window`), the panel's figures (`figures`), compactions as transactions
(`compactions`, `compaction_actions`), a person's actions on conversations (`conversations`),
imports and exports, abuse limits, the full-text index (`search_index`), and what happened, as
events (`events`).

Sub-rooms: `turns` (the engine), `render` (HTML), `web` (views and the websocket). The domain
itself imports only compaction, providers and core.
"""
