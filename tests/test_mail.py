"""Password reset mail: the mail server comes from the environment, a reset reaches it, and the
start-up check warns when debug is off and no mail server is named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from support.fake_smtp import FakeSMTP
from tests.servers import ROOT, Server

MAIL_VARIABLES = (
    "EMAIL_HOST",
    "EMAIL_PORT",
    "EMAIL_HOST_USER",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_USE_TLS",
    "EMAIL_USE_SSL",
    "DEFAULT_FROM_EMAIL",
)
SHOW = """
import json, django
from django.core import checks
django.setup()
from django.conf import settings as s
found = [m.id for m in checks.run_checks()]
mailer = s.MAILERS["default"]
print(json.dumps({"backend": mailer["BACKEND"], "options": mailer.get("OPTIONS", {}),
                  "from": s.DEFAULT_FROM_EMAIL, "checks": found}))
"""


def configured(**env: str) -> dict:
    """The mail settings, and the start-up checks' ids, of a process started with `env`."""
    base = {k: v for k, v in os.environ.items() if k not in MAIL_VARIABLES}
    answer = subprocess.run(
        [sys.executable, "-c", SHOW],
        cwd=ROOT,
        env=base
        | {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_SECRET_KEY": "a-key-for-this-test-only",
            "DJANGO_DEBUG": "false",
            "EMBEDDINGS": "none",
        }
        | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout.strip().splitlines()[-1])


def test_mail_settings_come_from_the_environment():
    found = configured(
        EMAIL_HOST="smtp.example.org",
        EMAIL_PORT="587",
        EMAIL_HOST_USER="chat",
        EMAIL_HOST_PASSWORD="secret",
        EMAIL_USE_TLS="true",
        DEFAULT_FROM_EMAIL="Chat <chat@example.org>",
    )
    assert found["backend"] == "django.core.mail.backends.smtp.EmailBackend"
    assert found["options"] == {
        "host": "smtp.example.org",
        "port": 587,
        "username": "chat",
        "password": "secret",
        "use_tls": True,
        "use_ssl": False,
        "timeout": 10,  # a silent mail server holds no request for long
    }
    assert found["from"] == "Chat <chat@example.org>"
    assert "web.W001" not in found["checks"]


def test_start_up_warns_when_reset_has_no_mail_server_and_debug_is_off():
    assert "web.W001" in configured()["checks"]
    debug = configured(DJANGO_DEBUG="true")  # `make run`: mails are printed, nothing to warn
    assert debug["backend"] == "django.core.mail.backends.console.EmailBackend"
    assert "web.W001" not in debug["checks"]


def test_both_kinds_of_tls_at_once_is_refused_at_start():
    base = {k: v for k, v in os.environ.items() if k not in MAIL_VARIABLES}
    answer = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=base
        | {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_DEBUG": "true",
            "EMAIL_USE_TLS": "true",
            "EMAIL_USE_SSL": "true",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answer.returncode != 0
    assert "Set EMAIL_USE_TLS (STARTTLS) or EMAIL_USE_SSL, not both" in answer.stderr


@pytest.mark.django_db(transaction=True)
def test_a_password_reset_reaches_the_mail_server_named(django_user_model):
    django_user_model.objects.create_user("alice", "alice@example.org", "alice-password-1")
    with FakeSMTP() as smtp:
        server = Server(
            "http://127.0.0.1:9",  # no model is asked
            EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=str(smtp.port),
            DEFAULT_FROM_EMAIL="chat@example.org",
        ).start()
        try:
            url = f"http://127.0.0.1:{server.port}/accounts/password_reset/"
            opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
            page = opener.open(url, timeout=30).read().decode()
            token = page.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
            form = {"email": "alice@example.org", "csrfmiddlewaretoken": token}
            done = opener.open(url, urllib.parse.urlencode(form).encode(), timeout=30)
            assert done.url.endswith("/accounts/password_reset/done/")
            deadline = time.monotonic() + 10
            while not smtp.mails and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            server.stop()
    [mail] = smtp.mails
    assert mail["from"] == "chat@example.org" and mail["to"] == ["alice@example.org"]
    assert f"http://127.0.0.1:{server.port}/accounts/reset/" in mail["data"]
