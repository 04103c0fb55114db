"""The fault campaign's parts (bench/faults.py is the script): the server slots (`servers`),
the tabs and messages (`tabs`), a person driving one conversation (`person`) and trying other
users' (`probes`), the campaign as a whole (`campaign`) and its run (`run`), the checks of the
database and the provider's log (`checks`), and the report (`report`)."""

MODEL = "claude-faults"
SYSTEM_PROMPT = "Be brief."
