"""Prompt-lookup decoding (``generator.prompt_lookup``) against plain greedy decoding, on the
oracle prompts a run builds, in one run: seconds per answer of each and whether the texts agree.

    python benchmarks/prompt_lookup.py                          # 8 questions, answer_mode=code, lookup 10
    python benchmarks/prompt_lookup.py --mode program --lookup 3
    python benchmarks/prompt_lookup.py --quick                  # 0.5B, 1 question, answer_mode=direct, 12 tokens (the test suite)

The prompts are what ``python -m t2exp rag_method=oracle generator.answer_mode=<mode>`` sends: the
gold document's focused evidence of ``--questions`` seeded bundled questions (half FinQA, half
TAT-DQA), rendered by the project's prompt library. Both generators share one model and neither
reuses a KV prefix (``reuse_prefix=false``), so each answer pays its whole prefill and the two differ
only in decoding; the order alternates per question. Ends with one ``RATIO prompt_lookup: ...`` line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, SHARED_CACHE, compose, instantiate, machine, ratio_line, table


def oracle_prompts(mode: str, n: int) -> list[list[dict[str, str]]]:
    from t2exp.answering.answers import build_messages
    from t2exp.answering.context import ContextShaper
    from t2exp.answering.prompts import PromptLibrary
    from t2exp.config.schema import dataset_args
    from t2exp.data.loader import load_subsets
    from t2exp.infra.paths import PROMPTS_DIR

    prompts = PromptLibrary(str(PROMPTS_DIR))
    evidence = ContextShaper("focused", 3)
    subsets = load_subsets(
        **dataset_args(subsets=["FinQA", "TAT-DQA"], source="local", path=str(DEFAULT_DATA), limit=max(1, n // 2), seed=0)
    )
    out = []
    for subset in subsets:
        docs = {d.context_id: d.text for d in subset.corpus}
        for q in subset.questions[: max(1, n // 2)]:
            out.append(build_messages(prompts, mode, q.question, [evidence.of(q.question, docs[q.context_id])]))
    return out[:n]  # n = 1: one FinQA question


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generator", default=None, help="a generator option (default: the main job's)")
    ap.add_argument("--mode", default=None, help="answer mode whose prompt and stop strings are used (default code)")
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--lookup", type=int, default=10, help="generator.prompt_lookup of the lookup side")
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        # direct: its prompt is half the code prompt's (835 vs 1,610 tokens), and prefill is this run's cost
        args.generator, args.questions, args.max_tokens = args.generator or "qwen_coder_0_5b", 1, 12
        args.mode = args.mode or "direct"
    args.mode = args.mode or "code"
    from t2exp.answering.answers import MODE_STOPS
    from t2exp.generators import Sampling

    overrides = [f"paths.models={SHARED_CACHE / 'models'}", "generator.reuse_prefix=false"]
    overrides += [f"generator={args.generator}"] if args.generator else []
    cfg = compose(overrides)
    plain = instantiate(cfg.generator)
    lookup = instantiate(compose([*overrides, f"generator.prompt_lookup={args.lookup}"]).generator)
    lookup._model = plain._model  # one set of weights: only decoding differs
    prompts = oracle_prompts(args.mode, args.questions)
    sampling = Sampling(max_tokens=args.max_tokens, stop=MODE_STOPS.get(args.mode, ()))
    print(machine())
    print(f"model {plain.name}, {len(prompts)} oracle prompts (answer_mode={args.mode}), prompt_lookup={args.lookup}")
    plain.generate([[{"role": "user", "content": "Hello."}]], Sampling(max_tokens=2))  # warm-up: first-call costs, not a prefill
    secs = {"plain": 0.0, "lookup": 0.0}
    tokens = {"plain": 0, "lookup": 0}
    same = 0
    for i, prompt in enumerate(prompts):
        order = [("plain", plain), ("lookup", lookup)][:: 1 if i % 2 == 0 else -1]
        texts = {}
        for name, gen in order:
            t0 = time.perf_counter()
            g = gen.generate([prompt], sampling)[0]
            secs[name] += time.perf_counter() - t0
            texts[name] = g.text
            tokens[name] += g.completion_tokens
        same += texts["plain"] == texts["lookup"]
    n = len(prompts)
    print()
    rows = [
        [label, secs[name] / n, tokens[name] / n] for name, label in (("plain", "plain greedy"), ("lookup", f"prompt lookup {args.lookup}"))
    ]
    print(table(["decoding", "s/answer", "new tokens/answer"], rows, ".2f"))
    ratio_line(
        "prompt_lookup",
        model=plain.name,
        mode=args.mode,
        questions=n,
        lookup=args.lookup,
        plain_s_per_answer=secs["plain"] / n,
        lookup_s_per_answer=secs["lookup"] / n,
        plain_over_lookup=secs["plain"] / max(1e-9, secs["lookup"]),
        identical=f"{same}/{n}",
    )


if __name__ == "__main__":
    main()
