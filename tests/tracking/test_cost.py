"""What a cell costs: its questions, the prompt and completion tokens the server counted, the
seconds it spent generating, the share of JSON answers that were valid JSON and the money at the
prices the user set, logged on each cell's MLflow run and shown in the sweep's report and explorer."""

from __future__ import annotations

import json

import pytest

from fakes.openai_server import FakeOpenAIServer
from helpers.app import answering_args, run_app
from helpers.tracking import mlflow_runs

PRICE = {"input": 0.15, "output": 0.60}  # USD per million tokens
VALID = json.dumps({"reasoning_steps": ["read the table"], "final_formula": "2 + 3", "computed_formula": "5"})


def reply(messages):
    """A valid JSON answer to questions whose text has an even length, prose to the others."""
    question = messages[-1]["content"]
    return VALID if len(question) % 2 == 0 else "The answer is five."


def test_a_sweep_reports_each_cells_tokens_seconds_and_money_as_the_server_counted_them(warm_cache, tmp_path):
    """Two cells (JSON answers, direct answers) against the stand-in server: each cell's logged
    tokens are the sum of the ``usage`` the server sent for that cell's requests, its money those
    tokens at the prices set, the JSON cell's valid share what the server replied; the sweep's
    report and explorer show them."""
    from t2exp.evaluation.reporting.explore import gather, page_data

    n = 4
    price = f"generator.price={{input:{PRICE['input']},output:{PRICE['output']}}}"
    with FakeOpenAIServer(model="fake-model", reply=reply) as srv:
        # its own LLM cache: an answer another test cached would reach no server
        run_app(["-m", *answering_args(srv.base_url, n, "generator.answer_mode=json,direct", price)], warm_cache, tmp_path)
    sent = {"json": [], "direct": []}
    for body, usage in srv.answered:
        sent["json" if "response_format" in body else "direct"].append((body, usage))
    client, runs = mlflow_runs(tmp_path)
    cells = {r.data.params["generator.answer_mode"]: r for r in runs if r.data.tags.get("t2exp.sweep") != "parent"}
    assert sorted(cells) == ["direct", "json"]
    for mode, run in cells.items():
        m = run.data.metrics
        prompt = sum(u["prompt_tokens"] for _, u in sent[mode])
        completion = sum(u["completion_tokens"] for _, u in sent[mode])
        assert len(sent[mode]) == n and prompt > 0 and completion > 0
        assert (m["questions"], m["prompt_tokens"], m["completion_tokens"]) == (n, prompt, completion)
        assert m["cost_usd"] == pytest.approx((prompt * PRICE["input"] + completion * PRICE["output"]) / 1e6, abs=1e-4)
        assert m["generate_seconds"] > 0
        assert "gpu_seconds" not in m  # a remote server: no GPU of this run's
    valid = sum(reply(body["messages"]) == VALID for body, _ in sent["json"])
    assert 0 < valid < n  # the stand-in replied both
    assert cells["json"].data.metrics["json_valid_share"] == pytest.approx(100 * valid / n, abs=1e-4)
    assert "json_valid_share" not in cells["direct"].data.metrics

    (parent,) = [r for r in runs if r.data.tags.get("t2exp.sweep") == "parent"]
    report = (tmp_path / "outputs" / "reports" / parent.info.run_id / "table3.md").read_text(encoding="utf-8")
    header = next(line for line in report.splitlines() if line.startswith("|"))
    for column in ("Questions", "Prompt tokens", "Completion tokens", "Generate s", "JSON valid %", "USD"):
        assert column in header, header
    json_line = next(line for line in report.splitlines() if "| json |" in line)
    json_cell = cells["json"].data.metrics
    assert f"| {json_cell['prompt_tokens']:.0f} | {json_cell['completion_tokens']:.0f} |" in json_line, json_line
    assert f"| {json_cell['json_valid_share']:.1f} | {json_cell['cost_usd']:.4f} |" in json_line, json_line

    page = page_data(gather([parent.info.run_id], tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"))
    shown = {c["run_id"]: c["cost"] for c in page["cells"]}
    for run in cells.values():
        assert shown[run.info.run_id]["prompt_tokens"] == run.data.metrics["prompt_tokens"]
        assert shown[run.info.run_id]["cost_usd"] == run.data.metrics["cost_usd"]


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("generator.price={input:-0.15,output:0.6}", "generator.price.input=-0.15"),
        ("generator.price={input:0.15,output:-1}", "generator.price.output=-1"),
        ("generator.price.input=0.15", "generator.price.output=None"),  # half a price: no cost at all
    ],
)
def test_a_negative_or_half_set_price_is_one_line_naming_the_field(shared_cache, tmp_path, override, field):
    with FakeOpenAIServer(model="fake-model") as srv:
        proc = run_app([*answering_args(srv.base_url, 1), override], shared_cache, tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("t2exp: error:")]
    assert field in line and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not srv.requests


class _OnTwoGpus:
    """A generator computing on two GPUs: each answer ``Final answer: 5``, 10 prompt and 3
    completion tokens."""

    name, batch_size, fingerprint, gpus = "two-gpus", 2, "two-gpus-v1", 2

    def generate(self, prompts, sampling, on_result=None, should_stop=None):
        from t2exp.generators import Generation

        out = [Generation(text="Final answer: 5", prompt_tokens=10, completion_tokens=3) for _ in prompts]
        for i, g in enumerate(out):
            if on_result is not None:
                on_result(i, g)
        return out


def test_gpu_seconds_are_the_seconds_generating_times_the_generators_gpus(tmp_path):
    """A cell's GPU-seconds: the time it spent generating, on each of the generator's GPUs; its
    tokens those of its answers."""
    from helpers.app import compose_cfg
    from helpers.paths import ROOT
    from t2exp.answering.prompts import PromptLibrary
    from t2exp.data.loader import load_subsets, loader_args
    from t2exp.generators import Sampling
    from t2exp.generators.cached import CachedGenerator
    from t2exp.infra.cache import KVCache
    from t2exp.methods import Services
    from t2exp.methods.pretrained_only import PretrainedOnly
    from t2exp.pipeline.steps import Components, Parts, Settings, run_steps

    subsets = load_subsets(**loader_args(compose_cfg("dataset=finqa", "dataset.limit=3")))
    generator = CachedGenerator(_OnTwoGpus(), KVCache(tmp_path / "llm.sqlite"))
    services = Services(None, None, generator, PromptLibrary(ROOT / "prompts"), variant="plain", lock_dir=tmp_path / "locks", k=3)
    settings = Settings(sampling=Sampling(), answer_mode="direct", k=3, run_dir=tmp_path / "run")
    m = run_steps(Components(Parts(subsets=subsets, method=PretrainedOnly(), services=services), settings)).metrics
    assert (m["questions"], m["prompt_tokens"], m["completion_tokens"]) == (3, 30, 9)
    assert m["generate_seconds"] > 0 and m["gpu_seconds"] == 2 * m["generate_seconds"]
    assert "json_valid_share" not in m  # no JSON asked for
