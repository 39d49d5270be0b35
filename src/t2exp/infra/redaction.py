"""Secrets out of everything a run writes: config values under secret-named keys, the values of
secret-named environment variables, every key a component read (``register_secret``: also one
named by ``*.api_key_env=MY_VAR``), key patterns (``sk-…``, ``AIza…``, ``Bearer …``) and the
password of a URL (``http://user:***@host``). Used by the logs, MLflow params/tags/artifacts and
the one-line errors."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

# a key (last dotted component) or env var NAME that holds a secret: api_key, OPENAI_API_KEY,
# HF_TOKEN, secret, AWS_SECRET_ACCESS_KEY, db_password; not max_tokens or api_key_env (a name)
_SECRET_KEY_RE = re.compile(r"(^|[_.-])(api[_-]?key|token|secret|secret[_-]?(access[_-]?)?key|password|passwd)$", re.IGNORECASE)
_SECRET_VALUE_RE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,})\b")
_BEARER_RE = re.compile(r"\b(Bearer\s+)(?!\*\*\*)[^\s'\",;]+", re.IGNORECASE)
_URL_PASSWORD_RE = re.compile(r"(://[^/\s:@'\"]+:)[^/\s@'\"]+@")  # scheme://user:PASSWORD@host
REDACTED = "***"
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """A key a component read (from its config or from any variable, whatever its name): redacted
    from every later log line, tag, param, artifact and error of this process."""
    if value and len(value) >= 4:
        _registered.add(value)


def forget_secrets() -> None:
    """Forget every registered secret (a process that starts over: a test)."""
    _registered.clear()


def has_url_password(text: str) -> bool:
    """``text`` holds a URL with a password (``http://user:PASSWORD@host``)."""
    return bool(_URL_PASSWORD_RE.search(text))


def _patterns(text: str) -> str:
    text = _SECRET_VALUE_RE.sub(REDACTED, text)
    text = _BEARER_RE.sub(lambda m: m.group(1) + REDACTED, text)
    return _URL_PASSWORD_RE.sub(lambda m: m.group(1) + REDACTED + "@", text)


def redact_value(key: str, value: Any) -> Any:
    if value is None or value == "":
        return value
    if is_secret_key(key):
        return REDACTED
    if isinstance(value, str):  # the secret values themselves are replaced where the text is written (redact_text)
        return _patterns(value)
    return value


def is_secret_key(key: str) -> bool:
    """A config key or environment variable name that holds a secret (``generator.api_key``,
    ``OPENAI_API_KEY``, ``HF_TOKEN``, ...)."""
    return bool(_SECRET_KEY_RE.search(key))


def _environ_snapshot() -> dict[str, str]:
    """A copy of ``os.environ`` that tolerates other threads deleting keys meanwhile (MLflow's
    telemetry thread removes its session variable when it cannot reach the network)."""
    for _ in range(10):
        try:
            keys = list(os.environ)
            break
        except RuntimeError:  # changed size during iteration
            continue
    else:  # pragma: no cover
        keys = []
    out = {}
    for k in keys:
        v = os.environ.get(k)
        if v is not None:
            out[k] = v
    return out


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-named environment variables (8+ characters), longest first."""
    env = _environ_snapshot() if environ is None else environ
    values = {v for k, v in env.items() if is_secret_key(k) and isinstance(v, str) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


_TOKEN_CHARS = r"[\w\-.~+]"  # what a key is made of: a secret inside a longer run of them takes the whole run


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """Replace the given secrets, the registered ones, every secret-named environment variable's
    value and the key and URL-password patterns by ``***``: a secret that is part of a longer token
    (``sk-abc`` in ``sk-abcdefghijkl``) takes the whole token."""
    values = sorted({s for s in (*(secrets or []), *_registered, *env_secrets()) if s}, key=len, reverse=True)
    if values:
        alternatives = "|".join(map(re.escape, values))
        text = re.sub(rf"{_TOKEN_CHARS}*(?:{alternatives})(?:{_TOKEN_CHARS}*[\w\-~+])?", REDACTED, text)
    return _patterns(text)


def redact_overrides(overrides: list[str]) -> list[str]:
    """Command-line overrides with the values of secret-named keys replaced by ``***``."""
    out = []
    for o in overrides:
        key, sep, value = o.partition("=")
        if sep and is_secret_key(key) and value and not value.startswith("${") and value != "null":
            o = f"{key}={REDACTED}"
        out.append(redact_text(o))
    return out


_factory_installed = False


def install_log_redaction() -> None:
    """Redact secrets from every log record of this process, whatever its logger or handler
    (Hydra's job log file, stderr): the message is formatted once and passed through
    ``redact_text``. Idempotent."""
    global _factory_installed
    if _factory_installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler to report
            return record
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return record

    logging.setLogRecordFactory(factory)
    _factory_installed = True
