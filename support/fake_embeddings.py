"""A fake embedder for tests, registered as a real one is (`providers.embeddings.register`), and
a tiny OpenAI-compatible embeddings server that answers with it.

`ConceptEmbedder` knows a few concepts, each a set of words that mean it ("painting", "art",
"abstracts"): a text's vector counts its words per concept, so two texts that share no word but
name the same concept are near. It remembers what it was asked to embed.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from providers.embeddings import unit_rows


class ConceptEmbedder:
    down = False

    def __init__(self, concepts: dict[str, str], name: str = "fake-concepts") -> None:
        """`concepts`: concept -> its words, separated by spaces."""
        self.name = name
        self.words = {
            word: i for i, words in enumerate(concepts.values()) for word in words.split()
        }
        self.dimension = len(concepts)
        self.asked: list[list[str]] = []

    def embed(self, texts: list[str], *, quick: bool = False) -> np.ndarray:
        self.asked.append(list(texts))
        matrix = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                if word in self.words:
                    matrix[row, self.words[word]] += 1
        return unit_rows(matrix)


class EmbeddingsServer:
    """POST /v1/embeddings on 127.0.0.1, answered with `embedder`'s vectors; every request's
    body and Authorization header kept in `requests`. `fail` makes it answer 500."""

    def __init__(self, embedder: ConceptEmbedder) -> None:
        self.embedder = embedder
        self.requests: list[tuple[dict, str]] = []
        self.fail = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((body, self.headers.get("Authorization", "")))
                if server.fail or self.path != "/v1/embeddings":
                    self.send_error(500 if server.fail else 404)
                    return
                vectors = server.embedder.embed(body["input"])
                data = [
                    {"object": "embedding", "index": i, "embedding": v.tolist()}
                    for i, v in reversed(list(enumerate(vectors)))  # any order: by index
                ]
                answer = json.dumps({"object": "list", "data": data, "model": body["model"]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer.encode())

            def log_message(self, *args) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1/embeddings"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
