"""The embedder is chosen by one setting: the built-in model from its package's own files with
no network, none at all, or an OpenAI-compatible embeddings server."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from providers import embeddings
from providers.values import LLMError
from support.fake_embeddings import ConceptEmbedder, EmbeddingsServer
from tests.test_settings import load_settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Loads the built-in model with every socket refused and an empty home (no cache to find the
# files in), so it can only have read them from the installed package.
OFFLINE_LOAD = textwrap.dedent(
    """
    import socket

    def refuse(*args, **kwargs):
        raise OSError("no network in this test")

    socket.socket.connect = refuse
    socket.create_connection = refuse

    import django
    django.setup()
    import numpy as np
    from providers.embeddings import BUILTIN, embedder

    model = embedder()
    vectors = model.embed(["We adopted a rescue dog last spring", "a pet animal", ""])
    print(model.name == BUILTIN, vectors.shape, vectors.dtype)
    print(round(float(np.linalg.norm(vectors[0])), 3), round(float(np.linalg.norm(vectors[2])), 3))
    print(float(vectors[0] @ vectors[1]) > 0.3)
    """
)


def test_the_builtin_model_loads_from_its_package_with_no_network(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", OFFLINE_LOAD],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_SECRET_KEY": "k",
            "EMBEDDINGS": "builtin",
            "HOME": str(tmp_path),
            "HF_HUB_OFFLINE": "1",
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == [
        "True (3, 256) float32",
        "1.0 0.0",  # unit rows; a text with no words is a row of zeros
        "True",  # a paraphrase with no word in common is near
    ]
    assert not (tmp_path / ".cache").exists()


def test_none_means_no_embedder(settings, fresh_runtime):
    settings.EMBEDDINGS = "none"
    assert embeddings.embedder() is None


def test_a_registered_embedder_answers_in_place_of_the_setting(settings, fresh_runtime):
    settings.EMBEDDINGS = "none"
    fake = ConceptEmbedder({"pets": "dog pet"})
    embeddings.register(fake)
    assert embeddings.embedder() is fake


@pytest.fixture
def server():
    running = EmbeddingsServer(ConceptEmbedder({"pets": "dog pet", "art": "painting art"}))
    yield running
    running.close()


def test_a_url_is_an_openai_compatible_embeddings_server(settings, fresh_runtime, server):
    settings.EMBEDDINGS = server.url
    settings.EMBEDDINGS_MODEL = "nomic-embed-text"
    settings.EMBEDDINGS_API_KEY = "secret-key"
    embedder = embeddings.embedder()
    assert embedder is embeddings.embedder()  # built once per configuration
    vectors = embedder.embed(["my dog", "a painting", "nothing"])
    assert vectors.dtype == np.float32
    assert vectors.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]  # in input order
    assert (embedder.name, embedder.dimension) == ("nomic-embed-text", 2)
    body, authorization = server.requests[0]
    assert body == {"model": "nomic-embed-text", "input": ["my dog", "a painting", "nothing"]}
    assert authorization == "Bearer secret-key"


def test_a_failing_server_is_an_error_of_the_provider(settings, fresh_runtime, server):
    settings.EMBEDDINGS, settings.EMBEDDINGS_MODEL = server.url, "m"
    server.fail = True
    with pytest.raises(LLMError, match="embeddings server"):
        embeddings.embedder().embed(["my dog"])


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EMBEDDINGS": "wordllama"}, "EMBEDDINGS must be builtin, none or"),
        ({"EMBEDDINGS": "http://localhost:9/v1/embeddings"}, "EMBEDDINGS_MODEL must name"),
    ],
)
def test_a_bad_embeddings_setting_stops_start_up(env, message):
    result = load_settings(**env)
    assert result.returncode != 0
    assert message in result.stderr
