"""Property tests (hypothesis): answer extraction, Number Match, the safe evaluator and the row
validator never fail in an unexpected way on arbitrary input.

Known defects in modules outside this suite's reach are pinned by ``xfail(strict=True)`` tests at
the end, so they turn into failures (and get noticed) once fixed.
"""

from __future__ import annotations

import math
import string

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from t2exp.answering.safe_eval import _FUNCS, UnsafeProgram, safe_eval
from t2exp.data.records import Subset
from t2exp.data.rows import METADATA_COLUMNS, REQUIRED_COLUMNS, rows_to_subset
from t2exp.errors import DataError
from t2exp.text.numbers import EPS, extract_number, number_match, parse_gold

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- extract_number -----------------------------------------------------------------------------------
NUMBERISH = "0123456789.,-+()$%€£¥ eEkKmMbBnt\\{}:<>/\n"
texts = (
    st.text(max_size=300)
    | st.text(alphabet=NUMBERISH, max_size=120)
    | st.lists(
        st.sampled_from(
            [
                "Final answer:",
                "\\boxed{",
                "}",
                "<think>",
                "</think>",
                "answer is",
                "(",
                ")",
                "%",
                "million",
                "bn",
                "$",
                "1,234",
                "-",
                ".5",
                "e9",
                "\n",
                " ",
                "12",
                "US$",
                "per cent",
            ]
        ),
        max_size=25,
    ).map("".join)
)


@FUZZ
@given(texts)
def test_extract_number_never_raises_and_is_finite(text):
    for v in (extract_number(text), parse_gold(text)):
        assert v is None or (isinstance(v, float) and math.isfinite(v))


@FUZZ
@given(st.one_of(st.none(), st.integers(), st.floats(), st.booleans(), st.binary(max_size=20), st.lists(st.integers(), max_size=3)))
def test_extract_number_accepts_non_text(value):
    v = extract_number(value)
    assert v is None or math.isfinite(v)


amounts = st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)
FORMATS = {
    "thousands": (lambda x: f"{x:,.2f}", lambda x: round(x, 2)),
    "negative": (lambda x: f"-{x:,.2f}", lambda x: -round(x, 2)),
    "percent": (lambda x: f"{x:.2f}%", lambda x: round(x, 2)),
    "parenthesised_percent": (lambda x: f"({x:.2f})%", lambda x: -round(x, 2)),
    "parenthesised_dollars": (lambda x: f"(${x:,.2f})", lambda x: -round(x, 2)),
    "dollars_million": (lambda x: f"${x:,.1f} million", lambda x: round(x, 1) * 1e6),
    "billion": (lambda x: f"{x:.1f} billion", lambda x: round(x, 1) * 1e9),
    "bn": (lambda x: f"{x:.1f}bn", lambda x: round(x, 1) * 1e9),
    "euro": (lambda x: f"€{x:,.2f}", lambda x: round(x, 2)),
    "exponent": (lambda x: f"{x:e}", lambda x: float(f"{x:e}")),
    "final_answer_line": (lambda x: f"We add 12 and 7.5.\nFinal answer: {x:,.3f}", lambda x: round(x, 3)),
    "boxed": (lambda x: f"so \\boxed{{{x:.2f}}} and 99 more", lambda x: round(x, 2)),
    "after_reasoning": (lambda x: f"<think>maybe 42 or 17</think>The answer is {x:,.2f}.", lambda x: round(x, 2)),
}


@pytest.mark.parametrize("fmt", list(FORMATS))
@FUZZ
@given(x=amounts)
def test_formatted_numbers_round_trip(fmt, x):
    render, expected = FORMATS[fmt]
    text = render(x)
    got = extract_number(text)
    assert got is not None and math.isclose(got, expected(x), rel_tol=1e-12, abs_tol=1e-12), (text, got)
    assert number_match(got, expected(x))


# --- number_match -------------------------------------------------------------------------------------
# magnitudes a report or a model writes; ratios beyond ~1e300 are pinned as a known defect below
values = st.floats(min_value=-1e15, max_value=1e15, allow_nan=False).filter(lambda v: v == 0 or abs(v) > 1e-12)


def _near_the_eps_edge(a: float, b: float) -> bool:
    """Where |q - 1| < eps is one-sided by definition: q just inside eps one way is just outside
    the other way (|1/q - 1| = |q - 1| / q)."""
    a, b = abs(a), abs(b)
    if a == 0 or b == 0 or (a < EPS and b < EPS):
        return False
    r = a / b
    q = r * 10.0 ** (-round(math.log10(r)))
    return abs(abs(q - 1) - EPS) < 3 * EPS * EPS or abs(abs(1 / q - 1) - EPS) < 3 * EPS * EPS


