# Two commands do all set-up: `make run` and `make test`. Both build .venv with a Python 3.12+
# found on this machine (python3 itself is often older; pyenv shims refuse without PYENV_VERSION,
# so we also look at the interpreters pyenv keeps).
SHELL := /bin/bash
PORT ?= 8000
WORKERS ?= 2
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

define FIND_PYTHON
for c in python3 python3.14 python3.13 python3.12 \
         $$(ls -d $$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV) \
         /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do \
  if $$c -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then echo $$c; exit 0; fi; \
done; echo "No Python 3.12+ found" >&2; exit 1
endef

.PHONY: run serve admin test test-unit test-browser screenshots lint format bench bench-load bench-load-paced bench-recall bench-facts bench-recall-semantic bench-beam bench-cache bench-faults bench-files clean

$(STAMP): pyproject.toml
	@test -x $(PY) || { py=$$($(FIND_PYTHON)) && echo "Creating $(VENV) with $$py" && $$py -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

run: $(STAMP)
	DJANGO_DEBUG=$${DJANGO_DEBUG:-true} $(PY) manage.py migrate --noinput
	DJANGO_DEBUG=$${DJANGO_DEBUG:-true} $(VENV)/bin/uvicorn config.asgi:application \
	  --host 127.0.0.1 --port $(PORT) --lifespan on --no-proxy-headers

# Production-style: WORKERS uvicorn processes on one port, PostgreSQL and Redis (the defaults
# point at local ones). Several processes share conversations through the database and the Redis
# channel layer, so REDIS_URL is required when WORKERS > 1. Debug is off: DJANGO_SECRET_KEY is
# taken from the environment, else generated once into .secret_key. Forwarded addresses are
# believed only from the proxies TRUSTED_PROXIES names (the app reads them, web/forwarded.py; the
# server rewrites nothing): behind a proxy on this host, TRUSTED_PROXIES=127.0.0.1 make serve.
# Each process holds to a CPU of its own, all but the last (core/cpu.py; ONE_CPU_PER_PROCESS).
serve: $(STAMP)
	@export DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/chat} \
	        REDIS_URL=$${REDIS_URL-redis://127.0.0.1:6379/0} DJANGO_DEBUG=$${DJANGO_DEBUG:-false} \
	        ONE_CPU_PER_PROCESS=$${ONE_CPU_PER_PROCESS:-true}; \
	if [ "$(WORKERS)" -gt 1 ] && [ -z "$$REDIS_URL" ]; then \
	  echo "WORKERS=$(WORKERS) needs REDIS_URL: processes share conversations through Redis" >&2; exit 1; fi; \
	if [ -z "$$DJANGO_SECRET_KEY" ]; then \
	  [ -s .secret_key ] || $(PY) -c 'import secrets; print(secrets.token_urlsafe(50))' > .secret_key; \
	  export DJANGO_SECRET_KEY=$$(cat .secret_key); fi; \
	$(PY) manage.py ensure_database && $(PY) manage.py migrate --noinput && \
	exec $(VENV)/bin/uvicorn config.asgi:application --host $${HOST:-127.0.0.1} --port $(PORT) \
	  --workers $(WORKERS) --lifespan on --no-proxy-headers

# An admin account for local use (reviewing summaries happens in the admin). Asks for a name and
# a password; with ADMIN_USER and DJANGO_SUPERUSER_PASSWORD set it asks nothing.
admin: $(STAMP)
	@export DJANGO_DEBUG=$${DJANGO_DEBUG:-true}; \
	$(PY) manage.py migrate --noinput && \
	$(PY) manage.py createsuperuser $${ADMIN_USER:+--username "$$ADMIN_USER"} \
	  $${DJANGO_SUPERUSER_PASSWORD:+--noinput --email "$${ADMIN_EMAIL:-}"}

# The whole suite: unit/integration tests, then the real-browser tests in their own process
# (Playwright's event loop and pytest-asyncio's do not mix in one process).
test: test-unit test-browser

test-unit: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -m "not browser" -q

# axe-core (package.json, pinned in package-lock.json) is injected into pages by the
# accessibility test; `npm ci` installs exactly the locked version when node_modules is missing
# or older than the lock file. Node's own copy of the lock in node_modules marks the install.
test-browser: $(STAMP)
	@if [ -x "$${CHROMIUM:-/usr/bin/chromium}" ]; then \
	  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
	    command -v npm >/dev/null || { echo "npm is needed for the accessibility test (axe-core): install Node.js 18+" >&2; exit 1; }; \
	    npm ci --no-audit --no-fund && touch node_modules/.package-lock.json || exit 1; \
	  fi; \
	  $(PY) -m pytest -m browser -q -p no:asyncio -W ignore::pytest.PytestConfigWarning; \
	else \
	  echo "SKIPPED browser tests: no Chromium at $${CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)"; \
	fi

# The README's pictures, retaken on purpose: the browser tests that take its screenshots,
# told to write them into screenshots/ (tests write only to scratch folders otherwise), and the
# sawtooth bench's figure into bench/sawtooth.png. Commit them if they are what the README shows.
screenshots: $(STAMP)
	@test -x "$${CHROMIUM:-/usr/bin/chromium}" || \
	  { echo "No Chromium at $${CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)" >&2; exit 1; }
	README_SCREENSHOTS=$(CURDIR)/screenshots $(PY) -m pytest -m browser -q -p no:asyncio \
	  -W ignore::pytest.PytestConfigWarning \
	  tests/browser/test_chat_in_a_browser.py::test_screenshot_for_the_readme \
	  tests/browser/test_files_in_a_browser.py::test_screenshot_of_files_for_the_readme
	$(PY) bench/sawtooth.py --png bench/sawtooth.png

lint: $(STAMP)
	$(VENV)/bin/ruff check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) bench/sawtooth.py

bench-load: $(STAMP)
	$(PY) bench/load.py

bench-load-paced: $(STAMP)
	$(PY) bench/load.py --paced --chats 10 --db sqlite --processes 1 --rounds 3

bench-recall: $(STAMP)
	$(PY) bench/recall.py

bench-facts: $(STAMP)
	$(PY) bench/facts.py

bench-recall-semantic: $(STAMP)
	$(PY) bench/recall_semantic.py

bench-beam: $(STAMP)
	$(PY) bench/beam.py

bench-cache: $(STAMP)
	$(PY) bench/cache.py

bench-faults: $(STAMP)
	$(PY) bench/faults.py

bench-files: $(STAMP)
	$(PY) bench/files.py

clean:
	rm -rf $(VENV) db.sqlite3
