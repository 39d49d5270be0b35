"""Reading an offline generator's GGUF file: gguf-py's reader on its own memory map, and on a plain
array view of the same map (what t2exp converts with), in one run; the two must read the same.

    python benchmarks/gguf_read.py                    # the 0.5B: tokenizer and weights as transformers reads them
    python benchmarks/gguf_read.py --generator qwen_coder_1_5b
    python benchmarks/gguf_read.py --quick            # the 0.5B's metadata only, read by gguf-py (the test suite)

The parts are joined into a temporary folder first (not timed). CPU seconds per reading; the full
form compares every weight and the vocabulary of both readings. Ends with one ``RATIO gguf_read: ...`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import compose, machine, ratio_line


def read(gguf: Path, full: bool) -> str:
    """A digest of what is read: the metadata fields (``--quick``), or transformers' tokenizer and weights."""
    h = hashlib.sha256()
    if not full:
        from gguf import GGUFReader

        for name, field in GGUFReader(gguf).fields.items():
            h.update(name.encode())
            for part in field.parts:
                h.update(bytes(part))
        return h.hexdigest()[:16]
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    for key, tensor in sorted(model.state_dict().items()):
        h.update(key.encode())
        h.update(tensor.view(torch.int16).numpy().tobytes())
    h.update(repr(sorted(tok.get_vocab().items())).encode())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generator", default="qwen_coder_0_5b", help="an offline generator option")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    from t2exp.generators.local_hf import _plain_gguf_reads, join_gguf_parts

    gen = compose([f"generator={args.generator}"]).generator
    print(machine())
    seconds, digests = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        gguf = join_gguf_parts(list(gen.gguf_parts), gen.sha256, int(gen.size), Path(tmp) / "model.gguf", gen.install)
        for name, reads in (("memmap", contextlib.nullcontext), ("plain_view", _plain_gguf_reads)):
            t0 = time.process_time()
            with reads():
                digests[name] = read(gguf, full=not args.quick)
            seconds[name] = time.process_time() - t0
            print(f"{name:>10}: {seconds[name]:6.1f} CPU-s, read {digests[name]}")
    what = "metadata (gguf-py)" if args.quick else "tokenizer and weights (transformers)"
    print(f"{gen.name}, {what}")
    ratio_line(
        "gguf_read",
        memmap_cpu_s=f"{seconds['memmap']:.1f}",
        plain_view_cpu_s=f"{seconds['plain_view']:.1f}",
        memmap_over_plain_view=f"{seconds['memmap'] / seconds['plain_view']:.2f}",
        same_reading=str(digests["memmap"] == digests["plain_view"]).lower(),
    )


if __name__ == "__main__":
    main()
