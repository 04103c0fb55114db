"""Importing a file of conversations (our export.json, or ChatGPT's conversations.json): the
import itself, staged and finished in short transactions (`importing`); the file read as a
stream of the fields kept (`reader`); each message and conversation checked as it comes
(`schema`); versions, pins, compactions and dates checked against each other (`history`); and
the rows written in batches (`rows`).
"""
