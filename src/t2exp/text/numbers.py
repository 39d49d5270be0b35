"""Numbers in answers: extraction from generated text, gold parsing and Number Match.

Number Match follows T²-RAGBench (Strich et al., §3): absolute values are compared; a prediction
is correct when both are below ``eps`` or when the ratio, shifted by its nearest power of ten,
is within ``eps`` of 1. A prediction without a number is wrong.

Two other readings are logged next to it (:func:`number_match_bare`, :func:`number_match_strict`)
and :func:`is_degenerate` flags runaway answers. No variant ever counts a nan or ±inf as correct.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from t2exp.text.reasoning import split_reasoning

EPS = 1e-2

_BOXED_RE = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_MARKER_RE = re.compile(r"(?:final\s+answer|answer\s+is|answer)\s*(?:is)?\s*[:=]?", re.IGNORECASE)
# a calendar date as a gold answer: 2016-09-23, 352-05-12, 23/09/2016, 2016/09/23, 09.23.2016
_DATE_RE = re.compile(r"^\d{1,4}([-/.])\d{1,2}\1\d{1,4}$")
_SCALES = {
    word: factor
    for factor, words in (
        (1e3, "thousand thousands k"),
        (1e6, "million millions mn mm m"),
        (1e9, "billion billions bn b"),
        (1e12, "trillion trillions tn"),
    )
    for word in words.split()
}
# One number as written in financial prose: optional sign or opening parenthesis, optional
# currency, digits with optional thousands separators, decimals, exponent, closing
# parenthesis, percent sign and a scale word.
_NUMBER_RE = re.compile(
    r"""
    (?P<open>\()?\s*
    (?P<sign>[-+\u2212\u2013])?\s*
    (?:(?:US)?\$|USD\s?|EUR\s?|GBP\s?|[€£¥])?\s*
    (?P<sign2>[-+\u2212\u2013])?
    (?P<num>
        \d{1,3}(?:,\d{3})+(?:\.\d+)?     # 1,234,567.89
      | \d+(?:\.\d+)?                    # 1234.5
      | \.\d+                            # .5
    )
    (?P<exp>[eE][-+]?\d+)?
    (?P<close>\s*\))?
    \s*(?P<pct>%|percent\b|per\s+cent\b)?
    \s*(?P<scale>(?:thousands?|millions?|billions?|trillions?|bn|mn|mm|tn|k|m|b)\b)?
    \s*(?P<close2>\))?
    """,
    re.VERBOSE | re.IGNORECASE,
)


@dataclass(frozen=True)
class ParsedNumber:
    value: float
    text: str


def strip_reasoning(text: str) -> str:
    """The answer part of a reasoning model's output: :func:`split_reasoning` (the generators'
    one definition of a ``<think>`` block) without its reasoning."""
    return split_reasoning(text)[0]


def _numbers(text: str) -> list[ParsedNumber]:
    out: list[ParsedNumber] = []
    for m in _NUMBER_RE.finditer(text):
        raw = m.group("num").replace(",", "")
        try:
            value = float(raw + (m.group("exp") or ""))
        except ValueError:  # pragma: no cover - regex guarantees digits
            continue
        if not math.isfinite(value):
            continue
        minus = ("-", "\u2212", "\u2013")
        negative = (
            m.group("sign") in minus or m.group("sign2") in minus or bool(m.group("open") and (m.group("close") or m.group("close2")))
        )
        scale = m.group("scale")
        if scale and not m.group("pct"):
            factor = _SCALES.get(scale.lower())
            # single letters only count as scales right after a currency amount ("$5m")
            if factor and (len(scale) > 1 or "$" in m.group(0) or "€" in m.group(0) or "£" in m.group(0)):
                value *= factor
        if negative:
            value = -value
        out.append(ParsedNumber(value=value, text=m.group(0).strip()))
    return out


def extract_number(text: str | None) -> float | None:
    """Pull the answer number out of a generated text; ``None`` when there is none.

    Order of preference: ``\\boxed{...}``; the first number after the last
    "Final answer:"/"Answer:" marker; otherwise the first number of the last line that has one.
    """
    if text is None or isinstance(text, bool):  # true/false are not numbers (float(True) would be 1.0)
        return None
    if not isinstance(text, str):
        try:
            value = float(text)
        except (TypeError, ValueError):
            return None
        return value if math.isfinite(value) else None
    text = strip_reasoning(text)
    boxed = _BOXED_RE.findall(text)
    for candidate in reversed(boxed):
        nums = _numbers(candidate)
        if nums:
            return nums[0].value
    markers = list(_MARKER_RE.finditer(text))
    if markers:
        nums = _numbers(text[markers[-1].end() :])
        if nums:
            return nums[0].value
    for line in reversed(text.splitlines()):
        nums = _numbers(line)
        if nums:
            return nums[0].value
    return None


def answer_span(text: str | None) -> str | None:
    """The answer part of a generated text as a string, in the order :func:`extract_number`
    looks: the last non-empty ``\\boxed{...}`` content; else the first non-empty line after the
    last "Final answer:"/"Answer:" marker; else the last line with a number; stripped. ``None``
    when there is none. The span need not hold a number ("Final answer: inf", "N/A")."""
    if text is None:
        return None
    text = strip_reasoning(str(text))
    boxed = [b.strip() for b in _BOXED_RE.findall(text) if b.strip()]
    if boxed:
        return boxed[-1]
    markers = list(_MARKER_RE.finditer(text))
    if markers:
        for line in text[markers[-1].end() :].splitlines():
            if line.strip():
                return line.strip()
    for line in reversed(text.splitlines()):
        if _numbers(line):
            return line.strip()
    return None


def parse_gold(value: object) -> float | None:
    """Gold answers are strings holding a float (``program_answer``); a date (TAT-DQA has
    "2016-09-23") or any other text without a number is None: a non-numeric gold, left out of NM."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if math.isfinite(float(value)) else None
    text = str(value).strip()
    try:
        f = float(text)
    except ValueError:
        return None if _DATE_RE.match(text) else extract_number(text)
    return f if math.isfinite(f) else None


