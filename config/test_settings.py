"""Settings for the test suite: the real settings, with a throwaway key and fast hashing."""

import os
import tempfile
from pathlib import Path

os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-secret-key-not-for-production")

from .settings import *  # noqa: E402,F403
from .settings import DATABASES, STORAGES  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests send, compact and sign in far faster than people: the limits' own tests lower these.
SENDS_PER_MINUTE = REPLIES_AT_ONCE = COMPACTIONS_PER_HOUR = 100_000
SIGNUPS_PER_HOUR = LOGIN_FAILURES_PER_15_MINUTES = 100_000
IMPORTS_PER_HOUR = PASSWORD_RESETS_PER_HOUR = 100_000
DEMO_WORD_DELAY_MS = 0
# The title request would take a reply a test queued for its turns (a fake answers in order):
# the titles' own tests turn it on (tests/test_generated_titles.py).
GENERATED_TITLES = False
# Search is lexical in tests unless one turns embeddings on (tests/test_semantic_*.py): vectors
# written by a background sweep would otherwise make other tests' hits depend on its timing.
EMBEDDINGS = "none"
# Async code's database calls (core/db.py) close their connections after each one, so none
# outlives a test (PostgreSQL cannot drop a test database that still has connections).
DATABASES["default"]["CONN_MAX_AGE"] = 0
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not Django's shared-cache in-memory database: tests write from several threads
    # (the test's, asgiref's, a live server's), and shared-cache SQLite refuses concurrent
    # writers instead of waiting for them.
    DATABASES["default"]["TEST"] = {
        "NAME": str(Path(tempfile.gettempdir()) / f"chat-test-{os.getpid()}.sqlite3")
    }
# Uploads go to a folder of this test process's own (tests/test_attachments*.py count its files).
ATTACHMENTS_ROOT = str(Path(tempfile.gettempdir()) / f"chat-test-attachments-{os.getpid()}")
STORAGES["attachments"]["OPTIONS"]["location"] = ATTACHMENTS_ROOT
