"""Real-browser fixtures: a uvicorn process (as `make run` starts it) with its own SQLite file,
and a headless Chromium.

These tests talk to the app only over HTTP and the websocket, like a user; they never touch the
ORM in-process, so pytest-django needs no test database here. Run them in their own process
(`make test-browser`): Playwright's sync API and pytest-asyncio's event loop do not mix.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TIMEOUT_MS = 20_000
SERVER_START_SECONDS = 30


def server_argv(port: int) -> list[str]:
    """The server as `make run` starts it."""
    return [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1"] + [
        "--port",
        str(port),
        "--lifespan",
        "on",
        "--no-proxy-headers",
    ]


# A budget sized for the tests: six long turns (~525 tokens each with the reply) cross the auto
# threshold (60% of 5,000), while the three-turn "Compact now" tests stay well below it and so
# see no auto-compaction of their own. A short kept tail (10%) makes every compaction replace
# most of the window, so the drop is clear whatever the rule-based summary's exact size. Words
# are slow enough that streaming can be watched and stopped.
SERVER_ENV = {
    "DJANGO_DEBUG": "true",
    "DJANGO_SECRET_KEY": "browser-tests",
    "LLM_PROVIDER": "demo",
    "DEMO_WORD_DELAY_MS": "40",
    "CONTEXT_BUDGET_TOKENS": "5000",
    "KEEP_TAIL_SHARE": "0.1",
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "LOG_LEVEL": "WARNING",
    # The UI under test, not the abuse limits (tests/test_limits.py): a module's user may have
    # replies still streaming in conversations an earlier test left.
    "REPLIES_AT_ONCE": "20",
    "SENDS_PER_MINUTE": "1000",
    # The session's one user imports in many tests (the limit: test_import_concurrency.py, and
    # test_outages_in_a_browser.py on a server of its own).
    "IMPORTS_PER_HOUR": "1000",
    # Every sign-up comes from 127.0.0.1 (forwarded addresses are believed from no one): the
    # settings test deletes the accounts it makes, and several files make their own users.
    "SIGNUPS_PER_HOUR": "1000",
    # Lexical search only. With an embedder, messages get their vectors in the background, a
    # heartbeat after they settle, and one without a vector yet ranks below those with one: what
    # a search (or the demo's recall) finds first would depend on whether that round has run.
    # Search by meaning is tested in the unit suite (tests/test_semantic_search.py), with the
    # vectors made before each search.
    "EMBEDDINGS": "none",
    # Titles stay the first words (tests read them); test_home_in_a_browser.py turns the model's
    # titles on for its own server.
    "GENERATED_TITLES": "false",
}
# Set by CI for the other suite; must not reach this server.
LEAKY_ENV = [
    "REDIS_URL",
    "DATABASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "CHAT_MODEL",
    "CHAT_MODELS",
]


def _wait_until_up(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the server exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(
        f"the server did not answer {url} in {SERVER_START_SECONDS}s:\n{log.read_text()[-4000:]}"
    )


@pytest.fixture(scope="session")
def server():
    """The base URL of a live server serving the app from a fresh SQLite file."""
    with serve() as base:
        yield base


@contextlib.contextmanager
def serve(**overrides: str):
    """A live server on a fresh SQLite file, with SERVER_ENV and these settings over it."""
    with tempfile.TemporaryDirectory(prefix="browser-tests-") as tmp:
        tmp_path = Path(tmp)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
        env |= (
            SERVER_ENV
            | overrides
            | {
                "DATABASE_URL": f"sqlite:///{tmp_path / 'browser.sqlite3'}",
                # Uploads beside the database, gone with it (not in the checkout's attachments/).
                "ATTACHMENTS_ROOT": str(tmp_path / "attachments"),
                "PORT": str(port),
            }
        )
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        log = tmp_path / "server.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                server_argv(port),
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            base = f"http://127.0.0.1:{port}"
            try:
                _wait_until_up(f"{base}/accounts/login/", proc, log)
                yield base
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
                errors = [
                    line
                    for line in log.read_text(errors="replace").splitlines()
                    if "Traceback" in line or "ERROR" in line
                ]
                if errors:
                    # Shown with -s or on failure: server-side faults a page may not reveal.
                    print("\n--- the server log had errors ---\n" + log.read_text()[-6000:])


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def new_context(browser, **kwargs):
    context = browser.new_context(viewport={"width": 1280, "height": 860}, **kwargs)
    context.set_default_timeout(TIMEOUT_MS)
    return context


@pytest.fixture
def context(browser):
    context = new_context(browser)
    yield context
    context.close()


@pytest.fixture
def page(context):
    return context.new_page()


_users = itertools.count(1)


def signup(page, base: str, username: str = "") -> str:
    """Create a user through the sign-up form; the page ends logged in. The database is new
    for each session, so names only need to differ within one."""
    username = username or f"newcomer{next(_users)}"
    password = "a-long-browser-password-9"
    page.goto(f"{base}/accounts/signup/")
    page.fill("#id_username", username)
    page.fill("#id_password1", password)
    page.fill("#id_password2", password)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert "/accounts/signup/" not in page.url, page.content()[:2000]
    return username


@pytest.fixture(scope="session")
def user_state(browser, server):
    """One signed-up user for the session: its cookies, for tests that need only a login."""
    context = new_context(browser)
    page = context.new_page()
    signup(page, server, "sam")
    state = context.storage_state()
    context.close()
    return state


@pytest.fixture
def user_context(browser, user_state):
    context = new_context(browser, storage_state=user_state)
    yield context
    context.close()


@pytest.fixture
def chat(user_context, server):
    """A page on a brand-new conversation of the session's user."""
    page = user_context.new_page()
    page.goto(f"{server}/")
    new_conversation(page)
    return page


