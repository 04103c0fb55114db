"""Reading settings from the environment: each helper fails loudly on a malformed value instead
of guessing, so a typo in a deployment is an error at start-up, not a surprise at run time."""

from __future__ import annotations

import json
import os
import re

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def _env_number(name: str, convert, what: str):
    """The variable read with `convert` (int, float); None when unset or empty."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        return convert(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {what}, got {raw!r}") from None


def env_int(name: str, default: int, *, minimum: int = 1, maximum: int | None = None) -> int:
    value = _env_number(name, int, "an integer")
    if value is None:
        return default
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {value}")
    return value


def env_fraction(name: str, default: float) -> float:
    value = _env_number(name, float, "a number")
    if value is None:
        return default
    if not 0 < value < 1:
        raise ImproperlyConfigured(f"{name} must be between 0 and 1, got {value}")
    return value


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_prices(name: str, default: dict[str, list[float]]) -> dict[str, list[float]]:
    """A price table as JSON: {"model-prefix": [input, output], ...}, dollars per million."""
    raw = env_str(name).strip()
    if not raw:
        return default
    try:
        prices = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{name} must be a JSON object: {exc}") from None
    if not isinstance(prices, dict) or not all(
        isinstance(v, list)
        and len(v) == 2
        and all(isinstance(x, int | float) and x >= 0 for x in v)
        for v in prices.values()
    ):
        raise ImproperlyConfigured(
            f"{name} must map model prefixes to [input, output] dollars per million tokens"
        )
    return prices


def env_mcp_servers(name: str) -> dict[str, dict]:
    """MCP servers as JSON: {"time": {"command": "python3", "args": ["-m", "mcp_server_time"],
    "env": {...}}, ...}; names of letters, digits, - and _."""
    raw = env_str(name).strip()
    if not raw:
        return {}
    try:
        servers = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{name} must be a JSON object: {exc}") from None
    if not isinstance(servers, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object of name -> server")
    for server, config in servers.items():
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,30}", server):
            raise ImproperlyConfigured(
                f"{name}: server name {server!r} must be 1-30 of A-Z a-z 0-9 _ -"
            )
        if not isinstance(config, dict) or not isinstance(config.get("command"), str):
            raise ImproperlyConfigured(f'{name}: server {server!r} needs a "command" string')
        if not isinstance(config.get("args", []), list):
            raise ImproperlyConfigured(f'{name}: server {server!r} "args" must be a list')
        if not isinstance(config.get("env", {}), dict):
            raise ImproperlyConfigured(f'{name}: server {server!r} "env" must be an object')
    return servers


MODEL_KEYS = {"id", "label", "context", "thinking", "output"}


def env_models(name: str) -> list[dict]:
    """The models people may pick, as JSON: [{"id": "claude-sonnet-5", "label": "Claude Sonnet
    5", "context": 200000}, ...]. Only "id" is required; "label" defaults to the id and
    "context" (the window's budget in tokens) to CONTEXT_BUDGET_TOKENS or the provider's own
    window; "thinking": true offers extended thinking on it (default false); "output" is the
    most tokens one answer of it may hold, thinking included (its max_tokens; default none
    beyond the window's room). Returned
    normalised, in the order given (the picker's order)."""
    raw = env_str(name).strip()
    if not raw:
        return []
    example = '[{"id": "claude-sonnet-5", "label": "Claude Sonnet 5", "context": 200000}]'
    try:
        models = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{name} must be a JSON list like {example}: {exc}") from None
    if not isinstance(models, list) or not models:
        raise ImproperlyConfigured(f"{name} must be a non-empty JSON list like {example}")
    parsed: list[dict] = []
    for number, model in enumerate(models, start=1):
        where = f"{name}: model {number}"
        if not isinstance(model, dict):
            raise ImproperlyConfigured(f'{where} must be an object with at least an "id"')
        unknown = sorted(set(model) - MODEL_KEYS)
        if unknown:
            raise ImproperlyConfigured(
                f"{where} has unknown keys {', '.join(unknown)} "
                "(known: id, label, context, thinking, output)"
            )
        model_id = model.get("id")
        # The id is stored on each conversation (a 100-character column).
        if not isinstance(model_id, str) or not re.fullmatch(r"\S{1,100}", model_id):
            raise ImproperlyConfigured(f'{where} needs an "id": 1-100 characters, no spaces')
        where = f"{name}: model {model_id!r}"
        if any(m["id"] == model_id for m in parsed):
            raise ImproperlyConfigured(f"{where} is listed twice")
        label = model.get("label", model_id)
        if not isinstance(label, str) or not 1 <= len(label.strip()) <= 100:
            raise ImproperlyConfigured(f'{where}: "label" must be text of 1-100 characters')
        context = model.get("context")
        if context is not None and (
            isinstance(context, bool) or not isinstance(context, int) or context < 1
        ):
            raise ImproperlyConfigured(
                f'{where}: "context" must be a whole number of tokens, got {context!r}'
            )
        thinking = model.get("thinking", False)
        if not isinstance(thinking, bool):
            raise ImproperlyConfigured(
                f'{where}: "thinking" must be true or false, got {thinking!r}'
            )
        output = model.get("output")
        if output is not None and (
            isinstance(output, bool) or not isinstance(output, int) or output < 1
        ):
            raise ImproperlyConfigured(
                f'{where}: "output" must be a whole number of tokens, got {output!r}'
            )
        parsed.append(
            {
                "id": model_id,
                "label": label.strip(),
                "context": context,
                "thinking": thinking,
                "output": output,
            }
        )
    return parsed
