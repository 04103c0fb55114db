"""Security headers: a strict Content-Security-Policy on every page (the admin's too), the same
with debug on or off, and `check --deploy` clean under the production profile in the README."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys

import pytest

from compaction.models import Compaction
from tests.transcripts import add_turns, committed_boundary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The README's "Production profile"; the key is any 50+ random characters.
PRODUCTION_PROFILE = {
    "DJANGO_DEBUG": "false",
    "DJANGO_ALLOWED_HOSTS": "chat.example.com",
    "BEHIND_TLS_PROXY": "true",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "EMAIL_HOST": "smtp.example.com",  # password reset mails somewhere (web.W001 otherwise)
}
# Set by CI or a developer's shell; none may leak into the profile under test.
LEAKY_ENV = ["SECURE_COOKIES", "DJANGO_SETTINGS_MODULE", "DJANGO_CSRF_TRUSTED_ORIGINS"]

# The style nonce, where a page renders one, is checked apart from this.
EXPECTED_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}


def policy_of(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy")
    assert header, f"no Content-Security-Policy on {response.request['PATH_INFO']}"
    directives = [part.split() for part in header.split(";") if part.strip()]
    return {name: values for name, *values in directives}


def assert_strict(response, status: int = 200) -> str | None:
    """The expected policy; the style nonce it names, if the page rendered one."""
    assert response.status_code == status, response.status_code
    policy = policy_of(response)
    nonces = [v for v in policy["style-src"] if v.startswith("'nonce-")]
    policy["style-src"] = [v for v in policy["style-src"] if v not in nonces]
    assert policy == EXPECTED_POLICY
    scripts = policy.get("script-src", policy["default-src"])
    assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts
    assert not any(v.startswith("'unsafe") for v in policy["style-src"])
    assert "Content-Security-Policy-Report-Only" not in response.headers
    assert len(nonces) <= 1, nonces
    return nonces[0][len("'nonce-") : -1] if nonces else None


def run_with(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_deploy_is_clean_under_the_production_profile():
    env = PRODUCTION_PROFILE | {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    result = run_with(env, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues (0 silenced)." in output, output


def test_the_policy_is_the_same_with_debug_on_or_off():
    show = (
        "import config.settings as s; "
        "print(s.SECURE_CSP, 'django.middleware.csp.ContentSecurityPolicyMiddleware' in "
        "s.MIDDLEWARE)"
    )
    seen = {
        debug: run_with({"DJANGO_DEBUG": debug, "DJANGO_SECRET_KEY": "k"}, "-c", show)
        for debug in ("true", "false")
    }
    for result in seen.values():
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith("True"), result.stdout
    assert seen["true"].stdout == seen["false"].stdout


@pytest.mark.django_db
def test_the_login_and_signup_pages_carry_the_policy(client):
    assert assert_strict(client.get("/accounts/login/")) is None
    assert assert_strict(client.get("/accounts/signup/")) is None


@pytest.mark.django_db
def test_the_csrf_failure_page_styles_itself_with_the_nonce():
    from django.test import Client

    response = Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "x"})
    nonce = assert_strict(response, status=403)
    assert nonce and f'<style nonce="{nonce}">' in response.content.decode()


@pytest.fixture
def compacted(conversation):
    add_turns(conversation, 4)
    committed_boundary(
        conversation, 5, summary="## Primary request and intent\nKeep the policy strict."
    )
    return conversation


@pytest.mark.django_db
def test_the_chat_pages_carry_the_policy_and_need_no_inline_code(client, alice, compacted):
    client.force_login(alice)
    pages = [
        "/",
        f"/conversations/{compacted.pk}/",
        f"/conversations/{compacted.pk}/?part=transcript",
        "/search/?q=policy",
        f"/conversations/{compacted.pk}/search/?q=policy",
    ]
    for url in pages:
        response = client.get(url, follow=True)
        assert assert_strict(response) is None, f"{url} rendered a nonce it does not need"
        html = response.content.decode()
        # What the policy refuses must not be in the markup: handlers, style attributes,
        # inline <script> or <style>, javascript: URLs.
        assert not re.search(r"<[^>]*\son[a-z]+\s*=", html), url
        assert not re.search(r"<[^>]*\sstyle\s*=", html), url
        assert not re.search(r"<script(?![^>]*\ssrc=)[^>]*>", html), url
        assert "<style" not in html and "javascript:" not in html, url
    page = client.get(f"/conversations/{compacted.pk}/").content.decode()
    assert 'data-confirm="Delete this conversation?"' in page
    assert re.search(r'<svg class="seg seg-history" width="[\d.]+%"', page)


@pytest.mark.django_db
def test_the_admin_carries_the_policy(admin_client, compacted):
    compaction = Compaction.objects.get(conversation=compacted)
    for url in [
        "/admin/",
        "/admin/chat/conversation/",
        f"/admin/chat/conversation/{compacted.pk}/change/",
        "/admin/compaction/compaction/",
        f"/admin/compaction/compaction/{compaction.pk}/change/",
    ]:
        response = admin_client.get(url)
        nonce = assert_strict(response)
        html = response.content.decode()
        # The admin puts the nonce on its tags; the header must name the same one.
        assert nonce and f'nonce="{nonce}"' in html, url
