"""Every option of every config group composes, passes the schema and the rules, and builds the
object its ``_target_`` names (a stand-in only where the real thing needs a server: Weaviate)."""

from __future__ import annotations

import sys

import pytest

from helpers.app import compose_cfg
from helpers.paths import TESTS
from t2exp import config
from t2exp.config.components import build, target_class
from t2exp.generators import vllm_backend
from t2exp.infra.paths import CONF_DIR
from t2exp.pipeline.build import build_components, build_method

KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "CO_API_KEY", "WEAVIATE_API_KEY")
FAKE_SCRIPT = TESTS / "fakes" / "openai_server.py"


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@pytest.fixture
def keys(monkeypatch):
    for k in KEYS:
        monkeypatch.setenv(k, "test-key-" + k.lower())
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: False)


def _typed(cfg):
    typed = config.check(cfg)
    assert type(typed).__name__ == "Config"
    return typed


@pytest.mark.parametrize("option", _options("embedder"))
def test_every_embedder_builds(option, keys):
    cfg = compose_cfg(f"embedder={option}", "generator=none")
    typed = _typed(cfg)
    emb = build(cfg.embedder, "embedder")  # the app's one constructor path (meta left out)
    assert isinstance(emb, target_class(cfg.embedder._target_))
    assert emb.name == option and emb.dim == typed.embedder.dim  # type: ignore[union-attr]
    assert isinstance(emb.fingerprint, str) and len(emb.fingerprint) >= 8


@pytest.mark.parametrize("option", _options("store"))
def test_every_store_builds(option, keys, tmp_path, request):
    """Each store option instantiates; store=weaviate connects for real, through weaviate-client, to
    the loopback stand-in (tests/weaviate_wire) named by the same overrides a user gives."""
    where: list[str] = []
    if option == "weaviate":
        wire = request.getfixturevalue("weaviate_wire")
        where = wire.overrides()[1:]
    if option == "weaviate_embedded":
        where = [f"store.binary={sys.executable}"]  # a file there; a user's is the Weaviate server binary
    cfg = compose_cfg(f"store={option}", "generator=none", f"paths.cache={tmp_path}", *where)
    _typed(cfg)
    if option == "weaviate_embedded":
        return  # building it starts the server: its start-up arguments are checked in tests/stores/test_weaviate_store.py
    store = build(cfg.store, "store")
    assert isinstance(store, target_class(cfg.store._target_))
    if option == "weaviate":
        assert store.client.is_ready() and "REST GET /v1/meta" in wire.db.requests
    store.close()


@pytest.mark.parametrize("option", _options("reranker"))
def test_every_reranker_builds_and_every_rerank_method_takes_it(option, keys):
    target = compose_cfg("rag_method=reranker", f"reranker={option}").reranker._target_
    needs_generator = getattr(target_class(target), "needs_generator", False)
    cfg = compose_cfg("rag_method=reranker", f"reranker={option}", *([] if needs_generator else ["generator=none"]))
    _typed(cfg)
    rr = build(cfg.reranker, "reranker")
    method = build_method(cfg.rag_method, reranker=rr)
    assert method.reranker is rr and method.name == "reranker"


@pytest.mark.parametrize("option", _options("rag_method"))
def test_every_rag_method_builds_from_its_target(option, keys):
    cfg = compose_cfg(f"rag_method={option}")
    typed = _typed(cfg)
    method = build_method(cfg.rag_method, reranker=object() if option == "reranker" else None)
    assert isinstance(method, target_class(cfg.rag_method._target_))
    assert method.name == option == typed.rag_method.name


@pytest.mark.parametrize("option", _options("generator"))
def test_every_generator_builds_and_answers(option, keys, tmp_path):
    """Each option builds its backend; the ones that speak the OpenAI protocol answer one prompt
    from the local wire-format server (a started vLLM server: its stand-in script)."""
    from fakes.openai_server import FakeOpenAIServer
    from t2exp.generators import Sampling

    with FakeOpenAIServer(model="m") as srv:
        fake_vllm = [
            f"generator.command=[{sys.executable},{FAKE_SCRIPT}]",
            "generator.startup_timeout=60",
            "generator.poll_interval=0.05",
            "generator.model=m",
        ]
        extra = {"openai_compat": ["generator.model=m"], "vllm_server": fake_vllm, "qwen_coder_0_5b_vllm": fake_vllm}.get(option, [])
        if option in ("openai_api", "openai_compat", "llama33_70b", "qwq32b"):
            extra += [f"generator.base_url={srv.base_url}", "generator.model=m"]
        cfg = compose_cfg(f"generator={option}", f"paths.cache={tmp_path}", *extra)
        typed = _typed(cfg)
        if option == "none":
            assert "_target_" not in cfg.generator and type(typed.generator).__name__ == "NoGeneratorConfig"
            return
        from t2exp.pipeline.build import GENERATOR_RUN_KEYS

        gen_cfg = {k: v for k, v in cfg.generator.items() if k not in GENERATOR_RUN_KEYS}
        gen = build(gen_cfg, "generator")
        assert gen.name == cfg.generator.name and gen.batch_size == cfg.generator.batch_size
        if cfg.generator.get("gguf_parts"):
            assert option.startswith("qwen_coder_")
            return  # the offline models: generation is tested end to end in test_pipeline and test_local_generator
        try:
            out = gen.generate([[{"role": "user", "content": "hello"}]], Sampling(max_tokens=8))
        finally:
            getattr(gen, "close", lambda: None)()
        assert [g.text for g in out] == ["echo: hello"]