@FUZZ
@given(values, values)
def test_number_match_is_symmetric_where_the_definition_is(a, b):
    assume(not _near_the_eps_edge(a, b))
    assert number_match(a, b) == number_match(b, a)


@FUZZ
@given(values, values)
def test_number_match_ignores_signs(a, b):
    assert number_match(a, b) == number_match(-a, b) == number_match(a, -b)


@FUZZ
@given(st.floats(min_value=1e-6, max_value=1e9, allow_nan=False), st.integers(-8, 8))
def test_number_match_is_scale_invariant_by_powers_of_ten(x, k):
    y = x * 10.0**k
    assume(x >= EPS and y >= EPS)  # below eps both count as zero
    assert number_match(y, x) and number_match(x, y)


@FUZZ
@given(values, values, st.integers(-6, 6))
def test_rescaling_the_prediction_does_not_change_the_verdict(a, b, k):
    scaled = a * 10.0**k
    assume(abs(a) >= EPS and abs(scaled) >= EPS and abs(b) >= EPS)
    assume(not _near_the_eps_edge(a, b) and not _near_the_eps_edge(scaled, b))
    assert number_match(a, b) == number_match(scaled, b)


@FUZZ
@given(st.floats(min_value=EPS, max_value=1e12), st.floats(min_value=0.02, max_value=0.45))
def test_number_match_rejects_clear_misses(x, off):
    assert not number_match(x * (1 + off), x)
    assert number_match(x * (1 + EPS / 2), x)
    assert not number_match(None, x) and not number_match(x, None)


# --- safe_eval ----------------------------------------------------------------------------------------
PROGRAM_CHARS = string.digits + "+-*/()., eE_abcdefghijklmnopqrstuvwxyz[]{}:'\"=<>!&|^~@#\\\n\t;"


@FUZZ
@given(st.text(max_size=200) | st.text(alphabet=PROGRAM_CHARS, max_size=200))
def test_safe_eval_raises_only_unsafe_program(src):
    try:
        v = safe_eval(src)
    except UnsafeProgram:
        return
    assert isinstance(v, float) and math.isfinite(v)


numbers = st.integers(0, 10**6).map(str) | st.floats(min_value=0, max_value=1e6, allow_nan=False).map(repr)
arith = st.recursive(
    numbers,
    lambda sub: (
        st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "//"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
        | sub.map(lambda s: f"-{s}")
        | st.lists(sub, min_size=1, max_size=4).flatmap(
            lambda xs: st.sampled_from(["abs", "min", "max", "round"] if len(xs) == 1 else ["min", "max"]).map(
                lambda f: f"{f}({' , '.join(xs)})"
            )
        )
        | st.lists(sub, min_size=1, max_size=4).map(lambda xs: f"sum([{' , '.join(xs)}])")
    ),
    max_leaves=12,
)


@FUZZ
@given(arith)
def test_safe_eval_computes_what_python_computes(expr):
    # spaces around commas: "1,234" would read as a thousands separator (see the pinned defect below)
    try:
        expected = eval(expr, {"__builtins__": {}}, dict(_FUNCS))  # generated arithmetic only
    except (ZeroDivisionError, OverflowError, ValueError, TypeError):
        with pytest.raises(UnsafeProgram):
            safe_eval(expr)
        return
    assume(math.isfinite(float(expected)) and abs(float(expected)) < 1e300)
    assert math.isclose(safe_eval(expr), float(expected), rel_tol=1e-9, abs_tol=1e-9)


identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)


@FUZZ
@given(identifiers, identifiers)
def test_nothing_outside_the_whitelist_evaluates(name, attr):
    forbidden = [
        name,  # a bare name, even a whitelisted function's
        f"{name}.{attr}",
        f"(1).{attr}",
        f"abs.{attr}",
        f"abs(1).{attr}",
        f"{name}[0]",
        f"[x for x in {name}]",
        f"lambda: {name}",
        f"{name}.{attr}(1)",
        f"abs(1, key={name})",
        f"{name} if 1 else 2",
        f"'{name}'",
    ]
    if name not in _FUNCS:
        forbidden += [f"{name}(1)", f"{name}()", f"max(1, {name}(2))"]
    for src in forbidden:
        with pytest.raises(UnsafeProgram):
            safe_eval(src)


