"""The generator as a pointwise reranker (reranker=generator_pointwise): grades parsed from the
replies, the first stage's order kept for equal grades, a missing generator refused up front."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers.app import compose_cfg
from t2exp import config
from t2exp.answering.prompts import PromptLibrary
from t2exp.errors import ConfigError
from t2exp.generators import Generation
from t2exp.infra.paths import resource_dir
from t2exp.rerankers.generator_pointwise import GeneratorReranker, parse_grade


class Grader:
    """Replies with the grade written in the document (``grade=N``), or nonsense."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompts, sampling, **_):
        out = []
        for p in prompts:
            text = p[0]["content"]
            self.prompts.append(text)
            out.append(Generation(text=text.split("grade=")[1][:2].strip() if "grade=" in text else "no idea"))
        assert sampling.max_tokens == 4 and sampling.temperature == 0.0
        return out


def test_parse_grade():
    assert [parse_grade(t) for t in ("7", " 10.", "Grade: 3/10", "none", "")] == [7.0, 10.0, 3.0, -1.0, -1.0]


def test_grades_rank_the_candidates_and_ties_keep_the_first_stage_order():
    from t2exp.methods.reranker import Rerank

    rr = GeneratorReranker(max_chars=40)
    grader = Grader()
    rr.bind_generator(grader, PromptLibrary(resource_dir("prompts")))
    docs = {"a": "doc a grade=2", "b": "doc b grade=9", "c": "doc c, no grade here", "d": "doc d grade=9"}
    assert rr.score("q?", list(docs.values())) == [2.0, 9.0, -1.0, 9.0]
    assert "Question: q?" in grader.prompts[0] and "doc a grade=2" in grader.prompts[0]
    assert rr.stats()["unreadable_grades"] == 1.0
    method = Rerank(rr, first_stage="hybrid", candidates=4)
    method.first = SimpleNamespace(retrieve=lambda qs, index, n: [[("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)]])
    index = SimpleNamespace(docs={c: SimpleNamespace(text=t) for c, t in docs.items()})
    (ranked,) = method.retrieve([SimpleNamespace(question="q?", metadata={})], index, 3)
    assert [c for c, _ in ranked] == ["b", "d", "a"]  # 9, 9 (b before d: the first stage's order), 2


def test_a_generator_reranker_needs_a_generator():
    with pytest.raises(ConfigError, match="reranker=generator_pointwise grades candidates with it"):
        config.check(compose_cfg("rag_method=reranker", "reranker=generator_pointwise", "generator=none"))
    config.check(compose_cfg("rag_method=reranker", "reranker=generator_pointwise"))