@pytest.fixture(scope="module")
def fast_server():
    """A server of the module's own whose demo answers at once: long conversations are many
    turns."""
    with serve(DEMO_WORD_DELAY_MS="0") as base:
        yield base


def reach_list(page) -> None:
    """Bring the conversation list on screen as a person would: on a phone's conversation page
    it is a drawer behind ☰ (one tap); elsewhere it is on the page already."""
    toggle = page.locator("#show-sidebar")
    if toggle.count() and toggle.is_visible() and toggle.get_attribute("aria-expanded") != "true":
        toggle.click()


def new_conversation(page) -> None:
    # The empty page offers a second one in its body; the sidebar's is always there.
    reach_list(page)
    page.get_by_role("button", name="+ New conversation").first.click()
    page.wait_for_url("**/conversations/*/")
    wait_socket(page)


def wait_socket(page) -> None:
    """Wait until htmx's ws extension has opened the conversation's socket."""
    page.wait_for_function(
        "() => { const el = document.getElementById('chat-root');"
        " const ws = el && el['htmx-internal-data'] && el['htmx-internal-data'].webSocket;"
        " return ws && ws.socket && ws.socket.readyState === 1; }",
        timeout=TIMEOUT_MS,
    )


def review_mode(page) -> None:
    """Turn on the open conversation's "Ask me before compacting" from its menu, and wait for
    the page it reloads to have its socket again."""
    page.locator("details.conversation-menu > summary").click()
    page.check("input[name=review_compactions]")
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_load_state()
    wait_socket(page)


def conversation_id(page) -> int:
    return int(page.get_attribute("#chat-root", "data-conversation"))


def send(page, text: str) -> None:
    """Type a message and press Enter; wait until the server has accepted it (its bubble shows).
    A message sent while a reply is still finishing is queued, never refused."""
    users = page.locator("#transcript .message.user")
    before = users.count()
    page.fill("#message-input", text)
    page.press("#message-input", "Enter")
    page.wait_for_function(
        "n => document.querySelectorAll('#transcript .message.user').length > n", arg=before
    )


def replies(page, status: str = "complete"):
    return page.locator(f'#transcript .message.assistant[data-status="{status}"]')


