"""One experiment: load → index → retrieve → generate → score → log.

This is the only module that knows every stage; each stage lives in its own module and passes
plain records along.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t2exp.answering import answer_choice, answers
from t2exp.answering.demos import Demo, DemoPool
from t2exp.answering.evidence import Evidence
from t2exp.answering.prompts import PromptLibrary
from t2exp.config.components import GeneratorConfig
from t2exp.data.loader import Question, Subset
from t2exp.embedders import Embedder
from t2exp.embedders.cached import CachedEmbedder
from t2exp.evaluation.metrics import CI_SEED, DEGENERATE, N_BOOT, NM_METRICS, RECALL_KS, metric_names, question_metrics
from t2exp.evaluation.scoring.compute import score_rows
from t2exp.evaluation.scoring.gold import gold_from
from t2exp.evaluation.scoring.predictions import parse_rows
from t2exp.generators import Cancelled, Generation, Generator, Sampling
from t2exp.generators.cached import CachedGenerator
from t2exp.index.build import truncation_fraction
from t2exp.index.documents import heading
from t2exp.infra import progress
from t2exp.infra.cache import JsonlLog, KVCache, atomic_write_text, content_key
from t2exp.methods import RagMethod, Services
from t2exp.methods.queries import QueryBuilder
from t2exp.pipeline.stop import Interrupted, StopRequest
from t2exp.stores import Store

__all__ = ["Components", "Interrupted", "Result", "run_experiment"]

log = logging.getLogger(__name__)


@dataclass
class Components:
    """Everything built from config; the experiment never looks at config files itself."""

    subsets: list[Subset]
    method: RagMethod
    embedder: Embedder | None
    store_factory: Callable[[], Store] | None
    generator: Generator | None
    prompts: PromptLibrary
    sampling: Sampling
    answer_mode: str
    k: int
    variant: str
    cache_dir: Path
    run_dir: Path  # where per-question predictions are appended (deterministic per cell)
    aux_sampling: Sampling | None = None  # HyDE / summaries
    stop: StopRequest = field(default_factory=StopRequest)  # checked at every safe point
    query: QueryBuilder = field(default_factory=QueryBuilder)  # the retrieval query of a question
    evidence: Evidence = field(default_factory=Evidence)  # what the generator reads of each document
    answer_prompt: str | None = None  # the answer template (None: answer_<answer_mode>)
    grounding: str = GeneratorConfig.grounding  # program checking when choosing the answer (t2exp.answering.answer_choice)
    demos: DemoPool | None = None  # retrieved demonstrations (t2exp.answering.demos)
    demos_k: int = GeneratorConfig.demos_k


@dataclass
class Result:
    metrics: dict[str, float]
    predictions_path: Path
    params: dict[str, Any] = field(default_factory=dict)
    table: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: bool = False  # resume=true found this cell already FINISHED


def run_experiment(c: Components) -> Result:
    timings = {"index_seconds": 0.0, "retrieve_seconds": 0.0, "generate_seconds": 0.0}
    extra: dict[str, float] = {}
    c.run_dir.mkdir(parents=True, exist_ok=True)
    preds = JsonlLog(c.run_dir / "predictions.jsonl")
    done = {r["id"]: r for r in preds.read()}
    if done:
        log.info("resuming: %d predictions already in %s", len(done), preds.path)
    # commit embeddings after every embedder batch (one API request), so a failure or a kill
    # mid-corpus keeps everything embedded so far
    embed_chunk = max(1, int(getattr(c.embedder, "batch_size", 256) or 256))
    embedder = CachedEmbedder(c.embedder, KVCache(c.cache_dir / "embeddings.sqlite"), chunk=embed_chunk) if c.embedder else None
    generator = CachedGenerator(c.generator, KVCache(c.cache_dir / "llm.sqlite")) if c.generator else None
    services = Services(
        embedder=embedder, store_factory=c.store_factory, generator=generator, prompts=c.prompts,
        variant=c.variant, lock_dir=c.cache_dir / "locks", aux_sampling=c.aux_sampling, query=c.query, k=c.k,
    )
    depth = max(c.k, max(RECALL_KS))
    rows: list[dict[str, Any]] = []
    tokens = {"prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0, "truncated_generations": 0, "model_seconds": 0.0}
    n_generated = 0

    for subset in c.subsets:
        # --- index -------------------------------------------------------------------------
        c.stop.check()
        t0 = time.perf_counter()
        index = c.method.prepare(subset, services)
        timings["index_seconds"] += time.perf_counter() - t0
        if index is not None:
            extra[f"{subset.name}/corpus_size"] = float(index.size())
        if index is not None and index.store is not None:
            extra[f"{subset.name}/index_cache_hit"] = float(index.cache_hit)
            extra[f"{subset.name}/index_build_seconds"] = index.build_seconds
            extra[f"{subset.name}/index_inserted"] = float(getattr(index.store, "inserted", 0))
            extra[f"{subset.name}/doc_truncated_frac"] = truncation_fraction(index.embedder, list(index.texts.values()))
        extra[f"{subset.name}/questions"] = float(len(subset.questions))
        extra[f"{subset.name}/non_numeric_gold"] = float(sum(q.gold is None for q in subset.questions))
        extra[f"{subset.name}/empty_questions_skipped"] = float(subset.stats.get("empty_questions_skipped", 0))

        todo = [q for q in subset.questions if q.id not in done]
        # --- retrieve (batched over all questions of the subset) ------------------------------
        t0 = time.perf_counter()
        hits_list = c.method.retrieve(todo, index, depth) if todo else []
        timings["retrieve_seconds"] += time.perf_counter() - t0

        # --- generate + score, one prediction written as soon as it exists --------------------
        batch = max(1, getattr(generator, "batch_size", 1)) if generator else len(todo) or 1
        shown = progress.stage(f"generate {subset.name}", len(todo), "answer") if generator is not None and todo else nullcontext(None)
        with shown as bar:
            for start in range(0, len(todo), batch):
                c.stop.check()
                chunk = todo[start : start + batch]
                chunk_hits = hits_list[start : start + batch] if hits_list is not None else [None] * len(chunk)
                contexts = [_evidence(c, q, h, index) for q, h in zip(chunk, chunk_hits, strict=False)]
                gens: Sequence[Generation | None] = [None] * len(chunk)

                def write(i: int, g: Generation | None, chunk=chunk, chunk_hits=chunk_hits, contexts=contexts, bar=bar) -> None:
                    """The prediction of question ``i`` of the chunk, once (in question order normally;
                    as answers arrive when the run is stopping or a request failed)."""
                    nonlocal n_generated
                    q = chunk[i]
                    if q.id in done:
                        return
                    row = _prediction_row(q, chunk_hits[i], contexts[i], g, c)
                    if g is not None:
                        n_generated += 1
                        if bar is not None:
                            bar.advance()
                            if g.cached:
                                bar.tally("from the LLM cache")
                        if not g.cached:
                            tokens["model_seconds"] += g.seconds
                        tokens["prompt_tokens"] += g.prompt_tokens
                        tokens["completion_tokens"] += g.completion_tokens
                        tokens["reasoning_tokens"] += int(g.extra.get("reasoning_tokens", 0) or 0)
                        tokens["truncated_generations"] += int(g.finish_reason == "length")
                    preds.write(row)
                    done[q.id] = row

                if generator is not None:
                    prompts = [answers.build_messages(c.prompts, c.answer_mode, q.question, ctx, c.answer_prompt, _demos(c, q))
                               for q, ctx in zip(chunk, contexts, strict=True)]
                    arrived: dict[int, Generation] = {}

                    def on_answer(i: int, g: Generation, arrived=arrived, write=write) -> None:
                        arrived[i] = g
                        if c.stop.is_set():  # a stopping run writes each answer the moment it exists
                            write(i, g)

                    t0 = time.perf_counter()
                    try:
                        gens = generator.generate(prompts, c.sampling, on_result=on_answer, should_stop=c.stop.is_set)
                    except BaseException as exc:  # a failure, a stop or a hard stop: keep every answer that arrived
                        for i in sorted(arrived):
                            write(i, arrived[i])
                        if isinstance(exc, Cancelled):
                            c.stop.check()  # Interrupted: nothing more was sent after the signal
                        raise
                    finally:
                        timings["generate_seconds"] += time.perf_counter() - t0
                for i, g in enumerate(gens):
                    write(i, g)
        rows.extend(done[q.id] for q in subset.questions)
        close = getattr(getattr(index, "store", None), "close", None)
        if close is not None:
            close()

    # --- score: the predictions, through the scorer t2exp.score uses ---------------------------
    metrics, table = _score(rows, c)
    metrics.update(timings)
    metrics.update(extra)
    if generator is not None:
        metrics.update({k: float(v) for k, v in tokens.items()})
        metrics["llm_calls"] = float(generator.calls)
        metrics["questions_per_second"] = n_generated / timings["generate_seconds"] if timings["generate_seconds"] > 0 else 0.0
    if embedder is not None:
        metrics["embeddings_computed"] = float(embedder.computed)
    metrics.update(c.method.stats())
    _write_leaderboard(rows, c.run_dir / "leaderboard.jsonl")
    return Result(metrics=metrics, predictions_path=preds.path, table=table)


def _score(rows: list[dict[str, Any]], c: Components) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """A run's metrics: its prediction rows scored against its questions by
    :func:`t2exp.evaluation.scoring.compute.score_rows` (what ``t2exp.score`` runs on the written
    file), keeping the run's metrics (each subset's and the question-weighted ``avg``, with CIs)
    and its degenerate-prediction counts; a scorer's bookkeeping (coverage, row counts) is for
    submissions and is left out: a run answers every question it loads."""
    subs, columns = parse_rows(rows, "run")
    scored = score_rows(subs, columns, gold_from(c.subsets), k=c.k, n_boot=N_BOOT, seed=CI_SEED)
    names = set(metric_names(c.k))
    table = {s: {n: v.__dict__ for n, v in m.items() if n in names} for s, m in scored.table.items()}
    answered = "nm" in scored.metric_names  # a run with a generator
    metrics = {key: v for key, v in scored.metrics.items()
               if key.partition("/")[2].removesuffix("_ci_low").removesuffix("_ci_high") in names
               or (answered and key.endswith("degenerate_predictions"))}
    return metrics, table


def _evidence(c: Components, q: Question, hits, index) -> list[str]:
    """What the generator reads for ``q``: the method's contexts (those of its top hits, in rank
    order) as ``context`` shapes them, each headed by its report when ``context.header`` asks."""
    texts = c.method.contexts(q, hits, index, c.k)
    if c.evidence.header == "none" or index is None or not texts:
        return c.evidence.all(q.question, texts)
    sources = [index.docs[cid] for cid, _ in (hits or [])[: len(texts)]]
    return c.evidence.all(q.question, texts, [heading(d) for d in sources])


def _demos(c: Components, q: Question) -> list[Demo]:
    """The demonstrations shown with ``q`` (none without a pool); never its own document's."""
    if c.demos is None:
        return []
    return c.demos.select(q.question, c.demos_k, q.id, q.context_id, q.metadata.get("company_name", ""))


