"""The web room: what a browser talks to. Views (pages, the sidebar, search), the websocket
consumer (thin: it parses a frame and calls an action), accounts within the abuse limits, the
origin check, sessions that close their sockets when they end, the admin, and the renderer the
outbox sends with (installed by `apps.WebConfig` at start-up).

May import every other room; nothing imports it.
"""
