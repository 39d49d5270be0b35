"""Generators: chat messages → text. One protocol; backends in sibling modules."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Protocol, runtime_checkable

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int = 0
    stop: tuple[str, ...] = ()
    # a JSON schema the answer must follow (answer_mode=json), sent as structured output where the
    # backend supports it; part of the LLM-cache key
    json_schema: dict | None = field(default=None, hash=False, compare=False)
    # self-consistency: ``samples - 1`` further answers drawn at ``sample_temperature`` next to the
    # main one (``Generation.extra["samples"]``); backends share the prompt's prefill among them
    samples: int = 1
    sample_temperature: float = 0.7

    def as_dict(self) -> dict:
        d = asdict(self)
        d["stop"] = list(self.stop)
        if self.json_schema is None:
            d.pop("json_schema")  # keys of answers cached before structured output existed stay valid
        if self.samples == 1:  # ... and before samples existed
            d.pop("samples")
            d.pop("sample_temperature")
        return d


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (a server's JSON may escape one, ``"\\ud800"``)
    becomes U+FFFD, so the answer can be parsed, cached and written as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")  # a str holds a pair as one code point: any surrogate left is lone


@dataclass
class Generation:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    finish_reason: str = "stop"  # "length" when max_tokens cut the output
    cached: bool = False
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:  # whatever a model or a server sent: the texts a run keeps are valid
        self.text = valid_text(self.text)
        self.extra = {k: valid_text(v) if isinstance(v, str) else v for k, v in self.extra.items()}

    def window(self, batch_start: int, arrived: int) -> tuple[int, int]:
        """Its real window in ns: it ended when it ``arrived`` and took the model's seconds (within its
        batch's window; an answer from the LLM cache took no model time)."""
        return (arrived if self.cached else max(batch_start, arrived - int(self.seconds * 1e9)), arrived)


OnResult = Callable[[int, "Generation"], None]
ShouldStop = Callable[[], bool]


class Cancelled(Exception):
    """Some prompts of a ``generate`` call were not sent because ``should_stop()`` became true
    (the run is stopping); the answers already completed went to ``on_result``."""


@runtime_checkable
class Generator(Protocol):
    name: str
    batch_size: int
    gpus: int  # the GPUs this run computes on (0 for a CPU or a remote server): a cell's gpu_seconds

    @property
    def fingerprint(self) -> str:
        """Identifies the model (and weights) whose outputs a cache may reuse."""

    def generate(
        self, prompts: list[Messages], sampling: Sampling, on_result: OnResult | None = None, should_stop: ShouldStop | None = None
    ) -> list[Generation]:
        """Answers in prompt order. Every backend calls ``on_result(i, generation)`` as soon as
        answer ``i`` is complete (before a later prompt can fail), so the LLM cache keeps the
        finished answers of a failed or interrupted batch. Before sending each prompt a backend
        asks ``should_stop()``; once it is true nothing more is sent and ``Cancelled`` is raised
        after the requests in flight complete."""
