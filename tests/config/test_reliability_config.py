"""Config validation, the command line's pre-flight check, secret handling and the stop signal,
in-process (the subprocess versions are in test_reliability_e2e.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from t2exp import config
from t2exp.cli.app import move_secret_overrides, preflight
from t2exp.errors import ConfigError, DataError
from t2exp.generators import vllm_backend
from t2exp.infra.paths import CONF_DIR
from t2exp.infra.redaction import (
    forget_secrets,
    install_log_redaction,
    is_secret_key,
    redact_overrides,
    redact_text,
    register_secret,
)
from t2exp.pipeline.identity import cell_key
from t2exp.pipeline.stop import STOP_GRACE_ENV, Interrupted, StopOnSignals, StopRequest
from t2exp.tracking.mlflow_run import flatten

config.register()
KEY_ENVS = ("OPENAI_API_KEY", "OPENAI_COMPAT_API_KEY", "CO_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "VLLM_API_KEY", "WEAVIATE_API_KEY")


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for k in KEY_ENVS:
        monkeypatch.delenv(k, raising=False)


def cfg_for(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def validate(cfg) -> None:
    config.check(cfg)


def one_line_error(*overrides: str) -> str:
    """What the command line says: composition (the schema's types and keys) and then
    ``config.check`` (ranges, allowed values, cross-group rules), through the pre-flight."""
    with pytest.raises(ConfigError) as e:
        preflight(list(overrides))
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# --- validation: key, bad value, allowed values ------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "parts"),
    [
        (["k=0"], ["k=0", "an integer >= 1"]),
        (["k=-2"], ["k=-2"]),
        (["k=2.5"], ["k=2.5", "an integer"]),
        (["k=true"], ["k=true", "an integer"]),
        (["seed=x"], ["seed=x", "an integer"]),
        (["rag_method.alpha=-0.1"], ["rag_method.alpha=-0.1", "[0, 1]"]),
        (["rag_method.alpha=abc"], ["rag_method.alpha=abc", "a number"]),
        (["rag_method.fusion=max"], ["rag_method.fusion='max'", "relative_score, rrf"]),
        (["rag_method.lexical=bm26"], ["rag_method.lexical='bm26'", "bm25s, rank_bm25, fielded, store"]),
        (["rag_method.candidate_depth=0"], ["rag_method.candidate_depth=0", ">= 1"]),
        (
            ["rag_method.fusion=paper", "rag_method.lexical=store"],
            ["rag_method.lexical='store'", "rank_bm25 or bm25s with rag_method.fusion=paper"],
        ),
        (["rag_method=reranker", "rag_method.candidates=4", "k=5"], ["rag_method.candidates=4", ">= k (5)"]),
        (["rag_method=reranker", "rag_method.candidates=many"], ["rag_method.candidates=many", "an integer"]),
        (["rag_method=reranker", "rag_method.first_stage=bm25"], ["rag_method.first_stage='bm25'", "base, hybrid"]),
        (["rag_method=hyde", "rag_method.question_weight=2"], ["rag_method.question_weight=2"]),
        (["rag_method=hyde", "generator=none"], ["generator='none'", "hyde"]),
        (["rag_method._target_=t2exp.methods.nope.Nope"], ["rag_method._target_='t2exp.methods.nope.Nope'", "importable"]),
        (["dataset.subsets=[FinQA,finqa]"], ["dataset.subsets='finqa'", "FinQA, ConvFinQA, VQAonBD, TAT-DQA"]),
        (["dataset.subsets=[]"], ["dataset.subsets=[]"]),
        (["dataset.source=web"], ["dataset.source='web'", "auto, local, hub"]),
        (["dataset.limit=0"], ["dataset.limit=0", "null or an integer >= 1"]),
        (["dataset.corpus_size=0"], ["dataset.corpus_size=0"]),
        (["dataset.path=/no/such/dir"], ["dataset.path='/no/such/dir'", "existing directory"]),
        (["dataset.source=local", "dataset.path=null"], ["dataset.path=None"]),
        (["document.variant=fancy"], ["document.variant='fancy'", "plain, metadata_prefix"]),
        (["generator.answer_mode=guess"], ["generator.answer_mode='guess'", "direct, cot, program"]),
        (["generator.sampling.max_tokens=0"], ["generator.sampling.max_tokens=0"]),
        (["generator.sampling.temperature=-1"], ["generator.sampling.temperature=-1"]),
        (["generator.sampling.top_p=0"], ["generator.sampling.top_p=0", "(0, 1]"]),
        (["generator.dtype=fp8"], ["generator.dtype='fp8'", "auto, float32, bfloat16"]),
        (["generator=openai_compat"], ["generator.model=None"]),
        (["generator=openai_compat", "generator.model=m", "generator.max_concurrency=0"], ["generator.max_concurrency=0"]),
        (["generator=openai_compat", "generator.model=m", "generator.timeout=0"], ["generator.timeout=0"]),
        (["generator=llama33_70b", "generator.backend=tgi"], ["generator.backend='tgi'", "openai, vllm, vllm_server"]),
        (["generator.sampling.max_tokens=many"], ["generator.sampling.max_tokens=many", "an integer"]),
        (["rag_method.alfa=0.3"], ["rag_method.alfa", "not a setting", "HybridConfig"]),
        # `+key=` appends even to a structured node: refused in the pre-flight all the same
        (["+foo=1"], ["foo is not a setting of Config", "allowed: experiment_name, k"]),
        (["rag_method=hybrid", "+rag_method.alpah=0"], ["rag_method.alpah is not a setting of HybridConfig", "alpha"]),
        (["generator=none", "+generator.foo=1"], ["generator.foo is not a setting of NoGeneratorConfig"]),
        (["+embedder.foo=2"], ["embedder.foo is not a setting of SentenceTransformerConfig", "batch_size"]),
        (["embedder.query_template=q"], ["embedder.query_template='q'", "{text}"]),
        (["rag_method=reranker", "reranker.stride=500"], ["reranker.stride=500", "chunk_words"]),
        (["generator=vllm_server", "generator.command=[/no/such/python]"], ["generator.command='/no/such/python'"]),
        (["embedder.batch_size=0"], ["embedder.batch_size=0"]),
        (["tracking.uri="], ["tracking.uri=''"]),
    ],
)
def test_bad_values_name_key_value_and_allowed(overrides, parts):
    msg = one_line_error(*overrides)
    assert "allowed" in msg, msg
    for part in parts:
        assert part in msg, (part, msg)


@pytest.mark.parametrize(
    ("overrides", "envs"),
    [
        (["embedder=openai"], ["OPENAI_API_KEY"]),
        (["embedder=gemini"], ["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
        (["embedder=cohere"], ["CO_API_KEY"]),
        (["generator=openai_api"], ["OPENAI_API_KEY"]),
        (["generator=openai_api", "generator.api_key_env=MY_KEY"], ["MY_KEY"]),
        (["generator=openai_compat", "generator.model=m", "generator.base_url=null"], ["OPENAI_COMPAT_API_KEY"]),
        (["generator=llama33_70b", "generator.base_url=null"], ["VLLM_API_KEY"]),
        (["rag_method=reranker", "reranker=cohere"], ["CO_API_KEY"]),
    ],
)
def test_api_components_need_a_key(overrides, envs, monkeypatch):
    msg = one_line_error(*overrides)
    group = next(g for g in ("embedder", "reranker", "generator") if any(o.startswith(f"{g}=") for o in overrides))
    assert f"{group}.api_key=None" in msg and all(e in msg for e in envs), msg
    monkeypatch.setenv(envs[-1], "k" * 20)  # any one of the variables will do
    validate(cfg_for(*overrides))
    monkeypatch.delenv(envs[-1])
    validate(cfg_for(*overrides, f"++{group}.api_key=explicit-key"))


def test_local_servers_and_offline_components_need_no_key():
    validate(cfg_for())  # the defaults: offline embedder and generator
    validate(cfg_for("generator=openai_compat", "generator.model=m"))  # base_url: a local server
    validate(cfg_for("generator=llama33_70b"))
    validate(cfg_for("generator=openai_api", "generator.base_url=http://127.0.0.1:9/v1"))
    validate(cfg_for("embedder=openai", "rag_method=pretrained_only"))  # no embedder is built


def test_vllm_backends_against_installed_extras(monkeypatch):
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: False)
    msg = one_line_error("generator=llama33_70b", "generator.backend=vllm")
    assert "generator.backend='vllm'" in msg and "install t2exp[vllm]" in msg
    msg = one_line_error("generator=vllm_server")
    assert "generator.command=None" in msg and "install t2exp[vllm]" in msg
    validate(cfg_for("generator=vllm_server", f"generator.command=[{sys.executable},-m,vllm]"))
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: True)
    validate(cfg_for("generator=llama33_70b", "generator.backend=vllm"))
    validate(cfg_for("generator=vllm_server"))


def test_weaviate_cloud_needs_url_and_key(monkeypatch):
    msg = one_line_error("store=weaviate", "store.connection=cloud")
    assert "store.cluster_url=None" in msg
    msg = one_line_error("store=weaviate", "store.connection=cloud", "store.cluster_url=https://x.weaviate.cloud")
    assert "WEAVIATE_API_KEY" in msg
    monkeypatch.setenv("WEAVIATE_API_KEY", "w" * 20)
    validate(cfg_for("store=weaviate", "store.connection=cloud", "store.cluster_url=https://x.weaviate.cloud"))


def test_weaviate_embedded_needs_a_preseeded_binary(tmp_path):
    """store=weaviate_embedded downloads nothing: without store.binary (or with one that is not
    there, or a URL of no tarball) one line says what to provide; a binary file or a tarball URL passes."""
    msg = one_line_error("store=weaviate_embedded")
    assert msg.startswith("store.binary=None is invalid") and "http://localhost URL" in msg and "store.embedded_dir" in msg
    assert "store.binary='/no/such/weaviate'" in one_line_error("store=weaviate_embedded", "store.binary=/no/such/weaviate")
    assert "store.binary='http://localhost:8000/weaviate'" in one_line_error(
        "store=weaviate_embedded", "store.binary=http://localhost:8000/weaviate"
    )
    binary = tmp_path / "weaviate"
    binary.write_bytes(b"")
    validate(cfg_for("store=weaviate_embedded", f"store.binary={binary}"))
    validate(cfg_for("store=weaviate_embedded", "store.binary=http://localhost:8000/weaviate-v1.40.3-linux-amd64.tar.gz"))
    # the option is the weaviate store's connection=embedded, with its own data folder
    msg = one_line_error("store=weaviate", "store.connection=embedded", f"store.binary={binary}")
    assert msg.startswith("store.embedded_dir=None is invalid")


def test_unresolvable_interpolation_names_the_key():
    msg = one_line_error("generator=openai_api", "generator.api_key=${oc.env:T2EXP_TEST_NO_SUCH_VAR}")
    assert msg.startswith("generator.api_key:") and "T2EXP_TEST_NO_SUCH_VAR" in msg


def test_every_shipped_option_validates(monkeypatch):
    """No false alarms: every config group option passes (keys set, vllm pretended present)."""
    for k in KEY_ENVS:
        monkeypatch.setenv(k, "k" * 20)
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: True)
    for group in ("dataset", "embedder", "generator", "rag_method", "store", "reranker"):
        for f in sorted((CONF_DIR / group).glob("*.yaml")):
            # qwen_coder_0_5b_vllm: its vLLM venv (scripts/vllm_cpu.sh) need not exist here
            extra = {
                "openai_compat": ["generator.model=m"],
                "qwen_coder_0_5b_vllm": [f"generator.command=[{sys.executable},-m,vllm]"],
                "weaviate_embedded": [f"store.binary={sys.executable}"],  # the binary a user provides
            }.get(f.stem, [])
            if group == "reranker":
                overrides = ["rag_method=reranker", f"reranker={f.stem}"]
            else:
                overrides = [f"{group}={f.stem}"]
            validate(cfg_for(*overrides, *extra))


# --- pre-flight: every sweep cell, and local data, before Hydra writes anything -----------------------
def test_preflight_checks_every_cell_of_a_sweep():
    assert preflight(["-m", "k=3,5", "rag_method=base,hybrid", "generator=none"]) == 4
    with pytest.raises(ConfigError, match=r"^k=0 is invalid"):
        preflight(["-m", "k=3,0", "generator=none"])
    with pytest.raises(ConfigError, match=r"rag_method.alpha=2"):
        preflight(["--multirun", "rag_method=hybrid,metadata_hybrid", "rag_method.alpha=2"])
    # a cell that does not compose stops the sweep before its first cell runs
    with pytest.raises(ConfigError, match=r"sweep cell #0 \(rag_method=base rag_method.alpha=0.5\): .*alpha"):
        preflight(["--multirun", "rag_method=base,hybrid", "rag_method.alpha=0.5"])
    with pytest.raises(ConfigError, match=r"^k=0"):
        preflight(["k=0", "hydra.mode=MULTIRUN"])


def test_preflight_leaves_other_commands_to_hydra():
    assert preflight(["--cfg", "job", "k=0"]) == 0
    assert preflight(["--help"]) == 0
    assert preflight(["--info"]) == 0
    assert preflight(["rag_method=nope"]) == 0  # Hydra's own "Could not find 'rag_method/nope'"
    assert preflight(["k=3,5"]) == 0  # a sweep without -m: Hydra explains
    assert preflight(["--no-such-flag"]) == 0
    assert preflight(["-m", "k=range(1,3)", "generator=none"]) == 2


def test_preflight_loads_local_data(tmp_path):
    import pandas as pd

    df = pd.DataFrame(
        {"id": ["a", "a"], "context_id": ["c", "c"], "question": ["q?", "q2?"], "program_answer": ["1", "2"], "context": ["t", "t"]}
    )
    df.to_parquet(tmp_path / "FinQA_test.parquet")
    with pytest.raises(DataError, match=r"FinQA_test.parquet: row 1: column 'id' value 'a' duplicates"):
        preflight(["dataset=finqa", f"dataset.path={tmp_path}", "generator=none"])


# --- secrets -------------------------------------------------------------------------------------------
def test_secret_overrides_move_to_the_environment():
    env: dict[str, str] = {}
    argv = [
        "-m",
        "k=3",
        "generator.api_key=sk-abcdefghijklmnop",
        "+embedder.api_key='quoted key'",
        "generator.api_key_env=X",
        "store.password=null",
        "embedder.api_key=${oc.env:MINE}",
        "--cfg",
        "job",
        "hf_token=abc123456789",
    ]
    out = move_secret_overrides(argv, env)
    assert out == [
        "-m",
        "k=3",
        "generator.api_key=${oc.env:T2EXP_SECRET_GENERATOR_API_KEY}",
        "+embedder.api_key=${oc.env:T2EXP_SECRET_EMBEDDER_API_KEY}",
        "generator.api_key_env=X",
        "store.password=null",
        "embedder.api_key=${oc.env:MINE}",
        "--cfg",
        "job",
        "hf_token=${oc.env:T2EXP_SECRET_HF_TOKEN}",
    ]
    assert env == {
        "T2EXP_SECRET_GENERATOR_API_KEY": "sk-abcdefghijklmnop",
        "T2EXP_SECRET_EMBEDDER_API_KEY": "quoted key",
        "T2EXP_SECRET_HF_TOKEN": "abc123456789",
    }


def test_a_url_with_a_password_moves_to_the_environment_too():
    env: dict[str, str] = {}
    out = move_secret_overrides(
        [
            "generator.base_url=http://user:pw-123@llm:8000/v1",
            "generator.base_url=http://llm:8000/v1",
            "tracking.uri=postgresql://me:pg-pw@db/mlflow",
        ],
        env,
    )
    assert out == [
        "generator.base_url=${oc.env:T2EXP_SECRET_GENERATOR_BASE_URL}",
        "generator.base_url=http://llm:8000/v1",
        "tracking.uri=${oc.env:T2EXP_SECRET_TRACKING_URI}",  # a database's own login: it stays in its URL
    ]
    assert env == {
        "T2EXP_SECRET_GENERATOR_BASE_URL": "http://user:pw-123@llm:8000/v1",
        "T2EXP_SECRET_TRACKING_URI": "postgresql://me:pg-pw@db/mlflow",
    }


def test_the_login_of_a_tracking_server_moves_to_mlflows_own_variables():
    """MLflow prints the URL it was given (``View run … at: URL``) as each run ends: the URL it
    gets holds no login, which MLflow's client sends from its variables as basic auth."""
    env: dict[str, str] = {}
    out = move_secret_overrides(["tracking.uri=https://me:p%40ss-123@mlflow.example:5000/"], env)
    assert out == ["tracking.uri=https://mlflow.example:5000/"]
    assert env == {"MLFLOW_TRACKING_USERNAME": "me", "MLFLOW_TRACKING_PASSWORD": "p@ss-123"}
    assert redact_text("401 for p@ss-123") == "401 for ***"  # whatever echoes it: it is a secret of this process


@pytest.mark.parametrize("command", ["compare", "report", "status", "collect", "score"])
@pytest.mark.parametrize("form", ["--tracking-uri=URI", "--tracking-uri URI"])
def test_the_login_of_a_tracking_uri_flag_is_in_no_line_of_a_command(command, form, tmp_path):
    """``--tracking-uri http://user:password@host`` of a command beside the app: its login moves to
    MLflow's variables as the app's ``tracking.uri`` does, so the command's lines show the URL without it."""
    from helpers.command import cli
    from t2exp.__main__ import main

    uri = "http://me:flag-pw-9911@127.0.0.1:9"  # no server answers there: the command's error names the URI
    run_id = "0123456789abcdef0123456789abcdef"  # a parent run id's form: looked up on the server
    target = {"compare": [run_id, run_id[::-1]], "report": [run_id], "status": [run_id], "collect": [run_id]}
    rows = tmp_path / "p.jsonl"
    rows.write_text('{"id": "FinQA/x", "prediction": "1"}\n', encoding="utf-8")
    args = target.get(command, [str(rows), "--mlflow"])
    flag = [form.replace("URI", uri)] if "=" in form else [form.split()[0], uri]
    proc = cli(main, [command, *args, *flag], cwd=tmp_path)
    assert proc.returncode != 0 and "127.0.0.1:9" in proc.stderr, proc.stderr
    assert "flag-pw-9911" not in proc.stdout + proc.stderr, proc.stderr


def test_a_swept_secret_is_refused_before_anything_is_written():
    """A swept secret (`generator.api_key=sk-A,sk-B`) is refused with one line pointing at
    generator.api_key_env, before it can land in multirun.yaml, each cell's .hydra/ or the parent
    run's tags."""
    env: dict[str, str] = {}
    with pytest.raises(ConfigError) as err:
        move_secret_overrides(["-m", "generator=openai_compat", "generator.api_key=sk-test-AAA,sk-test-BBB"], env)
    msg = str(err.value)
    assert "\n" not in msg and "generator.api_key is invalid as a sweep" in msg and "generator.api_key_env=KEY_A,KEY_B" in msg
    assert "sk-test" not in msg and env == {}


def test_moved_secret_resolves_in_the_composed_config(monkeypatch):
    env: dict[str, str] = {}
    (o,) = move_secret_overrides(["generator.api_key=sk-resolvesfine123"], env)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cfg = cfg_for("generator=openai_api", o)
    assert OmegaConf.to_container(cfg.generator, resolve=True)["api_key"] == "sk-resolvesfine123"
    assert "sk-resolvesfine123" not in OmegaConf.to_yaml(cfg)  # what Hydra writes to .hydra/config.yaml


def test_secret_names_and_redaction():
    for k in ("OPENAI_API_KEY", "generator.api_key", "HF_TOKEN", "apikey", "db.password", "AWS_SECRET_ACCESS_KEY"):
        assert is_secret_key(k), k
    for k in ("generator.sampling.max_tokens", "max_context_tokens", "api_key_env", "TOKENIZERS_PARALLELISM", "prompt_tokens"):
        assert not is_secret_key(k), k
    flat = flatten({"generator": {"api_key": "abc", "api_key_env": "OPENAI_API_KEY", "sampling": {"max_tokens": 96}}})
    assert flat == {"generator.api_key": "***", "generator.api_key_env": "OPENAI_API_KEY", "generator.sampling.max_tokens": 96}
    assert redact_overrides(["k=3", "generator.api_key=plain", "x=sk-abcdefghijkl"]) == ["k=3", "generator.api_key=***", "x=***"]


def test_environment_secrets_are_redacted_from_text_and_logs(monkeypatch, caplog):
    import logging

    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789-secret")
    assert redact_text("header tok-0123456789-secret here") == "header *** here"
    install_log_redaction()
    with caplog.at_level(logging.INFO):
        logging.getLogger("t2exp.test").info("calling with %s", "tok-0123456789-secret")
    assert "tok-0123456789" not in caplog.text and "calling with ***" in caplog.text


def test_a_key_read_from_a_variable_of_any_name_is_redacted(monkeypatch):
    """``generator.api_key_env=MY_LLM_CRED``: the name says nothing secret, the value is a key all
    the same; a 401 that echoes the Authorization header is redacted too."""
    from t2exp.generators.openai_compat import OpenAICompatGenerator

    monkeypatch.setenv("MY_LLM_CRED", "cred-9f8e7d6c5b4a")
    assert redact_text("key cred-9f8e7d6c5b4a") == "key cred-9f8e7d6c5b4a"  # not yet read by anything
    OpenAICompatGenerator("g", "m", base_url="http://127.0.0.1:9/v1", api_key_env="MY_LLM_CRED")
    assert redact_text("401: invalid key cred-9f8e7d6c5b4a") == "401: invalid key ***"
    assert redact_text("{'Authorization': 'Bearer other-key-123'}") == "{'Authorization': 'Bearer ***'}"
    assert redact_text("Bearer ***") == "Bearer ***"


def test_a_registered_secret_takes_the_whole_token_it_is_part_of():
    register_secret("sk-abc")
    register_secret("other")
    register_secret("tok-5678")
    assert redact_text("x=sk-abcdefghijkl") == "x=***"
    assert redact_text("{'Authorization': 'Bearer other-key-123'}") == "{'Authorization': 'Bearer ***'}"
    assert redact_text("x=tok-5678abcd, y=pre.tok-5678 z") == "x=***, y=*** z"
    assert redact_text("http://user:tok-5678@host/v1") == "http://user:***@host/v1"


def test_a_registered_secret_is_forgotten_when_asked():
    register_secret("cred-forget-me")
    assert redact_text("key cred-forget-me") == "key ***"
    forget_secrets()
    assert redact_text("key cred-forget-me") == "key cred-forget-me"


def test_the_password_of_a_url_is_redacted_wherever_it_is_written():
    url = "http://user:s3cret-pw@llm.internal:8000/v1"
    assert redact_text(f"connecting to {url}") == "connecting to http://user:***@llm.internal:8000/v1"
    assert redact_overrides([f"generator.base_url={url}"]) == ["generator.base_url=http://user:***@llm.internal:8000/v1"]
    assert flatten({"tracking": {"uri": "https://me:pw@mlflow.example/"}}) == {"tracking.uri": "https://me:***@mlflow.example/"}
    for plain in ("http://llm.internal:8000/v1", "sqlite:////tmp/x/mlflow.db", "user@host", "a: b@c"):
        assert redact_text(plain) == plain


def test_cell_key_ignores_the_value_of_a_set_key():
    base = {"k": 3, "generator": {"name": "g", "api_key": None}}
    a = cell_key({**base, "generator": {"name": "g", "api_key": "key-one"}})
    b = cell_key({**base, "generator": {"name": "g", "api_key": "key-two"}})
    assert a == b  # a rotated key resumes the same cell
    assert cell_key(base) == cell_key({"k": 3, "generator": {"name": "g", "api_key": None}})  # unset keys: unchanged


# --- SIGTERM / SIGINT handling -------------------------------------------------------------------------
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_first_signal_asks_to_stop_second_stops_now(monkeypatch):
    monkeypatch.setenv(STOP_GRACE_ENV, "30")
    stop = StopRequest()
    before = signal.getsignal(signal.SIGTERM)
    restore = StopOnSignals(stop).install().restore
    try:
        # a signal a process sends itself is handled before os.kill returns to Python code
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        assert stop.is_set() and stop.signal_name == "SIGTERM"
        with pytest.raises(Interrupted):
            stop.check()  # the experiment's next safe point
        with pytest.raises(Interrupted):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
            stop.check()  # not reached: the second signal raises in the handler
            raise AssertionError("the second signal did not stop at once")
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_grace_timer_stops_a_run_that_does_not_reach_a_safe_point(monkeypatch):
    monkeypatch.setenv(STOP_GRACE_ENV, "0.3")
    restore = StopOnSignals(StopRequest()).install().restore
    t0 = time.monotonic()
    try:
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            while time.monotonic() - t0 < 10:  # "busy" work that never checks the flag
                time.sleep(0.01)
    finally:
        restore()
    assert time.monotonic() - t0 < 5


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_stop_now_inside_an_atomic_block_is_raised_at_its_end(monkeypatch):
    monkeypatch.setenv(STOP_GRACE_ENV, "60")
    stop = StopRequest()
    restore = StopOnSignals(stop).install().restore
    steps = []
    try:
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # the first: stop at the next safe point
        with pytest.raises(Interrupted):
            with stop.atomic():
                steps.append("line written")
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # the second: stop now
                steps.append("recorded as written")
            steps.append("after the block")
    finally:
        restore()
    assert steps == ["line written", "recorded as written"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_sigint_as_an_answer_is_written_keeps_it_once(tmp_path, monkeypatch):
    """Ctrl-C while a request is in flight, Ctrl-C again the moment its answer's line is written:
    the answer is in the predictions once (the stop's "keep every answer that arrived" does not
    write it again)."""
    from fakes.openai_server import FakeOpenAIServer
    from helpers.app import app_overrides
    from helpers.command import cli
    from t2exp.__main__ import main
    from t2exp.infra.cache import JsonlLog

    def first_ctrl_c(messages) -> str:  # handled in the main thread once this answer is back there
        os.kill(os.getpid(), signal.SIGINT)
        return "7"

    real_write = JsonlLog.write

    def write_then_second_ctrl_c(self, row):
        real_write(self, row)
        if self.path.name == "predictions.jsonl":
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    monkeypatch.setattr(JsonlLog, "write", write_then_second_ctrl_c)
    cache = tmp_path / "cache"
    with FakeOpenAIServer(model="m", reply=first_ctrl_c) as srv:
        proc = cli(
            main,
            [
                "rag_method=oracle",
                "dataset=finqa",
                "dataset.limit=3",
                "generator=openai_compat",
                f"generator.base_url={srv.base_url}",
                "generator.model=m",
                "generator.max_concurrency=1",
                "generator.batch_size=1",
                "generator.max_retries=0",
                *app_overrides(cache, tmp_path / "track"),
            ],
            env={STOP_GRACE_ENV: "60"},
            cwd=tmp_path,
        )
        assert proc.returncode == 128 + signal.SIGINT, proc.stderr[-3000:]
        assert len(srv.requests) == 1
    (path,) = cache.glob("runs/*/predictions.jsonl")
    ids = [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]
    assert len(ids) == 1, ids


def test_handlers_are_not_installed_off_the_main_thread():
    out = []
    t = threading.Thread(target=lambda: out.append(StopOnSignals(StopRequest()).install().restore))
    t.start()
    t.join()
    out[0]()  # a no-op restore


def test_error_line_is_redacted(monkeypatch, capsys):
    from t2exp.cli.app import _fail

    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-print-1234")
    with pytest.raises(SystemExit) as e:
        _fail(ConfigError("bad\nthing sk-should-not-print-1234"))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == "t2exp: error: bad thing ***\n"
    assert re.fullmatch(r"t2exp: error: [^\n]*\n", err)


def test_cell_key_ignores_where_a_cell_runs_and_how_servers_are_reached():
    """store.uri, the generator's base_url, timeouts, concurrency and price (and paths.*)
    do not change what a cell computes, so they must not change its key; results-changing keys do."""
    base = {
        "k": 3,
        "rag_method": {"name": "hybrid", "alpha": 0.5},
        "store": {"_target_": "s", "uri": "/a/.t2exp_cache/lancedb", "candidate_depth": 50},
        "generator": {"name": "g", "model": "m", "base_url": "http://a:8000/v1", "timeout": 600, "max_concurrency": 16},
        "dataset": {"name": "finqa", "path": "/a/data", "limit": 6},
    }
    moved = {
        **base,
        "store": {**base["store"], "uri": "/b/cache/lancedb"},
        "generator": {**base["generator"], "base_url": "http://b:9000/v1", "timeout": 30, "max_concurrency": 2, "price": {"input": 1.0}},
        "dataset": {**base["dataset"], "path": "/mnt/b/data"},
        "paths": {"cache": "/b/cache"},
    }
    assert cell_key(base, "data-1") == cell_key(moved, "data-1")
    assert cell_key(base, "data-1") != cell_key(base, "data-2")  # other corpora or questions
    assert cell_key(base, "data-1") != cell_key({**base, "rag_method": {"name": "hybrid", "alpha": 0.3}}, "data-1")
    assert cell_key(base, "data-1") != cell_key({**base, "generator": {**base["generator"], "model": "other"}}, "data-1")


def test_another_model_on_a_packaged_embedder_option_is_refused_unless_the_package_is_cleared():
    """embedder=minilm loads the weights its package ships: embedder.model=X alone would have run
    MiniLM under X's name (params, run name, cell key)."""
    with pytest.raises(ConfigError) as e:
        preflight(["embedder.model=BAAI/bge-small-en-v1.5", "generator=none"])
    line = str(e.value)
    assert line.startswith("embedder.model=BAAI/bge-small-en-v1.5 is invalid with embedder=minilm") and "embedder.package=null" in line
    assert preflight(["embedder.model=BAAI/bge-small-en-v1.5", "embedder.package=null", "generator=none"]) == 1
    assert preflight(["embedder=minilm", "generator=none"]) == 1  # the option as it is
    with pytest.raises(ConfigError, match="embedder.model=intfloat/e5-small-v2 is invalid"):  # in a sweep cell too
        preflight(["-m", "embedder=minilm,e5", "embedder.model=intfloat/e5-small-v2", "generator=none"])


def test_plugin_options_a_missing_name_and_a_refused_target_are_readable_lines(tmp_path):
    from t2exp.config.components import build

    (tmp_path / "conf" / "rag_method").mkdir(parents=True)
    (tmp_path / "conf" / "rag_method" / "noname.yaml").write_text("_target_: t2exp.methods.base.Base\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^rag_method.name is missing; allowed: the option's name"):
        preflight([f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "rag_method=noname", "generator=none"])
    marker = tmp_path / "ran"
    with pytest.raises(ConfigError) as e:  # Hydra refuses it before any call: the whole reason, on one line
        build({"_target_": "os.system", "command": f"touch {marker}"}, "rag_method")
    line = str(e.value)
    assert "\n" not in line and line.startswith("rag_method: Target 'os.system' is blocklisted") and "cannot be authorized" in line
    assert not marker.exists()


# --- a user's own option YAML -------------------------------------------------------------------------------
HYBRID = (CONF_DIR / "rag_method" / "hybrid.yaml").read_text(encoding="utf-8")


def _user_conf(tmp_path, **options: str):
    """A config directory of the user's: ``rag_method/<name>.yaml`` for each option given."""
    conf = tmp_path / "my_conf"
    (conf / "rag_method").mkdir(parents=True, exist_ok=True)
    for name, text in options.items():
        (conf / "rag_method" / f"{name}.yaml").write_text(text, encoding="utf-8")
    return conf


@pytest.mark.parametrize("how", ["searchpath", "config-dir"])
def test_a_misspelt_key_in_a_users_typed_option_yaml_is_one_line_naming_it(tmp_path, how):
    """A copy of conf/rag_method/hybrid.yaml with a misspelt key, also inside its meta: block, or a
    value of the wrong type: one line naming the file, the key and what is allowed."""
    conf = _user_conf(
        tmp_path,
        alpah=HYBRID + "alpah: 0.3\n",
        famly=HYBRID.replace("  family:", "  famly:"),
        typed=HYBRID + "alpha: abc\n",
        good=HYBRID + "alpha: 0.3\n",
    )
    where = [f"hydra.searchpath=[file://{conf}]"] if how == "searchpath" else ["--config-dir", str(conf)]

    def error(option: str) -> str:
        return one_line_error(*where, f"rag_method={option}", "generator=none")

    assert error("alpah").startswith(
        "rag_method/alpah.yaml (the option rag_method=alpah): rag_method.alpah is not a setting of "
        "HybridConfig; allowed: _target_, name, meta, alpha, fusion"
    )
    assert error("famly") == (
        "rag_method/famly.yaml (the option rag_method=famly): rag_method.meta.famly is not a setting of "
        "OptionMeta; allowed: display_name, family, in_paper, order, licence, params"
    )
    assert error("typed").startswith(
        "rag_method/typed.yaml (the option rag_method=typed): rag_method.alpha=abc is invalid; allowed: a number"
    )
    assert preflight([*where, "rag_method=good", "generator=none"]) == 1
    # a sweep cell made of such an option stops the sweep before its first cell, naming the file too
    assert "rag_method/famly.yaml" in one_line_error("-m", *where, "rag_method=hybrid,famly", "generator=none")


def test_the_meta_block_of_an_untyped_plugin_option_is_checked_against_the_meta_schema(tmp_path):
    """An option with a _target_ and no schema: its meta: block is checked against the meta schema,
    one line naming the key and what is allowed."""
    plugin = "_target_: t2exp.methods.base.Base\nname: mine\nmeta:\n"
    conf = _user_conf(
        tmp_path,
        famly=plugin + "  famly: dense\n",
        order=plugin + "  order: first\n",
        flat="_target_: t2exp.methods.base.Base\nname: mine\nmeta: dense\n",
        good=plugin + "  display_name: Mine\n  family: dense\n  order: 0\n",
    )
    search = f"hydra.searchpath=[file://{conf}]"
    assert one_line_error(search, "rag_method=famly", "generator=none") == (
        "rag_method.meta.famly is not a setting of OptionMeta; allowed: display_name, family, in_paper, order, licence, params"
    )
    assert one_line_error(search, "rag_method=order", "generator=none").startswith(
        "rag_method.meta.order=first is invalid; allowed: an integer"
    )
    assert one_line_error(search, "rag_method=flat", "generator=none").startswith(
        "rag_method.meta='dense' is invalid; allowed: a mapping of display_name, family"
    )
    assert preflight([search, "rag_method=good", "generator=none"]) == 1
