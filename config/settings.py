"""All configuration comes from the environment, with safe defaults (read by config/env.py's
helpers, which fail loudly on a malformed value). docs/configuration.md lists every setting."""

from __future__ import annotations

import hashlib
import ipaddress
import re
import warnings
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from config.env import (
    env_bool,
    env_fraction,
    env_int,
    env_list,
    env_mcp_servers,
    env_models,
    env_prices,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent


DEBUG = env_bool("DJANGO_DEBUG", False)

SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("Set DJANGO_SECRET_KEY (or DJANGO_DEBUG=true for local use)")
    SECRET_KEY = "insecure-development-key-only-for-debug"  # noqa: S105

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "django_htmx",
    "chat",
    "web",
    "compaction",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "web.device_cookies.DeviceCookieMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",
                "web.context_processors.app_settings",
            ],
            # The chat's tags live with the rest of its rendering, not in an app's templatetags.
            "libraries": {"chat_tags": "render.tags"},
        },
    },
]

# On PostgreSQL, async code runs its database work on this many threads per process (core/db.py),
# each with its own connection kept for CONN_MAX_AGE seconds; on SQLite on one thread the event
# loop waits for. HTTP requests close their connections when they end (close_after_request).
DB_THREADS = env_int("DB_THREADS", 8)
# Each server process holds its threads to one CPU no other server process of this user holds,
# never the last CPU (core/cpu.py): the interpreter runs one thread at a time, and its hand-offs
# between the event loop and the database threads cost a fifth of a reply's CPU when made across
# cores. On under `make serve`, which starts its processes side by side on one machine; off by
# default, as processes that cannot see each other's lock files (containers) would share a core.
ONE_CPU_PER_PROCESS = env_bool("ONE_CPU_PER_PROCESS", False)
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("CONN_MAX_AGE", 60, minimum=0),
        # No health-check query before each reuse: async code reuses its threads' connections
        # for every call, and a broken one is closed after the call that found it broken.
        conn_health_checks=False,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the streaming task write while page views read; the timeout rides out the
    # short write locks instead of failing with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
        }
    )
elif env_bool("DB_PREPARED_STATEMENTS", True):
    # Values sent apart from the SQL, and a statement run a few times on a connection prepared
    # on the server: the engine runs the same few statements every turn on the same connections,
    # and PostgreSQL spent longer planning its window snapshot (about 1 ms) than running it
    # (0.2 ms). Prepared, the database's CPU per reply fell by about 45% (bench/README.md).
    # Off for a pooler that cannot carry prepared statements (PgBouncer before 1.21). Added to
    # the options DATABASE_URL gives (`?sslmode=require`), never in their place.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"server_side_binding": True, "prepare_threshold": 5}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    # Redis pub/sub, local first (core/redis_layer.py): a fragment for sockets in this process is
    # handed to them directly, and one PUBLISH carries it to the processes whose sockets are in
    # its group. The list-based layer (channels_redis.core) spent eight round trips per fragment
    # per socket; channels_redis's pub/sub layer read every fragment back from Redis in the
    # process that sent it. Fragments are best-effort either way: what must not be lost
    # (messages, replies, Stop) is in the database.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "core.redis_layer.RedisLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        # A Redis that accepts connections and never answers is given up on
                        # within a second per command, not left to hold each action for long
                        # (the layer reads its subscriptions with timeouts of its own, so an
                        # idle socket is not cut by this); keepalive and health checks still
                        # find a dead Redis connection.
                        "socket_timeout": 1,
                        "socket_connect_timeout": 1,
                        "socket_keepalive": True,
                        "health_check_interval": 30,
                    }
                ],
                # Redis pub/sub is not scoped by database number: without a prefix of its own,
                # two deployments on one Redis server would hear each other's conversations.
                "prefix": env_str(
                    "CHANNEL_PREFIX",
                    "chat-" + hashlib.sha256(REDIS_URL.encode()).hexdigest()[:12],
                ),
            },
        }
    }
