"""Search over the transcripts, with the database's own full-text index (chat/search_index.py):
one function for people (every version, marked when off the branch on screen) and one for the
model's recall (its own branch only), and the reading of a query (`query`).

Imports only the domain (chat) and core.
"""
