"""The named steps of a cell, subset by subset: index → retrieve → generate → score (the data is
loaded and the components built before, :mod:`t2exp.pipeline.build`; the result is logged after,
:mod:`t2exp.tracking.cell_log`).

This is the only module that knows every stage; each stage lives in its own module and passes
plain records along.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t2exp.answering import answers
from t2exp.answering.context import ContextShaper
from t2exp.answering.demos import DemoPool
from t2exp.config.generators import GeneratorConfig
from t2exp.data.records import Question, Subset
from t2exp.evaluation.metrics import RECALL_KS
from t2exp.evaluation.scoring.cell_rows import Prediction, score_cell
from t2exp.generators import Cancelled, Generation, Generator, Sampling
from t2exp.index.build import Index, truncation_fraction
from t2exp.index.documents import heading
from t2exp.methods import RagMethod, Services
from t2exp.pipeline.predictions import LEADERBOARD_FILE, PREDICTIONS_FILE, OnRow, PredictionWriter, Span, Tally
from t2exp.pipeline.stop import Interrupted, StopRequest

__all__ = ["Components", "Interrupted", "Parts", "Result", "Settings", "run_steps"]

log = logging.getLogger(__name__)


@dataclass
class Parts:
    """The objects built from config (:mod:`t2exp.pipeline.build`): the data, the method and what it
    may use (``services``: the embedder and generator behind their caches, the store, the prompts)."""

    subsets: list[Subset]
    method: RagMethod
    services: Services
    demos: DemoPool | None = None  # retrieved demonstrations (t2exp.answering.demos)


@dataclass
class Settings:
    """How the run asks, answers and keeps its work: plain values from config."""

    sampling: Sampling
    answer_mode: str
    k: int
    run_dir: Path  # where per-question predictions are appended (deterministic per cell)
    context: ContextShaper = field(default_factory=ContextShaper)  # what the generator reads of each document
    answer_prompt: str | None = None  # the answer template (None: answer_<answer_mode>)
    grounding: str = GeneratorConfig.grounding  # program checking when choosing the answer (t2exp.answering.answer_choice)
    demos_k: int = GeneratorConfig.demos_k


@dataclass
class Components:
    """A run's parts and settings, and its stop request; the steps never look at config files."""

    parts: Parts
    settings: Settings
    stop: StopRequest = field(default_factory=StopRequest)  # checked at every safe point


@dataclass
class Result:
    metrics: dict[str, float]
    predictions_path: Path
    rows: list[Prediction] = field(default_factory=list)  # every question's row (none: a cell skipped)
    table: dict[str, dict[str, Any]] = field(default_factory=dict)
    spans: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # Tally.spans: each question's stage times
    run_id: str | None = None  # the MLflow run that logged it (set by the app)


@dataclass
class Clock:
    """What the steps count as they go: seconds per stage and per-subset facts (what the writer
    counts is its own: :class:`t2exp.pipeline.predictions.Tally`)."""

    timings: dict[str, float] = field(default_factory=lambda: {"index_seconds": 0.0, "retrieve_seconds": 0.0, "generate_seconds": 0.0})
    extra: dict[str, float] = field(default_factory=dict)


def run_steps(c: Components, on_row: OnRow | None = None) -> Result:
    """The chain, subset by subset: index → retrieve → generate (each prediction written as it
    exists, and handed to ``on_row``) → score (:func:`t2exp.evaluation.scoring.cell_rows.score_cell`).
    Logging is the caller's."""
    run = c.settings
    run.run_dir.mkdir(parents=True, exist_ok=True)
    services, clock = c.parts.services, Clock()
    writer = PredictionWriter(
        run.run_dir / PREDICTIONS_FILE, c.stop, answer_mode=run.answer_mode, grounding=run.grounding, k=run.k, on_row=on_row
    )
    todo = writer.todo(c.parts.subsets)
    for subset in c.parts.subsets:
        c.stop.check()
        index = _index(c, subset, services, clock)
        hits, window = _retrieve(c, todo[subset.name], index, clock)
        _generate(c, subset.name, todo[subset.name], (hits, window), index, writer, clock)
        if index is not None and index.store is not None:
            index.store.close()
    written = writer.finish(c.parts.subsets, run.run_dir / LEADERBOARD_FILE)
    metrics, table = score_cell(written.rows, c.parts.subsets, run.k)
    metrics.update(_counts(c, clock, written.tally, services))
    return Result(metrics=metrics, predictions_path=writer.path, rows=written.rows, table=table, spans=written.tally.spans)


def _index(c: Components, subset: Subset, services: Services, clock: Clock) -> Index | None:
    """Index ``subset``'s corpus as the method needs it (None: the method reads no index)."""
    t0 = time.perf_counter()
    index = c.parts.method.prepare(subset, services)
    clock.timings["index_seconds"] += time.perf_counter() - t0
    extra, name = clock.extra, subset.name
    if index is not None:
        extra[f"{name}/corpus_size"] = float(index.size())
    if index is not None and index.store is not None:
        extra[f"{name}/index_cache_hit"] = float(index.cache_hit)
        extra[f"{name}/index_build_seconds"] = index.build_seconds
        extra[f"{name}/index_inserted"] = float(index.store.inserted)
        extra[f"{name}/doc_truncated_frac"] = truncation_fraction(index.embedder, list(index.texts.values()))
    extra[f"{name}/questions"] = float(len(subset.questions))
    extra[f"{name}/non_numeric_gold"] = float(sum(q.gold is None for q in subset.questions))
    extra[f"{name}/empty_questions_skipped"] = float(subset.stats.get("empty_questions_skipped", 0))
    return index