@pytest.mark.parametrize(
    "src",
    [
        "__import__('os').system('touch /tmp/t2exp_pwned')",
        "open('/etc/passwd').read()",
        "eval('1')",
        "exec('x=1')",
        "globals()",
        "().__class__.__bases__[0].__subclasses__()",
        "(lambda: 1)()",
        "getattr(abs, '__call__')(1)",
        "breakpoint()",
        "print(1)",
        "sum.__self__",
        "[].__len__()",
    ],
)
def test_classic_escapes_are_refused(src, tmp_path):
    with pytest.raises(UnsafeProgram):
        safe_eval(src)


# --- rows_to_subset -----------------------------------------------------------------------------------
cell = st.one_of(
    st.none(),
    st.just(float("nan")),
    st.just(pd.NA),
    st.text(max_size=12),
    st.sampled_from(["", "  ", "q0", "c0", "1.5", "yes"]),
    st.integers(-5, 5),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.binary(max_size=4),
)
optional_columns = st.lists(st.sampled_from([*METADATA_COLUMNS, "split", "original_answer", "extra", "Context"]), unique=True, max_size=6)
POOLS = {
    "id": [f"q{i}" for i in range(8)],
    "context_id": ["c0", "c1", "c2"],
    "context": ["t0", "t1", "t2"],
    "question": ["What is x?", "How much?"],
    "program_answer": ["1.5", "-2", "12%", "yes"],
    "split": ["test", "dev"],
}


@st.composite
def frames(draw):
    """Mostly well-formed frames (every required column, plausible values) with malformed cells,
    missing columns, duplicates and conflicting contexts mixed in."""
    cols = list(REQUIRED_COLUMNS) + draw(optional_columns)
    if draw(st.integers(0, 9)) == 0:  # sometimes a required column is missing
        cols.remove(draw(st.sampled_from(REQUIRED_COLUMNS)))
    n = draw(st.integers(0, 6))
    rows = []
    for _ in range(n):
        row = {}
        for c in cols:
            if c in POOLS and draw(st.integers(0, 4)) > 0:
                row[c] = draw(st.sampled_from(POOLS[c]))
            else:
                row[c] = draw(cell)
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames(), min_size=1, max_size=3), st.sampled_from([None, ["test"], ["dev", "test"]]), st.booleans())
def test_rows_to_subset_raises_only_data_errors(dfs, splits, skip_empty):
    sources = [(f"/data/FinQA_{i}.parquet", df) for i, df in enumerate(dfs)]
    try:
        sub = rows_to_subset("FinQA", sources, question_splits=splits, skip_empty_questions=skip_empty)
    except DataError as exc:
        msg = str(exc)
        assert "\n" not in msg and (msg.startswith("/data/FinQA_") or msg.startswith("subset FinQA"))
        return
    assert isinstance(sub, Subset) and sub.corpus
    ids = [q.id for q in sub.questions]
    assert len(ids) == len(set(ids)) and all(i.strip() for i in ids)
    corpus = {d.context_id: d for d in sub.corpus}
    assert len(corpus) == len(sub.corpus)
    assert all(q.context_id in corpus and q.question.strip() for q in sub.questions)
    assert all(d.text.strip() for d in sub.corpus)
    assert all(q.gold is None or math.isfinite(q.gold) for q in sub.questions)
    assert sub.stats["non_numeric_gold"] == sum(q.gold is None for q in sub.questions)


# --- pinned defects (outside this suite's files; see the reliability report) ---------------------------
@pytest.mark.parametrize(("pred", "gold", "ok"), [(3e300, 1e-10, False), (5e-324, 1.0, False), (1e300, 1e-10, True), (1e300, 1e-8, True)])
def test_number_match_extreme_ratios_do_not_raise(pred, gold, ok):
    # a ratio beyond float range is handled in log space (1e300 / 1e-10 = 1e310 is a power of ten)
    assert number_match(pred, gold) is ok


def test_safe_eval_round_with_digits():
    assert safe_eval("round(1.2345, 2)") == 1.23
    with pytest.raises(UnsafeProgram):
        safe_eval("round(1.2345, 2.5)")


def test_safe_eval_percent_signs_and_thousands_separators():
    # documented choices: '%' is a percent sign in model output, never modulo; ',' + 3 digits is a
    # thousands separator ("1,234.5"), so a tight argument list needs a space
    assert safe_eval("12.5% * 2") == 25.0
    assert safe_eval("1,234.5 - 234.5") == 1000.0
    assert safe_eval("max(1, 234)") == 234.0
