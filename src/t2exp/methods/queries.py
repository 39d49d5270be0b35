"""The retrieval query: the one string per question that the embedder, BM25 and a reranker see.

``query.template`` fills in the question and its metadata (``{question}``, ``{company_name}``,
``{report_year}``, ...; the T²-RAGBench authors' FinQA queries are ``"{company_name} : {question}"``);
``query.instruction``, when set, wraps the result (``"Instruct: ...\\nQuery: {query}"``), for every
retriever alike. Embedders may add their own ``embedder.query_template`` on top (E5/GTE/Stella
instructions); set it to ``"{text}"`` when ``query.instruction`` already carries one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from t2exp.data.records import Question
from t2exp.errors import DataError


class _Fields(dict):
    def __missing__(self, key: str) -> str:
        raise KeyError(key)


@dataclass(frozen=True)
class QueryBuilder:
    # the defaults of query.* in the schema (QueryConfig); tests/config/test_defaults.py holds them equal
    template: str = "{question}"
    instruction: str | None = None

    def __call__(self, q: Question) -> str:
        fields = _Fields({k: "" if v is None else str(v) for k, v in q.metadata.items()})
        fields["question"] = q.question
        try:
            text = self.template.format_map(fields)
        except KeyError as exc:
            raise DataError(
                f"query.template={self.template!r} is invalid for question {q.id}: it has no field {exc.args[0]!r}; "
                f"allowed: {{question}} or one of {', '.join('{' + k + '}' for k in sorted(q.metadata))}"
            ) from None
        return self.instruction.replace("{query}", text) if self.instruction else text

    def texts(self, questions: Sequence[Question]) -> list[str]:
        return [self(q) for q in questions]
