"""The model behind the chat, behind one interface: a client has `capabilities(model)` and
`stream(request)`, an async iterator of events (`values`) ending with a `Final`, or raising
`LLMError` with a sentence for the user.

`registry` decides which client answers for a model (the offline demo, Anthropic or any
compatible server, or a fake registered in their place), what a new conversation may pick and the
window's budget on each. Beside it: the plain values (`values`), content blocks read in one place
(`blocks`), the token estimates (`tokens`), prices (`prices`), prompt-cache breakpoints
(`caching`), usage as model columns (`usage_columns`), whether a text answers a question (the
demo's `answering`), files as a request carries them (`sent_files`) and what the demo says of
them (`demo_files`), and the embedder behind its own interface
(`embeddings`: built-in, none, or an embeddings server).

May import: core.
"""
