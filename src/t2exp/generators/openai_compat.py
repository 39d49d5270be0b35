"""Chat generation over the OpenAI chat-completions API: OpenAI itself or any compatible server
(vLLM, llama.cpp, TGI, LM Studio, ...).

Requests run concurrently (up to ``max_concurrency``) and come back in input order. The client's
own retries are off; this module retries 429, 5xx, timeouts, connection errors and malformed
responses ``max_retries`` times with exponential backoff, then raises a one-line ``RemoteError``
naming the endpoint, the status and a hint.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from t2exp.errors import ConfigError, one_line
from t2exp.generators import Cancelled, Generation, Messages, OnResult, Sampling, ShouldStop
from t2exp.generators.concurrency import generate_concurrently
from t2exp.infra.cache import content_key
from t2exp.infra.redaction import register_secret
from t2exp.infra.remote import Failure, Retrying, import_client, retry_after_seconds
from t2exp.text.reasoning import CLOSE_TAG, OPEN_TAG, split_reasoning

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"


def reasoning_generation(gen: Generation, reasoning_tokens: int | None = None) -> Generation:
    """Strip the think block from ``gen.text``; keep the raw text and a token count in ``extra``."""
    answer, thought = split_reasoning(gen.text)
    gen.extra["raw"] = gen.text
    gen.extra["reasoning_tokens"] = int(reasoning_tokens) if reasoning_tokens is not None else len(thought.split())
    gen.text = answer
    return gen


class _Malformed(Exception):
    """The server answered 2xx but the body is not a chat completion."""


class OpenAICompatGenerator(Retrying):
    """Chat completions via the official ``openai`` client, one request per prompt."""

    gpus = 0  # the server's GPUs are not this run's: a cell logs no gpu_seconds

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        provider: str | None = "openai",
        max_concurrency: int = 8,
        max_retries: int = 4,
        timeout: float = 120.0,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        reasoning: bool = False,
        batch_size: int = 64,
        model_revision: str | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url.rstrip("/") if base_url else None
        self.provider = provider
        self.api_key_env = api_key_env
        self.max_concurrency = int(max_concurrency)
        self.max_retries = int(max_retries)
        self.timeout = float(timeout)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.reasoning = bool(reasoning)
        self.batch_size = int(batch_size)
        self.model_revision = model_revision
        self._fingerprint: str | None = None
        key = api_key or (os.environ.get(api_key_env) if api_key_env else None)
        register_secret(key)  # also read from a variable whose name says nothing (api_key_env=MY_LLM_CRED)
        if not key:
            if self.base_url is None:  # hosted API: a key is required
                raise ConfigError(
                    f"generator={name} needs an API key: set {api_key_env or 'OPENAI_API_KEY'} (or generator.api_key), "
                    "or point generator.base_url at a local server"
                )
            key = "EMPTY"  # local servers (vLLM without --api-key) accept any key
        OpenAI = import_client("openai", provider or "openai-compatible", group="generator").OpenAI
        self._client = OpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=self.timeout)

    @property
    def endpoint(self) -> str:
        return self.base_url or OPENAI_BASE_URL

    @property
    def fingerprint(self) -> str:
        """What determines the outputs (the LLM cache key): the model id plus the weights behind it,
        i.e. ``generator.model_revision`` when set, else the ``root`` the server reports for the id
        (vLLM: the ``--model`` path), so two servers serving different weights under one id do not
        share answers. Where it is served (``base_url``) is left out: the same weights behind
        another port give the same outputs."""
        if self._fingerprint is None:
            weights = self.model_revision or self._served_root()
            self._fingerprint = content_key("openai-compat", self.provider, self.model, weights, self.reasoning)[:16]
        return self._fingerprint

    def _served_root(self) -> str | None:
        if self.base_url is None:
            return None  # the hosted API: the id is all it tells
        try:
            for m in self._client.models.list().data:
                if m.id == self.model:
                    root = (m.model_extra or {}).get("root")
                    return str(root) if root else None
        except Exception as exc:  # an unreachable server is reported by the first request
            log.debug("GET %s/models failed (%s); the fingerprint names the model id only", self.base_url, exc)
        return None

    # --- one request ------------------------------------------------------------------------------
    def _request(self, messages: Messages, sampling: Sampling) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "seed": sampling.seed,
        }
        if sampling.stop:
            kwargs["stop"] = list(sampling.stop)
        if sampling.json_schema is not None:  # structured output (OpenAI, vLLM's server: guided decoding)
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": sampling.json_schema}}
        return kwargs

    def _parse(self, resp: Any) -> Generation:
        choices = getattr(resp, "choices", None)
        if not choices:
            raise _Malformed(f"no choices in response ({type(resp).__name__})")
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise _Malformed("choice has no message")
        content = getattr(message, "content", None) or ""
        if not isinstance(content, str):
            raise _Malformed(f"message.content is {type(content).__name__}, not a string")
        # servers started with a reasoning parser return the thoughts in a separate field
        thought = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        if isinstance(thought, str) and thought and self.reasoning:
            content = f"{OPEN_TAG}{thought}{CLOSE_TAG}{content}"
        usage = getattr(resp, "usage", None)
        gen = Generation(
            text=content,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            finish_reason=str(getattr(choice, "finish_reason", None) or "stop"),
        )
        if self.reasoning:
            details = getattr(usage, "completion_tokens_details", None)
            counted = getattr(details, "reasoning_tokens", None)
            reasoning_generation(gen, counted if isinstance(counted, int) and counted > 0 else None)
        return gen

    def _classify(self, exc: BaseException) -> Failure:
        """What one attempt's exception means: retryable or not, the status the user sees
        (``message``) and what to do about it (``hint``)."""
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return Failure(
                "timeout",
                "timeout",
                retry=True,
                hint=f"no answer within timeout={self.timeout:g}s; raise generator.timeout or check the server is up",
            )
        if isinstance(exc, openai.APIConnectionError):
            return Failure(
                "connection", "connection error", retry=True, hint="cannot connect; is the server running at generator.base_url?"
            )
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            detail = one_line(getattr(exc, "message", "") or exc, 160)
            status = f"HTTP {code} ({detail})" if detail else f"HTTP {code}"
            retry_after = retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))
            hints = {
                429: "rate limited; lower generator.max_concurrency or raise generator.max_retries",
                401: f"check the API key ({self.api_key_env} or generator.api_key)",
                403: f"check the API key ({self.api_key_env} or generator.api_key)",
                404: f"is generator.model={self.model!r} served at this base_url?",
                408: "request timed out on the server",
            }
            hint = hints.get(
                code,
                "server error; check the server's log"
                if code >= 500
                else "request rejected; prompt longer than the context, or a sampling parameter the server refuses?",
            )
            return Failure(code, status, retry_after, hint=hint)  # retryable by status: 408, 429, 5xx
        if isinstance(exc, (_Malformed, json.JSONDecodeError, openai.APIResponseValidationError)):
            return Failure(
                "malformed",
                f"malformed response ({one_line(exc, 120)})",
                retry=True,
                hint="is generator.base_url an OpenAI-compatible /v1 endpoint?",
            )
        return Failure("client", f"{type(exc).__name__}: {one_line(exc, 160)}", retry=False, hint="unexpected client error")

    def _error_line(self, failure: Failure, attempts: int | None) -> str:
        if attempts is None:  # another request of the batch failed for good first
            return f"generator={self.name}: {self.endpoint} failed: {failure.message}; {failure.hint}"
        tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        return f"generator={self.name}: {self.endpoint} failed {tries}: {failure.message}; {failure.hint}"

    def _texts(self, resp: Any) -> list[str]:
        """Every choice's answer text (the drawn samples of a request with ``n`` > 1)."""
        choices = getattr(resp, "choices", None)
        if not choices:
            raise _Malformed(f"no choices in response ({type(resp).__name__})")
        texts = []
        for choice in choices:
            content = getattr(getattr(choice, "message", None), "content", None) or ""
            if not isinstance(content, str):
                raise _Malformed(f"message.content is {type(content).__name__}, not a string")
            texts.append(split_reasoning(content)[0] if self.reasoning else content)
        return texts

    def _attempt(self, kwargs: dict[str, Any], read: Callable[[Any], Any]) -> Any:
        """One request, its response read by ``read`` (a Generation gets its seconds); one that does not read is malformed."""
        t0 = time.perf_counter()
        resp = self._client.chat.completions.create(**kwargs)
        try:
            out = read(resp)
        except (AttributeError, TypeError, ValueError) as exc:
            raise _Malformed(f"{type(exc).__name__}: {exc}") from exc
        if isinstance(out, Generation):
            out.seconds = time.perf_counter() - t0
        return out

    def _generate_one(
        self, messages: Messages, sampling: Sampling, stop: threading.Event, should_stop: ShouldStop | None = None
    ) -> Generation:
        """One request under the shared retry loop (:func:`t2exp.infra.remote.with_retries`):
        retryable failures are retried up to ``max_retries`` times; a backoff is cut short, and no
        retry made, once another request of the batch has failed for good (``stop``)."""
        if should_stop is not None and should_stop():
            raise Cancelled()  # the run is stopping: this prompt is not sent

        def retried(call: Callable[[], Any]) -> Any:
            return self.retried(call, self._classify, self._error_line, f"generator={self.name}", abort=stop)

        kwargs = self._request(messages, sampling)
        gen = retried(lambda: self._attempt(kwargs, self._parse))
        if sampling.samples > 1:  # self-consistency: one more request drawing samples - 1 choices
            more = {**kwargs, "n": sampling.samples - 1, "temperature": sampling.sample_temperature, "seed": sampling.seed + 1}
            gen.extra["samples"] = retried(lambda: self._attempt(more, self._texts))
        return gen

    # --- protocol ---------------------------------------------------------------------------------
    def generate(
        self, prompts: list[Messages], sampling: Sampling, on_result: OnResult | None = None, should_stop: ShouldStop | None = None
    ) -> list[Generation]:
        """Concurrent requests (:func:`~t2exp.generators.concurrency.generate_concurrently`):
        ``on_result(i, generation)`` as each one completes; a queued request is not sent once
        ``should_stop()`` is true (``Cancelled`` is raised)."""
        if not prompts:
            return []
        return generate_concurrently(
            len(prompts),
            lambda i, stop: self._generate_one(prompts[i], sampling, stop, should_stop),
            self.max_concurrency,
            f"t2exp-{self.name}",
            on_result,
        )

    def close(self) -> None:
        self._client.close()
