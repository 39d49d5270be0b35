"""Loading a Hugging Face model as one line when it cannot be had: offline (``HF_HUB_OFFLINE=1``,
the usual state of a compute node) and not in the local cache, a typo in a model id, or a
revision that does not exist. Every loader of a hub model (embedder, cross-encoder, generator)
goes through :func:`load`, so the message and its fix are the same everywhere."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from t2exp.errors import ConfigError

T = TypeVar("T")


def _missing_model(exc: BaseException) -> bool:
    """An error that means "the weights are not here and cannot be fetched"."""
    names = {type(e).__name__ for e in _chain(exc)}
    if names & {"LocalEntryNotFoundError", "RepositoryNotFoundError", "RevisionNotFoundError", "GatedRepoError",
                "HFValidationError", "EntryNotFoundError"}:
        return True
    text = " ".join(str(e) for e in _chain(exc))
    return isinstance(exc, OSError) and ("huggingface.co" in text or "is not a local folder" in text or "offline" in text.lower())


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        out.append(e)
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return out


def load(loader: Callable[[], T], group: str, model: str, revision: str | None = None) -> T:
    """``loader()``; a missing model becomes one ``ConfigError`` naming the group, model id,
    revision and what to do."""
    try:
        return loader()
    except Exception as exc:  # classified below; anything else propagates unchanged
        if not _missing_model(exc):
            raise
        rev = f" --revision {revision}" if revision else ""
        offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
        where = "not in the local Hugging Face cache and HF_HUB_OFFLINE is set" if offline else "cannot be loaded from the hub"
        raise ConfigError(
            f"{group}.model={model!r} (revision {revision or 'default'}) is invalid: {where}; allowed: a model you have locally — "
            f"download it where the hub is reachable (hf download {model}{rev}), point {group}.model at a local "
            f"directory{'' if not offline else ', or unset HF_HUB_OFFLINE'} ({type(exc).__name__})"
        ) from None


# models loaded in this process, most recently used last: the cells of a sweep that runs in one
# process (the basic launcher), and every in-process run of the tests, load a model's weights once
KEEP_LOADED = 3
_loaded: OrderedDict[Hashable, Any] = OrderedDict()
_loaded_lock = threading.Lock()


def shared(key: Hashable, loader: Callable[[], T]) -> T:
    """The model ``loader()`` builds, loaded once per process for ``key`` (everything that decides
    the loaded object: kind, path or id, revision, dtype, device, ...); the ``KEEP_LOADED`` most
    recently used stay loaded, older ones are released to the garbage collector."""
    with _loaded_lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
    value = loader()
    with _loaded_lock:
        _loaded[key] = value
        _loaded.move_to_end(key)
        while len(_loaded) > KEEP_LOADED:
            _loaded.popitem(last=False)
    return value
