"""Configuration fails loudly at start-up instead of breaking pages later."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_settings(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SECRET_KEY": "k", **env},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AUTO_COMPACT_AT": "0.2"}, "KEEP_TAIL_SHARE (0.25) must be below AUTO_COMPACT_AT"),
        ({"AUTO_COMPACT_AT": "1.5"}, "AUTO_COMPACT_AT must be between 0 and 1"),
        ({"MAX_MESSAGE_CHARS": "lots"}, "MAX_MESSAGE_CHARS must be an integer"),
        ({"DJANGO_DEBUG": "maybe"}, "DJANGO_DEBUG must be true or false"),
        ({"LLM_PROVIDER": "openai"}, "LLM_PROVIDER must be anthropic or demo"),
        ({"DJANGO_SECRET_KEY": ""}, "Set DJANGO_SECRET_KEY"),
    ],
)
def test_a_bad_value_stops_start_up_with_a_clear_message(env, message):
    result = load_settings(**env)
    assert result.returncode != 0
    assert message in result.stderr


def test_production_settings_are_secure_by_default():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import config.settings as s; "
            "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
            "hasattr(s, 'SECURE_PROXY_SSL_HEADER'))",
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SECRET_KEY": "k", "DJANGO_DEBUG": "false"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["False", "True", "True", "False"]


def test_the_server_process_keeps_what_it_loaded_out_of_the_collectors_way():
    import gc

    import config.asgi  # noqa: F401 - the server's entry point freezes what it loaded

    assert gc.get_freeze_count() > 10_000


def test_the_database_urls_own_options_are_kept():
    # `?sslmode=require` must survive the options the settings add (prepared statements): a
    # database that requires TLS would otherwise be reached without it, or not at all.
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import config.settings as s; o = s.DATABASES['default']['OPTIONS']; "
            "print(o.get('sslmode'), o.get('prepare_threshold'))",
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SECRET_KEY": "k",
            "DATABASE_URL": "postgres://app@db.internal:5432/chat?sslmode=require",
        },
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["require", "5"]