def _prediction_row(q: Question, hits, contexts, gen, c: Components) -> dict[str, Any]:
    ranked = None if hits is None else [cid for cid, _ in hits]
    parsed = None
    if gen is not None:
        parsed = answer_choice.choose(c.answer_mode, [gen.text, *gen.extra.get("samples", [])], contexts, c.grounding)
    pred = parsed.value if parsed else None
    text = parsed.text if parsed else None
    dense = _dense_of(hits)
    depth = getattr(hits, "depth", None)
    m = question_metrics(ranked, q.context_id, c.k, pred, q.gold, pred_text=text, dense=dense, ranked_depth=depth)
    if gen is None:
        for name in (*NM_METRICS, DEGENERATE):
            m[name] = None
    return {
        "id": q.id,
        "subset": q.subset,
        "split": q.split,
        "context_id": q.context_id,
        "question": q.question,
        "retrieved": ranked,
        "scores": None if hits is None else [round(s, 6) for _, s in hits],
        # the dense similarity of each retrieved document the method's dense retriever returned
        # (None: BM25-only); what the authors' metrics re-sort by (methods.Ranking)
        "retrieved_dense": dense,
        # how many documents the method ranked, where that is fewer than R@5 reads: R@r past it is undefined
        **({"ranked_depth": depth} if depth is not None and depth < max(RECALL_KS) else {}),
        "n_contexts": len(contexts),
        "generation": None if gen is None else gen.text,
        "program": parsed.program if parsed else None,
        "program_error": parsed.program_error if parsed else None,
        **(parsed.fields if parsed else {}),
        "answer_text": text,  # the model's answer string (answers.answer_text): what nm_bare reads
        "prediction": pred,
        "gold": q.gold,
        "gold_raw": q.gold_raw,
        "finish_reason": None if gen is None else gen.finish_reason,
        "prompt_tokens": None if gen is None else gen.prompt_tokens,
        "completion_tokens": None if gen is None else gen.completion_tokens,
        # the model's seconds for this answer (when it came from the LLM cache: when it was made)
        "generate_seconds": None if gen is None else round(gen.seconds, 3),
        **m,
    }


