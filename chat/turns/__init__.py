"""The turn engine: a conversation's work, one step at a time. The turn's durable states and
their transitions (`states`, with its hand-written statements and `versions`), the engine that
drives them (`engine`), one reply streamed (`reply`, `relay` for its text), compactions run as
steps and a person's compaction actions (`compacting`), the websocket's queue actions
(`actions`), what this process runs and keeps alive (`liveness`), and what a dead one left
(`recovery`).

Imports the domain (chat), compaction, search, tools, providers and core; never render or web:
what happened leaves as events through the outbox (core/outbox.py).
"""