else:
    # One process: its sockets share a layer in memory (core/channel_layer.py).
    CHANNEL_LAYERS = {"default": {"BACKEND": "core.channel_layer.InMemoryLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Serve straight from the app folders (no collectstatic step needed for `make run`); WhiteNoise
# would otherwise warn on every start that STATIC_ROOT has not been collected.
WHITENOISE_USE_FINDERS = True
warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)
WHITENOISE_AUTOREFRESH = DEBUG

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
    # Off by default: both commit every subdomain (preload: for months, in browsers' own
    # lists) to HTTPS, which only the operator of the domain can promise.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    if env_bool("BEHIND_TLS_PROXY", False):
        # Only trust X-Forwarded-Proto when a proxy we control sets it.
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# --- Proxies in front of the app -----------------------------------------------------------
# Their addresses or networks ("127.0.0.1", "10.0.0.0/8"; "*" any): only from these are
# X-Forwarded-For and X-Forwarded-Proto believed (web/forwarded.py). Empty: the connection's own
# address is the client's, so no client can choose the address its per-address limits count.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", "")
for _proxy in TRUSTED_PROXIES:
    try:
        if _proxy != "*":
            ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"TRUSTED_PROXIES holds {_proxy!r}: give addresses or networks (10.0.0.0/8), or *"
        ) from None