def _retrieve(c: Components, todo: list[Question], index: Index | None, clock: Clock) -> tuple[list | None, Span | None]:
    """The ranked hits of every question still to answer, in one batch, and the batch's window
    (None, None: a method that retrieves nothing)."""
    t0, wall0 = time.perf_counter(), time.time_ns()
    hits = c.parts.method.retrieve(todo, index, max(c.settings.k, max(RECALL_KS))) if todo else []
    clock.timings["retrieve_seconds"] += time.perf_counter() - t0
    return hits, (None if hits is None else (wall0, time.time_ns()))


def _generate(
    c: Components,
    name: str,
    todo: list[Question],
    retrieved: tuple[list | None, Span | None],
    index: Index | None,
    writer: PredictionWriter,
    clock: Clock,
) -> None:
    """Answer ``todo`` in the generator's batches and write each prediction (a retrieval-only run
    writes its rows with no answer), with its ``retrieved`` hits and their window."""
    hits, window, generator = *retrieved, c.parts.services.generator
    batch = max(1, generator.batch_size) if generator else len(todo) or 1
    shown = writer.progress(f"generate {name}", len(todo)) if generator is not None and todo else nullcontext()
    with shown:
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            chunk_hits = hits[start : start + batch] if hits is not None else [None] * len(chunk)
            contexts = [_contexts(c, q, h, index) for q, h in zip(chunk, chunk_hits, strict=False)]
            c.stop.check()
            _answer(c, generator, Batch(chunk, chunk_hits, contexts, {"retrieve": window} if window is not None else {}), writer, clock)


@dataclass
class Batch:
    """One batch of questions for the generator: their hits, contexts and retrieve window."""

    questions: list[Question]
    hits: list
    contexts: list[list[str]]
    spans: dict[str, Span]


def _answer(c: Components, generator: Generator | None, b: Batch, writer: PredictionWriter, clock: Clock) -> None:
    """One batch of questions to the generator (none: each row written with no answer). A stopping
    run writes each answer the moment it arrives; a failure, a stop or a hard stop keeps every
    answer that arrived before it ends."""
    arrived: dict[int, tuple[Generation, Span]] = {}

    def write(i: int, g: Generation | None = None, window: Span | None = None) -> None:
        spans = b.spans if window is None else {**b.spans, "generate": window}
        writer.write(b.questions[i], b.hits[i], b.contexts[i], g, spans)

    if generator is None:
        for i in range(len(b.questions)):
            write(i)
        return
    pool = c.parts.demos  # the demonstrations shown with each question (none without a pool); never its own document's
    demos = [
        pool.select(q.question, c.settings.demos_k, q.id, q.context_id, q.metadata.get("company_name", "")) if pool else []
        for q in b.questions
    ]
    prompts = [
        answers.build_messages(c.parts.services.prompts, c.settings.answer_mode, q.question, ctx, c.settings.answer_prompt, d)
        for q, ctx, d in zip(b.questions, b.contexts, demos, strict=True)
    ]
    t0, wall0 = time.perf_counter(), time.time_ns()

    def on_answer(i: int, g: Generation) -> None:
        arrived[i] = (g, g.window(wall0, time.time_ns()))
        if c.stop.is_set():
            write(i, *arrived[i])

    try:
        gens = generator.generate(prompts, c.settings.sampling, on_result=on_answer, should_stop=c.stop.is_set)
    except BaseException as exc:
        for i in sorted(arrived):
            write(i, *arrived[i])
        if isinstance(exc, Cancelled):
            c.stop.check()  # Interrupted: nothing more was sent after the signal
        raise
    finally:
        clock.timings["generate_seconds"] += time.perf_counter() - t0
    wall1 = time.time_ns()
    for i, g in enumerate(gens):
        # a generator that returns its batch at once: every answer arrived with it
        write(i, g, arrived[i][1] if i in arrived else g.window(wall0, wall1))


def _counts(c: Components, clock: Clock, tally: Tally, services: Services) -> dict[str, float]:
    """What the run counted beside its scores: seconds per stage, per-subset facts, tokens, cache
    use and the method's own statistics."""
    metrics: dict[str, float] = dict(clock.timings)
    metrics.update(clock.extra)
    generator, embedder = services.generator, services.embedder
    if generator is not None:
        seconds = clock.timings["generate_seconds"]
        metrics.update({k: float(v) for k, v in tally.tokens.items()})
        metrics["llm_calls"] = float(generator.calls)
        metrics["questions_per_second"] = tally.generated / seconds if seconds > 0 else 0.0
        if generator.gpus:  # a remote server's GPUs are not the run's
            metrics["gpu_seconds"] = seconds * generator.gpus
    if embedder is not None:
        metrics["embeddings_computed"] = float(embedder.computed)
    metrics.update(c.parts.method.stats())
    return metrics


def _contexts(c: Components, q: Question, hits, index) -> list[str]:
    """What the generator reads for ``q``: the method's contexts (those of its top hits, in rank
    order) as ``context`` shapes them, each headed by its report when ``context.header`` asks."""
    texts = c.parts.method.contexts(q, hits, index, c.settings.k)
    if c.settings.context.header == "none" or index is None or not texts:
        return c.settings.context.all(q.question, texts)
    sources = [index.docs[cid] for cid, _ in (hits or [])[: len(texts)]]
    return c.settings.context.all(q.question, texts, [heading(d) for d in sources])
