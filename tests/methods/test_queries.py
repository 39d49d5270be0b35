"""The retrieval query string (query.template / query.instruction): known answers."""

from __future__ import annotations

import pytest

from helpers.app import compose_cfg
from t2exp import config
from t2exp.data.records import Question
from t2exp.errors import ConfigError, DataError
from t2exp.methods.queries import QueryBuilder

Q = Question(
    id="q1",
    subset="FinQA",
    split="dev",
    context_id="c1",
    question="What was the 2019 revenue?",
    gold=1.0,
    gold_raw="1.0",
    metadata={"company_name": "ACME Corp", "report_year": "2019"},
)
INSTRUCT = "Instruct: Given a question about a company, retrieve relevant passages that answer the query.\nQuery: {query}"


def test_default_is_the_bare_question():
    assert QueryBuilder()(Q) == "What was the 2019 revenue?"


def test_paper_template_and_instruction():
    assert QueryBuilder("{company_name} : {question}")(Q) == "ACME Corp : What was the 2019 revenue?"
    wrapped = QueryBuilder("{company_name} : {question}", INSTRUCT)(Q)
    assert wrapped == (
        "Instruct: Given a question about a company, retrieve relevant passages that answer the query.\n"
        "Query: ACME Corp : What was the 2019 revenue?"
    )


def test_a_field_the_question_lacks_is_one_line():
    with pytest.raises(DataError) as err:
        QueryBuilder("{ticker}: {question}")(Q)
    msg = str(err.value)
    assert "\n" not in msg and "query.template" in msg and "'ticker'" in msg and "{company_name}" in msg


def test_schema_checks_the_instruction_and_the_config_carries_it():
    with pytest.raises(ConfigError, match=r"query.instruction='no placeholder'.*\{query\}"):
        config.check(compose_cfg("query.instruction=no placeholder"))
    cfg = compose_cfg("query.template='{company_name} : {question}'")  # quoted: Hydra parses braces
    assert config.check(cfg).query.template == "{company_name} : {question}"