# --- Mail (password reset) -----------------------------------------------------------------
# The mail server that sends password resets: EMAIL_HOST names it (with EMAIL_PORT, the user and
# password it signs in with, and STARTTLS or implicit TLS). None named: with debug on (`make
# run`) each mail is printed in the server's output; with debug off, Django's default, a server
# on this host, and the start-up check warns (web/checks.py): a reset would answer "sent" and
# the log show a refused connection.
MAIL_CONFIGURED = bool(env_str("EMAIL_HOST").strip())
_use_tls = env_bool("EMAIL_USE_TLS", False)  # STARTTLS, usually on port 587
_use_ssl = env_bool("EMAIL_USE_SSL", False)  # TLS from the start, usually on port 465
if _use_tls and _use_ssl:
    raise ImproperlyConfigured("Set EMAIL_USE_TLS (STARTTLS) or EMAIL_USE_SSL, not both")
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": env_str("EMAIL_HOST").strip() or "localhost",
            "port": env_int("EMAIL_PORT", 25),
            "username": env_str("EMAIL_HOST_USER"),
            "password": env_str("EMAIL_HOST_PASSWORD"),
            "use_tls": _use_tls,
            "use_ssl": _use_ssl,
            # A mail server that does not answer must not hold a request's worker for long.
            "timeout": env_int("EMAIL_TIMEOUT", 10),
        },
    }
}
if DEBUG and not MAIL_CONFIGURED:
    MAILERS["default"] = {"BACKEND": "django.core.mail.backends.console.EmailBackend"}
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "webmaster@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# Database sessions that say whose they are (web/models.UserSession): a user's sessions are
# found by an index when they log out everywhere or their account goes.
SESSION_ENGINE = "web.session_store"
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# The same policy with debug on or off, so the tests (debug on) run under what production
# sends. Scripts and styles come only from our own files: no inline <script>, no event-handler
# attributes, no style="" attributes, no eval (htmx's allowEval and indicator styles are off in
# base.html). Model output is sanitised HTML already; this is the second line, and it also
# keeps an injected <img> or <a ping> from reaching another host.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    # No nonce: no page has an inline script (the admin's nonce attributes are on files).
    "script-src": [CSP.SELF],
    # The nonce is for Django's own pages that carry a nonce'd <style> (the CSRF failure page,
    # an admin changelist without actions); it goes into the header only where one is rendered.
    "style-src": [CSP.SELF, CSP.NONCE],
    # The favicon is the empty data: URL in base.html (no request for /favicon.ico).
    "img-src": [CSP.SELF, "data:"],
    # CSP3's 'self' matches ws:/wss: on the page's own host and port (Chromium, Firefox,
    # Safari 16+): the chat's websocket needs nothing more, and no other host is reachable.
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# --- The chat -----------------------------------------------------------------------------
ALLOW_SIGNUP = env_bool("ALLOW_SIGNUP", True)
# What people can type, field by field (core/clean.py): the forms show the same limits.
MAX_MESSAGE_CHARS = env_int("MAX_MESSAGE_CHARS", 20_000)
MAX_SYSTEM_PROMPT_CHARS = env_int("MAX_SYSTEM_PROMPT_CHARS", 20_000)
MAX_INSTRUCTIONS_CHARS = env_int("MAX_INSTRUCTIONS_CHARS", 2_000)
MAX_TITLE_CHARS = env_int("MAX_TITLE_CHARS", 200, maximum=200)  # the column's width
MAX_SUMMARY_CHARS = env_int("MAX_SUMMARY_CHARS", 20_000)
MAX_QUERY_CHARS = env_int("MAX_QUERY_CHARS", 500)
# Abuse limits (chat/limits.py), counted in the database in one atomic statement each, so they
# hold across processes, and while Redis is down.
SENDS_PER_MINUTE = env_int("SENDS_PER_MINUTE", 30)  # per user
REPLIES_AT_ONCE = env_int("REPLIES_AT_ONCE", 3)  # per user: conversations streaming together
COMPACTIONS_PER_HOUR = env_int("COMPACTIONS_PER_HOUR", 30)  # per user: compact now, regenerate
SIGNUPS_PER_HOUR = env_int("SIGNUPS_PER_HOUR", 5)  # per client address
LOGIN_FAILURES_PER_15_MINUTES = env_int("LOGIN_FAILURES_PER_15_MINUTES", 10)  # per name, address
IMPORTS_PER_HOUR = env_int("IMPORTS_PER_HOUR", 10)  # per user
PASSWORD_RESETS_PER_HOUR = env_int("PASSWORD_RESETS_PER_HOUR", 5)  # per address, per email
# Search by meaning (providers/embeddings.py): "builtin", the static model that ships inside its
# package (no network); "none", lexical search only; or the URL of an OpenAI-compatible
# embeddings endpoint (Ollama, vLLM, OpenAI, Voyage: http://localhost:11434/v1/embeddings),
# asked for EMBEDDINGS_MODEL with EMBEDDINGS_API_KEY as its bearer token.
EMBEDDINGS = env_str("EMBEDDINGS", "builtin").strip()
EMBEDDINGS_MODEL = env_str("EMBEDDINGS_MODEL").strip()
EMBEDDINGS_API_KEY = env_str("EMBEDDINGS_API_KEY")
# A server that is down must not hold up a search: a search's query gets this long (search then
# goes on by words and says so); a batch of settled messages, off every person's path, longer;
# after a failure the server is not asked again for EMBEDDINGS_RETRY_SECONDS.
EMBEDDINGS_QUERY_TIMEOUT_MS = env_int("EMBEDDINGS_QUERY_TIMEOUT_MS", 500)
EMBEDDINGS_TIMEOUT_SECONDS = env_int("EMBEDDINGS_TIMEOUT_SECONDS", 60)
EMBEDDINGS_RETRY_SECONDS = env_int("EMBEDDINGS_RETRY_SECONDS", 30)
if EMBEDDINGS.lower() in {"builtin", "none"}:
    EMBEDDINGS = EMBEDDINGS.lower()
elif not re.fullmatch(r"https?://\S+", EMBEDDINGS):
    raise ImproperlyConfigured(
        f"EMBEDDINGS must be builtin, none or an embeddings endpoint's URL, got {EMBEDDINGS!r}"
    )
elif not EMBEDDINGS_MODEL:
    raise ImproperlyConfigured("EMBEDDINGS is a server's URL: EMBEDDINGS_MODEL must name its model")
# "anthropic" or "demo"; empty picks anthropic when a key or base URL is set, else demo.
LLM_PROVIDER = env_str("LLM_PROVIDER").strip().lower()
if LLM_PROVIDER not in {"", "anthropic", "demo"}:
    raise ImproperlyConfigured(f"LLM_PROVIDER must be anthropic or demo, got {LLM_PROVIDER!r}")
