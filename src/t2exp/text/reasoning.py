"""The one rule for a reasoning model's ``<think>`` block: generators use it to count reasoning
tokens, the evaluator to read the answer part."""

from __future__ import annotations

import re

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"
_THINK_BLOCK_RE = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)


def split_reasoning(text: str) -> tuple[str, str]:
    """Split a reasoning model's output into ``(answer, reasoning)``.

    ``<think>…</think>`` blocks are reasoning; an unterminated block runs to the end. Some chat
    templates (QwQ, DeepSeek-R1) put the opening tag into the prompt, so the output starts inside
    the block: text before a leading ``</think>`` with no ``<think>`` before it is reasoning too.
    """
    thoughts: list[str] = []
    lower = text.lower()
    close = lower.find(CLOSE_TAG)
    opened = lower.find(OPEN_TAG)
    if close != -1 and (opened == -1 or close < opened):
        thoughts.append(text[:close])
        text = text[close + len(CLOSE_TAG) :]
    thoughts.extend(m.group(1) for m in _THINK_BLOCK_RE.finditer(text))
    answer = _THINK_BLOCK_RE.sub(" ", text)
    return answer.strip(), "\n".join(t.strip() for t in thoughts).strip()
