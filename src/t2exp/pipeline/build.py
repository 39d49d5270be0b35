"""Build a cell's components from its config (its data loaded and its key computed before, once:
:func:`t2exp.pipeline.identity.load_cell`): the method (and its reranker), embedder, store,
generator, prompts, sampling and the run's settings, each constructor called through the config's
``_target_`` (:func:`t2exp.config.components.build`). No work on the corpus yet."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from t2exp.answering.answers import ANSWER_SCHEMA, MODE_STOPS, answer_template
from t2exp.answering.context import ContextShaper
from t2exp.answering.demos import DemoPool
from t2exp.answering.prompts import PromptLibrary
from t2exp.config import to_dict
from t2exp.config.components import build, target_class
from t2exp.config.generators import AUX_MAX_TOKENS, GeneratorConfig
from t2exp.data.records import Subset
from t2exp.embedders.cached import CachedEmbedder
from t2exp.errors import ConfigError
from t2exp.generators import Sampling
from t2exp.generators.cached import CachedGenerator
from t2exp.infra.cache import KVCache, locks_dir
from t2exp.methods import RagMethod, Services
from t2exp.methods.queries import QueryBuilder
from t2exp.pipeline.identity import Cell, load_cell
from t2exp.pipeline.steps import Components, Parts, Settings
from t2exp.pipeline.stop import StopRequest

log = logging.getLogger("t2exp")

# what a method class declares (t2exp.methods.RagMethod) and the run reads before building it
METHOD_FLAGS = ("needs_index", "needs_generator", "needs_reranker")
# keys of a generator config that configure the run, not the backend's constructor
GENERATOR_RUN_KEYS = ("answer_mode", "prompt", "grounding", "demos", "demos_k", "sampling", "aux_sampling", "price")


def build_component(cfg: DictConfig | None, **kwargs: Any) -> Any:
    """The object a component config names (None for none): its run keys (``GENERATOR_RUN_KEYS``)
    and ``meta`` left out, the constructor called through ``_target_``."""
    if cfg is None or cfg.get("_target_") is None:
        return None
    d = to_dict(cfg)
    for key in GENERATOR_RUN_KEYS:
        d.pop(key, None)
    return build(d, str(d.get("name", d["_target_"])), **kwargs)


def note_non_numeric_golds(subsets: Sequence[Subset]) -> None:
    """One warning per subset whose questions (the run's sample) include golds without a number."""
    for s in subsets:
        n = sum(q.gold is None for q in s.questions)
        if n:
            log.warning("subset %s: %d of %d questions have a non-numeric gold answer; excluded from NM", s.name, n, len(s.questions))


def _sampling(cfg: DictConfig | None, answer_mode: str) -> Sampling:
    """Sampling from config; ``stop: null`` means the answer mode's default stop sequences."""
    d = to_dict(cfg) if cfg is not None else {}
    stop = d.pop("stop", None)
    schema = ANSWER_SCHEMA if answer_mode == "json" else None
    return Sampling(**d, stop=tuple(MODE_STOPS.get(answer_mode, ()) if stop is None else stop), json_schema=schema)


def build_components(cfg: DictConfig, stop: StopRequest | None = None, cell: Cell | None = None) -> Components:
    """Build every component of ``cell`` (by default: :func:`load_cell` of ``cfg``) from config, the
    embedder and generator behind their caches (embeddings committed after every embedder batch, one
    API request, so a failure or a kill mid-corpus keeps everything embedded so far); no work on the
    corpus yet."""
    cell = cell or load_cell(cfg)
    subsets = cell.subsets
    reranker = build_component(cfg.get("reranker"))
    method = build_method(to_dict(cfg.rag_method), reranker=reranker)
    embedder = build_component(cfg.embedder) if method.needs_index else None
    store_factory = (lambda: build_component(cfg.store)) if method.needs_index else None
    generator = build_component(cfg.generator)
    if generator is not None:  # NM is computed: say which questions it leaves out (once per cell)
        note_non_numeric_golds(subsets)
    gen_cfg = cfg.generator
    sampling = _sampling(gen_cfg.get("sampling"), str(gen_cfg.get("answer_mode", GeneratorConfig.answer_mode))) if generator else Sampling()
    aux = gen_cfg.get("aux_sampling")
    # auxiliary calls (HyDE passages, summaries) have no answer mode: ``stop: null`` is no stop sequence
    aux_sampling = _sampling(aux, answer_mode="") if aux else Sampling(max_tokens=AUX_MAX_TOKENS, seed=sampling.seed)
    cache_dir = Path(cfg.paths.cache)
    prompts = PromptLibrary(cfg.paths.prompts)
    demos = _demo_pool(cfg, prompts) if generator else None
    services = Services(
        embedder=CachedEmbedder(embedder, KVCache(cache_dir / "embeddings.sqlite"), chunk=max(1, int(embedder.batch_size)))
        if embedder
        else None,
        store_factory=store_factory,
        generator=CachedGenerator(generator, KVCache(cache_dir / "llm.sqlite")) if generator else None,
        prompts=prompts,
        variant=str(cfg.document.variant),
        lock_dir=locks_dir(cache_dir),
        aux_sampling=aux_sampling,
        query=QueryBuilder(str(cfg.query.template), cfg.query.get("instruction")),
        k=int(cfg.k),
    )
    return Components(
        parts=Parts(subsets=subsets, method=method, services=services, demos=demos),
        settings=Settings(
            sampling=sampling,
            answer_mode=str(gen_cfg.get("answer_mode", GeneratorConfig.answer_mode)),
            answer_prompt=gen_cfg.get("prompt"),
            grounding=str(gen_cfg.get("grounding", GeneratorConfig.grounding)),
            demos_k=int(gen_cfg.get("demos_k", GeneratorConfig.demos_k)),
            k=int(cfg.k),
            run_dir=cache_dir / "runs" / cell.key,
            context=ContextShaper(
                str(cfg.context.mode), int(cfg.context.sentences), str(cfg.context.tables), str(cfg.context.header), cfg.context.documents
            ),
        ),
        stop=stop or StopRequest(),
    )


def _demo_pool(cfg: DictConfig, prompts: PromptLibrary) -> DemoPool | None:
    """``generator.demos``' pool, after checking that the answer template shows demonstrations."""
    name = cfg.generator.get("demos")
    if not name:
        return None
    template = answer_template(str(cfg.generator.get("answer_mode", GeneratorConfig.answer_mode)), cfg.generator.get("prompt"))
    if "demos" not in prompts.variables(template):
        raise ConfigError(
            f"generator.demos={name}: the answer template {template!r} shows no demonstrations; "
            "set generator.prompt=answer_code_demos (or a template that loops over `demos`)"
        )
    return DemoPool.load(cfg.paths.prompts, str(name))


def build_method(cfg: Mapping[str, Any], reranker: Any | None = None) -> RagMethod:
    """The method a ``rag_method`` config names by ``_target_`` (``reranker`` for methods that
    rescore candidates: ``needs_reranker``)."""
    cls = target_class(cfg["_target_"], "rag_method._target_")
    if not all(hasattr(cls, flag) for flag in METHOD_FLAGS):
        raise ConfigError(
            f"rag_method._target_={cfg['_target_']}: a method class declares {', '.join(METHOD_FLAGS)} "
            "(t2exp.methods.RagMethod; subclass t2exp.methods.RetrievingMethod to inherit them)"
        )
    kwargs = {"reranker": reranker} if cls.needs_reranker else {}
    return build(cfg, f"rag_method={cfg.get('name')}", **kwargs)
