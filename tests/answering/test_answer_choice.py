"""Choosing the answer: program grounding against the evidence and self-consistency voting."""

from __future__ import annotations

import pytest

from t2exp.answering.answer_choice import choose, evidence_numbers, is_grounded
from t2exp.answering.safe_exec import program_literals
from t2exp.errors import ConfigError
from t2exp.generators import Sampling

EVIDENCE = ["| | 2019 | 2018 |\n| net sales | $1,250.5 | 1,000 |\n| margin | (12.3)% | 11.0% |", "Cash used was $310.2 million in 2020."]


def test_program_literals_read_numbers_as_safe_eval_does():
    assert sorted(program_literals("(1,250.5 - 1000) / 1000 * 100")) == [100.0, 1000.0, 1000.0, 1250.5]
    assert sorted(program_literals("-12.3% + $5")) == [5.0, 12.3]
    assert program_literals("revenue - 3") == [3.0] and program_literals("(((") == []


def test_evidence_numbers_drop_separators_signs_and_units():
    nums = evidence_numbers(EVIDENCE)
    assert {1250.5, 1000.0, 12.3, 11.0, 310.2, 2019.0, 2020.0} <= nums


@pytest.mark.parametrize(
    "program, grounded",
    [
        ("(1250.5 - 1000) / 1000 * 100", True),  # evidence numbers and the percent constant
        ("12.3 - 11.0", True),
        ("0.123 * 100", True),  # 12.3 % written as a fraction
        ("310.2 / 3", True),  # an average over three years
        ("1250 - 1000", False),  # 1,250.5 rounded: not copied
        ("4567 / 1000", False),  # a made-up number
        ("100", True),
        ("abc", False),  # no literal at all
    ],
)
def test_grounding_known_answers(program, grounded):
    assert is_grounded(program, evidence_numbers(EVIDENCE)) is grounded


def test_single_answer_is_parsed_and_its_grounding_recorded():
    a = choose("program", ["Program: (1250.5 - 1000) / 1000 * 100"], EVIDENCE, "check")
    assert a.value == pytest.approx(25.05) and a.fields["grounded"] is True
    assert "candidates" not in a.fields  # no samples, no vote fields
    assert "grounded" not in choose("program", ["Program: 1"], EVIDENCE, "off").fields
    with pytest.raises(ConfigError, match="generator.grounding='maybe'"):
        choose("program", ["Program: 1"], EVIDENCE, "maybe")


def test_majority_wins_by_number_match_and_ties_go_to_the_main_answer():
    texts = ["Program: 1250.5 - 1000", "Program: 12.3 - 11.0", "Program: (12.3 - 11.0)", "Program: 1.3", "Program: x"]
    a = choose("program", texts, EVIDENCE, "off")
    assert a.value == pytest.approx(1.3) and a.program == "12.3 - 11.0"  # three candidates agree (NM), the earliest of them
    assert a.fields["candidates"] == 4 and a.fields["vote_share"] == 0.75
    assert a.fields["sample_answers"][0] == "1250.5 - 1000"
    tie = choose("program", ["Program: 1250.5 - 1000", "Program: 12.3 - 11.0"], EVIDENCE, "off")
    assert tie.value == pytest.approx(250.5)


def test_prefer_lets_only_grounded_programs_vote():
    texts = ["Program: 4567 / 1000", "Program: 4567 / 1000", "Program: 310.2 / 3"]
    assert choose("program", texts, EVIDENCE, "check").value == pytest.approx(4.567)  # recorded, not used
    chosen = choose("program", texts, EVIDENCE, "prefer")
    assert chosen.value == pytest.approx(103.4) and chosen.fields["grounded"] is True
    # nothing grounded: every candidate votes
    assert choose("program", texts[:2], EVIDENCE, "prefer").value == pytest.approx(4.567)


def test_samples_change_the_llm_cache_key_only_when_drawn():
    assert Sampling().as_dict() == Sampling(samples=1, sample_temperature=0.3).as_dict()
    assert "samples" not in Sampling().as_dict()
    assert Sampling(samples=5).as_dict()["samples"] == 5
    assert Sampling(samples=5).as_dict() != Sampling(samples=5, sample_temperature=0.3).as_dict()


def test_a_runaway_candidate_does_not_vote_while_another_has_a_value():
    runaway = "Program: 0." + "0" * 60
    a = choose("program", [runaway, runaway, "Program: 310.2 / 3"], EVIDENCE, "off")
    assert a.value == pytest.approx(103.4) and a.fields["vote_share"] == 1.0
    assert choose("program", [runaway], EVIDENCE, "off").value == 0.0  # alone, it is still the answer


@pytest.mark.parametrize(
    "text, value, program",
    [
        ("(79.96 - 100) / 100 * 100", -20.04, "(79.96 - 100) / 100 * 100"),  # a bare expression: the program
        ("(27 + 24 + 20)\n\nThis adds the three years.", 71.0, "(27 + 24 + 20)"),
        ("Program: 3 + 4\n(1 + 1)", 7.0, "3 + 4"),  # the marker wins over the first line
        ("The total is 5 million.", 5e6, None),  # prose: the number in the text
    ],
)
def test_program_mode_reads_a_bare_expression_reply(text, value, program):
    from t2exp.answering.answers import parse_answer

    a = parse_answer("program", text)
    assert a.value == pytest.approx(value) and a.program == program