def wait_replies(page, n: int, timeout: int = TIMEOUT_MS) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll("
        "'#transcript .message.assistant[data-status=\"complete\"]').length >= n",
        arg=n,
        timeout=timeout,
    )


def turn(page, text: str) -> None:
    """Send one message; wait for its complete reply and the meter that follows it."""
    before = replies(page).count()
    meter = tokens(page)
    send(page, text)
    wait_replies(page, before + 1)
    wait_meter_changes(page, meter)


def wait_meter_changes(page, old: int) -> int:
    page.wait_for_function(
        "old => +document.getElementById('window-tokens').dataset.tokens !== old", arg=old
    )
    return tokens(page)


def record_stream(page, seq: int) -> None:
    """Record, in the page, every (status, text length) bubble #msg-<seq> goes through."""
    page.evaluate(
        """seq => {
            window.__stream = [];
            const look = () => {
                const bubble = document.getElementById('msg-' + seq);
                if (!bubble) return;
                const text = document.getElementById('msg-' + seq + '-text');
                const entry = [bubble.dataset.status, text ? text.innerText.length : -1];
                const last = window.__stream[window.__stream.length - 1];
                const changed = !last || last[0] !== entry[0] || last[1] !== entry[1];
                if (changed) window.__stream.push(entry);
            };
            new MutationObserver(look).observe(document.body,
                {childList: true, subtree: true, characterData: true, attributes: true});
        }""",
        seq,
    )


def recorded_stream(page) -> list[tuple[str, int]]:
    return [tuple(e) for e in page.evaluate("window.__stream")]


def tokens(page) -> int:
    return int(page.get_attribute("#window-tokens", "data-tokens"))


def export(page, base: str) -> dict:
    response = page.request.get(f"{base}/conversations/{conversation_id(page)}/export.json")
    assert response.ok, response.status
    return response.json()


# --- a server a test may stop and start again ------------------------------------------------


class RestartableServer:
    """A server of its own (own SQLite file, own port) that a test can stop and start again on
    the same port, to drop every websocket the way a deploy or a crash does. The session's
    `server` is never touched, so a failure here cannot leave other tests without one."""

    def __init__(self, tmp_path: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "server.log"
        self.env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
        self.env |= SERVER_ENV | {
            "DATABASE_URL": f"sqlite:///{tmp_path / 'restartable.sqlite3'}",
            "PORT": str(self.port),
        }
        self.argv = server_argv(self.port)
        self.proc: subprocess.Popen | None = None

    def migrate(self) -> None:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        _wait_until_up(f"{self.base}/accounts/login/", self.proc, self.log)

    def stop(self) -> None:
        """Terminate the process and wait until the port refuses connections."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"port {self.port} still open after the server stopped")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture(scope="module")
def restartable_server():
    with tempfile.TemporaryDirectory(prefix="browser-tests-restart-") as tmp:
        srv = RestartableServer(Path(tmp))
        srv.migrate()
        srv.start()
        try:
            yield srv
        finally:
            srv.stop()
            text = srv.log.read_text(errors="replace") if srv.log.exists() else ""
            if "Traceback" in text or "ERROR" in text:
                print("\n--- restartable server log had errors ---\n" + text[-6000:])


def message_ids(page) -> list[str]:
    """The ids of every message bubble in the transcript, in page order (duplicates kept)."""
    return page.evaluate("[...document.querySelectorAll('#transcript .message')].map(m => m.id)")


@contextlib.contextmanager
def server_with_admin(prefix: str, username: str, password: str):
    """A server of its own (own SQLite file, own port) with a superuser in its database, for
    tests that go through the admin too; yields its base URL."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        srv = RestartableServer(Path(tmp))
        srv.migrate()
        subprocess.run(
            [sys.executable, "manage.py", "createsuperuser", "--noinput"]
            + ["--username", username, "--email", f"{username}@example.com"],
            cwd=ROOT,
            env=srv.env | {"DJANGO_SUPERUSER_PASSWORD": password},
            check=True,
            capture_output=True,
            timeout=120,
        )
        srv.start()
        try:
            yield srv.base
        finally:
            srv.stop()