def _dense_of(hits) -> list[float | None] | None:
    dense = getattr(hits, "dense", None)
    if not dense:
        return None
    return [None if cid not in dense else round(float(dense[cid]), 6) for cid, _ in hits]


def _write_leaderboard(rows: list[dict[str, Any]], path: Path) -> None:
    """The official submission format: id, subset, context_id, prediction (one JSON per line)."""
    lines = [
        json.dumps({"id": r["id"], "subset": r["subset"], "context_id": (r["retrieved"] or [None])[0], "prediction": r["prediction"]})
        for r in rows
    ]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


# component settings that change where a cell runs or how a server is reached, not what it
# computes: a moved cache, another mount point or another server for the same weights resume the cell
OPERATIONAL_KEYS = frozenset({
    "uri", "base_url", "host", "port", "http_port", "grpc_port", "grpc_host", "http_secure", "grpc_secure", "cluster_url",
    "connection", "api_key_env", "timeout", "max_concurrency", "max_retries", "backoff_base", "backoff_max", "models_dir",
    "cache_dir", "startup_timeout", "poll_interval", "command", "extra_args", "env", "threads", "path",
})
COMPONENT_GROUPS = ("dataset", "embedder", "store", "generator", "reranker")


def cell_key(resolved: dict[str, Any], data: str | None = None) -> str:
    """Deterministic key of a sweep cell: what determines its results — the resolved config without
    bookkeeping (tracking, paths, resume) and without operational component settings
    (``OPERATIONAL_KEYS``: locations, endpoints, timeouts, concurrency), plus the content of the
    prompt templates (an edited prompt is a new cell, never a resume) and ``data``, a fingerprint of
    the loaded corpora and questions (it stands in for ``dataset.path``)."""
    semantic = {k: v for k, v in resolved.items() if k not in ("tracking", "paths", "resume", "experiment_name", "hydra")}
    for group in COMPONENT_GROUPS:
        if isinstance(semantic.get(group), dict):
            semantic[group] = {k: v for k, v in semantic[group].items() if k not in OPERATIONAL_KEYS}
    prompts_dir = (resolved.get("paths") or {}).get("prompts")
    semantic["_prompts"] = prompts_fingerprint(prompts_dir) if prompts_dir else None
    semantic["_data"] = data
    return content_key(_mask_secrets(semantic))[:16]


def data_fingerprint(subsets: list[Subset]) -> str:
    """The loaded corpora and the questions asked, every field a run reads (``Subset.fingerprint``)."""
    return content_key([s.fingerprint for s in subsets])[:16]


def prompts_fingerprint(directory: str | Path) -> str:
    """Hash of every ``*.j2`` template's and ``demos/*.jsonl`` pool's name and text in ``directory``."""
    d = Path(directory)
    files = sorted([*d.glob("*.j2"), *d.glob("demos/*.jsonl")]) if d.is_dir() else []
    return content_key([(f.name, f.read_text(encoding="utf-8")) for f in files])[:16]


def _mask_secrets(d: Any) -> Any:
    """A set API key does not change the cell (a rotated key resumes the same predictions)."""
    from t2exp.infra.redaction import is_secret_key

    if isinstance(d, dict):
        return {k: ("***" if is_secret_key(str(k)) and v not in (None, "") else _mask_secrets(v)) for k, v in d.items()}
    if isinstance(d, list):
        return [_mask_secrets(v) for v in d]
    return d
