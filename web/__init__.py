"""The web room: what a browser talks to. Views (`views/`: the conversation pages, the sidebar,
search, import and export, accounts), the websocket consumer (thin: it parses a frame and calls
an action), the origin check, sessions that close their sockets when they end, the admin, and
the renderer the outbox sends with (installed by `apps.WebConfig` at start-up).

Nothing imports it but config.

May import: render, turns, tools, search, chat, compaction, providers and core.
"""
