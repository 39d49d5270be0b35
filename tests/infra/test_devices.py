"""One device/dtype rule for every local model (infra.devices): embedder, reranker and generator
resolve ``dtype=auto`` alike."""

from __future__ import annotations

import pytest

from t2exp.embedders.sentence_transformers import SentenceTransformerEmbedder
from t2exp.generators.local_hf import TransformersGenerator
from t2exp.infra import devices
from t2exp.rerankers.cross_encoder import CrossEncoderReranker


def _models(device: str, dtype: str = "auto"):
    # constructors load nothing: the models load on first use
    return {
        "embedder": SentenceTransformerEmbedder("e", "some/model", device=device, dtype=dtype),
        "reranker": CrossEncoderReranker("r", "some/model", device=device, dtype=dtype),
        "generator": TransformersGenerator("g", "some/model", device=device, dtype=dtype),
    }


@pytest.mark.parametrize(
    ("device", "native", "expected"),
    [
        ("cpu", True, "bfloat16"),
        ("cpu", False, "float32"),
        ("cuda", True, "bfloat16"),
        ("cuda", False, "float16"),
    ],
)
def test_every_local_model_resolves_auto_by_one_rule(monkeypatch, device, native, expected):
    monkeypatch.setattr(devices, "native_bf16", lambda d: native)
    assert {k: m.dtype for k, m in _models(device).items()} == dict.fromkeys(("embedder", "reranker", "generator"), expected)


def test_an_explicit_dtype_is_kept():
    assert {m.dtype for m in _models("cpu", "float16").values()} == {"float16"}


def test_the_embedder_fingerprint_names_the_resolved_dtype(monkeypatch):
    # vectors made in bf16 are not the float32 vectors: another index cache entry
    monkeypatch.setattr(devices, "native_bf16", lambda d: True)
    bf16 = _models("cpu")["embedder"].fingerprint
    monkeypatch.setattr(devices, "native_bf16", lambda d: False)
    assert _models("cpu")["embedder"].fingerprint != bf16


def test_this_machine_answers_the_native_question():
    # the real probe (no stand-in): a bool, and auto follows it on this CPU
    native = devices.native_bf16("cpu")
    assert devices.resolve_dtype("auto", "cpu") == ("bfloat16" if native else "float32")


@pytest.mark.parametrize("group", ["embedder", "reranker", "generator"])
def test_a_dtype_of_no_kind_is_one_line(group):
    from t2exp.config.components import CrossEncoderConfig, SentenceTransformerConfig
    from t2exp.config.generators import TransformersGeneratorConfig
    from t2exp.errors import ConfigError

    cls = {"embedder": SentenceTransformerConfig, "reranker": CrossEncoderConfig, "generator": TransformersGeneratorConfig}[group]
    kwargs = {
        "embedder": dict(name="e", model="m", dim=8),
        "reranker": dict(name="r", model="m"),
        "generator": dict(name="g", model="m", models_dir="x"),
    }[group]
    with pytest.raises(ConfigError, match=f"{group}.dtype"):
        cls(_target_="x", dtype="fp8", **kwargs)


def test_the_machine_s_answer_without_torch_is_torch_s():
    # on Linux without a GPU node the rule reads /proc/cpuinfo; torch's own probes must agree
    torch = pytest.importorskip("torch")
    if devices._linux_cpu_flags() is None:
        pytest.skip("not Linux, or a GPU device node is present: torch answers itself")
    native = bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    assert devices.native_bf16("cpu") == native
    assert devices.resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("method", ["bm25", "base"])
def test_a_run_that_needs_no_model_never_imports_torch(tmp_path, warm_cache, method):
    """A sparse retriever needs no vectors, a dense one whose vectors and token counts are cached
    (its second run) needs no model, and ``generator=none`` none either: the process (a fresh
    interpreter, reporting its imports) loads neither torch nor transformers."""
    import re

    from helpers.app import run_app

    args = [f"rag_method={method}", "generator=none", "dataset=finqa", "dataset.limit=1"]
    if method == "base":
        run_app(args, warm_cache, tmp_path / "first")  # here: the question's vector and the documents' counts
    proc = run_app(args, warm_cache, tmp_path / "second", process=True, env={"PYTHONPROFILEIMPORTTIME": "1"})
    imported = set(re.findall(r"^import time:.*\|\s+([\w.]+)$", proc.stderr, flags=re.M))
    assert "t2exp.pipeline.cell" in imported  # the report is there, and the run went through a cell
    assert not imported & {"torch", "transformers", "sentence_transformers"}
