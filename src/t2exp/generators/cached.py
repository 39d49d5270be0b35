"""One LLM cache for every call (answers, HyDE, summaries): key = (model, messages, sampling)."""

from __future__ import annotations

import json

from t2exp.generators import Generation, Generator, Messages, OnResult, Sampling, ShouldStop
from t2exp.infra.cache import KVCache, content_key


class CachedGenerator:
    def __init__(self, inner: Generator, cache: KVCache) -> None:
        self.inner = inner
        self.cache = cache
        self.calls = 0  # generations actually computed by the model

    def __getattr__(self, item: str):
        return getattr(self.inner, item)

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def key(self, prompt: Messages, sampling: Sampling) -> str:
        return content_key("llm", self.inner.fingerprint, prompt, sampling.as_dict())

    @staticmethod
    def _encode(g: Generation) -> bytes:
        fields = ("text", "prompt_tokens", "completion_tokens", "seconds", "finish_reason", "extra")
        return json.dumps({f: getattr(g, f) for f in fields}).encode()

    def generate(
        self, prompts: list[Messages], sampling: Sampling, on_result: OnResult | None = None, should_stop: ShouldStop | None = None
    ) -> list[Generation]:
        keys = [self.key(p, sampling) for p in prompts]
        positions: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            positions.setdefault(k, []).append(i)

        def deliver(k: str, g: Generation) -> None:
            if on_result is not None:
                for i in positions[k]:
                    on_result(i, g)

        found = self.cache.get_many(keys)
        out: dict[str, Generation] = {}
        for k, raw in found.items():
            d = json.loads(raw)
            out[k] = Generation(**{**d, "cached": True})
            deliver(k, out[k])
        todo = [(k, p) for k, p in dict(zip(keys, prompts, strict=True)).items() if k not in out]
        for start in range(0, len(todo), max(1, self.inner.batch_size)):
            chunk = todo[start : start + max(1, self.inner.batch_size)]

            def keep(i: int, g: Generation, chunk=chunk) -> None:
                self.cache.put(chunk[i][0], self._encode(g))
                deliver(chunk[i][0], g)

            gens = self.inner.generate([p for _, p in chunk], sampling, on_result=keep, should_stop=should_stop)
            self.calls += len(chunk)
            for (k, _), g in zip(chunk, gens, strict=False):
                out[k] = g
        return [out[k] for k in keys]
