"""A run's predictions: one row per question, written by :class:`PredictionWriter` the moment it
exists (a resumed run reads them back and asks nothing twice), and the leaderboard file."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from t2exp.answering import answer_choice
from t2exp.data.records import Question, Subset
from t2exp.evaluation.metrics import DEGENERATE, NM_METRICS, RECALL_KS, question_metrics
from t2exp.evaluation.scoring.cell_rows import Prediction
from t2exp.generators import Generation
from t2exp.infra.cache import JsonlLog, atomic_write_text, jsonl_line
from t2exp.infra.progress import Stage, stage
from t2exp.methods import Ranking
from t2exp.pipeline.stop import StopRequest

log = logging.getLogger("t2exp.pipeline.steps")


Span = tuple[int, int]  # (start, end) in ns since the epoch


@dataclass
class Tally:
    """What a writer counts as it writes: the generator's tokens and answers, and each question's
    stage times."""

    tokens: dict[str, float] = field(
        default_factory=lambda: {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "reasoning_tokens": 0,
            "truncated_generations": 0,
            "model_seconds": 0.0,
        }
    )
    generated: int = 0
    # question id -> stage (retrieve, generate, score) -> (start, end) in ns since the epoch: the
    # real times of each question's stages, which its MLflow trace shows (a batch's window for
    # the questions it held; a generation ends when its answer arrived)
    spans: dict[str, dict[str, Span]] = field(default_factory=dict)

    def answer(self, g: Generation) -> None:
        self.generated += 1
        if not g.cached:
            self.tokens["model_seconds"] += g.seconds
        self.tokens["prompt_tokens"] += g.prompt_tokens
        self.tokens["completion_tokens"] += g.completion_tokens
        self.tokens["reasoning_tokens"] += int(g.extra.get("reasoning_tokens", 0) or 0)
        self.tokens["truncated_generations"] += int(g.finish_reason == "length")


@dataclass
class Written:
    """What a writer hands back when the run is done: every row in the run's question order, and
    what it counted (:class:`Tally`)."""

    rows: list[Prediction]
    tally: Tally


class PredictionWriter:
    """Writes each question's row once (:func:`prediction_of`) to ``predictions.jsonl``: in question
    order normally, as answers arrive when the run is stopping or a request failed. The rows
    already in the file (a resumed run) count as written. It counts what it writes (its
    :class:`Tally`) and advances the generate stage's progress bar (:meth:`progress`)."""

    def __init__(self, path: Path, stop: StopRequest, *, answer_mode: str, grounding: str, k: int) -> None:
        self.log = JsonlLog(path)
        self.path = self.log.path
        self.done = {str(r["id"]): Prediction.from_json(r) for r in self.log.read()}
        if self.done:
            log.info("resuming: %d predictions already in %s", len(self.done), self.log.path)
        self.stop = stop
        self.answer_mode, self.grounding, self.k = answer_mode, grounding, k
        self._tally = Tally()
        self._bar: Stage | None = None  # the generate stage's progress, while one is shown

    def todo(self, subsets: Sequence[Subset]) -> dict[str, list[Question]]:
        """Each subset's questions still to answer (none written yet)."""
        return {s.name: [q for q in s.questions if q.id not in self.done] for s in subsets}

    @contextmanager
    def progress(self, title: str, total: int) -> Iterator[None]:
        """Show the generate stage's progress while the block runs: one step per answer written."""
        with stage(title, total, "answer") as bar:
            self._bar = bar
            try:
                yield
            finally:
                self._bar = None

    def write(self, q: Question, hits, contexts: list[str], gen: Generation | None, spans: Mapping[str, Span] | None = None) -> None:
        """``q``'s row, unless written already; ``spans``: its retrieve and generate windows."""
        if q.id in self.done:
            return
        t0 = time.time_ns()
        row = prediction_of(q, hits, contexts, gen, self.answer_mode, self.grounding, self.k)
        self._tally.spans[q.id] = {**(spans or {}), "score": (t0, time.time_ns())}
        if gen is not None:
            self._tally.answer(gen)
            if self._bar is not None:
                self._bar.advance()
                if gen.cached:
                    self._bar.tally("from the LLM cache")
        with self.stop.atomic():  # a second Ctrl-C between the two wrote the answer twice
            self.log.write(row.to_json())
            self.done[q.id] = row

    def finish(self, subsets: Sequence[Subset], leaderboard: Path) -> Written:
        """Every question's row in the run's question order (the file rewritten in it when answers
        were written out of order: a stop, then a resume) and the ``leaderboard`` file."""
        rows = [self.done[q.id] for s in subsets for q in s.questions]
        if list(self.done) != [r.id for r in rows]:
            write_predictions(rows, self.path)
        write_leaderboard(rows, leaderboard)
        return Written(rows=rows, tally=self._tally)


def prediction_of(q: Question, hits, contexts: list[str], gen: Generation | None, answer_mode: str, grounding: str, k: int) -> Prediction:
    """The prediction of ``q``, its per-question metrics computed once."""
    ranked = None if hits is None else [cid for cid, _ in hits]
    parsed = None if gen is None else answer_choice.choose(answer_mode, [gen.text, *gen.extra.get("samples", [])], contexts, grounding)
    ranking = None if hits is None else Ranking.of(hits)
    dense, depth = (None, None) if ranking is None else (_dense_of(ranking), ranking.depth)
    pred, text = (parsed.value, parsed.text) if parsed else (None, None)
    m = question_metrics(ranked, q.context_id, k, pred, q.gold, pred_text=text, dense=dense, ranked_depth=depth)
    if gen is None:
        m.update(dict.fromkeys((*NM_METRICS, DEGENERATE)))
    return Prediction(
        id=q.id,
        subset=q.subset,
        split=q.split,
        context_id=q.context_id,
        question=q.question,
        retrieved=ranked,
        scores=None if hits is None else [round(s, 6) for _, s in hits],
        retrieved_dense=dense,
        ranked_depth=depth if depth is not None and depth < max(RECALL_KS) else None,
        n_contexts=len(contexts),
        generation=None if gen is None else gen.text,
        program=parsed.program if parsed else None,
        program_error=parsed.program_error if parsed else None,
        fields=dict(parsed.fields) if parsed else {},
        answer_text=text,
        prediction=pred,
        gold=q.gold,
        gold_raw=q.gold_raw,
        finish_reason=None if gen is None else gen.finish_reason,
        prompt_tokens=None if gen is None else gen.prompt_tokens,
        completion_tokens=None if gen is None else gen.completion_tokens,
        generate_seconds=None if gen is None else round(gen.seconds, 3),
        metrics=m,
    )


def _dense_of(hits: Ranking) -> list[float | None] | None:
    dense = hits.dense
    if not dense:
        return None
    return [None if cid not in dense else round(float(dense[cid]), 6) for cid, _ in hits]


def write_predictions(rows: Sequence[Prediction], path: Path) -> None:
    """``predictions.jsonl`` as a finished run leaves it: one line per question in the run's question
    order (subset by subset, each subset's sampled order), each line as :class:`PredictionWriter`
    wrote it. A run whose file ended up in another order (answers written as they arrived when it
    was stopped, then resumed) and the merge of a sharded cell both end with this file."""
    atomic_write_text(path, "".join(jsonl_line(r.to_json()) for r in rows))


def write_leaderboard(rows: Sequence[Prediction], path: Path) -> None:
    """The official submission format: id, subset, context_id, prediction (one JSON per line)."""
    lines = [
        json.dumps({"id": r.id, "subset": r.subset, "context_id": r.retrieved[0] if r.retrieved else None, "prediction": r.prediction})
        for r in rows
    ]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
