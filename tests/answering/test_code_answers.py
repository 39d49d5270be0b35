"""The ``code`` answer mode: straight-line Python programs with named inputs (safe_exec)."""

from __future__ import annotations

import pytest

from t2exp.answering.answer_choice import choose
from t2exp.answering.answers import MODE_STOPS, MODES, parse_answer
from t2exp.answering.safe_eval import UnsafeProgram
from t2exp.answering.safe_exec import program_literals, safe_exec

REPLY = """```python
# from the table (in millions)
net_sales_2019 = 1,250
net_sales_2018 = $1,000
answer = (net_sales_2019 - net_sales_2018) / net_sales_2018 * 100
```"""


def test_code_is_an_answer_mode_that_stops_at_the_closing_fence():
    assert "code" in MODES
    assert MODE_STOPS["code"] == ("\n```\n",)  # not "\n```": the prompt ends in a newline and transformers matches stops across it


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("a = 5\nb = 2\nanswer = a / b", 2.5),
        ("a = 5\nb = 2\na / b", 2.5),  # a final bare expression
        ("a = 5\nb = 2\nratio = a / b\nprint(ratio)", 2.5),  # a final print()
        ("a = 5\nb = 2\nratio = a * b", 10.0),  # the last assignment
        ("answer = 3\nx = 7", 3.0),  # `answer` wins over the last assignment
        ("rate = 12.5%", 12.5),
        ("total = 1,234.5 + 10", 1244.5),
        ("values = 1\nans = round(values / 3, 2)", 0.33),
        ("x = 4  # a comment\n\nanswer = x ** 2", 16.0),
        # which-year questions: a comparison picks the year, as a number or a numeric string
        ("s19 = 96168\ns18 = 70774\nif s19 > s18:\n    answer = '2019'\nelse:\n    answer = '2018'", 2019.0),
        ("s19 = 1\ns18 = 2\nif s19 > s18:\n    answer = 2019\nelif s18 >= 2 and not s19 > 5:\n    answer = 2018", 2018.0),
        ("a = 3.1\nb = 2.4\nanswer = 2019 if a > b else 2018", 2019.0),
        ("a = 3\nif 1 < a < 2:\n    answer = 1\nelse:\n    pass", 3.0),  # no branch assigned: the last assignment
        # yes/no questions: a comparison is 1 or 0
        ("ball = 115.36\ndow = 119.63\nanswer = ball > dow", 0.0),
        ("a = 2\nanswer = a > 1 and not a > 5", 1.0),
        # counting with += in one loop over a written-out list or a range, a print before the end ignored
        ("n = 0\nfor v in [5753, 5268, 4781]:\n    if v > 5000:\n        n += 1\nprint(n)", 2.0),
        ("t = 0\nfor i in range(1, 4):\n    t += i\nanswer = t", 6.0),
        ("x = 10\nx -= 4\nx /= 2", 3.0),
        ("a = 1\nprint(a)\nb = 2", 2.0),
        ("p = 49 / 136 * 100\nprint(f'Share: {p:.2f}%')", 49 / 136 * 100),  # an f-string showing one value
        ("a = 100\n b = 180.5\nanswer = (b - a) / a", 0.805),  # a stray indent in a program without blocks
        # counting and totals as one comprehension inside sum/len/min/max
        ("a = 3901\nb = 2321\nc = 2821\nyears = sum(1 for f in [a, b, c] if f > 3000)", 1.0),
        ("n = len([v for v in range(2017, 2020) if v > 2017])", 2.0),
        ("m = max(x / 2 for x in [4, 8])", 4.0),
        # assigned names that are not identifiers are joined with _ where they are written
        ("s&p_500_2017 = 208.1\nciti_2017 = 230.9\nr = citi_2017 / s&p_500_2017", 230.9 / 208.1),
        ("total_long-lived_assets = 50\ntotal purchase = 200\nanswer = total_long-lived_assets / total purchase", 0.25),
    ],
)
def test_safe_exec_values(source, value):
    assert safe_exec(source) == pytest.approx(value)


