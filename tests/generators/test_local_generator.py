"""The offline transformers generator: prompt-prefix KV reuse and self-consistency samples
continue one prefill without changing what greedy decoding answers; prompt-lookup decoding
accepts drafts copied from the prompt (real 0.5B model)."""

from __future__ import annotations

import pytest

from helpers.app import compose_cfg
from helpers.paths import ROOT
from t2exp.generators import Sampling

pytestmark = pytest.mark.slow

SYSTEM = {"role": "system", "content": "You are a financial analyst. Answer with one line 'Program: <expression>'. " * 6}
PROMPTS = [
    [SYSTEM, {"role": "user", "content": f"Revenue was {100 + 7 * i} in 2019 and {90 + 3 * i} in 2018. What is the change?"}]
    for i in range(3)
]
SAMPLING = Sampling(max_tokens=12, stop=("\n\n",))


def _settings() -> dict:
    """The 0.5B generator's constructor settings, as a run builds them."""
    from omegaconf import OmegaConf

    from t2exp.pipeline.build import GENERATOR_RUN_KEYS

    cfg = compose_cfg("generator=qwen_coder_0_5b", f"paths.models={ROOT / '.t2exp_cache' / 'models'}")
    return {k: v for k, v in OmegaConf.to_container(cfg.generator, resolve=True).items() if k not in GENERATOR_RUN_KEYS}


@pytest.fixture(scope="module")
def generators():
    from t2exp.config.components import build

    plain = _settings()
    reuse = build(dict(plain), "qwen")
    fresh = build({**plain, "reuse_prefix": False}, "qwen")
    fresh._model = reuse._model  # one set of weights; only the KV reuse differs  # type: ignore[attr-defined]
    return reuse, fresh


def test_prompt_lookup_copies_from_the_prompt_in_fewer_forward_passes(generators):
    # not asserted: the same text as plain decoding. Drafts are verified several tokens per
    # forward pass, and in bf16 that rounding can change a greedy token (benchmarks/prompt_lookup.py
    # shows code answers of the 1.5B that differ)
    from t2exp.config.components import build

    plain, _ = generators
    lookup = build({**_settings(), "prompt_lookup": 10}, "qwen")
    lookup._model = plain._model  # type: ignore[attr-defined]
    table = "| segment | 2019 | 2018 |\n| commercial aircraft services | 1,234.5 | 1,100.25 |\n| defense systems | 310.7 | 295.1 |"
    prompt = [[{"role": "user", "content": f"{table}\nCopy the row of commercial aircraft services exactly, as Markdown."}]]
    sampling = Sampling(max_tokens=24)
    model = plain._model[1]
    calls: list[int] = []
    hook = model.register_forward_hook(lambda *_: calls.append(1))
    try:
        a = plain.generate(prompt, sampling)[0]
        plain_calls, calls[:] = len(calls), []
        b = lookup.generate(prompt, sampling)[0]
        lookup_calls = len(calls)
    finally:
        hook.remove()
    assert "1,234.5" in a.text and "1,234.5" in b.text
    assert lookup_calls < plain_calls - 4  # drafts copied from the prompt were accepted several tokens at a time


def test_prefix_reuse_answers_exactly_as_a_fresh_prefill(generators):
    reuse, fresh = generators
    a = reuse.generate(PROMPTS, SAMPLING)
    b = fresh.generate(PROMPTS, SAMPLING)
    assert [g.text for g in a] == [g.text for g in b]
    assert all(g.text.strip() for g in a)
    assert reuse.reused_prefix_tokens > 2 * 60  # the system prompt of prompts 2 and 3 came from the cache
    assert fresh.reused_prefix_tokens == 0
    assert [g.prompt_tokens for g in a] == [g.prompt_tokens for g in b]


def test_samples_continue_the_same_prefill_and_keep_the_greedy_answer(generators):
    reuse, _ = generators
    greedy = reuse.generate(PROMPTS[:1], SAMPLING)[0]
    drawn = reuse.generate(PROMPTS[:1], Sampling(max_tokens=12, stop=("\n\n",), samples=4, sample_temperature=1.0))[0]
    assert drawn.text == greedy.text
    assert len(drawn.extra["samples"]) == 3 and all(isinstance(t, str) for t in drawn.extra["samples"])
    again = reuse.generate(PROMPTS[:1], Sampling(max_tokens=12, stop=("\n\n",), samples=4, sample_temperature=1.0))[0]
    assert again.extra["samples"] == drawn.extra["samples"]  # seeded
