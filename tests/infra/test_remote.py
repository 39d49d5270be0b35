"""The one retry loop of every remote call (``t2exp.infra.remote``): hosted embedders, the Cohere
reranker and OpenAI-protocol generators all run their requests through ``with_retries``."""

from __future__ import annotations

import threading

import pytest

from helpers.paths import ROOT
from t2exp.errors import ConfigError, RemoteError
from t2exp.infra.remote import Failure, backoff_delay, resolve_api_key, with_retries

SRC = ROOT / "src" / "t2exp"


class Flaky(Exception):
    def __init__(self, status: int | str, retry_after: float | None = None) -> None:
        super().__init__(f"status {status}")
        self.status, self.retry_after = status, retry_after


def classify(exc: BaseException) -> Failure | None:
    return Failure(exc.status, str(exc), exc.retry_after) if isinstance(exc, Flaky) else None


def line(failure: Failure, attempts: int | None) -> str:
    return f"{failure.status} after {attempts}"


def test_retryable_failures_are_retried_with_the_backoff_then_one_error_line():
    calls, waits = [], []

    def call():
        calls.append(1)
        raise Flaky(503, retry_after=7.0 if len(calls) == 2 else None)

    with pytest.raises(RemoteError, match="^503 after 3$"):
        with_retries(call, classify, 2, lambda attempt, ra: max(attempt + 1.0, ra or 0.0), line, "test", sleep=waits.append)
    assert len(calls) == 3 and waits == [1.0, 7.0]  # the second wait honours Retry-After


def test_a_failure_that_is_not_retryable_fails_at_once_and_an_unknown_error_passes_through():
    calls = []

    def bad_request():
        calls.append(1)
        raise Flaky(400)

    with pytest.raises(RemoteError, match="^400 after 1$"):
        with_retries(bad_request, classify, 5, lambda a, ra: 0.0, line, "test")
    assert len(calls) == 1
    with pytest.raises(KeyError):  # not a remote failure: not retried, not reworded
        with_retries(lambda: {}["x"], classify, 5, lambda a, ra: 0.0, line, "test")
    assert with_retries(lambda: 42, classify, 0, lambda a, ra: 0.0, line, "test") == 42
    assert Failure("client", "x", retry=False).retryable is False and Failure(404, "x", retry=True).retryable is True


def test_abort_cuts_a_wait_short_and_no_retry_is_made():
    abort, calls = threading.Event(), []

    def call():
        calls.append(1)
        abort.set()  # another request of the batch failed for good meanwhile
        raise Flaky(503)

    with pytest.raises(RemoteError, match="^503 after None$"):
        with_retries(call, classify, 5, lambda a, ra: 3600.0, line, "test", abort=abort)
    assert len(calls) == 1


def test_backoff_grows_honours_retry_after_and_is_capped():
    assert backoff_delay(0, None, 0.0, 30.0) == 0.0
    assert 4.0 <= backoff_delay(2, None, 1.0, 30.0) <= 5.0
    assert 10.0 <= backoff_delay(0, 10.0, 1.0, 30.0) <= 12.5
    assert backoff_delay(10, 100.0, 1.0, 30.0) <= 30.0 * 1.25


def test_a_missing_key_names_the_components_own_setting(monkeypatch):
    monkeypatch.delenv("T2EXP_TEST_NO_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"^reranker=cohere needs an API key: set T2EXP_TEST_NO_KEY \(or reranker.api_key\)$"):
        resolve_api_key("cohere", None, ["T2EXP_TEST_NO_KEY"], group="reranker")
    monkeypatch.setenv("T2EXP_TEST_NO_KEY", "k")
    assert resolve_api_key("cohere", None, ["T2EXP_TEST_NO_KEY"], group="reranker") == "k"


def test_every_retry_loop_is_the_shared_one():
    """tenacity is used in one module; no component imports another package's private module."""
    users = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "tenacity" in p.read_text())
    assert users == ["infra/remote.py"]
    private = sorted(
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "embedders._remote" in p.read_text() and p.parent.name != "embedders"
    )
    assert private == []
