"""API embedders (OpenAI, Gemini, Cohere) against local fakes that speak each wire format.

The real client libraries (openai, google-genai, cohere) make the HTTP calls; the fakes in
``tests/fakes`` check path, auth header and body and answer 400 to anything the real API would
reject, so a wrong request shape fails these tests. Backoff is 0 s, so nothing sleeps.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fakes import FakeHTTPServer
from fakes.providers import CohereFake, GeminiFake, OpenAIFake, fake_vector, unit
from helpers.app import compose_cfg
from helpers.paths import ROOT
from t2exp.embedders import Embedder
from t2exp.embedders._remote import RemoteEmbedder
from t2exp.embedders.cached import CachedEmbedder
from t2exp.embedders.cohere_embedder import CohereEmbedder
from t2exp.embedders.gemini_embedder import GeminiEmbedder
from t2exp.embedders.openai_embedder import OpenAIEmbedder
from t2exp.errors import ConfigError, RemoteError
from t2exp.infra.cache import KVCache

DIM = 8

ENV_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_CLOUD_PROJECT",
    "CO_API_KEY",
    "COHERE_API_KEY",
    "CO_API_URL",
)


@dataclass(frozen=True)
class Case:
    provider: str
    fake_cls: type[FakeHTTPServer]
    embedder_cls: type[RemoteEmbedder]
    model: str
    max_batch: int

    def __str__(self) -> str:
        return self.provider


CASES = [
    Case("openai", OpenAIFake, OpenAIEmbedder, "text-embedding-3-large", 2048),
    Case("gemini", GeminiFake, GeminiEmbedder, "text-embedding-004", 100),
    Case("cohere", CohereFake, CohereEmbedder, "embed-v4.0", 96),
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(params=CASES, ids=str)
def case(request: pytest.FixtureRequest) -> Case:
    return request.param


@pytest.fixture
def fake(case: Case) -> Iterator[Any]:
    with case.fake_cls(model=case.model, dim=DIM) as server:
        yield server


def make(case: Case, fake: Any, model: str | None = None, **overrides: Any) -> RemoteEmbedder:
    kwargs: dict[str, Any] = {
        "provider": case.provider,
        "dim": DIM,
        "max_tokens": 512,
        "batch_size": min(100, case.max_batch),
        "base_url": fake.base_url,
        "api_key": fake.api_key,
        "max_retries": 3,
        "timeout": 10.0,
        "backoff_base": 0.0,
        "backoff_max": 0.0,
    }
    kwargs.update(overrides)
    return case.embedder_cls(f"{case.provider}-test", model or case.model, **kwargs)


def sent_texts(case: Case, body: dict[str, Any]) -> list[str]:
    if case.provider == "openai":
        return body["input"]
    if case.provider == "cohere":
        return body["texts"]
    return [r["content"]["parts"][0]["text"] for r in body["requests"]]


# --- round trip ----------------------------------------------------------------------------------


def test_vectors_come_back_in_order_and_unit_length(case: Case, fake: Any) -> None:
    if isinstance(fake, OpenAIFake):
        fake.shuffle = True  # data[] arrives reversed; the embedder must sort by index
    emb = make(case, fake)
    texts = ["alpha revenue 2019", "beta table | 1 | 2 |", "gamma"]
    vecs = emb.embed_documents(texts)
    assert fake.rejections == []
    assert vecs.dtype == np.float32 and vecs.shape == (3, DIM)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vecs, unit([fake_vector(t, DIM) for t in texts]), atol=1e-6)
    assert len(fake.requests) == 1 and emb.requests_sent == 1
    assert isinstance(emb, Embedder)


def test_templates_are_applied_per_role(case: Case, fake: Any) -> None:
    emb = make(case, fake, query_template="Q: {text}", document_template="D: {text}")
    q = emb.embed_queries(["what was the margin?"])
    emb.embed_documents(["the margin was 4%"])
    assert fake.rejections == []
    assert sent_texts(case, fake.bodies[0]) == ["Q: what was the margin?"]
    assert sent_texts(case, fake.bodies[1]) == ["D: the margin was 4%"]
    np.testing.assert_allclose(q[0], unit(fake_vector("Q: what was the margin?", DIM)), atol=1e-6)


def test_empty_input_sends_nothing(case: Case, fake: Any) -> None:
    emb = make(case, fake)
    assert emb.embed_queries([]).shape == (0, DIM)
    assert fake.requests == []


# --- wire format per provider --------------------------------------------------------------------


def test_openai_request_shape() -> None:
    with OpenAIFake(api_key="sk-abc", dim=DIM) as fake:
        emb = OpenAIEmbedder("oa", "text-embedding-3-large", provider="openai", dim=DIM, base_url=fake.base_url, api_key="sk-abc")
        emb.embed_queries(["a", "b"])
        assert fake.rejections == []
        (req,) = fake.requests
        assert (req.method, req.path) == ("POST", "/v1/embeddings")
        assert req.headers["authorization"] == "Bearer sk-abc"
        assert req.body == {"model": "text-embedding-3-large", "input": ["a", "b"], "encoding_format": "float"}


def test_gemini_request_shape() -> None:
    with GeminiFake(api_key="gm-abc", dim=DIM) as fake:
        emb = GeminiEmbedder("gm", "text-embedding-004", provider="gemini", dim=DIM, base_url=fake.base_url, api_key="gm-abc")
        emb.embed_queries(["a", "b"])
        emb.embed_documents(["c"])
        assert fake.rejections == []
        q, d = fake.requests
        assert q.method == "POST" and q.path.endswith("/models/text-embedding-004:batchEmbedContents")
        assert q.path.split("/")[1] in ("v1", "v1beta")
        assert q.headers["x-goog-api-key"] == "gm-abc"
        assert [r["taskType"] for r in q.body["requests"]] == ["RETRIEVAL_QUERY"] * 2
        assert [r["taskType"] for r in d.body["requests"]] == ["RETRIEVAL_DOCUMENT"]
        first = q.body["requests"][0]
        assert first["model"] == "models/text-embedding-004"
        assert first["content"]["parts"] == [{"text": "a"}]
        assert "outputDimensionality" not in first


def test_cohere_request_shape() -> None:
    with CohereFake(api_key="co-abc", dim=DIM) as fake:
        emb = CohereEmbedder("co", "embed-v4.0", provider="cohere", dim=DIM, base_url=fake.base_url, api_key="co-abc")
        emb.embed_queries(["a", "b"])
        emb.embed_documents(["c"])
        assert fake.rejections == []
        q, d = fake.requests
        assert (q.method, q.path) == ("POST", "/v2/embed")
        assert q.headers["authorization"] == "Bearer co-abc"
        assert q.body == {"model": "embed-v4.0", "texts": ["a", "b"], "input_type": "search_query", "embedding_types": ["float"]}
        assert d.body["input_type"] == "search_document"


@pytest.mark.parametrize(
    ("case_", "field", "where"),
    [
        (CASES[0], "dimensions", lambda b: b["dimensions"]),
        (CASES[1], "outputDimensionality", lambda b: b["requests"][0]["outputDimensionality"]),
        (CASES[2], "output_dimension", lambda b: b["output_dimension"]),
    ],
    ids=["openai", "gemini", "cohere"],
)
def test_requested_dimensions_are_sent(case_: Case, field: str, where: Any) -> None:
    with case_.fake_cls(model=case_.model, dim=DIM) as fake:
        emb = make(case_, fake, dim=0, dimensions=4)
        vecs = emb.embed_documents(["x", "y"])
        assert fake.rejections == []
        assert where(fake.bodies[0]) == 4
        assert vecs.shape == (2, 4) and emb.dim == 4
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)


def test_openai_base64_response_is_decoded_by_the_client() -> None:
    """The fake serves base64 like the real API; the embedder asks for float, so this only
    guards the fake itself (another test may reuse it with the SDK's default base64)."""
    import openai

    with OpenAIFake(dim=DIM) as fake:
        client = openai.OpenAI(api_key=fake.api_key, base_url=fake.base_url, max_retries=0)
        resp = client.embeddings.create(model=fake.model, input=["abc"])
        assert fake.bodies[0]["encoding_format"] == "base64"
        np.testing.assert_allclose(resp.data[0].embedding, fake_vector("abc", DIM), rtol=1e-6)


# --- retries and errors --------------------------------------------------------------------------


def test_429_is_retried_then_succeeds(case: Case, fake: Any) -> None:
    fake.fail_next = [429]
    emb = make(case, fake)
    vecs = emb.embed_documents(["one", "two"])
    assert len(fake.requests) == 2 and emb.requests_sent == 2
    assert fake.bodies[0] == fake.bodies[1]
    np.testing.assert_allclose(vecs, unit([fake_vector(t, DIM) for t in ["one", "two"]]), atol=1e-6)


def test_persistent_500_raises_one_line_remote_error(case: Case, fake: Any) -> None:
    fake.fail_always = 500
    emb = make(case, fake, max_retries=2)
    with pytest.raises(RemoteError) as err:
        emb.embed_documents(["x"])
    msg = str(err.value)
    assert len(fake.requests) == 3  # 1 + max_retries, no client-side retries on top
    assert "\n" not in msg
    assert case.provider in msg and "HTTP 500" in msg and fake.base_url.rstrip("/") in msg and "hint:" in msg
    assert "after 3 attempt(s)" in msg


def test_wrong_request_shape_is_a_400_and_not_retried(case: Case, fake: Any) -> None:
    emb = make(case, fake, model="not-the-served-model")
    with pytest.raises(RemoteError, match="HTTP 400") as err:
        emb.embed_queries(["x"])
    assert len(fake.requests) == 1
    assert fake.rejections and "not-the-served-model" in fake.rejections[0]
    assert "\n" not in str(err.value)


def test_wrong_key_is_not_retried_and_names_the_env_var(case: Case, fake: Any) -> None:
    emb = make(case, fake, api_key="wrong")
    with pytest.raises(RemoteError) as err:
        emb.embed_queries(["x"])
    assert len(fake.requests) == 1
    if case.provider != "gemini":  # Gemini answers a bad key with 400 INVALID_ARGUMENT
        assert case.embedder_cls.key_envs[0] in str(err.value)


def test_missing_key_fails_in_the_constructor(case: Case, fake: Any) -> None:
    with pytest.raises(ConfigError) as err:
        make(case, fake, api_key=None)
    msg = str(err.value)
    assert "\n" not in msg and all(env in msg for env in case.embedder_cls.key_envs)
    assert fake.requests == []


def test_key_is_read_from_the_environment(case: Case, fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(case.embedder_cls.key_envs[-1], fake.api_key)
    make(case, fake, api_key=None).embed_queries(["x"])
    assert fake.rejections == [] and len(fake.requests) == 1


def test_unreachable_endpoint_is_retried_then_remote_error(case: Case) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("/v1" if case.provider == "openai" else "")
    emb = case.embedder_cls(
        "x",
        case.model,
        provider=case.provider,
        dim=DIM,
        base_url=base,
        api_key="k",
        max_retries=1,
        backoff_base=0.0,
        backoff_max=0.0,
        timeout=5.0,
    )
    with pytest.raises(RemoteError, match="connection|timeout") as err:
        emb.embed_queries(["x"])
    assert emb.requests_sent == 2 and "\n" not in str(err.value) and str(port) in str(err.value)


def test_dim_mismatch_is_a_config_error(case: Case, fake: Any) -> None:
    emb = make(case, fake, dim=16)
    with pytest.raises(ConfigError, match="embedder.dim=16"):
        emb.embed_queries(["x"])


# --- batching ------------------------------------------------------------------------------------


def test_batches_respect_batch_size_and_keep_order(case: Case, fake: Any) -> None:
    size = min(100, case.max_batch)
    texts = [f"passage {i}" for i in range(250)]
    emb = make(case, fake, batch_size=size)
    vecs = emb.embed_documents(texts)
    assert fake.rejections == []
    sizes = [len(sent_texts(case, b)) for b in fake.bodies]
    assert sizes == [size, size, 250 - 2 * size]
    assert [t for b in fake.bodies for t in sent_texts(case, b)] == texts
    np.testing.assert_allclose(vecs, unit([fake_vector(t, DIM) for t in texts]), atol=1e-6)


def config_error(*overrides: str) -> str:
    """The one line the command line prints for an embedder config (schema + rules)."""
    from t2exp.cli.app import preflight

    with pytest.raises(ConfigError) as err:
        preflight(["generator=none", "++embedder.api_key=k", *overrides])
    assert "\n" not in str(err.value)
    return str(err.value)


def test_batch_size_above_provider_limit_is_rejected(case: Case) -> None:
    msg = config_error(f"embedder={case.provider}", f"embedder.batch_size={case.max_batch + 1}")
    assert f"embedder.batch_size={case.max_batch + 1}" in msg and f"1..{case.max_batch}" in msg


# --- cache, fingerprint, tokens, packaging -------------------------------------------------------


def test_persistent_cache_avoids_second_request(case: Case, fake: Any, tmp_path: Path) -> None:
    texts = ["a", "b", "c"]
    first = CachedEmbedder(make(case, fake), KVCache(tmp_path / "emb.sqlite")).embed_documents(texts)
    again = CachedEmbedder(make(case, fake), KVCache(tmp_path / "emb.sqlite"))
    second = again.embed_documents(texts)
    assert len(fake.requests) == 1 and again.computed == 0
    np.testing.assert_array_equal(first, second)


def test_fingerprint_tracks_what_changes_vectors(case: Case, fake: Any) -> None:
    base = make(case, fake).fingerprint
    assert make(case, fake, base_url=fake.base_url + "/", api_key="other", batch_size=7, max_retries=0).fingerprint == base
    assert make(case, fake, model="other-model").fingerprint != base
    assert make(case, fake, dim=4, dimensions=4).fingerprint != base
    assert make(case, fake, revision="2025-01").fingerprint != base
    emb = make(case, fake, dim=0)
    before = emb.fingerprint
    emb.embed_queries(["x"])
    assert emb.dim == DIM and emb.fingerprint == before  # learning dim must not move cache keys


def test_task_types_enter_the_fingerprint() -> None:
    kw: dict[str, Any] = {"dim": DIM, "api_key": "k"}
    g = GeminiEmbedder("g", "m", **kw)
    assert GeminiEmbedder("g", "m", document_task_type="SEMANTIC_SIMILARITY", **kw).fingerprint != g.fingerprint
    c = CohereEmbedder("c", "m", **kw)
    assert CohereEmbedder("c", "m", query_input_type="clustering", **kw).fingerprint != c.fingerprint
    assert "embedder.query_task_type='retrieval_query'" in config_error("embedder=gemini", "embedder.query_task_type=retrieval_query")
    assert "embedder.document_input_type='search'" in config_error("embedder=cohere", "embedder.document_input_type=search")


def test_count_tokens_is_a_cheap_estimate(case: Case, fake: Any) -> None:
    emb = make(case, fake)
    assert emb.count_tokens(["", "abcd", "a" * 401]) == [0, 1, 101]
    assert fake.requests == []


def test_bad_config_is_rejected_before_any_request(case: Case) -> None:
    override = "embedder.query_template='no placeholder'"
    assert override in config_error(f"embedder={case.provider}", override)
    msg = config_error(f"embedder={case.provider}", "embedder.provider=somebody-else")
    assert "embedder.provider='somebody-else'" in msg and case.provider in msg


def test_missing_client_library_says_install_api_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for mod in ("openai", "google.genai", "cohere"):
        monkeypatch.setitem(sys.modules, mod, None)  # makes `import mod` raise ImportError
    for cls in (OpenAIEmbedder, GeminiEmbedder, CohereEmbedder):
        with pytest.raises(ConfigError, match=r"t2exp\[api\]"):
            cls("x", "m", dim=DIM, api_key="k")


def test_importing_t2exp_does_not_import_client_libraries() -> None:
    code = (
        "import sys\n"
        "import t2exp, t2exp.embedders._remote, t2exp.embedders.openai_embedder, "
        "t2exp.embedders.gemini_embedder, t2exp.embedders.cohere_embedder\n"
        "bad = [m for m in ('openai', 'google.genai', 'cohere') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


# --- configs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["openai", "gemini", "cohere"])
def test_api_configs_instantiate_and_talk_to_the_fake(name: str) -> None:
    from t2exp.config.components import build

    case = next(c for c in CASES if c.provider == name)
    cfg = compose_cfg(f"embedder={name}").embedder
    assert cfg.name == name and cfg.provider == name and cfg.model == case.model
    with case.fake_cls(model=case.model, dim=int(cfg.dim)) as fake:
        emb = build(cfg, name, base_url=fake.base_url, api_key=fake.api_key, backoff_base=0.0)
        assert isinstance(emb, case.embedder_cls) and emb.name == name
        vecs = emb.embed_queries(["what was the net income in 2019?"])
        assert vecs.shape == (1, int(cfg.dim)) and fake.rejections == []
