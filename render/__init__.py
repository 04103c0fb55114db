"""How things look: a message's bubble, the frames the tabs are sent (events as HTML fragments),
the context panel's meter and chart, untrusted text as sanitised HTML, "What the model sees",
and the templates' tags.

Renders values already loaded and runs no query. Imported only by the web room (which installs
`frames.render` as the outbox's renderer).

May import: search, chat, compaction, providers and core.
"""
