"""The domain: conversations and their append-only transcript (`models`, a tree of versions:
`branches`, `transcript`), a snapshot of a conversation in one read (`snapshot`) and its window
loaded from it (`window_loading`), the panel's figures (`figures`), compactions as transactions,
a person's actions on them included (`compactions`), a person's actions on conversations
(`conversations`), the sidebar's lists (`sidebar`), imports (`imports/`) and exports
(`exports/`), files given to the model (`attachments`, checked by their content in
`file_checks`), abuse limits (`limits`), the full-text index (`search_index`), messages' vectors
for search by meaning (`vectors`), and what happened, as events (`events`).

May import: compaction, providers and core.
"""
