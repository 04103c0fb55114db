"""The window: what the model sees of a conversation, kept within its budget.

Pure logic over plain values: the window's shape (`window`), the value it is built into
(`state`), where it may be cut (`cut`), clearing old tool results (`clearing`), when to compact
(`policy`), what the summariser is asked (`prompt`), a span too large for one request folded in
parts that fit (`chunks`), how its answer is kept or replaced by rules (`brief`), and the calls
themselves (`summariser`). Beside it, boundary storage: the compaction rows
(`models`, `boundaries`). No HTML, no broadcasting: what happened is returned.

Imports only `providers` and `core`. A boundary's foreign key names its conversation
("chat.Conversation"), the one reference upward, by name.
"""