@pytest.mark.parametrize(
    "source",
    [
        "import os",
        "a = b + 1",
        "x.y = 3",
        "a = open('f')",
        "a, b = 1, 2",
        "a = 1 / 0",
        "",
        "def f():\n    return 1",
        "a = 1\nwhile True:\n    a = 2",
        "answer = 'not a number'",
        "if x > 1:\n    answer = 2",
        "a = [1, 2]",
        "n += 1",
        "for i in range(101):\n    x = i",  # more than MAX_ITEMS: run time stays bounded
        "for i in range(3):\n    for j in range(3):\n        x = j",  # nested loops
        "for i in range(0.5, 3):\n    x = i",
        "for k in {1: 2}:\n    x = k",
        "for i in [1, 2]:\n    x = i\nelse:\n    x = 0",
        "a = 1\nb = 2\nprint(f'{a} and {b}')",  # which of two shown values is the answer is unknown
        "n = sum(x * y for x in [1, 2] for y in [3])",
        "n = sum(sum(y for y in [x]) for x in [1, 2])",  # one for, not nested
        "n = sum(1 for i in range(101))",
        "n = [x for x in [1, 2]]",  # bounded; a comprehension only as an argument
        "a-b = 2\nc = d-e",  # a repaired name must still be assigned before use
        "a = 1\n b = 2\nif a > b:\n    answer = a",
    ],  # with a block, indentation means something
)
def test_safe_exec_refuses_everything_but_bounded_arithmetic(source):
    with pytest.raises(UnsafeProgram):
        safe_exec(source)


def test_safe_exec_errors_name_the_cause_once():
    with pytest.raises(UnsafeProgram, match=r"^name 'b' is used before it is assigned$"):
        safe_exec("a = b + 1")


def test_program_literals_of_a_code_block_are_its_inputs():
    assert program_literals(REPLY) == [1250.0, 1000.0, 100.0]
    assert program_literals("s&p_500 = 208.1\nr = 2 / s&p_500") == [208.1, 2.0]  # the 500 of a repaired name is no input


def test_code_reply_is_run_and_recorded_as_the_program():
    parsed = parse_answer("code", "Here is the program:\n" + REPLY + "\nIt computes the change.")
    assert parsed.value == pytest.approx(25.0)
    assert parsed.program is not None and parsed.program.startswith("# from the table")
    assert parsed.text == parsed.program


def test_code_reply_cut_at_the_closing_fence_still_runs():
    # the stop string removes the closing fence (OpenAI-compatible servers drop it)
    assert parse_answer("code", REPLY.rsplit("\n```", 1)[0]).value == pytest.approx(25.0)


def test_code_reply_that_does_not_run_is_read_as_a_program_answer():
    parsed = parse_answer("code", "Program: (1250 - 1000) / 1000 * 100")
    assert parsed.value == pytest.approx(25.0)
    broken = parse_answer("code", "```python\nanswer = revenue / 2\n```")  # its 2 is an input, not an answer
    assert broken.value is None and "revenue" in str(broken.program_error)


def test_grounding_checks_the_code_inputs_against_the_evidence():
    evidence = ["| | 2019 | 2018 |\n| net sales | 1,250 | 1,000 |"]
    made_up = REPLY.replace("1,000", "1,100")
    grounded = choose("code", [REPLY], evidence, grounding="check")
    assert grounded.fields["grounded"] is True
    assert choose("code", [made_up], evidence, grounding="check").fields["grounded"] is False


