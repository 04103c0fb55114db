"""Search over the transcripts, with the database's own full-text index (chat/search_index.py):
one function for people (every version, marked when off the branch on screen) and one for the
model's recall (its own branch only) (`messages`), each message ranked with its neighbours as
context (`context`), search by meaning over the stored vectors (`semantic`) fused with it
(`fusion`), which file of a message a hit was found in (`files`), the reading of a query
(`query`), and the values all of them share (`values`: `Hit`,
`Scope`).

May import: chat, providers and core.
"""