CHAT_MODEL = env_str("CHAT_MODEL", "claude-sonnet-5")
# The models a new conversation may pick (providers.registry.available_models), each with its
# window's budget. Unset: CHAT_MODEL alone. Set: CHAT_MODEL (the picker's default) must be one of
# them, and defaults to the first. With no API key or base URL the offline demo is the only choice.
CHAT_MODELS = env_models("CHAT_MODELS")
if not CHAT_MODELS:
    CHAT_MODELS = [{"id": CHAT_MODEL, "label": CHAT_MODEL, "context": None}]
elif not env_str("CHAT_MODEL"):
    CHAT_MODEL = CHAT_MODELS[0]["id"]
elif CHAT_MODEL not in [m["id"] for m in CHAT_MODELS]:
    raise ImproperlyConfigured(
        f"CHAT_MODEL ({CHAT_MODEL!r}) must be one of the ids in CHAT_MODELS "
        f"({', '.join(m['id'] for m in CHAT_MODELS)}), or left unset to default to the first"
    )
# The model that writes compaction summaries (a cheaper one, say), one of CHAT_MODELS' ids.
# Empty: each conversation's own model. A conversation may choose another in its settings.
SUMMARY_MODEL = env_str("SUMMARY_MODEL").strip()
if SUMMARY_MODEL and SUMMARY_MODEL not in [m["id"] for m in CHAT_MODELS]:
    raise ImproperlyConfigured(
        f"SUMMARY_MODEL ({SUMMARY_MODEL!r}) must be one of the ids in CHAT_MODELS "
        f"({', '.join(m['id'] for m in CHAT_MODELS)}), or left unset for each conversation's model"
    )
CHAT_MAX_TOKENS = env_int("CHAT_MAX_TOKENS", 4096)
LLM_TIMEOUT_SECONDS = env_int("LLM_TIMEOUT_SECONDS", 120)
# Dollars per million tokens [input, output] by model-name prefix (providers/prices.py); cache
# reads are billed at 0.1x input, writes at 1.25x. Defaults from the public price list; check
# them against your contract and override as JSON.
MODEL_PRICES = env_prices(
    "MODEL_PRICES",
    {"claude-opus": [15, 75], "claude-sonnet": [3, 15], "claude-haiku": [1, 5]},
)
# After a conversation's first reply, its model is asked for a short title (one small request,
# counted in its cost); off: it keeps the first words of its first message.
GENERATED_TITLES = env_bool("GENERATED_TITLES", True)
# Prompt-cache breakpoints on every request (providers/caching.py); off sends none.
PROMPT_CACHING = env_bool("PROMPT_CACHING", True)
# A compaction's summary request goes over the conversation's own cached prefix (same system,
# tools and messages, the request appended) while that prefix is cached; off: always a separate
# transcript request (bench/cache.py compares the two).
SUMMARY_READS_CACHE = env_bool("SUMMARY_READS_CACHE", True)
# A model's summary that leaves out key facts of what it replaces (compaction/key_facts.py) is
# sent back once, with them named, to be revised (compaction/summariser.revised); off: the
# first summary is kept as it is (the boundary still counts what it lost).
SUMMARY_REVISES_FACTS = env_bool("SUMMARY_REVISES_FACTS", True)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 2, minimum=0)
# A streaming reply's text goes out to the browsers at most this often (deltas are coalesced),
# so the cost of fanning it out does not grow with the number of tokens. Every frame costs the
# server about 60 us (the layer, the consumer, the socket and its compression): at 50 rather
# than 40, a reply streamed over 0.7 s goes in 15 frames instead of 18, and 100 paced chats on
# one process cost about 0.2 ms less CPU a reply (bench/load.py --stream-seconds 0.7).
DELTA_INTERVAL_MS = env_int("DELTA_INTERVAL_MS", 50, minimum=0)
# A streaming reply's text is saved to its row (with its heartbeat) at most this often, so a tab
# opened mid-reply, or a crash, loses at most this much; a write per token would cost more.
PARTIAL_SAVE_MS = env_int("PARTIAL_SAVE_MS", 1000, minimum=0)

