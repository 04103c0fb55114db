"""The turn engine: a conversation's work, one step at a time. The turn's durable states and
the transitions between them (`transitions`), the SQL each turn runs (`sql`), versions
(`versions`), the engine that drives them (`engine`, `tasks`), one reply streamed (`reply`,
`relay` for its text and thinking, `thinking` for what each request asks to think),
compactions run as steps and told to the tabs (`compacting`), the websocket's queue actions
(`actions`), what this process runs and keeps alive (`liveness`), and what a dead one left
(`recovery`).

Never render or web: what happened leaves as events through the outbox (core/outbox.py).

May import: tools, chat, compaction, providers and core.
"""