# --- model output that must not crash a run (nor its resume: the answer is in the LLM cache) ---
HUGE = "1" + "0" * 400
HOSTILE = [
    f"```python\nprint({HUGE})\nanswer = 5\n```",  # an unused 400-digit literal: float(int) overflows
    f"Program: {HUGE} - 1",
    '{"reasoning_steps": [], "final_formula": "' + HUGE + ' / 2", "computed_formula": "5"}',
    "The answer is 42. \ud800",  # a lone surrogate: ast.parse and the writer failed on it
    "```python\nanswer = 42 \ud800\n```",
    "Program: 42 \x00",  # a null byte
    "Final answer: 1e999",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("text", HOSTILE)
def test_no_model_output_crashes_parsing_or_the_answer_choice(mode, text):
    from t2exp.generators import Generation

    parsed = parse_answer(mode, Generation(text).text)
    assert parsed.value is None or parsed.value == parsed.value
    for grounding in ("check", "prefer"):
        choose(mode, [text, text], ["revenue was 42 in 2019 and 5 in 2018"], grounding=grounding)


def test_a_generation_is_valid_utf8_before_it_is_cached_or_written():
    import json

    from t2exp.generators import Generation

    g = Generation("The answer is 42. \ud800", extra={"reasoning": "so \udfff"})
    g.text.encode("utf-8"), g.extra["reasoning"].encode("utf-8")  # no UnicodeEncodeError
    assert g.text == "The answer is 42. \ufffd" and json.loads(json.dumps(g.text, ensure_ascii=False)) == g.text
    assert Generation("plain €").text == "plain €"


def test_program_literals_of_a_huge_integer_are_no_evidence_number():
    assert sorted(program_literals(f"answer = {HUGE} * 0 + 5")) == [0.0, 5.0, float("inf")]


def test_a_comprehension_in_a_condition_is_refused_not_run():
    """A comprehension nested in another's ``ifs`` (100^4 steps here, more with each level) is
    refused as nested comprehensions, not run; so is one nested in what a comprehension runs over."""
    deep = (
        "answer = sum(1 for z3 in range(100) if sum(1 for z2 in range(100) if sum(1 for z1 in range(100) "
        "if sum(1 for z0 in range(100)) > 0) > 0) > 0)"
    )
    with pytest.raises(UnsafeProgram, match="nested comprehensions"):
        safe_exec(deep)
    with pytest.raises(UnsafeProgram, match="nested comprehensions"):
        safe_exec("answer = sum(1 for x in [sum(1 for y in range(3))])")  # nor in what it runs over
    assert safe_exec("answer = sum(1 for x in [1, 5, 9] if x > 3)") == 2.0


def test_a_long_program_is_refused_before_the_name_repair():
    """The repair of non-identifier names is quadratic; a source over the bound is refused first."""
    from t2exp.answering import safe_exec as module

    calls = []
    real = module._repair_names
    module._repair_names = lambda s: calls.append(1) or real(s)
    try:
        with pytest.raises(UnsafeProgram, match="too long"):
            safe_exec("total purchase consideration = 5\n" * 10_000)
    finally:
        module._repair_names = real
    assert calls == []


def test_one_budget_of_steps_bounds_every_loop_and_comprehension_of_a_program():
    """A comprehension inside a loop runs its items once per pass (100 x 100 x 6 here); the items of
    every loop and comprehension count against one budget, MAX_STEPS, whatever their place."""
    from t2exp.answering.safe_eval import MAX_STEPS

    per_pass = " + ".join(["sum(x for x in range(100))"] * 6)
    with pytest.raises(UnsafeProgram, match=f"^the loops and comprehensions of the program run over more than {MAX_STEPS} items$"):
        safe_exec(f"t = 0\nfor i in range(100):\n    t += {per_pass}\nanswer = t")
    within = f"n = 0\nfor i in range(100):\n    n += sum(1 for x in [1, 1])\nanswer = n + len([v for v in range({MAX_STEPS - 300})])"
    assert safe_exec(within) == 200.0  # 100 + 100 x 2 + (MAX_STEPS - 300): the whole budget
    with pytest.raises(UnsafeProgram, match="more than"):
        safe_exec(within.replace(f"range({MAX_STEPS - 300})", f"range({MAX_STEPS - 299})"))  # one item more


@pytest.mark.parametrize(
    "source",
    [
        "if False:\n    import os\nanswer = 1",
        "a = 1\nif a > 2:\n    import os\nanswer = a",
        "a = 1\nif a < 2:\n    answer = 2\nelse:\n    while a:\n        a = 0",
        "for i in [1]:\n    if i > 5:\n        for j in [1]:\n            x = j\nanswer = 1",
    ],
)
def test_every_statement_is_checked_before_any_runs_also_in_a_branch_not_taken(source):
    with pytest.raises(UnsafeProgram, match="(Import|While) statement is not allowed|nested loops are not allowed"):
        safe_exec(source)
