"""Answer modes: how the generator is asked for the answer and how its text becomes a number.

- ``direct``: the final number only; ``cot``: reasoning, then a "Final answer:" line.
- ``program``: an arithmetic expression over numbers quoted from the context, evaluated by
  ``t2exp.answering.safe_eval``; when none parses, the number in the text is used.
- ``code``: a short Python program in a code block naming each input number, computing ``answer``
  (:func:`t2exp.answering.safe_exec.safe_exec`); a block that does not run is no answer, a reply
  without one is read as in ``program`` mode.
- ``json``: the T²-RAGBench authors' object (``ANSWER_SCHEMA``), structured output where the backend
  has it; the answer is ``computed_formula`` read with bare ``float()``. Invalid JSON, a missing key,
  a non-float value or a runaway reply (``MAX_JSON_CHARS``, ``MAX_JSON_DEPTH``) is no answer (NM 0);
  ``final_formula`` and its value (``final_formula_value``) are kept.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from t2exp.answering.prompts import PromptLibrary
from t2exp.answering.safe_eval import UnsafeProgram, safe_eval
from t2exp.answering.safe_exec import safe_exec
from t2exp.errors import ConfigError
from t2exp.text.numbers import answer_span, bare_float, extract_number, strip_reasoning

if TYPE_CHECKING:
    from t2exp.answering.demos import Demo

MODES = ("direct", "cot", "program", "code", "json")
# stop sequences used when ``generator.sampling.stop`` is null: one-line answer modes stop at a
# blank line (small models otherwise ramble until max_tokens), a code block at its closing fence,
# reasoning runs on
MODE_STOPS: dict[str, tuple[str, ...]] = {"direct": ("\n\n",), "program": ("\n\n",), "code": ("\n```\n",), "cot": (), "json": ()}
ANSWER_KEYS = ("reasoning_steps", "final_formula", "computed_formula")
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning_steps": {"type": "array", "items": {"type": "string"}},
        "final_formula": {"type": "string"},
        "computed_formula": {"type": "string"},
    },
    "required": list(ANSWER_KEYS),
    "additionalProperties": False,
}
_PROGRAM_RE = re.compile(r"program\s*:\s*(.+)", re.IGNORECASE)
_FENCE_RE = re.compile(r"```(?:python)?\s*\n?(.*?)```", re.DOTALL)
# a code block whose closing fence may be missing (the ``code`` mode's stop string cuts it off)
_OPEN_FENCE_RE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)


@dataclass
class ParsedAnswer:
    value: float | None
    program: str | None = None
    program_error: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # answer-mode specific, recorded with the prediction
    # the model's answer string (see :func:`answer_text`): what ``nm_bare`` parses with float()
    text: str | None = None


# a reply is read for JSON within bounds checked by one linear scan before any parsing (a runaway
# reply, ``[`` or ``{`` written until max_tokens, otherwise crashes Python's JSON reader or takes
# seconds): its first MAX_JSON_CHARS characters (an answer is a few hundred), and only objects
# that nest at most MAX_JSON_DEPTH deep (the answer schema needs 2)
MAX_JSON_CHARS = 50_000
MAX_JSON_DEPTH = 20
_JSON_MARKS = re.compile(r'[\[\]{}"\\]')


def _object_starts(text: str) -> tuple[list[int], int]:
    """Where an object may start in ``text``: each ``{`` outside JSON strings whose contents nest at
    most MAX_JSON_DEPTH deep (an unclosed one: to the end of the text), in order; and the deepest
    nesting seen. Linear in ``len(text)``; prose counts too (an upper bound of what a reader meets)."""
    stack: list[list[int]] = []  # [position, is an object, depth of it and what it holds]
    starts: list[int] = []
    deepest = 0
    in_string, escaped_at = False, -1

    def close() -> None:
        pos, is_object, depth = stack.pop()
        if is_object and depth <= MAX_JSON_DEPTH:
            starts.append(pos)
        if stack:
            stack[-1][2] = max(stack[-1][2], depth + 1)

    for m in _JSON_MARKS.finditer(text):
        ch, pos = m.group(), m.start()
        if in_string:
            if pos != escaped_at and ch in '\\"':
                escaped_at, in_string = (pos + 1, True) if ch == "\\" else (escaped_at, False)
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append([pos, ch == "{", 1])
            deepest = max(deepest, len(stack))
        elif stack and ch in "]}":
            close()
    while stack:
        close()
    return sorted(starts), deepest


def read_json_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """The first JSON object in ``text`` (a bare object, or one inside prose or a code fence)
    within the bounds above, or None and why there is none."""
    window = text[:MAX_JSON_CHARS]
    starts, deepest = _object_starts(window)
    decoder = json.JSONDecoder()
    for i in starts:
        try:
            obj, _ = decoder.raw_decode(window, i)
        except (ValueError, RecursionError):  # not JSON; an integer of more digits than Python reads
            continue
        if isinstance(obj, dict):
            return obj, ""
    why = "no JSON object"
    if deepest > MAX_JSON_DEPTH:
        why += f" nested at most {MAX_JSON_DEPTH} deep (it nests {deepest} deep)"
    return None, why + (f" in its first {MAX_JSON_CHARS} characters" if len(text) > MAX_JSON_CHARS else "")


def _finite_bare_float(value: object) -> float | None:
    """The authors' reading of ``computed_formula`` (:func:`numbers.bare_float`), finite values only."""
    x = bare_float(value)
    return x if x is not None and math.isfinite(x) else None


def parse_json_answer(text: str) -> ParsedAnswer:
    obj, why = read_json_object(text)
    if obj is None or any(k not in obj for k in ANSWER_KEYS):
        missing = why if obj is None else f"missing {', '.join(k for k in ANSWER_KEYS if k not in obj)}"
        return ParsedAnswer(value=None, program_error=f"invalid JSON answer: {missing}", fields={"json_valid": False}, text=None)
    formula = str(obj.get("final_formula") or "")
    try:
        formula_value: float | None = safe_eval(formula) if formula.strip() else None
    except UnsafeProgram:
        formula_value = None
    return ParsedAnswer(
        value=_finite_bare_float(obj.get("computed_formula")),
        program=formula or None,
        text=str(obj.get("computed_formula")),  # the authors' answer string: what nm_bare reads
        fields={
            "json_valid": True,
            "final_formula": formula,
            "computed_formula": str(obj.get("computed_formula")),
            "final_formula_value": formula_value,
            "reasoning_steps": obj.get("reasoning_steps"),
        },
    )


def answer_template(mode: str, template: str | None = None) -> str:
    """The answer template a run renders: ``generator.prompt``, else ``answer_<answer_mode>``."""
    return template or f"answer_{mode}"


def build_messages(
    prompts: PromptLibrary,
    mode: str,
    question: str,
    contexts: list[str],
    template: str | None = None,
    demos: Sequence[Demo] = (),
) -> list[dict[str, str]]:
    """The chat of one question: the system prompt, then ``template`` (default ``answer_<mode>``)
    with the question, its evidence and the retrieved ``demos`` (:mod:`t2exp.answering.demos`)."""
    if mode not in MODES:
        raise ConfigError(f"generator.answer_mode={mode!r}: allowed values are {', '.join(MODES)}")
    return [
        {"role": "system", "content": prompts.render("system")},
        {
            "role": "user",
            "content": prompts.render(answer_template(mode, template), question=question, contexts=contexts, demos=list(demos)),
        },
    ]


def _program_candidates(text: str) -> list[str]:
    """Programs in the order they are tried: after a ``Program:`` marker, the last line of a code
    fence, then the first line of a reply that is only an expression (models that were shown
    ``Program: <expression>`` examples often answer with the bare expression)."""
    cands = [m.group(1).strip() for m in _PROGRAM_RE.finditer(text)]
    for block in _FENCE_RE.findall(text):
        lines = [ln.strip() for ln in block.strip().splitlines() if ln.strip()]
        if lines:
            last = lines[-1]
            cands.append(last.split("=", 1)[1] if "=" in last and "==" not in last else last)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if first and not cands:
        cands.append(first)
    return cands


def answer_text(mode: str, text: str | None, program: str | None = None) -> str | None:
    """The model's answer string: what a run records as the answer, before any number parsing.

    This is the string the authors' bare-``float()`` Number Match (``nm_bare``) reads, and the one
    :func:`t2exp.text.numbers.is_degenerate` inspects; a run stores it as ``answer_text``
    in ``predictions.jsonl`` (next to the raw ``generation``, the ``program`` and the parsed
    number ``prediction``). In ``program`` mode it is the program the model wrote (the
    authors' ``computed_formula`` is also the model's own string: evaluating it is our reading,
    not theirs) when one was parsed; otherwise, and in ``direct``/``cot``, it is
    :func:`t2exp.text.numbers.answer_span` of the generation (reasoning stripped): the
    ``\\boxed{}`` content, else the rest of the line after the last answer marker, else the last
    line with a digit. ``None`` when there is none.
    """
    if mode in ("program", "code") and program:
        return program.strip() or None
    return answer_span(text)


def parse_code_answer(text: str) -> ParsedAnswer:
    """A ``code`` reply: its first code block run by :func:`safe_exec`; a block that does not run
    is no answer (its numbers are inputs, not the result). A reply without a code block is run
    whole when it is a program, else read as a ``program`` answer."""
    match = _OPEN_FENCE_RE.search(text)
    block = (match.group(1) if match else text).strip()
    try:
        return ParsedAnswer(value=safe_exec(block), program=block, text=block)
    except UnsafeProgram as exc:
        if match:
            return ParsedAnswer(value=None, program=None, program_error=f"code: {exc}", text=block or None)
        fallback = parse_answer("program", text)
        if fallback.program_error:
            fallback.program_error = f"code: {exc}; {fallback.program_error}"
        return fallback


def parse_answer(mode: str, text: str) -> ParsedAnswer:
    text = strip_reasoning(text or "")
    if mode == "json":
        return parse_json_answer(text)
    if mode == "code":
        return parse_code_answer(text)
    if mode == "program":
        error = None
        for cand in _program_candidates(text):
            cand = cand.splitlines()[0] if cand else cand
            try:
                return ParsedAnswer(value=safe_eval(cand), program=cand, text=answer_text(mode, text, cand))
            except UnsafeProgram as exc:
                error = str(exc)
        return ParsedAnswer(value=extract_number(text), program=None, program_error=error or "no program found", text=answer_span(text))
    return ParsedAnswer(value=extract_number(text), text=answer_span(text))