def _absolute(pred: float | None, gold: float | None) -> tuple[float, float] | None:
    """``(|pred|, |gold|)`` when both are finite numbers (every NM reading ignores the sign), else None."""
    if pred is None or gold is None:
        return None
    a_star, a = abs(float(pred)), abs(float(gold))
    return (a_star, a) if math.isfinite(a_star) and math.isfinite(a) else None


def _both_small_or(pred: float | None, gold: float | None, eps: float, rule: Callable[[float, float], bool]) -> bool:
    """The opening every NM reading shares: absolute finite values, both below ``eps`` is a match,
    else ``rule(|pred|, |gold|)``; a non-finite or missing side is no match."""
    pair = _absolute(pred, gold)
    if pair is None:
        return False
    a_star, a = pair
    return (a_star < eps and a < eps) or rule(a_star, a)


def _shift_match(a_star: float, a: float, eps: float) -> bool:
    # q = (a*/a) * 10^-round(log10(a*/a)), computed in log space so that no ratio over- or
    # underflows a float
    if a_star == 0.0 or a == 0.0:
        return False
    log_ratio = math.log10(a_star) - math.log10(a)
    return abs(10.0 ** (log_ratio - round(log_ratio)) - 1.0) < eps


def number_match(pred: float | None, gold: float | None, eps: float = EPS) -> bool:
    """T²-RAGBench Number Match on absolute values, invariant to powers of ten."""
    return _both_small_or(pred, gold, eps, lambda a_star, a: _shift_match(a_star, a, eps))


# a run of digits, possibly broken by thousands separators or one decimal point: "0.000000000000",
# "123,456,789,012,345"
_DIGIT_RUN_RE = re.compile(r"\d+(?:[.,]\d+)*")
DEGENERATE_DIGITS = 15


def bare_float(text: object) -> float | None:
    """The authors' reading of an answer string: ``float(text.strip())``, else ``None``.

    A number (not a bool) is taken as is; anything ``float()`` rejects ("1,234.5", "$5",
    "5 million", "") is ``None``. nan and ±inf strings do parse (``float("inf")``): callers treat
    non-finite values as wrong.
    """
    if text is None or isinstance(text, bool):
        return None
    try:
        if isinstance(text, (int, float)):
            return float(text)  # an int of 309+ digits overflows
        return float(str(text).strip())
    except (ValueError, OverflowError):
        return None


def number_match_bare(text: object, gold: float | None, eps: float = EPS) -> bool:
    """Number Match as the T²-RAGBench authors' code scores it.

    The prediction is the answer *string*, parsed only by :func:`bare_float`; anything it rejects
    is wrong. For a gold with ``|gold| < eps`` only a prediction with ``|pred| < eps`` is correct
    (no scale shift for small golds); otherwise the paper's scale-invariant rule
    (:func:`number_match`). nan/±inf on either side is wrong.
    """
    pred = bare_float(text)
    pair = _absolute(pred, gold)
    if pair is None:
        return False
    a_star, a = pair
    if a < eps:
        return a_star < eps
    return number_match(pred, gold, eps)


def number_match_strict(pred: float | None, gold: float | None, eps: float = EPS) -> bool:
    """Relative error without a power-of-ten shift: ``|a* - a| / |a| < eps`` on absolute values
    (sign ignored, as in :func:`number_match`); both below ``eps`` also counts. ``1e92`` for a
    gold ``1.0`` is wrong here (``number_match`` accepts it). nan/±inf on either side is wrong."""
    return _both_small_or(pred, gold, eps, lambda a_star, a: a != 0.0 and abs(a_star - a) / a < eps)


def _runaway(number: str) -> bool:
    """One written number (digits, optional ``,`` separators and ``.``) is a runaway string."""
    digits = number.replace(",", "")
    if sum(ch.isdigit() for ch in digits) < DEGENERATE_DIGITS:
        return False
    if digits.count(".") != 1 or len(digits.split(".")[0]) >= DEGENERATE_DIGITS:
        return True
    return repr(float(digits)) != digits


def is_degenerate(text: object, value: object = None) -> bool:
    """A runaway number rather than an answer: ``text`` holds a written number of ``DEGENERATE_DIGITS``
    (15) or more digits with 15+ before the point, more than one ``.``, or a fraction that is not
    Python's shortest float form (``repr(float(s)) != s``: "0.000000000000000", "12.50000000000000";
    "0.3333333333333333" is what a computed float prints, as most FinQA golds, and is fine); or
    ``text`` (by :func:`bare_float`) or ``value`` is nan or ±inf. None, or a finite number as ``text``,
    is not degenerate. Logged as ``degenerate_predictions`` (per subset too)."""
    if value is not None and not isinstance(value, bool):
        try:
            if not math.isfinite(float(value)):  # type: ignore[arg-type]
                return True
        except (TypeError, ValueError):
            pass
    if text is None:
        return False
    bare = bare_float(text)
    if bare is not None and not math.isfinite(bare):
        return True
    if isinstance(text, (int, float)):
        return False  # a finite number carries no runaway digit string of its own
    return any(_runaway(m.group(0)) for m in _DIGIT_RUN_RE.finditer(str(text)))