# Tools. A turn is a loop of provider calls while the model asks for tools: at most this many
# steps run tools; beyond them a call is answered "not run" and the turn ends.
TOOL_STEP_LIMIT = env_int("TOOL_STEP_LIMIT", 8)
# The built-in recall tools (search_history, read_messages) let the model reach the compacted
# part of its conversation.
RECALL_TOOLS = env_bool("RECALL_TOOLS", True)
# When the window passes the auto threshold, tool results of at least this many characters in
# older turns are cleared from it first (the transcript keeps them); only if that is not enough
# is anything summarised.
TOOL_CLEAR_MIN_CHARS = env_int("TOOL_CLEAR_MIN_CHARS", 2000)
# A tool's answer beyond this is cut (and says so): one result must not flood the window.
TOOL_RESULT_MAX_CHARS = env_int("TOOL_RESULT_MAX_CHARS", 20_000)
READ_MESSAGES_PAGE_CHARS = env_int("READ_MESSAGES_PAGE_CHARS", 8_000)
READ_MESSAGES_PAGE_MESSAGES = env_int("READ_MESSAGES_PAGE_MESSAGES", 20)
# Model Context Protocol servers whose tools the chat offers (each conversation can switch them
# off); started by each server process on first use, over stdio.
MCP_SERVERS = env_mcp_servers("MCP_SERVERS")
MCP_TIMEOUT_SECONDS = env_int("MCP_TIMEOUT_SECONDS", 30)
# Search for people: hits per search, and how far back a jump to a hit loads the transcript.
SEARCH_PAGE_HITS = env_int("SEARCH_PAGE_HITS", 20)
SEARCH_JUMP_MESSAGES = env_int("SEARCH_JUMP_MESSAGES", 2000)
# Liveness: a process touches the heartbeat of every reply and compaction it runs this often;
# one whose heartbeat is older than TURN_STALE_SECONDS was cut off by a dying process and any
# process closes it (reply interrupted with its text, compaction failed).
TURN_HEARTBEAT_SECONDS = env_int("TURN_HEARTBEAT_SECONDS", 5)
TURN_STALE_SECONDS = env_int("TURN_STALE_SECONDS", 20)
if TURN_STALE_SECONDS < 3 * TURN_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        f"TURN_STALE_SECONDS ({TURN_STALE_SECONDS}) must be at least three heartbeats "
        f"(3 x TURN_HEARTBEAT_SECONDS = {3 * TURN_HEARTBEAT_SECONDS}), or live replies would be "
        "closed as stale"
    )
