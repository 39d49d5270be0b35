"""answer_mode=json (the authors' answer format): parsing valid and broken answers, the value read
with bare float(), and the schema sent as structured output over the OpenAI wire protocol."""

from __future__ import annotations

import json

import pytest

from fakes.openai_server import FakeOpenAIServer
from t2exp.answering.answers import ANSWER_SCHEMA, MODES, parse_answer

VALID = json.dumps(
    {"reasoning_steps": ["rev 2019 = 120", "rev 2018 = 100"], "final_formula": "(120 - 100) / 100 * 100", "computed_formula": "20.0"}
)


def test_json_is_an_answer_mode():
    assert "json" in MODES


def test_valid_answer():
    a = parse_answer("json", VALID)
    assert a.value == 20.0 and a.program == "(120 - 100) / 100 * 100"
    assert a.fields["json_valid"] is True and a.fields["final_formula_value"] == pytest.approx(20.0)
    assert a.fields["computed_formula"] == "20.0" and a.fields["reasoning_steps"] == ["rev 2019 = 120", "rev 2018 = 100"]


@pytest.mark.parametrize(
    "text",
    [
        "Here it is:\n```json\n" + VALID + "\n```",  # inside prose and a code fence
        "<think>let me see {not json}</think>" + VALID,  # after a reasoning block
    ],
)
def test_the_first_json_object_is_read(text):
    assert parse_answer("json", text).value == 20.0


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("20.0", "no JSON object"),
        ('{"reasoning_steps": [], "final_formula": "1+1"', "no JSON object"),  # truncated
        ('{"reasoning_steps": [], "final_formula": "1+1"}', "missing computed_formula"),
    ],
)
def test_broken_answers_score_nothing(text, why):
    a = parse_answer("json", text)
    assert a.value is None and a.fields["json_valid"] is False and why in a.program_error


@pytest.mark.parametrize(
    ("computed", "value"),
    [
        ("20.0", 20.0),
        (" -3.5 ", -3.5),
        ("1e3", 1000.0),
        ("20%", None),
        ("$1,234", None),
        ("twenty", None),
        ("nan", None),
        ("inf", None),  # the authors' bare float()
    ],
)
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


# --- a runaway reply is no answer, never a crash ---------------------------------------------------

RUNAWAY = {
    "brackets": '{"final_answer": ' + "[" * 1200,  # RecursionError in Python's JSON reader
    "long integer": '{"reasoning_steps": [], "final_formula": "1", "computed_formula": ' + "9" * 5000 + "}",  # int string limit
    "braces": "{" * 200_000,  # seconds of failed reads, one per brace
    "overflowing integer": '{"reasoning_steps": [], "final_formula": "1", "computed_formula": ' + "9" * 4000 + "}",  # float() overflows
}


@pytest.mark.parametrize("name", list(RUNAWAY))
def test_a_runaway_reply_is_a_question_without_a_number(name):
    from t2exp.answering.answer_choice import choose

    a = choose("json", [RUNAWAY[name]], ["revenue 120"], "check")
    assert a.value is None and a.fields.get("json_valid") in (False, True)
    assert a.program_error is None or a.program_error.startswith("invalid JSON answer")


def test_the_bounds_name_themselves_and_keep_an_answer_before_a_ramble():
    from t2exp.answering.answers import MAX_JSON_CHARS, MAX_JSON_DEPTH

    a = parse_answer("json", RUNAWAY["brackets"])
    assert f"nested at most {MAX_JSON_DEPTH} deep (it nests 1201 deep)" in a.program_error
    assert f"in its first {MAX_JSON_CHARS} characters" in parse_answer("json", "{]" * MAX_JSON_CHARS).program_error
    # a valid answer, then junk until max_tokens (no constrained decoding): the answer is read;
    # brackets inside its strings are not nesting
    steps = ['a [ { b \\" ['] * 30
    text = json.dumps({"reasoning_steps": steps, "final_formula": "1", "computed_formula": "3"}) + " [" * 30_000
    assert parse_answer("json", text).value == 3.0

    def steps_nested(depth: int) -> str:  # the answer object, its reasoning_steps nesting ``depth`` deep in all
        return (
            json.dumps({"reasoning_steps": "[" * (depth - 1) + "]" * (depth - 1), "final_formula": "1", "computed_formula": "4"})
            .replace('"[', "[")
            .replace(']"', "]")
        )

    assert parse_answer("json", steps_nested(MAX_JSON_DEPTH)).value == 4.0
    assert "no JSON object nested at most" in parse_answer("json", steps_nested(MAX_JSON_DEPTH + 1)).program_error


@pytest.mark.slow
def test_a_runaway_reply_is_nm_zero_in_a_run_and_in_its_rerun_from_the_llm_cache(tmp_path):
    """End to end over the OpenAI wire protocol: the runaway reply is cached like any other; the run
    and a second run reading it from the LLM cache both finish, the question counted wrong."""
    from helpers.app import run_app
    from helpers.tracking import mlflow_runs

    args = [
        "generator=openai_compat",
        "generator.model=m",
        "generator.answer_mode=json",
        "generator.max_retries=0",
        "rag_method=oracle",
        "dataset=finqa",
        "dataset.limit=2",
    ]
    with FakeOpenAIServer(model="m", reply=lambda messages: RUNAWAY["brackets"]) as srv:
        for attempt in (1, 2):
            proc = run_app([*args, f"generator.base_url={srv.base_url}"], tmp_path / "cache", tmp_path, check=False)
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert len(srv.requests) == 2, attempt  # the rerun asked nothing: it read the cached replies
    client, runs = mlflow_runs(tmp_path)
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    for run in runs:
        path = client.download_artifacts(run.info.run_id, "predictions.jsonl", str(tmp_path / run.info.run_id))
        rows = [json.loads(line) for line in open(path, encoding="utf-8")]
        assert run.data.metrics["FinQA/nm"] == 0.0
        assert [(r["nm"], r["prediction"], r["json_valid"]) for r in rows] == [(0.0, None, False)] * 2
