"""Choosing the answer: program grounding and self-consistency voting over a generator's samples.

A generation may carry extra samples (``generator.sampling.samples`` > 1: the main, usually
greedy, answer plus ``samples - 1`` drawn at ``sample_temperature``; ``Generation.extra["samples"]``).
Each candidate is parsed by the answer mode (:func:`t2exp.answering.answers.parse_answer`), then:

- **grounding** (``generator.grounding``): a program is *grounded* when every number literal it
  uses (:func:`t2exp.answering.safe_exec.program_literals`) is a number of the evidence the generator read
  (:func:`t2exp.answering.context.terms`: ``$1,234.5`` → 1234.5, ``(12.3)%`` → 12.3), up to a factor of 100
  or 1000 (a percentage written as a fraction, a table in thousands), or one of the constants
  arithmetic on reports needs (``CONSTANTS``: 1 for growth, 2-4 for averages, 12 months, 100 for
  percent, ...). A program that copies a number not in the evidence has read it wrong or made it up.
  ``off``: not checked; ``check``: recorded per question (``grounded``) but the choice ignores it;
  ``prefer``: when any candidate is grounded, only grounded candidates take part in the vote.
- **runaway guard**: a candidate whose answer is degenerate (:func:`t2exp.text.numbers.is_degenerate`,
  e.g. ``0.000…0`` written until ``max_tokens``) does not vote while any other candidate has a value.
- **voting**: the candidates with a value are grouped by Number Match against each other
  (:func:`t2exp.text.numbers.number_match`, the equality the score uses); the largest group
  wins and ties go to the group of the earliest candidate (the main answer). The answer is that
  group's earliest candidate. With one sample this is just the main answer.

Recorded with the prediction: ``grounded`` (the chosen program, None outside program mode or
when off), ``candidates`` (how many parsed to a number), ``vote_share`` (the winning group's
share of them), and ``sample_answers`` (each candidate's answer string) when samples were drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from t2exp.answering.answers import ParsedAnswer, parse_answer
from t2exp.answering.context import terms
from t2exp.answering.safe_exec import program_literals
from t2exp.errors import ConfigError
from t2exp.text.numbers import is_degenerate, number_match

GROUNDING = ("off", "check", "prefer")
CONSTANTS = frozenset({0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 12.0, 100.0, 1000.0, 1e6, 1e9})
_FACTORS = (1.0, 100.0, 0.01, 1000.0, 0.001)


def evidence_numbers(contexts: Sequence[str]) -> set[float]:
    """Absolute values of the numbers written in the evidence, each kept at 9 and at 6 decimals
    (the keys :func:`is_grounded` looks a literal up by)."""
    out: set[float] = set()
    for text in contexts:
        for t in terms(text):
            if t[0].isdigit():
                try:
                    x = abs(float(t.replace(",", "")))
                except ValueError:
                    continue
                out.update((round(x, 9), round(x, 6)))
    return out


def _known(value: float, numbers: set[float]) -> bool:
    if value in CONSTANTS:
        return True
    return any(round(value * f, 9) in numbers or round(value * f, 6) in numbers for f in _FACTORS)


def is_grounded(program: str, numbers: set[float]) -> bool:
    """Every literal of ``program`` is a number of the evidence (``numbers``: :func:`evidence_numbers`)."""
    literals = program_literals(program)
    return bool(literals) and all(_known(v, numbers) for v in literals)


def choose(mode: str, texts: Sequence[str], contexts: Sequence[str], grounding: str = "off") -> ParsedAnswer:
    """The answer among the candidate generations ``texts`` (the main one first)."""
    if grounding not in GROUNDING:
        raise ConfigError(f"generator.grounding={grounding!r}: allowed values are {', '.join(GROUNDING)}")
    parsed = [parse_answer(mode, t) for t in texts]
    checked = grounding != "off" and mode in ("program", "code", "json")
    numbers = evidence_numbers(contexts) if checked else set()
    grounded = [bool(p.program) and is_grounded(str(p.program), numbers) for p in parsed] if checked else [False] * len(parsed)
    voters = [i for i, p in enumerate(parsed) if p.value is not None]
    sane = [i for i in voters if not is_degenerate(parsed[i].text, parsed[i].value)]
    voters = sane or voters
    if grounding == "prefer" and any(grounded[i] for i in voters):
        voters = [i for i in voters if grounded[i]]
    best = _vote([parsed[i].value for i in voters], voters)  # type: ignore[misc]
    chosen = parsed[best] if best is not None else parsed[0]
    fields = dict(chosen.fields)
    if checked:
        fields["grounded"] = grounded[best if best is not None else 0]
    if len(texts) > 1:
        group = [i for i in voters if best is not None and number_match(parsed[i].value, parsed[best].value)]
        fields.update(
            candidates=sum(p.value is not None for p in parsed),
            vote_share=round(len(group) / len(voters), 4) if voters else 0.0,
            sample_answers=[p.text for p in parsed],
        )
    return replace(chosen, fields=fields)


def _vote(values: Sequence[float], order: Sequence[int]) -> int | None:
    """The earliest candidate of the largest Number-Match group (ties: the earliest group)."""
    best, best_size = None, 0
    for pos, v in enumerate(values):
        size = sum(number_match(v, w) for w in values)
        if size > best_size:
            best, best_size = order[pos], size
    return best
