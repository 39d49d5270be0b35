"""Choosing the answer among a generator's samples (``generator.sampling.samples`` > 1: the main
answer plus ``samples - 1`` drawn at ``sample_temperature``), each parsed by the answer mode:

- **grounding** (``generator.grounding``): a program is grounded when every number literal it uses is
  a number of the evidence read (``$1,234.5`` → 1234.5), up to a factor of 100 or 1000, or one of
  ``CONSTANTS``. ``off``; ``check``: recorded only; ``prefer``: when any candidate is grounded,
  only grounded candidates vote.
- **runaway guard**: a degenerate answer (``0.000…0`` until ``max_tokens``) does not vote while
  another candidate has a value.
- **voting**: candidates grouped by Number Match against each other; the largest group wins, ties go
  to the earliest candidate's group, and its earliest candidate is the answer.

Recorded: ``grounded``, ``candidates`` (how many parsed), ``vote_share`` and ``sample_answers``.
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
