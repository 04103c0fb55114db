"""Which model turns text into vectors for search by meaning, behind one interface.

An embedder has a `name` (stored beside each vector: vectors of another model are made again),
a `dimension`, and `embed(texts)`: a float32 matrix, one unit-length row per text (a row of
zeros for a text with no words). `embedder()` is the one place that decides, from EMBEDDINGS:

- "builtin" (the default): WordLlama's static model, whose weights (16 MB, 256 dimensions) and
  tokenizer are files inside its package: loaded from there with downloads disabled, so it works
  with no network at all. MIT licence. It averages token vectors, 0.1 s of CPU per 1,000
  messages.
- "none": no embeddings; search is lexical only.
- a URL: an OpenAI-compatible `/v1/embeddings` endpoint (Ollama, vLLM, OpenAI, Voyage) asked for
  EMBEDDINGS_MODEL, for larger models. A server can be down: a search's query is given
  EMBEDDINGS_QUERY_TIMEOUT_MS (search goes on by words, `unavailable()` says so), and after a
  failure nothing more is asked of it for EMBEDDINGS_RETRY_SECONDS (a breaker), so a search
  while it is down waits for nothing.

Tests and benchmarks register a fake in its place (`register`), as they do for chat models.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings

from core import runtime
from providers.values import LLMError

BUILTIN = "wordllama-l2_supercat-256"
# Tokens a static model averages: the head of a long message says what it is about, and
# tokenizing a 100,000-character tool result would cost more than every other message.
MAX_CHARS = 4000


class Embedder(Protocol):
    name: str
    dimension: int
    down: bool  # it cannot answer now (a server that failed a moment ago)

    def embed(self, texts: list[str], *, quick: bool = False) -> np.ndarray:
        """`quick`: a person waits for the answer (a search's query), so give up soon."""
        ...


class Unavailable(LLMError):
    """The embeddings server is down, or was moments ago: not asked again yet."""


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 (rows of zeros stay zeros), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


class BuiltinEmbedder:
    """WordLlama's default model, from the files its wheel installs."""

    name = BUILTIN
    dimension = 256
    down = False  # it runs in this process

    def __init__(self) -> None:
        import wordllama
        from wordllama import WordLlama

        # The package's own folder is the "cache" it looks in: weights/ and tokenizers/ hold
        # the files of its default model. With downloads disabled, a missing file is an error,
        # never a request to a model hub.
        self._model = WordLlama.load(
            config="l2_supercat",
            dim=self.dimension,
            cache_dir=Path(wordllama.__file__).parent,
            disable_download=True,
        )

    def embed(self, texts: list[str], *, quick: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return unit_rows(self._model.embed([t[:MAX_CHARS] for t in texts]))


class ServerEmbedder:
    """An OpenAI-compatible embeddings endpoint: POST {"model", "input": [...]} and read
    {"data": [{"index", "embedding"}]}. After a failure it is not asked again for
    `retry_after` seconds: each call in that time is refused at once (`Unavailable`)."""

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str = "",
        *,
        timeout: float = 60,
        query_timeout: float = 0.5,
        retry_after: float = 30,
    ) -> None:
        self.url, self.model, self.api_key = url, model, api_key
        self.timeout, self.query_timeout, self.retry_after = timeout, query_timeout, retry_after
        self.name = model
        self.dimension = 0  # known from the first answer
        self.retry_at = 0.0  # time.monotonic() before which the server is not asked

    @property
    def down(self) -> bool:
        return time.monotonic() < self.retry_at

    def embed(self, texts: list[str], *, quick: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.down:
            raise Unavailable("The embeddings server did not answer a moment ago.")
        try:
            matrix = self._ask(texts, self.query_timeout if quick else self.timeout)
        except LLMError:
            self.retry_at = time.monotonic() + self.retry_after
            raise
        self.retry_at = 0.0
        return matrix

    def _ask(self, texts: list[str], timeout: float) -> np.ndarray:
        body = json.dumps({"model": self.model, "input": [t[:MAX_CHARS] or " " for t in texts]})
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        # The URL is the setting's, which only an http(s) URL passes (config/settings.py).
        request = urllib.request.Request(self.url, body.encode(), headers, method="POST")  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                answer = json.load(response)
            rows = sorted(answer["data"], key=lambda row: row["index"])
            matrix = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LLMError(f"The embeddings server did not answer: {exc!r}") from exc
        if matrix.ndim != 2 or len(matrix) != len(texts):
            raise LLMError(f"The embeddings server sent {len(matrix)} vectors for {len(texts)}.")
        self.dimension = matrix.shape[1]
        return unit_rows(matrix)


def register(embedder: Embedder | None) -> None:
    """Embed with `embedder` in place of what the settings say (a test's or a benchmark's fake),
    for as long as the runtime lasts (`core.runtime.reset`)."""
    runtime.current().registered_embedder = embedder


def embedder() -> Embedder | None:
    """The embedder search and the vectors use; None when EMBEDDINGS is "none"."""
    current = runtime.current()
    if current.registered_embedder is not None:
        return current.registered_embedder
    choice = settings.EMBEDDINGS
    if choice == "none":
        return None
    config = ("embeddings", choice, settings.EMBEDDINGS_MODEL, settings.EMBEDDINGS_API_KEY)
    built = current.clients.get(config)
    if built is None:
        if choice == "builtin":
            built = BuiltinEmbedder()
        else:
            built = ServerEmbedder(
                choice,
                settings.EMBEDDINGS_MODEL,
                settings.EMBEDDINGS_API_KEY,
                timeout=settings.EMBEDDINGS_TIMEOUT_SECONDS,
                query_timeout=settings.EMBEDDINGS_QUERY_TIMEOUT_MS / 1000,
                retry_after=settings.EMBEDDINGS_RETRY_SECONDS,
            )
        current.clients[config] = built
    return built


def query_vector(embedder: Embedder, text: str) -> np.ndarray | None:
    """A search query's vector, or None when the embedder cannot answer now: the search goes on
    by words (and `unavailable()` says so)."""
    try:
        return embedder.embed([text], quick=True)[0]
    except LLMError:
        return None


def unavailable() -> bool:
    """Whether search by meaning is configured but cannot answer now (its server is down)."""
    current = embedder()
    return current is not None and current.down
