"""The offline generator's arithmetic: prefill and decode time of its converted checkpoint in
float32 and in bfloat16 on this CPU, and what ``generator.dtype=auto`` picks here, in one run.

    python benchmarks/dtype.py                       # the default generator (1.5B), 1,900-token prompt
    python benchmarks/dtype.py --generator qwen_coder_0_5b --tokens 1200
    python benchmarks/dtype.py --quick               # 0.5B, 64 tokens, 2 new tokens (the test suite)

The prompt is random token ids of ``--tokens`` length (the focused evidence of the main job is
~1,900 tokens, an oracle document ~1,200); decode is timed over ``--new`` greedy one-token steps
on the prompt's KV cache. One warm-up call per dtype. Ends with one ``RATIO dtype: ...`` line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED_CACHE, compose, instantiate, machine, ratio_line, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generator", default=None, help="a generator option (default: the main job's)")
    ap.add_argument("--tokens", type=int, default=1900)
    ap.add_argument("--new", type=int, default=40, help="decoded tokens")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.generator, args.tokens, args.new = args.generator or "qwen_coder_0_5b", 64, 2
    import torch
    from transformers import AutoModelForCausalLM

    from t2exp.infra.devices import resolve_dtype

    overrides = [f"paths.models={SHARED_CACHE / 'models'}"] + ([f"generator={args.generator}"] if args.generator else [])
    gen = instantiate(compose(overrides).generator)
    path = gen.checkpoint()
    print(machine())
    print(
        f"model {gen.name} ({path}); prompt {args.tokens} tokens, {args.new} new; generator.dtype=auto picks "
        f"{resolve_dtype('auto', 'cpu')} here"
    )
    ids = torch.randint(100, 20000, (1, args.tokens), generator=torch.Generator().manual_seed(0))
    rows, seconds = [], {}
    for dtype in ("float32", "bfloat16"):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval()
        with torch.inference_mode():
            model(ids[:, :32])  # warm-up
            t0 = time.perf_counter()
            model(ids)
            prefill = time.perf_counter() - t0
            out = model(ids, use_cache=True)  # then greedy steps, one token each, on its KV cache
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            t0 = time.perf_counter()
            for _ in range(args.new):
                out = model(token, cache=past, use_cache=True)
                past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            decode_ms = 1000 * (time.perf_counter() - t0) / args.new
        seconds[dtype] = (prefill, decode_ms)
        rows.append([dtype, prefill, decode_ms])
        del model
    print()
    print(table(["dtype", "prefill s", "decode ms/token"], rows, ".2f"))
    ratio_line(
        "dtype",
        model=gen.name,
        tokens=args.tokens,
        auto=resolve_dtype("auto", "cpu"),
        prefill_fp32_over_bf16=seconds["float32"][0] / seconds["bfloat16"][0],
        decode_fp32_over_bf16=seconds["float32"][1] / max(1e-9, seconds["bfloat16"][1]),
    )


if __name__ == "__main__":
    main()
