"""Prompt tokens a question costs under the T²-RAGBench authors' protocol (k=3 whole documents): the
input to the GPU-hours estimate of docs/scale.md ("What a full run costs").

``python -m t2exp +experiment=paper rag_method=bm25 k=3`` runs on the report sample (``dataset.limit=200``,
seed 0: 400 bundled dev questions) against the stand-in server of ``tests/fakes/openai_server.py``, which
keeps every chat request as t2exp sent it; each request's messages are then counted with a real
tokenizer through its chat template (``--tokenizer``: a Hugging Face tokenizer directory, by default the
offline generator's converted Qwen2.5-Coder checkpoint under ``.t2exp_cache/models``). BM25 stands for
any retriever here: the protocol gives the generator the k retrieved documents whole, so the length
depends on the documents, hardly on which retriever found them.

    python benchmarks/prompt_tokens.py                 # 400 questions
    python benchmarks/prompt_tokens.py --quick         # 5 questions a subset
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

sys.path.insert(0, str(C.ROOT / "tests"))
from fakes.openai_server import FakeOpenAIServer

MODEL = "counter"


def requests_of(limit: int, work: Path) -> list[dict]:
    """The chat requests one paper-protocol run of ``limit`` questions a subset sends."""
    with FakeOpenAIServer(model=MODEL) as srv:
        args = [
            "+experiment=paper",
            "rag_method=bm25",
            "k=3",
            f"dataset.limit={limit}",
            f"seed={C.REPORT_SEED}",
            "generator=openai_compat",
            f"generator.model={MODEL}",
            "generator.name=counter",
            f"generator.base_url={srv.base_url}",
            "tracking.traces=false",
            f"paths.work={work}",
            f"paths.cache={work / 'cache'}",
            f"paths.models={C.SHARED_CACHE / 'models'}",
            f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
            f"tracking.artifact_location={work / 'artifacts'}",
            f"hydra.run.dir={work / 'hydra'}",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "T2EXP_PROGRESS": "0"}
        env.pop("T2EXP_PARENT_RUN_ID", None)
        proc = subprocess.run([sys.executable, "-m", "t2exp", *args], capture_output=True, text=True, cwd=C.ROOT, env=env, timeout=1800)
        if proc.returncode != 0:
            sys.exit(f"prompt_tokens: python -m t2exp failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return list(srv.requests)


def default_tokenizer() -> Path | None:
    found = sorted((C.SHARED_CACHE / "models").glob("*-hf/tokenizer.json"))
    return found[0].parent if found else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="prompt tokens per question, authors' protocol, k=3")
    ap.add_argument("--quick", action="store_true", help="5 questions a subset")
    ap.add_argument("--limit", type=int, default=C.REPORT_LIMIT, help="questions a subset (default 200)")
    ap.add_argument("--tokenizer", type=Path, default=default_tokenizer(), help="a Hugging Face tokenizer directory")
    args = ap.parse_args(argv)
    if args.tokenizer is None:
        sys.exit("prompt_tokens: no tokenizer: run the offline generator once (it converts its checkpoint) or pass --tokenizer DIR")
    limit = 5 if args.quick else args.limit
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(args.tokenizer))
    print(f"# prompt_tokens  questions/subset={limit}  tokenizer={args.tokenizer.name} ({type(tok).__name__})  machine: {C.machine()}")
    with tempfile.TemporaryDirectory(prefix="t2exp-prompts-") as tmp:
        reqs = requests_of(limit, Path(tmp))
    texts = [tok.apply_chat_template(r["messages"], tokenize=False, add_generation_prompt=True) for r in reqs]
    counts = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    max_tokens = sorted({r.get("max_tokens") or r.get("max_completion_tokens") for r in reqs}, key=str)
    mean = sum(counts) / len(counts)
    print(f"\n## {len(counts)} prompts, +experiment=paper rag_method=bm25 k=3 (whole documents, JSON answers)\n")
    print(
        C.table(
            ["prompts", "mean", "p50", "p95", "max", "max_tokens asked"],
            [[len(counts), mean, C.percentile(counts, 50), C.percentile(counts, 95), max(counts), max_tokens]],
            floatfmt=".0f",
        )
    )
    C.ratio_line(
        "prompt_tokens",
        prompts=len(counts),
        mean=round(mean),
        p50=round(C.percentile(counts, 50)),
        p95=round(C.percentile(counts, 95)),
        max=max(counts),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
