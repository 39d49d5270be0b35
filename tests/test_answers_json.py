"""answer_mode=json (the authors' answer format): parsing valid and broken answers, the value read
with bare float(), and the schema sent as structured output over the OpenAI wire protocol."""

from __future__ import annotations

import json

import pytest

from t2exp.answering.answers import ANSWER_SCHEMA, MODES, parse_answer

try:
    from tests.fakes.openai_server import FakeOpenAIServer
except ImportError:
    from fakes.openai_server import FakeOpenAIServer

VALID = json.dumps({"reasoning_steps": ["rev 2019 = 120", "rev 2018 = 100"], "final_formula": "(120 - 100) / 100 * 100",
                    "computed_formula": "20.0"})


def test_json_is_an_answer_mode():
    assert "json" in MODES


def test_valid_answer():
    a = parse_answer("json", VALID)
    assert a.value == 20.0 and a.program == "(120 - 100) / 100 * 100"
    assert a.fields["json_valid"] is True and a.fields["final_formula_value"] == pytest.approx(20.0)
    assert a.fields["computed_formula"] == "20.0" and a.fields["reasoning_steps"] == ["rev 2019 = 120", "rev 2018 = 100"]


@pytest.mark.parametrize("text", [
    "Here it is:\n```json\n" + VALID + "\n```",  # inside prose and a code fence
    "<think>let me see {not json}</think>" + VALID,  # after a reasoning block
])
def test_the_first_json_object_is_read(text):
    assert parse_answer("json", text).value == 20.0


@pytest.mark.parametrize(("text", "why"), [
    ("20.0", "no JSON object"),
    ('{"reasoning_steps": [], "final_formula": "1+1"', "no JSON object"),  # truncated
    ('{"reasoning_steps": [], "final_formula": "1+1"}', "missing computed_formula"),
])
def test_broken_answers_score_nothing(text, why):
    a = parse_answer("json", text)
    assert a.value is None and a.fields["json_valid"] is False and why in a.program_error


@pytest.mark.parametrize(("computed", "value"), [
    ("20.0", 20.0), (" -3.5 ", -3.5), ("1e3", 1000.0),
    ("20%", None), ("$1,234", None), ("twenty", None), ("nan", None), ("inf", None),  # the authors' bare float()
])
def test_computed_formula_is_read_with_bare_float(computed, value):
    text = json.dumps({"reasoning_steps": [], "final_formula": "", "computed_formula": computed})
    assert parse_answer("json", text).value == value


def test_final_formula_that_is_not_an_expression_is_kept_without_a_value():
    text = json.dumps({"reasoning_steps": [], "final_formula": "revenue growth", "computed_formula": "7"})
    a = parse_answer("json", text)
    assert a.value == 7.0 and a.fields["final_formula"] == "revenue growth" and a.fields["final_formula_value"] is None


def test_openai_compatible_generator_sends_the_schema_as_structured_output():
    from t2exp.generators import Sampling
    from t2exp.generators.openai_compat import OpenAICompatGenerator

    with FakeOpenAIServer(model="m", reply=lambda messages: VALID) as srv:
        gen = OpenAICompatGenerator("g", "m", base_url=srv.base_url, api_key="x", provider=None, max_retries=0)
        (out,) = gen.generate([[{"role": "user", "content": "q"}]], Sampling(max_tokens=64, json_schema=ANSWER_SCHEMA))
        plain = gen.generate([[{"role": "user", "content": "q"}]], Sampling(max_tokens=64))
    body, body_plain = srv.requests[0], srv.requests[1]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}}
    assert "response_format" not in body_plain and plain
    assert parse_answer("json", out.text).value == 20.0


def test_the_schema_is_part_of_the_llm_cache_key():
    from t2exp.generators import Sampling

    assert Sampling().as_dict() != Sampling(json_schema=ANSWER_SCHEMA).as_dict()
    assert "json_schema" not in Sampling().as_dict()  # keys of answers cached before stay valid