@pytest.mark.parametrize("option", _options("dataset"))
def test_every_dataset_composes_and_local_ones_load(option, keys):
    cfg = compose_cfg(f"dataset={option}", "generator=none")
    typed = _typed(cfg)
    assert set(typed.dataset.subsets) <= {"FinQA", "ConvFinQA", "VQAonBD", "TAT-DQA"}
    if option in ("bundled", "finqa", "tatdqa"):  # held by the bundle: loaded for real
        components = build_components(cfg)
        assert [s.name for s in components.parts.subsets] == list(typed.dataset.subsets)
        assert all(s.questions and s.corpus for s in components.parts.subsets)


@pytest.mark.parametrize("option", _options("experiment"))
def test_every_experiment_composes(option, keys):
    _typed(compose_cfg(f"+experiment={option}"))


def test_an_option_that_sets_a_run_level_key_wins_over_the_main_config():
    """metadata_hybrid indexes with the metadata prefix (conf/config.yaml's own
    `document.variant: plain` does not override the option); the command line still wins."""
    assert compose_cfg("rag_method=metadata_hybrid").document.variant == "metadata_prefix"
    assert compose_cfg("rag_method=metadata_hybrid", "document.variant=plain").document.variant == "plain"
    assert compose_cfg("rag_method=hybrid").document.variant == "plain"
    assert compose_cfg("+experiment=table4").k == 5


@pytest.mark.parametrize("method", _options("rag_method"))
def test_the_paper_experiment_sets_the_authors_protocol_for_every_method(method, keys):
    cfg = compose_cfg("+experiment=paper", f"rag_method={method}")
    typed = _typed(cfg)
    assert typed.query.template == "{company_name} : {question}"
    assert typed.query.instruction.startswith("Instruct: Given a question about a company") and typed.query.instruction.endswith("{query}")
    assert cfg.embedder.query_template == "{text}"  # the instruction is not wrapped twice
    assert cfg.generator.answer_mode == "json"
    if method == "hybrid":
        assert (cfg.rag_method.fusion, cfg.rag_method.lexical) == ("paper", "rank_bm25")
    if method == "reranker":
        assert cfg.rag_method.first_stage == "base"
    assert compose_cfg(f"rag_method={method}").query.template == "{question}"  # t2exp's own protocol otherwise


def test_paper_hyde_asks_for_a_plain_passage_of_the_bare_question(keys):
    from t2exp.answering.prompts import PromptLibrary
    from t2exp.data.records import Question
    from t2exp.infra.paths import PROMPTS_DIR

    cfg = compose_cfg("+experiment=paper", "rag_method=hyde")
    assert cfg.rag_method.prompt == "hyde_paper" and compose_cfg("rag_method=hyde").rag_method.prompt == "hyde"
    method = build_method(cfg.rag_method)
    q = Question(id="q", subset="FinQA", split="dev", context_id="c", question="What was revenue?", gold=1.0, gold_raw="1")
    text = PromptLibrary(PROMPTS_DIR).render(method.prompt, question=q.question)
    assert text.startswith("Please write a passage to answer the question.") and "What was revenue?" in text


def test_aux_sampling_from_the_schema_is_usable(keys):
    """The schema gives aux_sampling a `stop: null`; it must become no stop sequence, not None
    (so `Sampling.as_dict()`, the LLM-cache key, works for generator=qwq32b)."""
    components = build_components(compose_cfg("generator=qwq32b", "dataset=finqa", "dataset.limit=1"))
    aux = components.parts.services.aux_sampling
    assert aux is not None and aux.stop == () and aux.max_tokens == 4096 and aux.json_schema is None
    assert aux.as_dict()["stop"] == []
