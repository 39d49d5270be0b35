"""A hub model that cannot be had (offline and not cached, a typo) is one line, not a traceback."""

from __future__ import annotations

import os

import pytest

from t2exp.errors import ConfigError
from t2exp.infra import model_hub


def _offline() -> None:
    raise OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files.")


def test_a_missing_model_is_one_line_naming_group_model_revision_and_fix(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as err:
        model_hub.load(_offline, "embedder", "intfloat/multilingual-e5-large-instruct", "abc123")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("embedder.model='intfloat/multilingual-e5-large-instruct' (revision abc123)")
    assert "hf download intfloat/multilingual-e5-large-instruct --revision abc123" in msg and "unset HF_HUB_OFFLINE" in msg


def test_other_errors_are_not_disguised():
    def broken() -> None:
        raise ValueError("dtype mismatch")

    with pytest.raises(ValueError, match="dtype mismatch"):
        model_hub.load(broken, "embedder", "m")
    assert model_hub.load(lambda: 42, "embedder", "m") == 42


@pytest.mark.slow
def test_an_uncached_hub_embedder_offline_ends_in_one_line_and_a_failed_run(tmp_path):
    from helpers.app import run_app
    from helpers.tracking import mlflow_runs

    args = ["embedder=e5", "rag_method=base", "generator=none", "dataset=finqa", "dataset.limit=2"]  # a dense method embeds
    proc = run_app(args, tmp_path / "cache", tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("t2exp: error: embedder.model='intfloat/multilingual-e5-large-instruct'") and "hf download" in line
    _, runs = mlflow_runs(tmp_path)
    assert [r.info.status for r in runs] == ["FAILED"] and "hf download" in runs[0].data.tags["t2exp.error"]


def test_a_model_is_loaded_once_per_process_and_the_oldest_is_released():
    from t2exp.infra import model_hub

    calls: list[str] = []

    def loader(name: str):
        def load() -> object:
            calls.append(name)
            return object()

        return load

    a = model_hub.shared(("test", "a"), loader("a"))
    assert model_hub.shared(("test", "a"), loader("a")) is a and calls == ["a"]  # a sweep's second cell: no second load
    for name in "bcd":
        model_hub.shared(("test", name), loader(name))
    assert len(model_hub._loaded) <= model_hub.KEEP_LOADED
    assert ("test", "a") not in model_hub._loaded  # the least recently used went first
    model_hub.shared(("test", "a"), loader("a"))
    assert calls == ["a", "b", "c", "d", "a"]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["embedder=e5", "embedder.model=/nonexistent/dir"], "embedder.model='/nonexistent/dir'"),
        (["embedder=e5", "embedder.model=./models/e5"], "embedder.model='./models/e5'"),
        (["rag_method=reranker", "reranker=cross_encoder", "reranker.model=/nonexistent/ce"], "reranker.model='/nonexistent/ce'"),
        (["generator=qwen_coder_1_5b", "generator.model=../nonexistent/qwen"], "generator.model='../nonexistent/qwen'"),
    ],
)
def test_a_local_model_path_that_is_not_there_is_one_line_before_any_work(overrides, key, tmp_path, monkeypatch):
    """A local model path that does not exist is refused in the pre-flight, before the MLflow run
    opens, with one line naming the key and how to fix it (not sentence-transformers'
    "FileNotFoundError: Path ... not found")."""
    from t2exp.cli.app import preflight

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        preflight([*overrides, *([] if any(o.startswith("generator=") for o in overrides) else ["generator=none"])])
    msg = str(err.value)
    path = overrides[-1].split("=", 1)[1]
    assert msg.startswith(f"{key} is invalid: no such directory ({os.path.abspath(tmp_path / path)})"), msg
    assert f"point {key.split('=')[0]} at it" in msg


def test_a_local_model_path_that_holds_no_model_is_one_line_when_it_loads(tmp_path):
    from sentence_transformers import SentenceTransformer

    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x", encoding="utf-8")
    for model, says in (
        (str(tmp_path / "empty"), "holds no model this loader reads (ValueError: Unrecognized model"),
        (str(tmp_path / "file"), "a file, not a directory"),
        ("/nonexistent/dir", "no such directory"),
    ):
        with pytest.raises(ConfigError) as err:
            model_hub.load(lambda m=model: SentenceTransformer(m, device="cpu"), "embedder", model)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"embedder.model='{model}' is invalid: ") and says in msg, msg