# Pause between the demo model's words, so streaming (and Stop) can be seen.
DEMO_WORD_DELAY_MS = env_int("DEMO_WORD_DELAY_MS", 30, minimum=0)
# Imports (POST /conversations/import/): the file's size, and conversations per file.
IMPORT_MAX_BYTES = env_int("IMPORT_MAX_BYTES", 50_000_000)
IMPORT_MAX_CONVERSATIONS = env_int("IMPORT_MAX_CONVERSATIONS", 1000)
# Django keeps uploads above this on disk rather than in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5_000_000
# Files given to the model (chat/attachments.py, docs/files.md): checked by their content, kept
# through Django's storage API under the "attachments" alias, on the file system in
# ATTACHMENTS_ROOT (outside the static root: nothing there is served but by its owner's
# request). Each limit's refusal names it.
ATTACHMENTS_ROOT = env_str("ATTACHMENTS_ROOT", str(BASE_DIR / "attachments"))
ATTACHMENT_MAX_BYTES = env_int("ATTACHMENT_MAX_BYTES", 25_000_000)  # one file, as uploaded
ATTACHMENTS_PER_MESSAGE = env_int("ATTACHMENTS_PER_MESSAGE", 10)  # uploads waiting to be sent
ATTACHMENT_STORAGE_PER_USER = env_int("ATTACHMENT_STORAGE_PER_USER", 500_000_000)  # bytes kept
ATTACHMENT_MAX_PDF_PAGES = env_int("ATTACHMENT_MAX_PDF_PAGES", 100)  # the API reads 100 at most
# An image's pixels, as its header claims them (never above Pillow's decompression-bomb limit):
# most are decoded whole, 4 bytes a pixel, before they are scaled.
ATTACHMENT_MAX_IMAGE_PIXELS = env_int("ATTACHMENT_MAX_IMAGE_PIXELS", 50_000_000)
# An upload never sent is swept after this long.
ATTACHMENT_UNSENT_SECONDS = env_int("ATTACHMENT_UNSENT_SECONDS", 86_400)
# Files checked at once by one process: an image is decoded whole to be checked (a 49-megapixel
# PNG took 265 MiB), so this bounds a burst of uploads' memory; more wait their turn.
ATTACHMENT_CHECKS_AT_ONCE = env_int("ATTACHMENT_CHECKS_AT_ONCE", 2)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "attachments": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        # No base_url: a stored file has no public address, only GET /attachments/<id>/.
        "OPTIONS": {"location": ATTACHMENTS_ROOT, "file_permissions_mode": 0o600},
    },
}
# Several machines share one S3-compatible bucket instead (django-storages, the "s3" extra):
# its name, and the endpoint of a service other than AWS (MinIO, Ceph, R2). Credentials come from
# these or from boto3's own chain (AWS_ACCESS_KEY_ID, an instance role). Objects stay private: a
# file is served through GET /attachments/<id>/ only, never by a bucket address.
ATTACHMENTS_S3_BUCKET = env_str("ATTACHMENTS_S3_BUCKET").strip()
if ATTACHMENTS_S3_BUCKET:
    STORAGES["attachments"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": ATTACHMENTS_S3_BUCKET,
            "location": env_str("ATTACHMENTS_S3_PREFIX", "attachments").strip("/"),
            "endpoint_url": env_str("ATTACHMENTS_S3_ENDPOINT_URL").strip() or None,
            "region_name": env_str("ATTACHMENTS_S3_REGION").strip() or None,
            "access_key": env_str("ATTACHMENTS_S3_ACCESS_KEY_ID") or None,
            "secret_key": env_str("ATTACHMENTS_S3_SECRET_ACCESS_KEY") or None,
            "default_acl": "private",
            "file_overwrite": False,
            "querystring_auth": True,
        },
    }
DEFAULT_SYSTEM_PROMPT = env_str("DEFAULT_SYSTEM_PROMPT", "You are a helpful assistant.")
# How many messages the chat page renders at first; older ones load on demand.
PAGE_MESSAGES = env_int("PAGE_MESSAGES", 60)
# A deleted conversation can be restored ("Undo" in the sidebar) for this long; after it, it
# stays deleted (its rows stay either way: the transcript is append-only).
UNDO_DELETE_SECONDS = env_int("UNDO_DELETE_SECONDS", 300)

# --- History management ------------------------------------------------------------------
# The window's budget of every model without a "context" of its own in CHAT_MODELS (which
# wins: it is the more specific setting). Empty: the provider's own window for the model
# (providers.registry.context_budget).
CONTEXT_BUDGET_TOKENS = env_int("CONTEXT_BUDGET_TOKENS", 0, minimum=0)
AUTO_COMPACT_AT = env_fraction("AUTO_COMPACT_AT", 0.6)
KEEP_TAIL_SHARE = env_fraction("KEEP_TAIL_SHARE", 0.25)
if KEEP_TAIL_SHARE >= AUTO_COMPACT_AT:
    # The kept tail alone would sit past the threshold: every compaction would trigger the next.
    raise ImproperlyConfigured(
        f"KEEP_TAIL_SHARE ({KEEP_TAIL_SHARE}) must be below AUTO_COMPACT_AT ({AUTO_COMPACT_AT})"
    )
SUMMARY_MAX_TOKENS = env_int("SUMMARY_MAX_TOKENS", 4096)
# After this many failed compactions in a row, auto-compaction pauses for a while.
COMPACT_FAILURE_LIMIT = env_int("COMPACT_FAILURE_LIMIT", 3)
COMPACT_PAUSE_MINUTES = env_int("COMPACT_PAUSE_MINUTES", 15)
# The SDK's own variables: a base URL points the client at any Anthropic-compatible server.
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")
