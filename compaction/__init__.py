"""The window: what the model sees of a conversation, kept within its budget.

Pure logic over plain values: a transcript message as the window sees it (`entries`), the
window's state (`window_state`), assembling it into a request (`assembly`), where it may be cut
(`cut`), clearing old tool results (`clearing`), when to compact (`policy`), what opening one
compaction does, planned at once (`planning`), what the summariser is asked (`prompt`), a span
too large for one request folded in parts that fit (`chunks`), the rule-based brief, its
facts section and the facts it carries (`brief`, `brief_facts`, `facts`), what a person's
instructions ask of it (`instructions`), which key facts a summary kept (`key_facts`), and the
calls themselves (`summariser`). Beside it, boundary storage: the compaction rows (`models`,
`boundaries`). No HTML, no broadcasting: what happened is returned.

A boundary's foreign key names its conversation ("chat.Conversation") by string: no import.

May import: providers and core.
"""
