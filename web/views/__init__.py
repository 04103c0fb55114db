"""The pages and endpoints, one module a family: the conversation pages (`conversations`), the
sidebar's list and menus (`sidebar`), search (`search`), import and export (`import_export`),
files given to the model (`attachments`), accounts (`accounts`), and the one lookup they share
(`owned`)."""
