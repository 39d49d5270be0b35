"""Seeded samples of a loaded subset: a sample of its questions (``dataset.limit``) and a
subsample of its corpus with the questions whose gold document it keeps (``dataset.corpus_size``)."""

from __future__ import annotations

import random
from dataclasses import replace

from t2exp.data.records import Question, Subset


def sample_questions(questions: list[Question], limit: int | None, seed: int) -> list[Question]:
    """A seeded sample of ``limit`` questions (order kept); the corpus is not touched."""
    if not limit or limit >= len(questions):
        return questions
    rng = random.Random(seed)
    keep = set(rng.sample(range(len(questions)), limit))
    return [q for i, q in enumerate(questions) if i in keep]


def subsample_corpus(subset: Subset, size: int | None, seed: int) -> Subset:
    """Keep a seeded subsample of ``size`` documents and the questions whose gold is in it.

    Subsamples are nested: for one seed, the documents of a smaller size are a prefix of the
    same permutation, so they are contained in every larger one (corpus-size curves).
    """
    if not size or size >= len(subset.corpus):
        return subset
    order = sorted(subset.corpus, key=lambda d: d.context_id)
    random.Random(f"corpus:{seed}").shuffle(order)
    keep = order[:size]
    ids = {d.context_id for d in keep}
    questions = [q for q in subset.questions if q.context_id in ids]
    return replace(subset, questions=questions, corpus=keep, stats=dict(subset.stats, corpus_subsampled_from=len(subset.corpus)))
